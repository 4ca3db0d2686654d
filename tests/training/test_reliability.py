"""Nothing lost, nothing mixed (docs/reliability.md): one writer per run directory, checkpoint
directories and files replaced atomically, a killed writer's leftovers repaired, SIGINT and
SIGTERM saving a resumable checkpoint, a torn metrics line tolerated — and a fault-injection
sweep that SIGKILLs a real training run at places inside its checkpoint and file writes and
between its steps, then checks that what is visible loads, that a file being replaced is the
old one or the new one, and that resuming reproduces the uninterrupted run bit for bit."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from attnlab import atomic
from attnlab.atomic import atomic_directory, atomic_file, check_target, clean_leftovers, write_atomic
from attnlab.checkpoint import list_checkpoints, load_state
from attnlab.training.metrics import MetricsLog, read_metrics
from attnlab.training.run_dir import RunDirectoryInUse, RunLock, writing_run
from attnlab.training.state import load_trainer_state
from reliability_worker import RESULTS, results_record
from repo_paths import SRC, TESTS

WORKER = TESTS / "reliability_worker.py"


def worker(run_dir: Path, *args: str, wait: bool = True, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, str(WORKER), str(run_dir), *args]
    if wait:
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, **kw)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kw)


def wait_for_step(run_dir: Path, step: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, proc.communicate()
        metrics = run_dir / "metrics.jsonl"
        if metrics.is_file() and any(e.get("step", 0) >= step for e in read_metrics(metrics)):
            return
        time.sleep(0.05)
    raise AssertionError(f"the run did not reach step {step}")


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """The uninterrupted 8-step run: its final weights and how often each kill point is hit."""
    root = tmp_path_factory.mktemp("reference")
    done = worker(root / "run", "--count-points", str(root / "counts.json"))
    assert done.returncode == 0, done.stderr
    return {
        "state": torch.load(root / "run" / "final_state.pt"),
        "counts": json.loads((root / "counts.json").read_text()),
        "events": untimed_events(root / "run"), "run": root / "run",
    }


def untimed_events(run: Path) -> list[dict]:
    """The events of a run's metrics.jsonl without their timing fields."""
    return [{k: v for k, v in e.items() if k not in ("tokens_per_s", "elapsed_s")} for e in read_metrics(run)]


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)


def assert_visible_checkpoints_load(run: Path, evals_done: int) -> None:
    for step_dir in list_checkpoints(run):
        load_state(step_dir)
        load_trainer_state(step_dir / "trainer.pt")
    if (run / "best").exists() or evals_done >= 2:  # a best/ once written never disappears
        load_state(run / "best")


# ---------------------------------------------------------------- one writer per run directory
def test_a_second_writer_is_refused_naming_the_holder(tmp_path, reference):
    run = tmp_path / "run"
    # 400 steps of 0.1 s: still running however long a loaded machine takes to start the second
    # (it is killed below, so the length costs nothing).
    first = worker(run, "--steps", "400", "--sleep", "0.1", wait=False)
    try:
        wait_for_step(run, 1, first)
        second = worker(run, "--steps", "4")
        assert second.returncode != 0
        assert f"is in use by PID {first.pid}" in second.stderr
    finally:
        first.kill()
        first.wait()


def test_a_killed_runs_lock_never_blocks(tmp_path):
    run = tmp_path / "run"
    holder = worker(run, "--steps", "400", "--sleep", "0.1", wait=False)
    wait_for_step(run, 1, holder)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with RunLock(run):  # the OS released the dead process's lock
        assert (run / ".lock").is_file()


def test_the_lock_is_reentrant_in_one_process_and_exclusive_across(tmp_path):
    with RunLock(tmp_path), RunLock(tmp_path):  # the task driver and the trainer
        code = f"from attnlab.training.run_dir import RunLock\nwith RunLock({str(tmp_path)!r}): pass"
        other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(SRC)})
        assert other.returncode != 0 and "RunDirectoryInUse" in other.stderr
        assert f"PID {os.getpid()}" in other.stderr
    with RunLock(tmp_path):  # released by the outer exit
        pass
    assert issubclass(RunDirectoryInUse, ValueError)  # the CLI prints it as one line


