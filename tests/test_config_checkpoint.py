"""Configs from TOML (typos rejected by name); checkpoints (atomic, safetensors only, tied)."""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import dataclass, field

import pytest
import torch
from safetensors import safe_open

from attnlab.checkpoint import atomic_directory, load_state, load_state_file, save_pretrained, save_state
from attnlab.config import (
    Config,
    from_dict,
    load_toml,
    parse_override,
)
from attnlab.models import GPT, GPTConfig, Transformer, TransformerConfig, load_pretrained
from attnlab.training.state import load_trainer_state


def tiny_gpt(**kw) -> GPT:
    torch.manual_seed(0)
    cfg = dict(vocab_size=17, block_size=12, d_model=16, num_heads=2, num_layers=2) | kw
    return GPT.from_config(GPTConfig(**cfg)).eval()


# --- configs -----------------------------------------------------------------------------


def test_unknown_key_is_rejected_by_name_with_a_suggestion():
    with pytest.raises(
        ValueError, match=r"unknown key 'd_modle' in GPTConfig; did you mean 'd_model'"
    ):
        GPTConfig.from_dict({"vocab_size": 10, "d_modle": 64})


def test_missing_and_mistyped_keys_are_named():
    with pytest.raises(ValueError, match="missing required key.*vocab_size"):
        GPTConfig.from_dict({"d_model": 64})
    with pytest.raises(ValueError, match=r"GPTConfig.d_model must be int, got str 'big'"):
        GPTConfig.from_dict({"vocab_size": 10, "d_model": "big"})
    with pytest.raises(ValueError, match=r"positional must be one of .*got 'sinus'"):
        GPTConfig.from_dict({"vocab_size": 10, "positional": "sinus"})
    assert GPTConfig.from_dict({"vocab_size": 10, "dropout": 0}).dropout == 0.0  # int → float


@dataclass
class _Train(Config):
    lr: float = 1e-3
    steps: int = 10


@dataclass
class _Recipe(Config):
    model: TransformerConfig
    train: _Train = field(default_factory=_Train)


def test_load_toml_maps_nested_tables_and_applies_overrides(tmp_path):
    recipe = tmp_path / "r.toml"
    recipe.write_text(
        '[model]\nsrc_vocab_size = 100\nd_model = 32\nnum_heads = 4\npositional = "learned"\n'
        "[train]\nlr = 0.01\n"
    )
    data = load_toml(
        recipe,
        [
            "model.d_model=64",
            "train.steps=5",
            "model.positional=rope",
            'model.activation="gelu"',
            "train.lr=3e-4",
        ],
    )
    cfg = from_dict(_Recipe, data)
    assert (
        cfg.model.d_model == 64
        and cfg.model.positional == "rope"
        and cfg.model.activation == "gelu"
    )
    assert cfg.train.steps == 5 and cfg.train.lr == 3e-4 and cfg.model.tgt_vocab_size == 100
    assert TransformerConfig.from_toml(recipe, section="model").d_model == 32
    with pytest.raises(
        ValueError, match=r"unknown key 'lrate' in _Recipe.train; did you mean 'lr'"
    ):
        from_dict(_Recipe, load_toml(recipe, ["train.lrate=1"]))


def test_config_values_are_literals_never_code(tmp_path):
    marker = tmp_path / "pwned"
    path, value = parse_override(f"model.positional=__import__('pathlib').Path('{marker}').touch()")
    assert path == ["model", "positional"] and isinstance(value, str) and not marker.exists()
    with pytest.raises(ValueError, match="key=value"):
        parse_override("d_model 64")


def test_config_round_trips_through_a_dict():
    cfg = TransformerConfig(src_vocab_size=50, tgt_vocab_size=60, positional="alibi")
    assert TransformerConfig.from_dict(cfg.to_dict()) == cfg


# --- checkpoints -------------------------------------------------------------------------


