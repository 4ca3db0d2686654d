"""attnlab's GPT ↔ Hugging Face Llama folders: the rotary layouts, exported and loaded back by
``transformers`` (logits equal), a Llama made by ``transformers`` (grouped-query attention)
read into attnlab (logits equal), and the options Llama has no counterpart for refused."""

import pytest
import torch

from attnlab.interop.llama import from_half_layout, load_llama, save_llama, to_half_layout
from attnlab.models import GPT, GPTConfig

transformers = pytest.importorskip("transformers", reason="transformers: the test extras (make test)")

LLAMA_LIKE = dict(vocab_size=89, block_size=32, d_model=48, num_heads=6, num_layers=2, positional="rope",
                  norm="rmsnorm", norm_first=True, bias=False, activation="swiglu", d_ff=64, dropout=0.0,
                  rope_base=100_000.0)


def test_the_half_layout_puts_each_heads_even_rows_first_and_comes_back():
    w = torch.arange(8.0)[:, None]  # 2 heads of 4 rows
    assert to_half_layout(w, 2).flatten().tolist() == [0, 2, 1, 3, 4, 6, 5, 7]
    w = torch.randn(48, 5)
    assert torch.equal(from_half_layout(to_half_layout(w, 6), 6), w)


@pytest.mark.parametrize("kv_heads, tie", [(None, True), (2, False), (1, True)])
def test_an_exported_gpt_is_the_same_model_in_transformers(tmp_path, kv_heads, tie):
    torch.manual_seed(0)
    ours = GPT(GPTConfig(**LLAMA_LIKE, num_kv_heads=kv_heads, tie_output=tie)).eval()
    save_llama(ours, tmp_path / "llama")
    theirs = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "llama").eval()
    idx = torch.randint(89, (2, 32))
    with torch.no_grad():
        assert (ours(idx) - theirs(idx).logits).abs().max() <= 1e-5
    back = load_llama(tmp_path / "llama")
    pairs = zip(back.state_dict().values(), ours.state_dict().values(), strict=True)
    assert all(torch.equal(a, b) for a, b in pairs)


def test_a_llama_made_by_transformers_reads_into_attnlab_with_the_same_logits(tmp_path):
    torch.manual_seed(1)
    config = transformers.LlamaConfig(vocab_size=71, hidden_size=36, intermediate_size=60,
                                      num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=3,
                                      max_position_embeddings=24, rope_theta=50_000.0, rms_norm_eps=1e-5,
                                      tie_word_embeddings=True)
    theirs = transformers.LlamaForCausalLM(config).eval()
    theirs.save_pretrained(tmp_path / "hf")
    ours = load_llama(tmp_path / "hf").eval()
    assert ours.config.num_kv_heads == 3 and ours.config.rope_base == 50_000.0
    idx = torch.randint(71, (3, 24))
    with torch.no_grad():
        assert (ours(idx) - theirs(idx).logits).abs().max() <= 1e-5


@pytest.mark.parametrize("option, value", [("positional", "learned"), ("norm", "layernorm"), ("bias", True),
                                           ("activation", "gelu"), ("norm_first", False)])
def test_an_option_llama_has_no_counterpart_for_is_refused_by_name(tmp_path, option, value):
    model = GPT(GPTConfig(**{**LLAMA_LIKE, option: value}))
    with pytest.raises(ValueError, match=f"Llama has no counterpart for {option} = "):
        save_llama(model, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_attnlab_export_writes_a_llama_shaped_gpt_as_llama_for_causal_lm(tmp_path, capsys):
    from attnlab.cli import main
    from attnlab.data import Tokenizer
    from attnlab.pipelines import LanguageModelPipeline

    tok = Tokenizer.train(["the cat sat on the mat\n", "a dog ran in the park\n"] * 50, 300)
    torch.manual_seed(0)
    model = GPT(GPTConfig(**{**LLAMA_LIKE, "vocab_size": tok.vocab_size, "num_kv_heads": 3})).eval()
    LanguageModelPipeline(model, tok).save(tmp_path / "ckpt")
    assert main(["export", str(tmp_path / "ckpt"), str(tmp_path / "hf")]) == 0
    assert capsys.readouterr().out.strip() == f"{tmp_path / 'hf'}: LlamaForCausalLM and its tokenizer"
    theirs = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "hf").eval()
    ids = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")("the dog sat")["input_ids"]
    assert ids == tok.encode("the dog sat")
    with torch.no_grad():
        assert (model(torch.tensor([ids])) - theirs(torch.tensor([ids])).logits).abs().max() <= 1e-5
