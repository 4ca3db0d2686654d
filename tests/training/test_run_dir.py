"""One run, one directory (docs/reliability.md): a run writes into a directory only when it is
empty, is the run's own (a resume) or ``--overwrite`` replaces an earlier run there; a resume
with nothing left to train is refused; and a refused command leaves the file system as it
found it — no directory, no ``.lock``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnlab.cli import main
from attnlab.labs import demo
from attnlab.tasks import load_recipe
from attnlab.tasks.classification import compare_transfer
from attnlab.training import TrainConfig, Trainer
from attnlab.training.run_dir import RunLock, command_line, writing_run
from repo_paths import ROOT
from trained_toys import requires_mnist
from training_toys import NTM, TINY, lm_loss, make_batches, make_model

SRC = ROOT / "src"


def train(*argv: object) -> int:
    return main(["train", *map(str, argv)])


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` (hidden ones too) with its bytes (``None``: a directory; a
    ``.lock`` counts by its name: it names its last holder)."""
    def content(p: Path) -> bytes | None:
        return None if p.is_dir() else b"" if p.name == ".lock" else p.read_bytes()

    return {str(p.relative_to(root)): content(p) for p in root.rglob("*")}


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("attnlab train: error: "), err
    return err


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A finished 4-step run (checkpoints at steps 2 and 4, best/, metrics, results)."""
    run = tmp_path_factory.mktemp("runs") / "base"
    assert train("--config", NTM, "--run-dir", run, *TINY) == 0
    return run


@pytest.fixture
def kept(base, tmp_path) -> Path:
    """The issue's reproduction: a copy of a run without its checkpoints, with a user's file."""
    kept = tmp_path / "kept"
    shutil.copytree(base, kept)
    shutil.rmtree(kept / "checkpoints")
    (kept / "best" / "mine.txt").write_text("my notes")
    return kept


# ---------------------------------------------------------------- a new run and what is there
def test_a_new_run_refuses_a_directory_holding_results_but_no_checkpoints(kept, capsys):
    before = snapshot(kept)
    assert train("--config", NTM, "--run-dir", kept, *TINY) == 2
    err = one_line_error(capsys)
    assert f"run directory {kept} is not empty (best/, " in err and "metrics.jsonl" in err
    assert "pass --overwrite to replace it" in err and "--resume" not in err  # nothing to resume
    assert snapshot(kept) == before


def test_a_new_run_refuses_a_run_with_checkpoints_offering_to_resume_it(base, capsys):
    before = snapshot(base)
    assert train("--config", NTM, "--run-dir", base, *TINY) == 2
    assert f"resume it with --resume {base}, choose another --run-dir" in one_line_error(capsys)
    assert snapshot(base) == before


@pytest.mark.parametrize("entry", ["notes.txt", "results.json", "metrics.jsonl", "best/mine.txt", ".hidden"])
def test_any_file_makes_a_directory_not_empty(tmp_path, entry):
    (tmp_path / entry).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / entry).write_text("x")
    with pytest.raises(ValueError, match=f"is not empty \\({entry.split('/')[0]}"):
        with writing_run(tmp_path):
            pass


def test_only_the_lock_and_half_written_files_count_as_empty(tmp_path):
    (tmp_path / ".lock").write_text("PID 1")
    (tmp_path / ".results.json.tmp-ab12").write_text("half")
    with writing_run(tmp_path):
        pass
    assert [p.name for p in tmp_path.iterdir()] == [".lock"]  # the leftover was repaired away


def test_overwrite_replaces_an_earlier_run_and_nothing_outside_it(kept, tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep")
    (kept / "linked_dir").symlink_to(outside)
    (kept / "best" / "linked_file").symlink_to(outside / "precious.txt")
    with (kept / "metrics.jsonl").open("a") as f:
        f.write('{"event": "train", "step": 99, "loss": 1.0}\n')  # the earlier run's last line
    assert train("--config", NTM, "--run-dir", kept, *TINY, "--overwrite") == 0
    assert f"replacing the earlier run in {kept}: deleting best/, " in capsys.readouterr().out
    assert (outside / "precious.txt").read_text() == "keep" and snapshot(outside).keys() == {"precious.txt"}
    assert not (kept / "linked_dir").exists() and not (kept / "best" / "mine.txt").exists()
    steps = [json.loads(e)["step"] for e in (kept / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 2, 3, 4, 4]  # the new run's events only (train; eval at 2 and 4)


def test_overwrite_refuses_a_directory_no_run_wrote(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    assert train("--config", NTM, "--run-dir", mine, *TINY, "--overwrite") == 2
    assert "no run wrote it (it has no .lock)" in one_line_error(capsys)
    assert snapshot(mine) == {"thesis.tex": b"years of work"}


def test_overwrite_and_resume_exclude_each_other(base, capsys):
    assert train("--resume", base, "--overwrite") == 2
    assert "give one of them" in one_line_error(capsys)


def test_train_help_documents_overwrite(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    assert "--overwrite" in capsys.readouterr().out


# ---------------------------------------------------------------- a resume writes its own run
def test_a_resume_writes_only_into_its_own_run(base, tmp_path, capsys):
    other = tmp_path / "other" / "run"
    assert train("--resume", base, "--run-dir", other, "train.max_steps=6") == 2
    assert f"continues the run in {base}, not --run-dir {other}" in one_line_error(capsys)
    assert not (tmp_path / "other").exists()


def test_a_resume_with_max_steps_below_its_checkpoint_is_refused(base, capsys):
    before = snapshot(base)
    assert train("--resume", base, "train.max_steps=2") == 2
    err = one_line_error(capsys)
    assert "train.max_steps=2 but checkpoint" in err and "step_00000004 is already at step 4" in err
    assert snapshot(base) == before


def test_the_trainer_refuses_a_resume_with_no_steps_left(tmp_path):
    def trainer(max_steps: int) -> Trainer:
        model = make_model()
        config = TrainConfig(max_steps=max_steps, save_every=2, log_every=1, run_dir=str(tmp_path),
                             progress=False)
        return Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), lm_loss, make_batches(8), config)

    trainer(4).fit()
    metrics = (tmp_path / "metrics.jsonl").read_bytes()
    with pytest.raises(ValueError, match="max_steps=3 but checkpoint .*step_00000004 is already at step 4"):
        trainer(3).fit(resume_from=tmp_path)
    assert (tmp_path / "metrics.jsonl").read_bytes() == metrics  # not cut back


def test_a_finished_run_resumed_says_it_has_nothing_left_to_train(base, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(base, run)
    assert train("--resume", run) == 0
    assert "is at train.max_steps=4 already: nothing left to train" in capsys.readouterr().out


# ---------------------------------------------------------------- a refused command leaves nothing
def test_a_missing_checkpoint_to_resume_is_not_created(base, tmp_path, capsys):
    run = tmp_path / "k2"
    shutil.copytree(base, run)
    before = snapshot(run)
    missing = run / "checkpoints" / "step_00009999"
    assert train("--resume", missing, "--config", NTM) == 2
    assert f"resume path {missing} does not exist" in one_line_error(capsys)
    assert snapshot(run) == before


def test_a_refused_new_run_leaves_no_lock(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    assert train("--config", NTM, "--run-dir", tmp_path, *TINY) == 2
    one_line_error(capsys)
    assert snapshot(tmp_path) == {"notes.txt": b"mine"}


@requires_mnist
def test_a_recipe_refused_after_its_data_is_read_leaves_no_directory(tmp_path, capsys):
    run = tmp_path / "a" / "b" / "caption"
    config = ROOT / "configs" / "digits_caption.toml"
    assert train("--config", config, "--run-dir", run, "data.canvas=24", "data.size=24") == 2
    assert "canvas=24 is too small" in one_line_error(capsys)
    assert list(tmp_path.iterdir()) == []


def test_a_run_directory_name_that_is_not_utf8_is_refused_creating_nothing(tmp_path, capsys):
    """The command refuses it as an argument (tests/cli/test_cli_boundary.py); the library's own
    entry point refuses it too, before anything is created."""
    run = tmp_path / os.fsdecode(b"caf\xe9")
    with pytest.raises(SystemExit) as exit_info:
        train("--config", NTM, "--run-dir", run, *TINY)
    assert exit_info.value.code == 2 and "argument --run-dir: is not UTF-8" in capsys.readouterr().err
    with pytest.raises(ValueError, match="is not a valid UTF-8 name"):
        with writing_run(run, resume=None, overwrite=False):
            pass
    assert list(tmp_path.iterdir()) == []


def test_the_lock_takes_back_what_a_failed_run_created_and_nothing_else(tmp_path):
    with pytest.raises(OSError), RunLock(tmp_path / "a" / "b"):
        raise OSError("refused")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError), RunLock(tmp_path / "wrote"):
        (tmp_path / "wrote" / "tokenizer.json").write_text("{}")
        raise OSError("failed later")
    assert sorted(p.name for p in (tmp_path / "wrote").iterdir()) == [".lock", "tokenizer.json"]
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / ".lock").write_text("")
    with pytest.raises(OSError), RunLock(tmp_path / "old"):
        raise OSError("refused")
    assert (tmp_path / "old" / ".lock").is_file()  # an earlier run's lock stays


def test_a_lock_file_removed_while_it_is_taken_is_taken_again(tmp_path, monkeypatch):
    """A refused run deletes its .lock while holding it; a run that opened the old file just
    before must not hold the deleted one while a third holds the new one."""
    real_open, calls = os.open, []

    def open_then_lose_it(path, *args):
        fd = real_open(path, *args)
        calls.append(path)
        if len(calls) == 1:
            os.unlink(path)  # as a refused run's clean-up would, just after we opened it
        return fd

    monkeypatch.setattr(os, "open", open_then_lose_it)
    with RunLock(tmp_path):
        held = RunLock._held[tmp_path.resolve()].fd
        assert os.path.samestat(os.fstat(held), os.stat(tmp_path / ".lock"))
    assert len(calls) == 2


# ---------------------------------------------------------------- the holder's command line
def test_the_holder_command_line_is_whole_or_cut_between_words():
    assert command_line(["/venv/bin/attnlab", "train", "--run-dir", "runs/my run"]) == (
        "attnlab train --run-dir 'runs/my run'"
    )
    words = ["attnlab", "train", *(f"model.layer_{i}_width=1024" for i in range(40))]
    cut = command_line(words, limit=120)
    assert len(cut) <= 120 and cut.endswith(" …")
    assert cut[:-2].split(" ") == words[: len(cut[:-2].split(" "))]  # whole words only


def test_a_refused_second_writer_shows_the_holders_command_line_at_word_boundaries(tmp_path, monkeypatch):
    argv = ["attnlab", "train", "--config", "configs/shakespeare_char.toml",
            *(f"model.setting_number_{i}=12345" for i in range(30))]
    monkeypatch.setattr(sys, "argv", argv)
    with RunLock(tmp_path):
        code = f"from attnlab.training.run_dir import RunLock\nwith RunLock({str(tmp_path)!r}): pass"
        other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(SRC)})
    message = other.stderr.strip().splitlines()[-1]
    shown = message.split(": ", 2)[2].split("; wait for it")[0]
    assert shown.startswith("attnlab train --config configs/shakespeare_char.toml") and shown.endswith(" …")
    assert shown[:-2].split(" ") == argv[: len(shown[:-2].split(" "))]


# ---------------------------------------------------------------- the commands that write runs
def test_the_demo_replaces_its_own_earlier_run_and_nothing_else(tmp_path, monkeypatch, capsys):
    recipe = tmp_path / "demo.toml"
    recipe.write_text(NTM.read_text())
    monkeypatch.setattr(demo, "find_recipe", lambda: recipe)
    from attnlab.config import apply_overrides

    monkeypatch.setattr("attnlab.tasks.load_recipe", lambda path: apply_overrides(load_recipe(path), TINY))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="no run wrote it"):  # --out a directory of one's own
        demo.run_translation_demo(mine)
    assert snapshot(mine) == {"notes.txt": b"mine"}
    out = tmp_path / "demo"
    for _ in range(2):  # `make demo` twice in a row
        assert demo.run_translation_demo(out).is_file()
    assert f"replacing the earlier run in {out}" in capsys.readouterr().out


def test_finetune_refuses_an_out_directory_that_is_not_empty_before_reading_anything(tmp_path):
    (tmp_path / "report.json").write_text("{}")
    with pytest.raises(ValueError, match=f"run directory {tmp_path} is not empty .*another --out"):
        compare_transfer(load_recipe(ROOT / "configs" / "shakespeare_vs_kjv.toml"),
                         tmp_path / "no_such_checkpoint", out_dir=tmp_path)
    assert snapshot(tmp_path) == {"report.json": b"{}"}
