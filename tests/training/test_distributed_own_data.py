"""Data parallelism on the user's own text: each rank of ``torchrun`` draws its language-model
windows from its own contiguous part of the token stream (:class:`~attnlab.data.LMDataset`'s
``part``), ``attnlab train`` under 2 CPU processes (gloo on 127.0.0.1, torchrun's environment
variables) writes its run from rank 0 alone, and a resumed 2-process run ends bit-identical
to the uninterrupted one."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from attnlab.data import LMDataset
from ranks import run_ranks
from repo_paths import SHARED_DATA, TESTS

WORLD = 2
STEPS, STOP = 6, 3  # the whole run's steps; where the interrupted run stops
BLOCK = 16
TINY = [
    "model.num_layers=1",
    "model.num_heads=2",
    "model.d_model=32",
    f"data.block_size={BLOCK}",
    "data.batch_size=4",
    "optim.warmup=2",
    f"optim.decay_steps={STEPS}",  # the schedule does not depend on where a run stops
    "train.log_every=1",
    f"train.eval_every={STOP}",  # both runs evaluate at STOP (the stopped run's last step)
    f"train.save_every={STOP}",
    "train.keep_last_k=0",
    "train.progress=false",
    "train.measure_memory=false",
    "eval.eval_iters=2",
    "eval.sample_chars=10",
]
RECIPE = """task = "language_model"

[data]
corpus = {corpus!r}
tokenizer = "char"
seed = 1337

[model]
dropout = 0.0

