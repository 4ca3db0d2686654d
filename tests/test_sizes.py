"""Sizes checked against memory before anything is allocated, and integers bounded when parsed
(attnlab.memory, attnlab.config): a setting that asks for more memory than the machine has is
refused in one line naming it, before the run directory, the data or the model exist."""

from __future__ import annotations

import io
import json

import pytest
import torch

import attnlab.memory
from attnlab.cli import main
from attnlab.config import from_dict
from attnlab.memory import Need, check_fits, format_bytes, measure_model, sized
from attnlab.models import GPT, MODEL_TYPES, load_pretrained
from attnlab.training import OptimConfig, TrainConfig
from explorer_toys import gpt_checkpoint, translator_checkpoint

MACHINE = 16 * 10**9  # every test here runs on a machine of 16 GB, whatever the real one has
HOST_MEMORY = attnlab.memory.host_memory


@pytest.fixture(autouse=True)
def machine_of_16_gb(monkeypatch):
    monkeypatch.setattr(attnlab.memory, "host_memory", lambda: MACHINE)


def refused(capsys, *argv: str) -> str:
    """Run ``attnlab ARGV``: it must exit 2 with one line on stderr, which is returned."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert "internal error" not in err and "frame #" not in err
    return err


def test_bytes_read_as_the_allocator_counts_them():
    assert format_bytes(32_000_000_000_000) == "32.0 TB"
    assert format_bytes(999) == "999 bytes"
    assert format_bytes(23_400_000_000) == "23.4 GB"
    assert format_bytes(10**40) == "10,000,000,000,000,000.0 YB"


def test_needs_beyond_the_machine_are_refused_naming_their_settings():
    memory = sized("the NTM's memory", {"data.batch_size": 8, "model.memory_size": 10**9,
                                        "model.memory_width": 1000}, 4)
    assert memory.nbytes == 32 * 10**12
    with pytest.raises(ValueError) as err:
        check_fits([memory, Need("the model", 10**9)])
    assert str(err.value) == (
        "data.batch_size × model.memory_size × model.memory_width = 8 × 1,000,000,000 × 1,000 floats "
        "(the NTM's memory) need at least 32.0 TB; this machine has 16.0 GB"
    )
    check_fits([Need("the model", MACHINE)])  # exactly what the machine has: not refused


def test_a_data_set_counts_against_the_machine_and_a_model_against_its_device(monkeypatch):
    host_only = attnlab.memory.device_memory
    monkeypatch.setattr(attnlab.memory, "device_memory",
                        lambda d: (80 * 10**9, "cuda:0") if torch.device(d).type == "cuda" else host_only(d))
    check_fits([Need("the model", 20 * 10**9)], "cuda")  # more than the machine, less than the GPU
    with pytest.raises(ValueError, match="the images need at least 20.0 GB; this machine has 16.0 GB"):
        check_fits([Need("the images", 20 * 10**9, host=True)], "cuda")
    with pytest.raises(ValueError, match="the model need at least 100.0 GB; cuda:0 has 80.0 GB"):
        check_fits([Need("the model", 100 * 10**9), Need("the images", 10**9, host=True)], "cuda")


def test_host_memory_is_ram_and_swap_at_most():
    total, meminfo = HOST_MEMORY(), attnlab.memory._meminfo()
    assert total is not None and total > 10**8
    if meminfo:  # Linux
        assert total <= meminfo["MemTotal"] + meminfo.get("SwapTotal", 0)


def smallest_config(model_type: str):
    """The default config of a model type, with a vocabulary of 40 where it needs one."""
    cls = MODEL_TYPES[model_type]
    if model_type == "gpt_classifier":
        return cls.config_class(gpt=MODEL_TYPES["gpt"].config_class(vocab_size=40))
    fields = cls.config_class.__dataclass_fields__
    return cls.config_class(**{k: 40 for k in ("vocab_size", "src_vocab_size") if k in fields})


@pytest.mark.parametrize("model_type", sorted(MODEL_TYPES))
def test_every_model_is_measured_exactly_without_being_built(model_type):
    cls, config = MODEL_TYPES[model_type], smallest_config(model_type)
    size = measure_model(lambda: cls.from_config(config))
    model = cls.from_config(config)
    assert size.parameters == sum(p.numel() for p in model.parameters())
    assert size.parameter_bytes == sum(p.numel() * p.element_size() for p in model.parameters())
    assert size.buffer_bytes == sum(b.numel() * b.element_size() for b in model.buffers())


def test_a_model_of_a_trillion_parameters_is_measured_without_memory():
    config = MODEL_TYPES["gpt"].config_class(vocab_size=65, d_model=10**6, num_heads=1, num_layers=1)
    size = measure_model(lambda: GPT(config))
    assert size.parameters > 10**12


@pytest.mark.parametrize("recipe, overrides, names", [
    ("ntm_copy", ["model.memory_size=1000000000", "model.memory_width=1000"],
     ["model.memory_size × model.memory_width", "8 × 1,000,000,000 × 1,000", "32.0 TB"]),
    ("ntm_copy", ["data.batch_size=1000000000"], ["data.batch_size", "1,000,000,000"]),
    ("shakespeare_char", ["data.batch_size=100000000"], ["data.batch_size", "100,000,000"]),
    ("digits_caption", ["data.canvas=100000", "data.size=100000"], ["data.size²", "10,000,000,000"]),
    ("shakespeare_char", ["model.d_model=1000000", "model.num_heads=1"], ["d_model=1000000"]),
    ("shakespeare_char", ["model.num_layers=1000000000"], ["num_layers = 1,000,000,000 layers"]),
    ("shakespeare_lstm", ["model.num_layers=1000000000"], ["num_layers × 4 × hidden_dim²"]),
    ("multi30k_de_en", ["model.max_len=10000000000"], ["model.max_len=10000000000"]),
    ("multi30k_demo", ["eval.beam_size=1000000000000"], ["eval.beam_size", "1,000,000,000,000"]),
    ("shakespeare_bpe", ["data.vocab_size=1000000000000"], ["data.vocab_size", "BPE"]),
])
def test_sizes_beyond_memory_are_refused_before_anything_exists(tmp_path, capsys, recipe, overrides, names):
    run = tmp_path / "run"
    err = refused(capsys, "train", "--config", f"configs/{recipe}.toml", "--run-dir", str(run), *overrides)
    assert "this machine has 16.0 GB" in err
    for name in names:
        assert name in err
    assert not run.exists()  # refused before the run directory, the data and the model


@pytest.mark.parametrize("value", ["99999999999999999999", "-9223372036854775809"])
def test_integers_are_bounded_when_parsed(tmp_path, capsys, value):
    err = refused(capsys, "train", "--config", "configs/ntm_copy.toml", "--run-dir", str(tmp_path / "r"),
                  f"data.batch_size={value}")
    assert f"[data].batch_size = {value} is outside the 64-bit integers" in err
    assert from_dict(TrainConfig, {"max_steps": 1, "seed": 2**63 - 1}).seed == 2**63 - 1
    with pytest.raises(ValueError, match=r"\[train\].seed = 9223372036854775808 is outside"):
        from_dict(TrainConfig, {"max_steps": 1, "seed": 2**63}, where="[train]")
    with pytest.raises(ValueError, match=r"\[optim\].lr = 1000\d+ is too large for a float"):
        from_dict(OptimConfig, {"lr": 10**400}, where="[optim]")


def test_a_checkpoint_whose_config_asks_for_terabytes_is_refused_naming_it(tmp_path, capsys):
    ckpt = gpt_checkpoint(tmp_path / "gpt")
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**config, "block_size": 10**12}))
    err = refused(capsys, "generate", str(ckpt), "--prompt", "a", "--max-new-tokens", "2")
    assert f"checkpoint {ckpt} (config.json)" in err and "block_size=1000000000000" in err
    (ckpt / "config.json").write_text(json.dumps({**config, "d_model": 10**6, "num_heads": 1}))
    with pytest.raises(ValueError, match=rf"checkpoint {ckpt} \(config.json\): .*d_model=1000000"):
        load_pretrained(ckpt)  # the one place every command builds a checkpoint's model


def test_a_beam_beyond_memory_is_refused_at_the_first_step(tmp_path, capsys, monkeypatch):
    ckpt = translator_checkpoint(tmp_path / "translator")
    for beam in ("100000000", "2147483647"):  # larger beams are refused as arguments (options.py)
        monkeypatch.setattr("sys.stdin", io.StringIO("Ein Hund läuft.\nZwei Katzen.\n"))
        err = refused(capsys, "translate", str(ckpt), "--beam", beam)
        assert "sentences × beam_size × vocabulary" in err and f" × {int(beam):,} × " in err


@pytest.mark.parametrize("model_type", ["gpt", "ntm", "transformer"])
def test_measuring_draws_no_random_numbers(model_type):
    cls, config = MODEL_TYPES[model_type], smallest_config(model_type)
    state = torch.get_rng_state()
    measure_model(lambda: cls.from_config(config))
    assert torch.equal(state, torch.get_rng_state())  # the real model that follows is the same