def test_a_fresh_run_refuses_a_directory_with_checkpoints(tmp_path, reference):
    assert worker(tmp_path / "run", "--steps", "2").returncode == 0
    again = worker(tmp_path / "run", "--steps", "2")
    assert again.returncode != 0 and "is not empty (best/, checkpoints/" in again.stderr
    assert f"resume it with --resume {tmp_path / 'run'}" in again.stderr


# ---------------------------------------------------------------- atomic directories
def test_replacing_a_directory_exchanges_it_in_one_step(tmp_path):
    target = tmp_path / "best"
    with atomic_directory(target) as d:
        (d / "v").write_text("1")
    calls = []
    real = atomic._exchange

    def spy(a, b):
        calls.append((a, b))
        assert (b / "v").read_text() == "1"  # the old one is in place until the swap
        return real(a, b)

    atomic._exchange = spy
    try:
        with atomic_directory(target) as d:
            (d / "v").write_text("2")
    finally:
        atomic._exchange = real
    assert len(calls) == 1 and (target / "v").read_text() == "2"
    assert [p.name for p in tmp_path.iterdir()] == ["best"]  # the old one was deleted


def test_a_crash_between_two_renames_is_repaired(tmp_path, monkeypatch):
    """Where the filesystem cannot exchange, the old directory is moved aside first; a crash
    before the new one arrives leaves no best/ — until the next start puts the old one back."""
    target = tmp_path / "best"
    with atomic_directory(target) as d:
        (d / "v").write_text("old")
    monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    renames = []
    real = os.replace

    def crash_on_second(src, dst):
        renames.append(src)
        if len(renames) == 2:
            raise SystemExit("killed")  # an exception: the except clause restores
        return real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", crash_on_second)
    with pytest.raises(SystemExit):
        with atomic_directory(target) as d:
            (d / "v").write_text("new")
    monkeypatch.setattr(atomic.os, "replace", real)
    assert (target / "v").read_text() == "old"  # the except clause put it back already
    # A real SIGKILL runs no except clause: recreate that state and let the next start repair it.
    aside = tmp_path / ".best.old-x1"
    aside.mkdir()
    real(target, aside / "best")
    (tmp_path / ".best.tmp-x2").mkdir()
    assert not target.exists()
    removed = clean_leftovers(tmp_path)
    assert (target / "v").read_text() == "old" and len(removed) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["best"]


def test_checkpoint_files_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        with atomic_directory(tmp_path / "ckpt") as d:
            (d / "model.safetensors").write_bytes(b"x")
            os.chmod(d / "model.safetensors", 0o600)  # as safetensors writes it
    finally:
        os.umask(old)
    assert oct((tmp_path / "ckpt").stat().st_mode & 0o777) == oct(0o755)
    assert oct((tmp_path / "ckpt" / "model.safetensors").stat().st_mode & 0o777) == oct(0o644)


def test_writing_run_repairs_leftovers_under_the_lock(tmp_path):
    step = tmp_path / "checkpoints" / "step_00000002"  # a resumable run (the files' presence)
    step.mkdir(parents=True)
    for name in ("model.safetensors", "config.json", "trainer.pt"):
        (step / name).touch()
    (tmp_path / "checkpoints" / ".step_00000004.tmp-ab12").mkdir(parents=True)
    (tmp_path / ".final.tmp-cd34").mkdir()
    (tmp_path / "tokenizer").mkdir()  # a translation run's tokenizers, written file by file
    (tmp_path / "tokenizer" / ".src.json.tmp-ef56").write_text("{")
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / ".loss.png.tmp-gh78").write_bytes(b"\x89PNG")
    with writing_run(tmp_path, resume=tmp_path):
        pass
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".") and p.name != ".lock"]


