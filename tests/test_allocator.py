"""attnlab.allocator: which malloc the attnlab command preloads, and that it does."""

import os
import subprocess
import sys

import pytest

from attnlab import allocator
from repo_paths import CONFIGS

INSTALLED = {name: allocator._library(name) for name in allocator.LIBRARIES}


@pytest.fixture
def both_installed(monkeypatch):
    monkeypatch.setattr(allocator, "_library", lambda name: f"lib{allocator.LIBRARIES[name]}.so")


def test_auto_prefers_tcmalloc_then_jemalloc_then_glibc(both_installed, monkeypatch):
    assert allocator.choose({}) == "libtcmalloc_minimal.so"
    assert allocator.choose({"ATTNLAB_ALLOCATOR": "JEMalloc "}) == "libjemalloc.so"
    only_jemalloc = {"jemalloc": "libjemalloc.so"}
    monkeypatch.setattr(allocator, "_library", only_jemalloc.get)
    assert allocator.choose({"ATTNLAB_ALLOCATOR": "auto"}) == "libjemalloc.so"
    monkeypatch.setattr(allocator, "_library", lambda name: None)
    assert allocator.choose({}) is None  # glibc, which keeps its freed memory


def test_no_relaunch_on_glibc_after_a_relaunch_or_with_a_preload(both_installed):
    assert allocator.choose({"ATTNLAB_ALLOCATOR": "glibc"}) is None
    assert allocator.choose({"ATTNLAB_ALLOCATOR_LOADED": "libtcmalloc_minimal.so"}) is None
    assert allocator.choose({"LD_PRELOAD": "libasan.so"}) is None  # the user's own preload wins


def test_a_bad_or_missing_choice_is_one_line(monkeypatch):
    with pytest.raises(ValueError, match="must be one of auto, tcmalloc, jemalloc, glibc, got 'je'"):
        allocator.choose({"ATTNLAB_ALLOCATOR": "je"})
    monkeypatch.setattr(allocator, "_library", lambda name: None)
    with pytest.raises(ValueError, match=r"=jemalloc but libjemalloc is not installed \(Debian's libjem"):
        allocator.choose({"ATTNLAB_ALLOCATOR": "jemalloc"})
    with pytest.raises(ValueError, match=r"=tcmalloc but libtcmalloc_minimal is not .*: make allocator\)"):
        allocator.choose({"ATTNLAB_ALLOCATOR": "tcmalloc"})


@pytest.mark.skipif(not any(INSTALLED.values()), reason="no caching allocator installed: make allocator")
@pytest.mark.parametrize("choice", ["auto", "glibc"])
def test_the_command_runs_with_the_chosen_allocator(tmp_path, choice):
    """The run header names the malloc mapped into the training process: the relaunched one."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ATTNLAB_ALLOCATOR_LOADED")}
    command = [sys.executable, "-m", "attnlab.cli", "train", "--config", str(CONFIGS / "ntm_copy.toml"),
               "--run-dir", str(tmp_path / "run"), "--threads", "1", "train.max_steps=2", "optim.warmup=1",
               "train.progress=false", "eval.test_lengths=[4]", "eval.test_sequences=2",
               "eval.val_sequences=2", "train.measure_memory=false"]
    out = subprocess.run(command, capture_output=True, text=True, env={**env, "ATTNLAB_ALLOCATOR": choice},
                         timeout=300)
    assert out.returncode == 0, out.stderr
    expected = "glibc" if choice == "glibc" else next(n for n, lib in INSTALLED.items() if lib)
    assert f" · malloc {expected} · " in out.stdout.splitlines()[0]
