"""Checkpoints written by attnlab 0.1 (before the re-layout of docs/design.md) still load.

``tests/fixtures/checkpoints_v0_1`` holds four tiny checkpoints written by that code — its
``config.json`` files have the old flat fields (GPT's ``tie_weights``) and its GPT weights the
old names (``layers.0...`` before the decoder stack) — and the outputs that code computed for
fixed inputs (``expected_outputs.safetensors``). Loading must give the same outputs (to float32
rounding: another CPU or thread count sums in another order) and saving again must write
today's names.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from attnlab.models import (
    GPT,
    LSTMN,
    AttentionSeq2Seq,
    Encoder,
    GPTConfig,
    GPTForSequenceClassification,
    RNNSeq2Seq,
    ShowAttendTell,
    Transformer,
    load_pretrained,
)
from attnlab.tasks import LMRecipe, load_recipe
from attnlab.training import OptimConfig
from repo_paths import CONFIGS
from repo_paths import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "checkpoints_v0_1"
SRC = torch.tensor([[3, 4, 5, 6, 0], [7, 8, 9, 0, 0]])
TGT = torch.tensor([[1, 5, 6, 7], [1, 8, 9, 10]])
IDX = torch.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]])
CALLS = {
    "transformer": (Transformer, lambda m: m(SRC, TGT)),
    "gpt": (GPT, lambda m: m(IDX)),
    "encoder": (Encoder, lambda m: m(IDX, torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]))),
    "gpt_classifier": (GPTForSequenceClassification, lambda m: m(IDX, torch.tensor([5, 3]))),
}


@pytest.fixture(scope="module")
def expected() -> dict[str, torch.Tensor]:
    return load_file(str(FIXTURES / "expected_outputs.safetensors"))


@pytest.mark.parametrize("name", sorted(CALLS))
def test_old_checkpoint_loads_and_computes_the_same(name, expected):
    cls, call = CALLS[name]
    model = load_pretrained(FIXTURES / name)
    assert type(model) is cls
    with torch.no_grad():
        torch.testing.assert_close(call(model), expected[name], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_saving_again_writes_todays_names_and_round_trips(name, expected, tmp_path):
    cls, call = CALLS[name]
    model = cls.from_pretrained(FIXTURES / name)
    model.save_pretrained(tmp_path / name)
    config = json.loads((tmp_path / name / "config.json").read_text())
    assert "tie_weights" not in json.dumps(config)
    again = load_pretrained(tmp_path / name)
    names = set(again.state_dict())
    assert not any(k.startswith(("layers.", "gpt.layers.")) for k in names)
    if name == "transformer":  # one EncoderDecoderStack: stack.encoder.*, stack.decoder.*
        assert not any(k.startswith(("encoder.", "decoder.")) for k in names)
    with torch.no_grad():
        torch.testing.assert_close(call(again), expected[name], rtol=1e-5, atol=1e-6)


def test_old_gpt_config_is_upgraded():
    old = json.loads((FIXTURES / "gpt" / "config.json").read_text())
    assert old["tie_weights"] is True and "tie_output" not in old  # the 0.1 format
    model = GPT.from_pretrained(FIXTURES / "gpt")
    assert model.config.tie_output is True
    assert model.head.weight is model.tok_embed.weight
    nested = GPTForSequenceClassification.from_pretrained(FIXTURES / "gpt_classifier")
    assert nested.config.gpt.tie_output is False  # renamed inside the nested table too


def test_a_recipe_with_an_old_name_is_told_the_new_one():
    with pytest.raises(ValueError, match="'tie_weights' in .* was renamed to 'tie_output'"):
        GPTConfig.from_dict({"vocab_size": 10, "tie_weights": True})
    config = CONFIGS / "shakespeare_nanogpt_cpu.toml"
    with pytest.raises(ValueError, match="renamed to 'tie_output'"):
        LMRecipe.from_dict(load_recipe(config, ["model.tie_weights=false"]))
    with pytest.raises(ValueError, match="'total_steps' in .* was renamed to 'decay_steps'"):
        OptimConfig.from_dict({"total_steps": 100})


# ----------------------------------------------------------------------------- recurrent models
RECURRENT = ALL_FIXTURES / "recurrent_v0_1"
IMAGES = torch.arange(128, dtype=torch.float32).reshape(2, 1, 8, 8) / 128
RECURRENT_CALLS = {  # written by attnlab 0.1 at commit e012971, weights moved off their init
    "attention_seq2seq": (AttentionSeq2Seq, lambda m: m(SRC, TGT)),  # the location score
    "rnn_seq2seq": (RNNSeq2Seq, lambda m: m(SRC, TGT)),
    "lstmn": (LSTMN, lambda m: m(IDX)),
    "show_attend_tell": (ShowAttendTell, lambda m: m(IMAGES, TGT)),
}
OLD_NAMES = {  # weights those checkpoints hold under names the models have since changed
    "rnn_seq2seq": ("decoder.weight_ih_l0", "cell.weight_ih"),
    "lstmn": ("layers.1.w_s.weight", "layers.1.score.w_q.weight"),
}


@pytest.fixture(scope="module")
def recurrent_expected() -> dict[str, torch.Tensor]:
    return load_file(str(RECURRENT / "expected_outputs.safetensors"))


@pytest.mark.parametrize("name", sorted(RECURRENT_CALLS))
def test_old_recurrent_checkpoint_loads_and_computes_the_same(name, recurrent_expected, tmp_path):
    """The one additive score and the stepped GRU cells renamed weights (``renamed_weights``):
    the old files load, compute what 0.1 computed and are saved again under today's names."""
    cls, call = RECURRENT_CALLS[name]
    model = load_pretrained(RECURRENT / name)
    assert type(model) is cls
    with torch.no_grad():
        torch.testing.assert_close(call(model), recurrent_expected[name], rtol=1e-5, atol=1e-6)
    if name in OLD_NAMES:
        old, new = OLD_NAMES[name]
        assert old in load_file(str(RECURRENT / name / "model.safetensors"))
        model.save_pretrained(tmp_path / name)
        saved = load_file(str(tmp_path / name / "model.safetensors"))
        assert old not in saved and new in saved
        with torch.no_grad():
            torch.testing.assert_close(call(load_pretrained(tmp_path / name)), recurrent_expected[name])
