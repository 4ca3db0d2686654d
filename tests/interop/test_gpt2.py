"""attnlab's GPT ↔ Hugging Face GPT-2 folders: exported, loaded back by ``transformers`` itself
(logits equal), a GPT-2 made by ``transformers`` read into attnlab (logits equal), and every
option GPT-2 has no counterpart for refused by name."""

import pytest
import torch

from attnlab.interop.gpt2 import load_gpt2, save_gpt2
from attnlab.models import GPT, GPTConfig

transformers = pytest.importorskip("transformers", reason="transformers: the test extras (make test)")

GPT2_LIKE = dict(vocab_size=97, block_size=24, d_model=32, num_heads=4, num_layers=2, positional="learned",
                 activation="gelu", norm_first=True, bias=True, dropout=0.0)


@pytest.mark.parametrize("tie", [True, False])
def test_an_exported_gpt_is_the_same_model_in_transformers(tmp_path, tie):
    torch.manual_seed(0)
    ours = GPT(GPTConfig(**GPT2_LIKE, tie_output=tie)).eval()
    save_gpt2(ours, tmp_path / "gpt2")
    theirs = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "gpt2").eval()
    idx = torch.randint(97, (3, 24))
    with torch.no_grad():
        assert (ours(idx) - theirs(idx).logits).abs().max() <= 1e-5
    assert load_gpt2(tmp_path / "gpt2").state_dict().keys() == ours.state_dict().keys()


def test_a_gpt2_made_by_transformers_reads_into_attnlab_with_the_same_logits(tmp_path):
    torch.manual_seed(1)
    config = transformers.GPT2Config(vocab_size=61, n_positions=16, n_embd=24, n_layer=2, n_head=3,
                                     activation_function="gelu", resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
    theirs = transformers.GPT2LMHeadModel(config).eval()
    theirs.save_pretrained(tmp_path / "hf")
    ours = load_gpt2(tmp_path / "hf").eval()
    idx = torch.randint(61, (2, 16))
    with torch.no_grad():
        assert (ours(idx) - theirs(idx).logits).abs().max() <= 1e-5


def test_a_gpt_without_biases_exports_with_zero_biases(tmp_path):
    torch.manual_seed(2)
    ours = GPT(GPTConfig(**{**GPT2_LIKE, "bias": False})).eval()
    save_gpt2(ours, tmp_path / "gpt2")
    theirs = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "gpt2").eval()
    assert theirs.transformer.h[0].mlp.c_fc.bias.abs().max() == theirs.transformer.ln_f.bias.abs().max() == 0
    idx = torch.randint(97, (3, 24))
    with torch.no_grad():
        assert (ours(idx) - theirs(idx).logits).abs().max() <= 1e-5


@pytest.mark.parametrize("option, value", [("positional", "rope"), ("norm", "rmsnorm"), ("norm_first", False),
                                           ("activation", "swiglu"), ("num_kv_heads", 2)])
def test_an_option_gpt2_has_no_counterpart_for_is_refused_by_name(tmp_path, option, value):
    model = GPT(GPTConfig(**{**GPT2_LIKE, option: value}))
    with pytest.raises(ValueError, match=f"GPT-2 has no counterpart for {option} = "):
        save_gpt2(model, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_gpt2s_tanh_gelu_is_refused_on_reading(tmp_path):
    config = transformers.GPT2Config(vocab_size=11, n_positions=8, n_embd=8, n_layer=1, n_head=2)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "hf")  # gelu_new, GPT-2's own
    with pytest.raises(ValueError, match="activation_function 'gelu_new' has no counterpart"):
        load_gpt2(tmp_path / "hf")


def test_attnlab_export_writes_a_folder_transformers_loads_with_its_tokenizer(tmp_path, capsys):
    from attnlab.cli import main
    from attnlab.data import Tokenizer
    from attnlab.data.corpora import data_dir
    from attnlab.pipelines import LanguageModelPipeline

    text = (data_dir() / "tinyshakespeare" / "input.txt").read_text()[:50_000]
    tok = Tokenizer.train(text.splitlines(keepends=True), 300)
    torch.manual_seed(0)
    model = GPT(GPTConfig(**{**GPT2_LIKE, "vocab_size": tok.vocab_size})).eval()
    LanguageModelPipeline(model, tok).save(tmp_path / "ckpt")
    assert main(["export", str(tmp_path / "ckpt"), str(tmp_path / "hf"), "--format", "hf"]) == 0
    assert capsys.readouterr().out.strip() == f"{tmp_path / 'hf'}: GPT2LMHeadModel and its tokenizer"
    theirs = transformers.GPT2LMHeadModel.from_pretrained(tmp_path / "hf").eval()
    their_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    line = "ROMEO: what light through yonder window breaks?"
    assert their_tok(line)["input_ids"] == tok.encode(line)
    idx = torch.tensor([tok.encode(line)[:24]])
    with torch.no_grad():
        assert (model(idx) - theirs(idx).logits).abs().max() <= 1e-5
    rope = GPT(GPTConfig(**{**GPT2_LIKE, "positional": "rope"}))
    LanguageModelPipeline(rope, tok).save(tmp_path / "rope")
    assert main(["export", str(tmp_path / "rope"), str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err  # a GPT-2 but for its positions, and far from a Llama
    assert "GPT2LMHeadModel has no counterpart for positional = 'rope'" in err
    assert "LlamaForCausalLM has no counterpart for norm = 'layernorm'" in err