[train]
max_steps = {steps}
seed = 1337
"""


# ----------------------------------------------------------------------------- parts of a stream
def _starts(data: LMDataset, draws: int = 200, batch_size: int = 16) -> np.ndarray:
    """The start of every window ``data`` draws (its tokens are ``0, 1, 2, ...``), checking
    that ``y`` is ``x`` shifted by one."""
    starts = []
    for _ in range(draws):
        x, y = data.get_batch(batch_size)  # (B, block) each
        assert torch.equal(x, x[:, :1] + torch.arange(x.shape[1]))  # contiguous windows
        assert torch.equal(y, x + 1)
        starts.append(x[:, 0])
    return torch.cat(starts).numpy()


@pytest.mark.parametrize("world", [2, 3])
def test_each_rank_draws_only_from_its_own_contiguous_part(tmp_path, world):
    """A memory-mapped stream whose token ``i`` is ``i``: the windows of rank ``r`` cover
    exactly one contiguous stretch, the stretches of ranks 0, 1, ... follow each other
    without overlap or gap, cover the whole stream, and differ in length by at most one."""
    n, block = 203, 4
    path = tmp_path / "train.bin"
    np.arange(n, dtype=np.uint16).tofile(path)
    tokens = np.memmap(path, dtype=np.uint16, mode="r")  # (n,), as a prepared corpus is read
    spans = []
    for rank in range(world):
        starts = _starts(LMDataset(tokens, block, seed=5, part=(rank, world)))
        first, last = int(starts.min()), int(starts.max())
        # 3,200 draws from fewer than 70 starts: every start of the part is drawn, no other.
        assert set(starts.tolist()) == set(range(first, last + 1))
        spans.append((first, last + block + 1))  # the tokens the rank's windows read: [a, b)
    assert spans[0][0] == 0 and spans[-1][1] == n  # the whole stream ...
    for (_, stop), (start, _) in zip(spans, spans[1:], strict=False):
        assert stop == start  # ... in disjoint, contiguous parts, in rank order
    sizes = [b - a for a, b in spans]
    assert max(sizes) - min(sizes) <= 1


def test_a_part_of_one_is_the_whole_stream_with_the_same_windows():
    tokens = np.random.default_rng(0).integers(0, 50, 1000).astype(np.uint16)  # (N,)
    whole, part = LMDataset(tokens, 8, seed=3), LMDataset(tokens, 8, seed=3, part=(0, 1))
    for _ in range(5):
        for a, b in zip(whole.get_batch(6), part.get_batch(6), strict=True):
            assert torch.equal(a, b)


def test_a_part_shorter_than_a_window_is_refused():
    tokens = np.arange(30, dtype=np.uint16)
    LMDataset(tokens, 9, part=(2, 3))  # tokens 20..29: one window
    with pytest.raises(ValueError, match=r"part 3 of 4 of the stream has 7 tokens but block_size \+ 1 = 10"):
        LMDataset(tokens, 9, part=(2, 4))  # tokens 15..21


# ----------------------------------------------------------------------------- the worker
WRITES = ("open", "os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.truncate", "os.link",
          "os.symlink", "shutil.rmtree", "shutil.move", "os.chmod", "os.utime")


def _watch_writes(run_dir: Path, seen: list[str]) -> None:
    """Record in ``seen`` every change this process makes under ``run_dir`` (Python's audit
    events: files opened for writing, renamed, removed; directories made or removed)."""
    root = os.path.realpath(run_dir)

    def inside(path) -> bool:
        if isinstance(path, int) or path is None:
            return False
        path = os.path.realpath(os.fsdecode(path))
        return path == root or path.startswith(root + os.sep)

    def hook(event: str, args: tuple) -> None:
        if event not in WRITES:
            return
        if event == "open":
            path, mode, flags = args
            writing = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
            if mode is not None:
                writing = any(c in mode for c in "wax+")
            if writing and inside(path):
                seen.append(f"open {path} {mode or flags}")
        elif event == "os.mkdir" and os.path.realpath(os.fsdecode(args[0])) == root:
            return  # the empty directory the command names: any rank may make sure it is there
        elif any(inside(a) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))):
            seen.append(f"{event} {args[:2]}")

    sys.addaudithook(hook)


def _worker(out_dir: str, argv: list[str]) -> int:
    """One rank of ``attnlab train ARGV`` (started with RANK / WORLD_SIZE / MASTER_* set): joins
    the process group as torchrun's processes do, runs the command's ``main`` and writes what
    it saw to ``out_dir``: the training batches this rank's data yielded, the token stream they
    came from, and every change it made under the run directory."""
    torch.set_num_threads(1)
    from attnlab.cli import main
    from attnlab.tasks.language_model import task as lm
    from attnlab.training import distributed as dist

    info = dist.init_distributed("gloo", timeout_s=120)
    out, rank = Path(out_dir), info.rank
    flag = "--run-dir" if "--run-dir" in argv else "--resume"
    run_dir = Path(argv[argv.index(flag) + 1])
    writes: list[str] = []
    batches: list[tuple[torch.Tensor, torch.Tensor]] = []
    stream: list[np.ndarray] = []
    train_data = lm.LanguageModelTask.train_data

    def recorded(self):
        epochs = train_data(self)
        stream.append(np.asarray(self.train_ids).astype(np.int64))

        def epoch_batches(epoch):
            for batch in epochs(epoch):
                batches.append(tuple(t.clone() for t in batch))
                yield batch

        return epoch_batches

    lm.LanguageModelTask.train_data = recorded
    _watch_writes(run_dir, writes)
    try:
        code = main(argv)
    finally:
        dist.cleanup()
    (out / f"writes_rank{rank}.json").write_text(json.dumps(writes))
    if batches:
        x, y = (torch.stack([b[i] for b in batches]) for i in (0, 1))  # (steps, B, block) each
        torch.save({"x": x, "y": y, "tokens": torch.from_numpy(stream[0])}, out / f"batches_rank{rank}.pt")
    return code


def launch(out: Path, *argv: str, timeout: float = 150) -> Path:
    """``attnlab train ARGV`` in WORLD processes with torchrun's environment; each rank's
    records go to ``out``."""
    out.mkdir(parents=True)
    code = (
        f"import sys; sys.path[:0] = [{str(TESTS)!r}, {str(Path(__file__).resolve().parent)!r}]; "
        f"import test_distributed_own_data as t; sys.exit(t._worker({str(out)!r}, {list(argv)!r}))"
    )
    logs = run_ranks(code, WORLD, timeout=timeout, what=f"the {WORLD}-process run {' '.join(argv)}")
    (out / "log.txt").write_text("\n".join(logs))
    return out


# ----------------------------------------------------------------------------- two processes
@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """Three text files (together about 60 KB) in a folder, slices of tinyshakespeare."""
    shakespeare = Path(os.environ.get("ATTNLAB_DATA", SHARED_DATA)) / "tinyshakespeare" / "input.txt"
    if not shakespeare.is_file():
        pytest.skip(f"needs {shakespeare} (the shared corpora)")
    text = shakespeare.read_text(encoding="utf-8")
    folder = tmp_path_factory.mktemp("own_text") / "texts"
    folder.mkdir()
    for i, (start, stop) in enumerate([(0, 25_000), (300_000, 315_000), (700_000, 720_000)]):
        (folder / f"part{i}.txt").write_text(text[start:stop], encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def recipe(corpus) -> Path:
    path = corpus.parent / "own.toml"
    path.write_text(RECIPE.format(corpus=str(corpus), steps=STEPS), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def whole(recipe, tmp_path_factory) -> tuple[Path, Path]:
    """The uninterrupted run of STEPS steps: (its run directory, the ranks' records)."""
    base = tmp_path_factory.mktemp("whole")
    run = base / "run"
    return run, launch(base / "records", "train", "--config", str(recipe), "--run-dir", str(run), *TINY)


@pytest.fixture(scope="module")
def resumed(recipe, tmp_path_factory) -> tuple[Path, Path, Path]:
    """The run stopped at step STOP, then resumed to STEPS: (its run directory, the stopped and
    the resumed launch's records)."""
    base = tmp_path_factory.mktemp("resumed")
    run = base / "run"
    first = launch(base / "first", "train", "--config", str(recipe), "--run-dir", str(run), *TINY,
                   f"train.max_steps={STOP}")
    second = launch(base / "second", "train", "--resume", str(run), f"train.max_steps={STEPS}")
    return run, first, second


def _train_events(run: Path) -> list[dict]:
    events = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [e for e in events if e["event"] == "train"]


def _occurrences(tokens: torch.Tensor, window: torch.Tensor) -> np.ndarray:
    """Every position where ``window`` (W,) occurs in ``tokens`` (N,)."""
    views = tokens.unfold(0, len(window), 1)  # (N - W + 1, W)
    return torch.nonzero((views == window).all(dim=1)).flatten().numpy()


def test_two_ranks_train_on_their_own_parts_of_the_users_text(whole):
    run, records = whole
    results = json.loads((run / "results.json").read_text())
    assert results["steps"] == STEPS and results["stopped"] == "max_steps"
    assert [e["step"] for e in _train_events(run)] == list(range(1, STEPS + 1))  # one writer
    seen = [torch.load(records / f"batches_rank{r}.pt", weights_only=True) for r in range(WORLD)]
    tokens = seen[0]["tokens"]  # (N,) the prepared training stream
    assert torch.equal(seen[1]["tokens"], tokens)  # both ranks read the same prepared files
    n = len(tokens)
    assert n > 40_000  # the three files, less the validation tail
    windows = []
    for rank, s in enumerate(seen):
        x, y = s["x"], s["y"]  # (STEPS, B, BLOCK) each
        assert x.shape == (STEPS, 4, BLOCK) and torch.equal(x[..., 1:], y[..., :-1])
        full = torch.cat([x, y[..., -1:]], dim=-1).flatten(0, 1)  # (STEPS * B, BLOCK + 1)
        lo, hi = n * rank // WORLD, n * (rank + 1) // WORLD  # the rank's part of the stream
        for w in full:
            where = _occurrences(tokens, w)
            assert len(where), "a training window that is not in the token stream"
            assert ((where >= lo) & (where + BLOCK + 1 <= hi)).any(), (
                f"rank {rank} trained on a window at {where.tolist()}, outside its part [{lo}, {hi})"
            )
        windows.append({tuple(w.tolist()) for w in full})
    assert not windows[0] & windows[1]  # the ranks trained on different windows


def test_only_rank_0_writes_the_run_directory(whole, resumed):
    run, records = whole
    assert (run / "results.json").is_file() and (run / "checkpoints").is_dir()
    for launched in (records, *resumed[1:]):
        rank0, rank1 = (json.loads((launched / f"writes_rank{r}.json").read_text()) for r in range(WORLD))
        assert rank0, "the audit hook saw no write at all: it watches the wrong directory"
        assert rank1 == [], f"rank 1 changed the run directory: {rank1}"


def test_a_resumed_two_process_run_ends_bit_identical(whole, resumed):
    run_whole, run_part = whole[0], resumed[0]
    final = f"checkpoints/step_{STEPS:08d}/model.safetensors"
    a, b = load_file(run_whole / final), load_file(run_part / final)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    loss = [(e["step"], e["loss"], e["lr"], e["tokens"]) for e in _train_events(run_whole)]
    assert [(e["step"], e["loss"], e["lr"], e["tokens"]) for e in _train_events(run_part)] == loss
    stopped = load_file(run_part / f"checkpoints/step_{STOP:08d}/model.safetensors")
    assert any(not torch.equal(stopped[k], a[k]) for k in a)  # the resume did train