# ---------------------------------------------------------------- atomic files
def test_an_exception_mid_write_keeps_the_old_file(tmp_path):
    target = write_atomic(tmp_path / "page.html", "old")
    with pytest.raises(KeyboardInterrupt):
        with atomic_file(target, "w") as f:
            f.write("new, half")
            raise KeyboardInterrupt  # Ctrl-C in the middle of the write
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]  # the temporary file is gone
    with pytest.raises(ValueError):
        with atomic_file(tmp_path / "new.png") as f:
            f.write(b"\x89PNG")
            raise ValueError("drawing failed")
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]  # no file rather than half a one


def test_atomic_files_follow_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "results.json", "{}")
    finally:
        os.umask(old)
    assert oct((tmp_path / "results.json").stat().st_mode & 0o777) == oct(0o640)  # not mkstemp's 0o600


def test_a_symlinked_target_keeps_its_link(tmp_path):
    real = write_atomic(tmp_path / "shared" / "explorer.html", "old")
    link = tmp_path / "explorer.html"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new" and link.read_text() == "new"
    assert sorted(p.name for p in real.parent.iterdir()) == ["explorer.html"]


def test_a_write_error_names_the_file(tmp_path):
    target = write_atomic(tmp_path / "report.md", "old")
    with pytest.raises(OSError) as caught:
        with atomic_file(target) as f:
            f.write(b"x")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))  # as a full disk's write does
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(target)
    assert target.read_text() == "old"
    (tmp_path / "plots").mkdir()
    with pytest.raises(ValueError, match=f"^cannot write the file {tmp_path / 'plots'}: it is a directory$"):
        write_atomic(tmp_path / "plots", b"\x89PNG")  # refused before anything is written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plots", "report.md"]


def test_a_path_that_cannot_be_written_is_refused_before_any_work(tmp_path):
    (tmp_path / "afile").write_text("mine")
    with pytest.raises(ValueError, match=f"^cannot write {tmp_path / 'afile' / 'x.html'}: "
                                         f"{tmp_path / 'afile'} is a file, not a directory$"):
        check_target(tmp_path / "afile" / "x.html")
    with pytest.raises(ValueError, match="cannot write the directory .*afile: it is a file"):
        with atomic_directory(tmp_path / "afile"):
            pass
    dangling = tmp_path / "d.html"
    dangling.symlink_to(tmp_path / "nowhere" / "x.html")
    with pytest.raises(ValueError, match="is a symbolic link to .*nowhere/x.html, whose directory does not"):
        write_atomic(dangling, "page")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "d.html"]  # no nowhere/ created
    assert (tmp_path / "afile").read_text() == "mine"


def test_a_failed_write_takes_back_the_directories_it_created(tmp_path):
    (tmp_path / "kept").mkdir()
    for make in (lambda p: atomic_file(p), lambda p: atomic_directory(p)):
        with pytest.raises(OSError):
            with make(tmp_path / "kept" / "new" / "deeper" / "out"):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        assert list(tmp_path.iterdir()) == [tmp_path / "kept"] and not any((tmp_path / "kept").iterdir())
    write_atomic(tmp_path / "kept" / "new" / "x.txt", "written")  # a write that succeeds keeps them
    assert (tmp_path / "kept" / "new" / "x.txt").read_text() == "written"


def test_a_half_written_temporary_file_is_a_leftover(tmp_path):
    (tmp_path / ".results.json.tmp-ab_12").write_text('{"evals": ')
    (tmp_path / "results.json").write_text("{}")
    assert [p.name for p in clean_leftovers(tmp_path)] == [".results.json.tmp-ab_12"]
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


WRITES = re.compile(r"\.write_(text|bytes)\(|\bopen\([^)]*[\"'][wax]|\.savefig\(|torch\.save\(|json\.dump\(|"
                    r"shutil\.copy|\)\.save\(")
