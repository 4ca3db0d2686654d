"""Pipelines against the model and its tokenizer used by hand: a translation (a caption) equals
an uncached greedy loop over the model's own logits (and beam search called directly), a
language model's greedy continuation equals an uncached argmax loop with the special tokens
masked, each
``attention`` equals the model's ``return_weights``; ``save`` then ``from_checkpoint`` gives the
same files and the same outputs; a checkpoint of another family is refused in one line."""

from __future__ import annotations

import json

import pytest
import torch

from attnlab.data import CharTokenizer
from attnlab.data.tokenizers import SPECIAL_TOKENS, WordTokenizer
from attnlab.generation import beam_search
from attnlab.models import Transformer, TransformerConfig
from attnlab.pipelines import (
    CaptioningPipeline,
    DecodeConfig,
    EncoderPipeline,
    LanguageModelPipeline,
    TranslationPipeline,
)
from explorer_toys import CHARS, ENGLISH, GERMAN, gpt_checkpoint, tiny_encoder, translator_checkpoint
from views_toys import captioner as toy_captioner

SENTENCES = ["Ein Hund läuft über die Wiese.", "", "Eine Frau liest ein Buch.", "Ein Kind spielt.", "  "]


@pytest.fixture(scope="module")
def translator(tmp_path_factory) -> TranslationPipeline:
    return TranslationPipeline.from_checkpoint(translator_checkpoint(tmp_path_factory.mktemp("mt")))


@pytest.fixture(scope="module")
def lm(tmp_path_factory) -> LanguageModelPipeline:
    return LanguageModelPipeline.from_checkpoint(gpt_checkpoint(tmp_path_factory.mktemp("lm")))


def greedy_by_hand(model, src_tok, tgt_tok, sentence: str, limit_a: float, limit_b: int) -> str:
    """Encode without specials, then argmax of the full (uncached) decoder's last logits, never
    ``<pad>`` or ``<bos>``, until ``<eos>`` or ``limit_a · S + limit_b`` tokens."""
    ids = src_tok.encode(sentence.strip())
    if not ids:
        return ""
    src, out = torch.tensor([ids]), [tgt_tok.bos_id]
    with torch.no_grad():
        for _ in range(max(1, int(limit_a * len(ids) + limit_b))):
            logits = model(src, torch.tensor([out]))[0, -1]  # (V,)
            logits[[tgt_tok.pad_id, tgt_tok.bos_id]] = float("-inf")
            token = int(logits.argmax())
            if token == tgt_tok.eos_id:
                break
            out.append(token)
    return tgt_tok.decode(out[1:])


def test_translate_is_the_models_greedy_loop_by_hand(translator):
    """The recipe of the toy checkpoint says max_len_a = 1.0, max_len_b = 4; batched by source
    length with other sentences, each line equals its own loop."""
    greedy = translator.settings(beam_size=1)
    assert (greedy.max_len_a, greedy.max_len_b) == (1.0, 4)
    got = translator.translate(SENTENCES, greedy)
    model, src_tok, tgt_tok = translator.model, translator.src_tok, translator.tgt_tok
    assert got == [greedy_by_hand(model, src_tok, tgt_tok, s, 1.0, 4) for s in SENTENCES]
    assert got[1] == got[4] == ""


def test_translate_with_a_beam_is_beam_search_called_alone(translator):
    decoding = translator.settings(beam_size=3, length_penalty=1.0, batch_size=2)
    got = translator.translate(SENTENCES, decoding)
    tok = translator.tgt_tok
    for sentence, line in zip(SENTENCES, got, strict=True):
        ids = translator.src_tok.encode(sentence.strip())
        if not ids:
            assert line == ""
            continue
        (best,) = beam_search(translator.model, torch.tensor([ids]), beam_size=3, length_penalty=1.0,
                              max_new_tokens=int(1.0 * len(ids) + 4), bos_id=tok.bos_id, eos_id=tok.eos_id)
        assert line == tok.decode(best[0].tokens)


def test_translation_attention_is_what_decode_returns(translator):
    source, translation = GERMAN[0], ENGLISH[0]
    found = translator.attention(source, translation)
    src = torch.tensor([translator.src_tok.encode(source)])
    tgt = torch.tensor([[translator.tgt_tok.bos_id, *translator.tgt_tok.encode(translation)]])
    with torch.no_grad():
        memory, mask = translator.model.encode(src)
        _, weights = translator.model.decode(tgt, memory, mask, return_weights=True)
    assert torch.equal(found.weights, torch.stack([w[0] for w in weights]))  # (L, H, T, S)
    assert found.source == translator.src_tok.token_strings(src[0].tolist())
    assert found.target == [*translator.tgt_tok.token_strings(tgt[0, 1:].tolist()), "<eos>"]
    assert torch.equal(found.layer(-1), found.weights[1])
    with pytest.raises(ValueError, match=r"layer must be in \[-2, 1\], got 2"):
        found.layer(2)


