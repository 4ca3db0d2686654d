"""Resuming a run with its own recipe: ``attnlab train --resume RUN`` needs no ``--config``,
writes into RUN, and continues exactly; a recipe whose data, model or optimizer differ from
the resumed run's is refused in one line before anything is written (two runs never mix)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from attnlab.checkpoint import run_dir_of
from attnlab.cli import main
from repo_paths import ROOT

CONFIG = ROOT / "configs" / "shakespeare_nanogpt_cpu.toml"
TINY = [
    "model.num_layers=1", "model.d_model=32", "model.num_heads=2", "data.block_size=16",
    "optim.warmup=2", "optim.decay_steps=6", "eval.eval_iters=2", "eval.sample_chars=10",
    "train.progress=false", "train.log_every=1", "train.save_every=0", "train.keep_last_k=0",
]

pytestmark = pytest.mark.skipif(
    not (Path(os.environ.get("ATTNLAB_DATA", "/nonexistent")) / "tinyshakespeare").is_dir(),
    reason="needs $ATTNLAB_DATA/tinyshakespeare (the shared corpora)",
)


def run(*argv: object) -> int:
    return main([str(a) for a in argv])


def losses(run_dir: Path) -> dict[int, float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return {e["step"]: e["loss"] for e in map(json.loads, lines) if e["event"] == "train"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    """A whole 6-step run and a 3-step run of the same recipe."""
    root = tmp_path_factory.mktemp("resume_recipe")
    whole, part = root / "whole", root / "part"
    assert run("train", "--config", CONFIG, "--run-dir", whole, *TINY, "train.max_steps=6") == 0
    assert run("train", "--config", CONFIG, "--run-dir", part, *TINY, "train.max_steps=3") == 0
    return whole, part


def test_a_changed_model_data_or_optimizer_is_refused_before_anything_is_written(runs, capsys):
    _, part = runs
    before = (part / "metrics.jsonl").read_text()
    for change in ("model.d_model=48", "data.block_size=8", "optim.lr=0.5", "train.seed=7"):
        code = run("train", "--config", CONFIG, "--run-dir", part, "--resume", part,
                   *TINY, "train.max_steps=6", change)
        err = capsys.readouterr().err
        key, value = change.split("=")
        assert code != 0 and f"{key}={value}" in err and "resumed from" in err, (change, err)
        assert len(err.strip().splitlines()) == 1, err
    assert (part / "metrics.jsonl").read_text() == before


def test_resume_without_config_takes_the_runs_recipe_and_directory_and_continues_exactly(runs, tmp_path):
    whole, part = runs
    branch = tmp_path / "branch"
    assert run("train", "--config", CONFIG, "--run-dir", branch, *TINY, "train.max_steps=3") == 0
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the default run directory must be the resumed run's, not runs/<name>
    try:
        assert run("train", "--resume", "branch", "train.max_steps=6") == 0
    finally:
        os.chdir(cwd)
    assert not (tmp_path / "runs").exists()
    assert losses(branch) == losses(whole)


def test_train_needs_a_config_or_a_run_to_resume(capsys):
    assert run("train") != 0
    assert "--config" in capsys.readouterr().err


def test_run_dir_of_a_checkpoint_is_the_run_that_holds_it(runs):
    whole, _ = runs
    step = next((whole / "checkpoints").iterdir())
    assert run_dir_of(whole) == whole
    assert run_dir_of(step) == whole
    assert run_dir_of(whole / "best") == whole