NOT_THROUGH_ATOMIC = {  # (file, the write): why it needs no atomic_file of its own
    ("checkpoint.py", "(tmp / CONFIG_NAME).write_text("): "inside atomic_directory",
    ("checkpoint.py", "(directory / name).write_bytes(content)"): "write_extra: inside atomic_directory",
    ("checkpoint.py", "shutil.copyfile(source, directory / name)"): "write_extra: inside atomic_directory",
    ("data/image_captions.py", ".save(tmp / name)"): "inside atomic_directory",
    ("data/image_captions.py", "(tmp / CAPTIONS_FILE).write_text("): "inside atomic_directory",
    ("data/image_captions.py", "(tmp / DIGITS_FILE).write_text("): "inside atomic_directory",
    ("training/metrics.py", 'self.path.open("a")'): "an append: a torn last line is dropped on reading",
    ("training/state.py", "torch.save(payload, path)"): "into the caller's buffer",
    ("training/state.py", "torch.save(payload, f)"): "into atomic_file",
    ("visualize/figure.py", "fig.savefig(f, "): "into atomic_file",
    ("measure/timing.py", '_CLEAR_REFS.write_text("5")'): "a /proc control file, not an output",
    ("measure/timing.py", 'open(os.devnull, "w")'): "/dev/null",
    ("data/prepared.py", "(tmp / META_FILE).write_text("): "build_once: inside atomic_directory",
    ("data/prepared.py", 'self._bin = open(directory / f"{name}.bin", "wb")'): "inside atomic_directory",
    ("data/prepared.py", 'self._idx = open(directory / f"{name}.idx", "wb")'): "inside atomic_directory",
    ("data/pair_corpus.py", '(out / f"{split}.jsonl").write_text('): "inside atomic_directory",
    ("interop/hf_folders.py", '(tmp / "config.json").write_text('): "inside atomic_directory",
    ("interop/hf_folders.py", '(tmp / "tokenizer.json").write_text('): "inside atomic_directory",
    ("interop/hf_folders.py", '(tmp / "tokenizer_config.json").write_text('): "inside atomic_directory",
    ("interop/hf_folders.py", "(tmp / name).write_text(text)"): "inside atomic_directory",
    ("views/html.py", "figure.savefig(buffer, "): "into an in-memory buffer: a view's _repr_png_",
    ("data/speech/wav.py", 'wave.open(buffer, "wb")'): "into an in-memory buffer, which write_wav writes "
                                                       "through atomic_file",
}


def test_every_file_attnlab_writes_goes_through_the_atomic_writer():
    """No write in ``src/attnlab`` opens its target directly, except those listed (and why)."""
    seen = set()
    for file in sorted((SRC / "attnlab").rglob("*.py")):
        name = file.relative_to(SRC / "attnlab").as_posix()
        for line in file.read_text(encoding="utf-8").splitlines():
            if name != "atomic.py" and WRITES.search(line):
                known = [k for k in NOT_THROUGH_ATOMIC if k[0] == name and k[1] in line]
                assert known, f"{name}: {line.strip()} writes a file without attnlab.atomic"
                seen.update(known)
    assert seen == set(NOT_THROUGH_ATOMIC)  # no stale entry


# ---------------------------------------------------------------- a torn metrics line
def test_a_torn_last_metrics_line_is_dropped(tmp_path):
    log = MetricsLog(tmp_path)
    log.append({"event": "train", "step": 1, "loss": 2.0})
    with log.path.open("a") as f:
        f.write('{"event": "train", "st')  # a kill in the middle of a write
    assert read_metrics(tmp_path) == [{"event": "train", "step": 1, "loss": 2.0}]
    log.truncate_after(1)
    assert log.path.read_text() == '{"event": "train", "step": 1, "loss": 2.0}\n'
    (tmp_path / "metrics.jsonl").write_text('{"broken\n{"event": "train", "step": 2}\n')
    with pytest.raises(ValueError, match="metrics.jsonl:1 is not valid JSON"):
        read_metrics(tmp_path)  # damage inside the file is still an error


