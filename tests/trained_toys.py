"""Tiny trained runs for the tests that need a real checkpoint: each trains in seconds through
``attnlab train`` on the real corpora (Multi30k, tinyshakespeare, MNIST scenes) or the NTM's
synthetic copy task. The task tests (translation, RNN translation, algorithmic, captioning,
language model) and the labs' tests (``tests/labs/test_labs_checkpoints.py``) build their fixtures
from these."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnlab.cli import main
from attnlab.data.corpora import data_dir
from attnlab.data.mnist import IMAGES_FILE

ROOT = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------ translation (Transformer)
TRANSLATION_RECIPE = "configs/multi30k_demo.toml"
TRANSLATION_TINY = [
    "data.train_limit=500",
    "data.vocab_size=400",
    "model.d_model=32",
    "model.num_heads=2",
    "model.num_encoder_layers=1",
    "model.num_decoder_layers=1",
    "model.d_ff=64",
    "train.max_steps=20",
    "optim.warmup=5",
    "train.log_every=5",
    "train.eval_every=10",
    "train.save_every=10",
    "train.progress=false",
    "eval.val_limit=8",
    "eval.test_limit=16",
    "eval.beam_size=2",
    "eval.average_last=2",
    "eval.max_len_a=1.0",  # short outputs: the untrained model never stops early
    "eval.max_len_b=4",
]


def train_translator(run_dir: Path, *overrides: str) -> Path:
    """The demo recipe's Transformer at a tiny size, 20 steps on 500 Multi30k pairs."""
    args = ["train", "--config", TRANSLATION_RECIPE, "--run-dir", str(run_dir), "--device", "cpu"]
    assert main([*args, *TRANSLATION_TINY, *overrides]) == 0
    return run_dir


# ------------------------------------------------------------------ translation (RNNs)
RNN_TINY = [
    "data.train_limit=400",
    "data.vocab_size=300",
    "model.embed_dim=16",
    "model.hidden_dim=32",
    "train.max_steps=6",
    "optim.warmup=2",
    "train.log_every=3",
    "train.eval_every=3",
    "train.save_every=3",
    "train.keep_last_k=2",
    "train.progress=false",
    "eval.val_limit=6",
    "eval.test_limit=8",
    "eval.beam_size=2",
    "eval.average_last=2",
    "eval.max_len_a=1.0",  # short outputs: the untrained model never stops early
    "eval.max_len_b=3",
]
RNN_ATTENTION = [*RNN_TINY, "model.encoder_dim=16", "model.attention_dim=8"]
RNN_RECIPES = {  # name -> (recipe, overrides)
    "bahdanau": ("configs/multi30k_bahdanau.toml", RNN_ATTENTION),
    "cho": ("configs/multi30k_rnn.toml", RNN_TINY),
}


def train_rnn_translator(run_dir: Path, name: str) -> Path:
    """Bahdanau's attention model (``"bahdanau"``) or Cho's (``"cho"``) at a tiny size, 6 steps."""
    config, overrides = RNN_RECIPES[name]
    assert main(["train", "--config", config, "--run-dir", str(run_dir), *overrides]) == 0
    return run_dir


# ------------------------------------------------------------------ the NTM's copy task
ALGORITHMIC_RECIPE = """\
task = "algorithmic"
[data]
task = "copy"
min_length = 1
max_length = 5
batch_size = 16
[model]
{model}
[optim]
lr = 1e-2
[train]
max_steps = 40
eval_every = 20
log_every = 10
save_every = 20
clip_norm = 10.0
progress = false
[eval]
val_sequences = 20
test_lengths = [3, 8]
test_sequences = 20
"""
NTM_TABLE = "controller_dim = 32\nmemory_size = 16\nmemory_width = 8"


def train_algorithmic(tmp_path: Path, model_table: str = NTM_TABLE) -> Path:
    """The copy task (lengths 1-5), 40 steps of 16 sequences, for the model ``model_table``
    describes (default a small NTM); returns the run directory ``tmp_path/run``."""
    config = tmp_path / "tiny.toml"
    config.write_text(ALGORITHMIC_RECIPE.format(model=model_table))
    run_dir = tmp_path / "run"
    assert main(["train", "--config", str(config), "--run-dir", str(run_dir)]) == 0
    return run_dir


# ------------------------------------------------------------------ captioning (MNIST scenes)
REAL_MNIST = data_dir() / "mnist"
requires_mnist = pytest.mark.skipif(
    not (REAL_MNIST / IMAGES_FILE).is_file(),
    reason=f"the MNIST test set is not in {REAL_MNIST} (set ATTNLAB_DATA to a folder holding mnist/)",
)
CAPTION_MODEL = {"type": "show_attend_tell", "conv_channels": [8, 16, 16], "feature_dim": 16, "embed_dim": 16,
                 "hidden_dim": 32, "attention_dim": 16, "dropout": 0.0}
CAPTION_TRAIN = {"max_steps": 6, "eval_every": 3, "save_every": 3, "log_every": 3, "progress": False,
                 "metric": "val_exact", "metric_mode": "max"}
CAPTION_SCENES = {"train_scenes": 48, "val_scenes": 8, "test_scenes": 12}


def caption_recipe(**data) -> dict:
    """A tiny captioning recipe (as a dict) with the ``[data]`` fields ``data``."""
    return {"task": "captioning", "data": {"batch_size": 8, **data}, "model": dict(CAPTION_MODEL),
            "optim": {"warmup": 1}, "train": dict(CAPTION_TRAIN),
            "eval": {"beam_size": 2, "val_limit": 8, "max_len": 20, "mistakes": 2}}


def train_captioner(run_dir: Path) -> Path:
    """A tiny captioner, 6 steps on 48 scenes (8 validation, 12 test scenes)."""
    from attnlab.tasks import train

    return train(caption_recipe(**CAPTION_SCENES), run_dir=run_dir)


# ------------------------------------------------------------------ language model (GPT)
LM_RECIPE = ROOT / "configs" / "shakespeare_nanogpt_cpu.toml"
LM_FAST = ["train.progress=false", "train.log_every=1", "train.save_every=0", "train.keep_last_k=0"]


def train_gpt(run_dir: Path) -> Path:
    """nanoGPT's CPU configuration, 30 steps, evaluated every 10, validated on the last 2 %;
    its checkpoint is ``run_dir/checkpoints/step_00000030``."""
    args = ["train", "--config", str(LM_RECIPE), "--run-dir", str(run_dir), "train.max_steps=30",
            "train.eval_every=10", "eval.eval_iters=8",
            "data.train_fraction=0.98",  # a shorter validation tail keeps the test fast
            *LM_FAST]
    assert main(args) == 0
    return run_dir