@pytest.mark.parametrize("joint", [True, False])
def test_translation_save_then_from_checkpoint_round_trips(translator, tmp_path, joint):
    tgt_tok = translator.tgt_tok if joint else WordTokenizer.train(ENGLISH)
    sizes = dict(src_vocab_size=translator.src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size)
    config = TransformerConfig(**sizes, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
                               d_ff=32)
    torch.manual_seed(1)
    recipe = {"task": "translation", "eval": {"beam_size": 2, "max_len": 5}}
    pipeline = TranslationPipeline(Transformer(config).eval(), translator.src_tok, tgt_tok, recipe=recipe)
    assert pipeline.decoding == DecodeConfig(beam_size=2, max_len=5)  # the recipe's [eval]
    pipeline.save(tmp_path / "ckpt")
    names = {"tokenizer.json"} if joint else {"src_tokenizer.json", "tgt_tokenizer.json"}
    assert {p.name for p in (tmp_path / "ckpt").iterdir()} == {"model.safetensors", "config.json",
                                                               "recipe.json", *names}
    assert json.loads((tmp_path / "ckpt" / "recipe.json").read_text()) == recipe
    again = TranslationPipeline.from_checkpoint(tmp_path / "ckpt")
    assert again.decoding == pipeline.decoding and again.recipe == recipe
    assert (again.src_tok is again.tgt_tok) == joint
    assert again.translate(GERMAN) == pipeline.translate(GERMAN)


def test_a_checkpoint_of_another_family_is_refused_naming_its_model_type(translator, lm, tmp_path):
    lm.save(tmp_path / "gpt")
    with pytest.raises(ValueError, match=f"checkpoint {tmp_path / 'gpt'} has model_type 'gpt'; a translation "
                                         "model is one of transformer, attention_seq2seq, rnn_seq2seq"):
        TranslationPipeline.from_checkpoint(tmp_path / "gpt")
    translator.save(tmp_path / "mt")
    with pytest.raises(ValueError, match="has model_type 'transformer'; generate takes gpt, lstm, lstmn"):
        LanguageModelPipeline.check_checkpoint(tmp_path / "mt", "generate")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        LanguageModelPipeline.from_checkpoint(tmp_path / "nowhere")


def test_greedy_generation_is_the_models_argmax_loop_by_hand(lm):
    """Temperature 0: each token is the argmax of an uncached forward over all tokens so far
    (5 + 11 fill the block of 16: no window slides), the four special tokens never drawn."""
    prompt, new = "to be", 11
    got = lm.generate(prompt, new, temperature=0.0, top_k=None)
    ids = lm.tokenizer.encode(prompt)
    assert len(ids) + new == lm.model.config.block_size
    with torch.no_grad():
        for _ in range(new):
            logits = lm.model(torch.tensor([ids]))[0, -1]
            logits[: len(SPECIAL_TOKENS)] = float("-inf")
            ids.append(int(logits.argmax()))
    assert got == lm.tokenizer.decode(ids[len(lm.tokenizer.encode(prompt)):])


def test_generation_streams_the_text_it_returns_and_watches_each_token(lm):
    pieces, watched = [], []
    text = lm.generate("ROMEO:", 20, temperature=1.0, seed=3, write=pieces.append,
                       watch=lambda token, weights: watched.append((token, weights.shape)))
    assert "".join(pieces) == text == lm.generate("ROMEO:", 20, temperature=1.0, seed=3)
    assert len(watched) == 20 and all(shape[:2] == (2, 2) for _, shape in watched)
    assert "".join(lm.tokenizer.token_strings([t for t, _ in watched])) == text


def test_lm_attention_is_what_forward_returns(lm):
    found = lm.attention("to be or not to be, that is")  # 27 characters: the last 16 are read
    ids = lm.tokenizer.encode("to be or not to be, that is")[-16:]
    with torch.no_grad():
        _, weights = lm.model(torch.tensor([ids]), return_weights=True)
    assert torch.equal(found.weights, torch.stack([w[0] for w in weights]))  # (L, H, n, n)
    assert found.tokens == list("to be or not to be, that is"[-16:])
    with pytest.raises(ValueError, match="text cannot be encoded: .*'ü'"):
        lm.attention("grüß")