# ---------------------------------------------------------------- signals
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_saves_a_resumable_checkpoint_and_exits_with_its_code(tmp_path, reference, signum):
    run = tmp_path / "run"
    proc = worker(run, "--sleep", "0.3", wait=False)
    wait_for_step(run, 3, proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert "interrupted: saved" in out and "--resume" in out
    assert json.loads(out.strip().splitlines()[-1])["signal"] == signum
    saved = list_checkpoints(run)[-1]
    assert int(saved.name.split("_")[1]) >= 3
    resumed = worker(run, "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert_same_weights(torch.load(run / "final_state.pt"), reference["state"])
    assert untimed_events(run) == reference["events"]


def test_resuming_a_finished_run_repeats_nothing(tmp_path, reference):
    """Resumed twice at train.max_steps: no step, evaluation (results.json) or event again."""
    run = shutil.copytree(reference["run"], tmp_path / "run")
    results = (run / RESULTS).read_text()
    for _ in range(2):
        assert (resumed := worker(run, "--resume")).returncode == 0, resumed.stderr
    assert untimed_events(run) == reference["events"] and (run / RESULTS).read_text() == results
    assert_same_weights(torch.load(run / "final_state.pt"), reference["state"])


# ---------------------------------------------------------------- SIGKILL at a spread of moments
def kill_points(reference: dict, everywhere: bool) -> list[tuple[str, int]]:
    """Every hit of every point (everywhere: ``make test-slow``), or the middle hit of each."""
    points = []
    for name, hits in sorted(reference["counts"].items()):
        ks = range(1, hits + 1) if everywhere else [(hits + 1) // 2]
        points += [(name, k) for k in ks]
    return points


def assert_results_old_or_new(run: Path, name: str, k: int) -> None:
    """``results.json``, rewritten by every evaluation, is a complete record or absent, never
    torn; a kill inside its k-th write leaves the (k-1)-th (or none when k = 1)."""
    path = run / RESULTS
    record = json.loads(path.read_text()) if path.exists() else None
    if record is not None:
        assert record == results_record(record["evals"]), (name, k)
    if name in ("file_opened", "file_written"):
        assert record == (results_record(k - 2) if k > 1 else None), (name, k)
        assert len(list(run.glob(f".{RESULTS}.tmp-*"))) == 1  # the new one, left for the next start


def kill_and_resume(tmp_path: Path, reference: dict, name: str, k: int) -> None:
    run = tmp_path / f"{name}_{k}"
    killed = worker(run, "--kill-at", f"{name}:{k}")
    assert killed.returncode == -signal.SIGKILL, (name, k, killed.stdout, killed.stderr)
    events = read_metrics(run) if (run / "metrics.jsonl").exists() else []
    evals = sum(1 for e in events if e["event"] == "eval")
    assert_visible_checkpoints_load(run, evals)
    assert_results_old_or_new(run, name, k)
    resumed = worker(run, "--resume" if list_checkpoints(run) else "--overwrite")  # a restart replaces
    assert resumed.returncode == 0, (name, k, resumed.stderr)
    assert_same_weights(torch.load(run / "final_state.pt"), reference["state"])
    assert not [p for p in run.rglob(".*") if p.name != ".lock"], "leftovers were not cleaned"
    assert untimed_events(run) == reference["events"], (name, k)  # each event once, none lost


def test_kill_points_cover_checkpoint_and_file_writes_and_steps(reference):
    counts = reference["counts"]
    assert set(counts) == {"step", "weights", "trainer_pt", "finish", "swap", "swapped", "rename",
                           "metrics", "prune", "file_opened", "file_written"}
    assert counts["step"] == 8 and counts["swap"] >= 2  # best/ replaced at least twice
    assert counts["file_opened"] == counts["file_written"] == 4  # one results.json an evaluation


def test_sigkill_at_the_middle_hit_of_each_point(tmp_path, reference):
    for name, k in kill_points(reference, everywhere=False):
        kill_and_resume(tmp_path, reference, name, k)


@pytest.mark.slow
def test_sigkill_at_every_hit_of_every_point(tmp_path, reference):
    points = kill_points(reference, everywhere=True)
    for name, k in points:
        kill_and_resume(tmp_path, reference, name, k)
    print(f"{len(points)} kill points")