def test_gpt_round_trip_gives_identical_outputs_and_keeps_tying(tmp_path):
    model = tiny_gpt(positional="relative")
    idx = torch.randint(0, 17, (2, 9))
    save_pretrained(model, tmp_path / "ckpt", extra={"tokenizer.json": b"{}"})
    loaded = GPT.from_pretrained(tmp_path / "ckpt")
    torch.testing.assert_close(loaded(idx), model(idx), rtol=0, atol=0)
    assert loaded.head.weight is loaded.tok_embed.weight
    assert loaded.config == model.config
    with safe_open(str(tmp_path / "ckpt" / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert ("head.weight" in keys) != ("tok_embed.weight" in keys)  # one copy of the tied matrix
    assert json.loads((tmp_path / "ckpt" / "config.json").read_text())["model_type"] == "gpt"
    assert (tmp_path / "ckpt" / "tokenizer.json").read_bytes() == b"{}"


def test_transformer_round_trip_with_shared_embeddings(tmp_path):
    torch.manual_seed(0)
    cfg = TransformerConfig(
        src_vocab_size=13,
        d_model=16,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        share_embeddings=True,
        positional="learned",
        max_len=10,
    )
    model = Transformer.from_config(cfg).eval()
    src, tgt = torch.randint(0, 13, (2, 7)), torch.randint(0, 13, (2, 5))
    model.save_pretrained(tmp_path / "t")
    loaded = load_pretrained(tmp_path / "t")
    assert isinstance(loaded, Transformer)
    torch.testing.assert_close(loaded(src, tgt), model(src, tgt), rtol=0, atol=0)
    assert loaded.src_embed.weight is loaded.tgt_embed.weight is loaded.output.weight


def test_interrupted_write_leaves_previous_checkpoint_intact(tmp_path):
    model = tiny_gpt()
    idx = torch.randint(0, 17, (1, 6))
    ckpt = tmp_path / "ckpt"
    model.save_pretrained(ckpt)
    before = sorted(os.listdir(ckpt))
    with pytest.raises(RuntimeError, match="power cut"), atomic_directory(ckpt) as tmp:
        (tmp / "model.safetensors").write_bytes(b"half a file")
        raise RuntimeError("power cut")
    with pytest.raises(FileNotFoundError):  # a failing extra aborts save_pretrained midway
        tiny_gpt(d_model=32).save_pretrained(ckpt, extra={"vocab.txt": tmp_path / "missing.txt"})
    assert sorted(os.listdir(ckpt)) == before
    assert os.listdir(tmp_path) == ["ckpt"]  # no temporary directories left behind
    torch.testing.assert_close(GPT.from_pretrained(ckpt)(idx), model(idx), rtol=0, atol=0)


def test_overwriting_replaces_the_checkpoint(tmp_path):
    tiny_gpt().save_pretrained(tmp_path / "c")
    tiny_gpt(d_model=32).save_pretrained(tmp_path / "c")
    assert GPT.from_pretrained(tmp_path / "c").config.d_model == 32
    assert os.listdir(tmp_path) == ["c"]


def test_missing_or_corrupt_checkpoints_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"checkpoint directory .*nowhere does not exist"):
        load_state(tmp_path / "nowhere")
    tiny_gpt().save_pretrained(tmp_path / "c")
    (tmp_path / "c" / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00garbage!")
    with pytest.raises(ValueError, match=r"model.safetensors are corrupt or not safetensors"):
        GPT.from_pretrained(tmp_path / "c")
    (tmp_path / "c" / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=r"has no model.safetensors"):
        GPT.from_pretrained(tmp_path / "c")
    (tmp_path / "c" / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"config.json is not valid JSON"):
        load_state(tmp_path / "c")


def test_weights_whose_aliases_metadata_is_no_object_are_named(tmp_path):
    save_state({"w": torch.zeros(2)}, tmp_path / "w.safetensors", metadata={"aliases": "[1]"})
    refused = r"'aliases' metadata of checkpoint weights .*w.safetensors must hold a JSON object, got list"
    with pytest.raises(ValueError, match=refused):
        load_state_file(tmp_path / "w.safetensors")


def test_bert_files_nested_too_deep_are_named(tmp_path):
    from attnlab.interop.bert import load_bert

    (tmp_path / "config.json").write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(ValueError, match="BERT file .*config.json nests its arrays or objects too deeply"):
        load_bert(tmp_path)


@pytest.mark.parametrize("depth", [150, 5000])
def test_json_deeper_than_the_cap_is_refused_on_every_python(tmp_path, depth):
    """Python 3.12's JSON parser reads any depth and 3.11's stops near its recursion limit:
    the cap is checked before parsing, so both refuse the same files, naming the depth."""
    from attnlab.parsing import MAX_NESTING, read_json

    (tmp_path / "config.json").write_text('{"a": ' + "[" * depth + "]" * depth + "}")
    refused = (rf"config.json nests its arrays or objects too deeply to read "
               rf"\({depth + 1} levels; at most {MAX_NESTING}\)")
    with pytest.raises(ValueError, match=refused):
        read_json(tmp_path / "config.json", "checkpoint config")
    (tmp_path / "ok.json").write_text('{"a": ' + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1) + "}")
    value = read_json(tmp_path / "ok.json")["a"]  # the deepest file allowed still loads
    for _ in range(MAX_NESTING - 2):
        (value,) = value
    assert value == []


def test_wrong_model_type_or_shapes_are_refused(tmp_path):
    tiny_gpt().save_pretrained(tmp_path / "g")
    with pytest.raises(ValueError, match=r"model_type 'gpt' but Transformer expects 'transformer'"):
        Transformer.from_pretrained(tmp_path / "g")
    config = json.loads((tmp_path / "g" / "config.json").read_text())
    config["num_layers"] = 3  # the weights hold only 2 layers
    (tmp_path / "g" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"does not match GPT: missing \['decoder.layers.2.ffn.w1.bias'"):
        GPT.from_pretrained(tmp_path / "g")
    config["num_layers"], config["d_model"] = 2, 32
    (tmp_path / "g" / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        ValueError,
        match=r"not match GPT: tok_embed.weight has shape \(17, 16\) in the file but \(17, 32\)",
    ):
        GPT.from_pretrained(tmp_path / "g")


class _Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_loading_never_unpickles(tmp_path):
    marker = tmp_path / "executed"
    tiny_gpt().save_pretrained(tmp_path / "c")
    (tmp_path / "c" / "model.safetensors").write_bytes(pickle.dumps(_Exploit(marker)))
    with pytest.raises(ValueError, match="corrupt or not safetensors"):
        GPT.from_pretrained(tmp_path / "c")
    assert not marker.exists()


@pytest.mark.parametrize("protocol", [None, 2, 4])
def test_a_pickled_trainer_state_is_refused_in_attnlabs_own_line(tmp_path, protocol):
    marker, path = tmp_path / "executed", tmp_path / "trainer.pt"
    payload = {"format": "attnlab.trainer_state", "state": _Exploit(marker)}
    if protocol is None:
        torch.save(payload, path)
    else:  # a bare pickle, no torch zip around it
        path.write_bytes(pickle.dumps(payload, protocol=protocol))
    with pytest.raises(ValueError) as err:
        load_trainer_state(path)
    message = str(err.value)
    assert "\n" not in message and "weights_only" not in message  # never torch's advice to unpickle
    if protocol == 4:  # a framed pickle: refused at the first opcode torch does not read
        assert message.startswith(f"trainer state {path} could not be read")
    else:
        assert message == (
            f"trainer state {path} holds pickled objects, which attnlab never loads (its trainer.pt "
            "holds only numbers, strings and tensors): this file was not written by attnlab"
        )
    assert not marker.exists()


def test_num_parameters_counts_tied_weights_once():
    model = tiny_gpt()
    d, v, n, layers = 16, 17, 12, 2
    # nanoGPT's count: embeddings + per layer (QKV, out, 2 LN, MLP) + final LN; head tied.
    per_layer = (
        (3 * d * d + 3 * d) + (d * d + d) + 2 * (2 * d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    )
    assert model.num_parameters() == v * d + n * d + layers * per_layer + 2 * d
    assert model.num_parameters(exclude_embeddings=True) == layers * per_layer + 2 * d
    model.tok_embed.weight.requires_grad_(False)
    assert model.num_parameters(trainable_only=True) == n * d + layers * per_layer + 2 * d