def test_lm_save_then_from_checkpoint_round_trips(lm, tmp_path):
    LanguageModelPipeline(lm.model, lm.tokenizer, recipe={"task": "language_model"}).save(tmp_path / "ckpt")
    again = LanguageModelPipeline.from_checkpoint(tmp_path / "ckpt")
    assert isinstance(again.tokenizer, CharTokenizer) and again.tokenizer.chars == sorted(set(CHARS))
    assert again.recipe == {"task": "language_model"}
    assert again.generate("to be", 12, seed=0) == lm.generate("to be", 12, seed=0)


@pytest.fixture(scope="module")
def captioner() -> CaptioningPipeline:
    return toy_captioner()


def test_caption_is_the_models_greedy_loop_by_hand(captioner):
    images = torch.rand(3, 1, 16, 16, generator=torch.Generator().manual_seed(0))
    assert captioner.decoding == DecodeConfig(beam_size=3, length_penalty=0.0, batch_size=100, max_len=6)
    got = captioner.caption(images, captioner.settings(beam_size=1, batch_size=2))
    tok, expected = captioner.tokenizer, []
    for image in images:
        out = [tok.bos_id]
        with torch.no_grad():
            for _ in range(6):
                logits = captioner.model(image[None], torch.tensor([out]))[0, -1]  # (V,)
                logits[[tok.pad_id, tok.bos_id]] = float("-inf")
                if (token := int(logits.argmax())) == tok.eos_id:
                    break
                out.append(token)
        expected.append(tok.decode(out[1:]))
    assert got == expected


def test_caption_attention_is_what_decode_returns_on_the_grid(captioner):
    image, ids = torch.rand(1, 16, 16), captioner.tokenizer.encode("a big seven")
    words, maps = captioner.attention(image, ids)
    with torch.no_grad():
        memory, mask = captioner.model.encode(image[None])
        _, weights = captioner.model.decode(torch.tensor([[captioner.tokenizer.bos_id, *ids]]), memory, mask,
                                            return_weights=True)
    assert words == ["a", "big", "seven", "<eos>"] and maps.shape == (4, 4, 4)  # grid 16 / 2 ** 2
    assert torch.equal(maps.flatten(1), weights[0][0, 0])  # row-major: location i is (i // w, i % w)
    assert torch.allclose(maps.sum((1, 2)), torch.ones(4))


def test_captioner_save_then_from_checkpoint_round_trips(captioner, tmp_path):
    captioner.save(tmp_path / "ckpt")
    again = CaptioningPipeline.from_checkpoint(tmp_path / "ckpt")
    assert again.decoding == captioner.decoding and again.recipe == captioner.recipe
    images = torch.rand(2, 1, 16, 16)
    assert again.caption(images) == captioner.caption(images)
    assert again.tokenizer.to_json() == captioner.tokenizer.to_json()


def test_embed_is_the_mean_of_the_models_states_sentence_by_sentence(tmp_path):
    """The tiny encoder alone, by hand: ids of ``[CLS] words [SEP]``, forward, mean over the
    tokens; batched with padding, each row the same. An Encoder checkpoint written as before
    pipelines (the model's files + the tokenizer's ``tokenizer.json``) loads with its tokenizer."""
    encoder = tiny_encoder()
    sentences = ["the animal was too tired .", "a dog", "it was wide"]
    got = encoder.embed(sentences, batch_size=2)
    vocab = encoder.tokenizer.get_vocab()
    for sentence, row in zip(sentences, got, strict=True):
        ids = [vocab["[CLS]"], *(vocab[w] for w in sentence.split()), vocab["[SEP]"]]
        with torch.no_grad():
            expected = encoder.model(torch.tensor([ids]))[0].mean(0)  # (d,)
        assert torch.allclose(row, expected, atol=1e-6)
    files = {"tokenizer.json": encoder.tokenizer.to_str().encode()}
    encoder.model.save_pretrained(tmp_path / "enc", extra=files)
    again = EncoderPipeline.from_checkpoint(tmp_path / "enc")
    assert torch.equal(again.embed(sentences), encoder.embed(sentences))
    found = again.attention("the dog was wide")
    ids = encoder.tokenize(["the dog was wide"])["input_ids"]  # (1, 6)
    with torch.no_grad():
        _, weights = encoder.model(ids, return_weights=True)
    assert found.tokens == ["[CLS]", "the", "dog", "was", "wide", "[SEP]"]
    assert all(torch.equal(a, w[0]) for a, w in zip(found.attention, weights, strict=True))
