"""A full disk under every command that writes a picture, a page or a report
(docs/reliability.md, "Atomic outputs"): each command runs in its own process under a file-size
limit (``RLIMIT_FSIZE``, with ``SIGXFSZ`` ignored), so its writes fail with ``EFBIG`` the way
they fail with ``ENOSPC`` on a full disk. It must exit 2 with one line naming the file, and
leave the old file in place (or none) — never a 0-byte or truncated one. Also: the picture a
command reports is the one it wrote, at exactly the path given."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from attnlab.checkpoint import list_checkpoints
from attnlab.cli import main
from attnlab.data.tokenizers import WordTokenizer
from attnlab.models import ShowAttendTell, ShowAttendTellConfig
from explorer_toys import translator_checkpoint
from repo_paths import SRC
from trained_toys import caption_recipe
from training_toys import NTM, TINY

LIMIT = 4096  # bytes a process may write into one file: less than any picture or page attnlab writes
OLD = b"the old file, complete"
CAPTIONS = ["a red square", "two green dots", "one blue line"]
FULL_DISK = f"""
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
resource.setrlimit(resource.RLIMIT_FSIZE, ({LIMIT}, {LIMIT}))
from attnlab.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module", autouse=True)
def font_cache():
    """matplotlib's font cache, built here without the limit (a fresh machine builds it on
    first use, and under the limit it could not save it: a warning on stderr)."""
    import matplotlib.font_manager  # noqa: F401


def attnlab_on_a_full_disk(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-c", FULL_DISK, *argv], capture_output=True, text=True,
                          env=env, timeout=300)


def assert_refused_naming(done: subprocess.CompletedProcess, command: str, target: Path) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"attnlab {command}: error: File too large: {target}\n"


def assert_only(folder: Path, files: dict[str, bytes]) -> None:
    """``folder`` holds exactly ``files`` with their contents: no new, half-written or temporary file."""
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == files


def captioner_checkpoint(directory: Path) -> Path:
    """An untrained attention captioner of 16-pixel grey images, with its word tokenizer and recipe."""
    tokenizer = WordTokenizer.train(CAPTIONS)
    torch.manual_seed(0)
    config = ShowAttendTellConfig(vocab_size=tokenizer.vocab_size, image_size=16, conv_channels=(4, 8),
                                  feature_dim=8, embed_dim=8, hidden_dim=16, attention_dim=8, dropout=0.0)
    ShowAttendTell(config).eval().save_pretrained(directory)
    tokenizer.save(directory)
    recipe = caption_recipe(source="folder", folder="unused", size=16)
    recipe["eval"].update(beam_size=1, max_len=4)
    (directory / "recipe.json").write_text(json.dumps(recipe), encoding="utf-8")
    return directory


@pytest.fixture(scope="module")
def captioner(tmp_path_factory) -> tuple[Path, Path]:
    """The captioner's checkpoint and a 16 x 16 grey picture to caption."""
    from PIL import Image

    root = tmp_path_factory.mktemp("captioner")
    image = root / "scene.png"
    Image.new("L", (16, 16), 128).save(image)
    return captioner_checkpoint(root / "ckpt"), image


def test_export_html_on_a_full_disk_keeps_the_old_page(tmp_path):
    translator = translator_checkpoint(tmp_path / "translator")
    out = tmp_path / "site"
    out.mkdir()
    (out / "explorer.html").write_bytes(OLD)
    done = attnlab_on_a_full_disk("export-html", "--translator", str(translator), "--no-bert",
                                  "--out", str(out / "explorer.html"))
    assert_only(out, {"explorer.html": OLD})
    assert_refused_naming(done, "export-html", out / "explorer.html")


def test_caption_attention_on_a_full_disk_keeps_the_old_picture(tmp_path, captioner):
    checkpoint, image = captioner
    (tmp_path / "attention.png").write_bytes(OLD)
    done = attnlab_on_a_full_disk("caption", str(checkpoint), str(image),
                                  "--attention", str(tmp_path / "attention.png"))
    assert_only(tmp_path, {"attention.png": OLD})
    assert_refused_naming(done, "caption", tmp_path / "attention.png")


def test_lab_on_a_full_disk_keeps_the_old_pictures(tmp_path):
    out = tmp_path / "lab"
    out.mkdir()
    (out / "worked_examples.png").write_bytes(OLD)
    done = attnlab_on_a_full_disk("lab", "worked-examples", "--quick", "--out", str(out))
    assert_only(out, {"worked_examples.png": OLD})
    assert_refused_naming(done, "lab", out / "worked_examples.png")


def test_plot_on_a_full_disk_keeps_the_old_curves(tmp_path):
    events = [{"event": "train", "step": s, "loss": 5.0 / s, "lr": 1e-3} for s in range(1, 6)]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "loss.png").write_bytes(OLD)
    done = attnlab_on_a_full_disk("plot", str(tmp_path))
    assert_only(tmp_path / "plots", {"loss.png": OLD})  # and no lr.png: it stopped at the first
    assert_refused_naming(done, "plot", tmp_path / "plots" / "loss.png")


def test_training_on_a_full_disk_leaves_no_partial_checkpoint(tmp_path):
    """The first checkpoint (best/, at the first evaluation) cannot be written: safetensors'
    own I/O error becomes one line naming the file, and nothing half-written is visible."""
    run = tmp_path / "fd"
    done = attnlab_on_a_full_disk("train", "--config", str(NTM), "--run-dir", str(run), *TINY)
    assert done.returncode == 2, done.stderr
    named = rf"attnlab train: error: File too large: {re.escape(str(run))}/best/model\.safetensors\n"
    assert re.fullmatch(named, done.stderr), done.stderr  # where it would stand, not the hidden copy
    assert list_checkpoints(run) == [] and not (run / "best").exists()
    assert sorted(p.name for p in run.iterdir()) == [".lock", "metrics.jsonl"]


def test_plot_writes_into_out(tmp_path, capsys):
    events = [{"event": "train", "step": s, "loss": 5.0 / s} for s in range(1, 4)]
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert main(["plot", str(tmp_path / "run"), "--out", str(tmp_path / "curves")]) == 0
    assert capsys.readouterr().out == f"{tmp_path / 'curves' / 'loss.png'}\n"
    assert (tmp_path / "curves" / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "run" / "plots").exists()


@pytest.mark.parametrize("name, magic", [("attention", b"\x89PNG"), ("attention.PDF", b"%PDF"),
                                         ("attention.svg", b"<?xml")])
def test_caption_writes_the_picture_it_reports(tmp_path, captioner, capsys, name, magic):
    checkpoint, image = captioner
    assert main(["caption", str(checkpoint), str(image), "--attention", str(tmp_path / name)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"attention picture: {tmp_path / name}"
    assert [p.name for p in tmp_path.iterdir()] == [name]
    assert (tmp_path / name).read_bytes().startswith(magic)


def test_a_picture_suffix_matplotlib_cannot_write_is_refused_first(tmp_path, captioner, capsys):
    checkpoint, image = captioner
    assert main(["caption", str(checkpoint), str(image), "--attention", str(tmp_path / "a.pgn")]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # refused before any caption was written
    assert err.startswith(f"attnlab caption: error: picture {tmp_path / 'a.pgn'} must end in one of ")
    assert ".png, " in err and err.count("\n") == 1
