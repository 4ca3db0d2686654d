"""What every ``attnlab`` command does the same way at its boundary (docs/reliability.md, "The
command line"): arguments that are not UTF-8, a reader that stops reading, any number of
Ctrl-Cs, and errors that name the file or setting at fault — each tried on a real command with
the seconds-old toy checkpoints of ``explorer_toys``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from attnlab.checkpoint import list_checkpoints, load_state
from attnlab.cli import main
from attnlab.training.metrics import read_metrics
from explorer_toys import gpt_checkpoint, translator_checkpoint
from repo_paths import ROOT
from trained_toys import ALGORITHMIC_RECIPE, NTM_TABLE

SRC = ROOT / "src"
LM_RECIPE = ROOT / "configs" / "shakespeare_nanogpt_cpu.toml"


def attnlab(*args: str | bytes | Path, **kw) -> subprocess.Popen:
    """``python -m attnlab.cli ARGS`` in its own process, with this checkout's attnlab."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen([sys.executable, "-m", "attnlab.cli", *args], env=env, **kw)


@pytest.fixture(scope="module")
def toys(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("toys")
    return {"translator": translator_checkpoint(root / "translator"), "gpt": gpt_checkpoint(root / "gpt")}


# ---------------------------------------------------------------- arguments that are not UTF-8
def test_a_non_utf8_argument_is_refused_naming_it_in_a_real_process(toys):
    proc = attnlab("plot-alignment", toys["translator"], "--src", b"Ein \xe4 Hund",
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert b"attnlab plot-alignment: error: argument --src: is not UTF-8 (byte 0xe4 at character 4)" in err


@pytest.mark.parametrize(
    ("argv", "name"),
    [
        (["plot-alignment", "{translator}", "--src", "Ein \udce4 Hund"], "--src"),
        (["generate", "{gpt}", "--prompt", "ROMEO\udcff:"], "--prompt"),
        (["translate", "runs/k\udce4se"], "checkpoint"),
        (["caption", "ckpt", "sc\udce9ne.png"], "images"),
        (["train", "--config", "configs/multi30k_demo.toml", "--run-dir", "runs/\udce4"], "--run-dir"),
        (["train", "--config", "configs/multi30k_demo.toml", "data.src_lang=d\udce9"], "key=value"),
    ],
)
def test_every_text_argument_is_checked_the_same_way(toys, argv, name, capsys):
    argv = [a.format(**toys) for a in argv]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and f"error: argument {name}: is not UTF-8 (byte 0x" in err


# ---------------------------------------------------------------- a reader that stops reading
@pytest.mark.parametrize("command", ["generate", "translate"])
def test_a_closed_pipe_ends_the_command_quietly(toys, tmp_path, command):
    lines = tmp_path / "in.de"
    lines.write_text("Ein Hund läuft über die Wiese.\n" * 5000, encoding="utf-8")
    args = {"generate": ["generate", toys["gpt"], "--max-new-tokens", "20000", "--temperature", "1"],
            "translate": ["translate", toys["translator"], "--beam", "1", "--batch-size", "8"]}[command]
    with lines.open("rb") as stdin:
        proc = attnlab(*args, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.readline()  # like `| head -1`: read a little, then go away
        proc.stdout.close()
        err = proc.stderr.read()
        proc.wait(timeout=120)
    assert proc.returncode == 141 and err == b""  # 128 + SIGPIPE, and nothing said


# ---------------------------------------------------------------- any number of Ctrl-Cs
def test_any_number_of_ctrl_c_saves_once_and_exits_130(tmp_path):
    """A real training run gets a SIGINT, then a SIGINT or SIGTERM every 2 ms while it saves and
    exits: one checkpoint saved, one message, exit 130, no traceback (before, the later ones
    broke the save and then the interpreter's exit: "Exception ignored in atexit callback")."""
    config = tmp_path / "copy.toml"
    config.write_text(ALGORITHMIC_RECIPE.format(model=NTM_TABLE))
    run = tmp_path / "run"
    proc = attnlab("train", "--config", config, "--run-dir", run, "train.max_steps=1000000",
                   "train.log_every=1", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not ((run / "metrics.jsonl").is_file() and read_metrics(run)):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    sent, stop = 0, time.monotonic() + 3
    while proc.poll() is None and time.monotonic() < stop:
        proc.send_signal(signal.SIGTERM if sent % 3 == 2 else signal.SIGINT)
        sent += 1
        time.sleep(0.002)
    out, err = (text.decode() for text in proc.communicate(timeout=60))
    assert sent >= 2, "the run ended before a second signal"
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert err.count("interrupted by SIGINT") == 1 and "interrupted: saved" in out
    load_state(list_checkpoints(run)[-1])  # the checkpoint it saved is whole


# ---------------------------------------------------------------- evaluate: what each task takes
@pytest.mark.parametrize(("model_type", "task"), [("ntm", "an algorithmic"), ("gpt", "a language_model")])
def test_evaluate_refuses_beam_settings_for_checkpoints_that_do_not_decode(tmp_path, capsys, model_type,
                                                                           task):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    for option, value in (("--beam", "4"), ("--length-penalty", "1.0")):
        assert main(["evaluate", str(tmp_path), option, value]) == 2
        err = capsys.readouterr().err.strip()
        assert err == (f"attnlab evaluate: error: --beam and --length-penalty set how captioning, speech and "
                       f"translation checkpoints decode; {task} checkpoint is scored without decoding")
    assert main(["evaluate", str(tmp_path), "--split", "test_2016_flickr"]) == 2
    split = "test" if model_type == "ntm" else "val"
    assert f"--split must be one of {split} for {task}" in capsys.readouterr().err


def test_evaluate_help_names_the_splits_each_task_has(capsys):
    import re

    from attnlab.tasks import TASKS

    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for cls in TASKS.values():
        for split in cls.eval_splits:
            assert re.search(rf"(?<![\w/]){split}(?![\w/])", text), (cls.__name__, split)


def test_decoding_a_test_set_shows_a_progress_bar_when_the_recipe_asks(toys, tmp_path, monkeypatch, capsys):
    import shutil

    from attnlab.data.pair_corpus import PreparedPairs

    pairs = [("Ein Hund läuft über die Wiese.", "A dog runs across the grass.")] * 6
    monkeypatch.setattr(PreparedPairs, "pairs", lambda self, split: pairs)
    for progress in (True, False):
        ckpt = shutil.copytree(toys["translator"], tmp_path / f"progress_{progress}")
        recipe = {"task": "translation", "data": {"src_lang": "de", "tgt_lang": "en"},
                  "train": {"progress": progress}, "eval": {"beam_size": 2, "max_len_b": 3}}
        (ckpt / "recipe.json").write_text(json.dumps(recipe))
        assert main(["evaluate", str(ckpt), "--split", "val"]) == 0
        err = capsys.readouterr().err
        assert (" 0/6 " in err and "sentence" in err and "decoding" in err) is progress, err


# ---------------------------------------------------------------- errors that name their file
def test_a_config_json_without_a_size_names_the_file_and_the_key(toys, tmp_path, capsys):
    import shutil

    ckpt = shutil.copytree(toys["gpt"], tmp_path / "gpt")
    config = json.loads((ckpt / "config.json").read_text())
    del config["d_model"]
    (ckpt / "config.json").write_text(json.dumps(config))
    assert main(["generate", str(ckpt), "--max-new-tokens", "1"]) == 2
    err = capsys.readouterr().err.strip()
    config = ckpt / "config.json"
    assert err.startswith(f"attnlab generate: error: checkpoint config {config} has no d_model, and its "
                          "default does not fit the weights: ")
    assert len(err.splitlines()) == 1 and len(err) - len(str(ckpt)) < 200


def test_a_bad_recipe_json_on_resume_names_the_file(tmp_path, capsys):
    step = tmp_path / "run" / "checkpoints" / "step_00000010"
    step.mkdir(parents=True)
    for name in ("model.safetensors", "config.json", "trainer.pt"):
        (step / name).write_bytes(b"")
    recipe = {"task": "algorithmic", "train": {"max_steps": 9}, "optim": 3}
    (step / "recipe.json").write_text(json.dumps(recipe))
    assert main(["train", "--resume", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"attnlab train: error: {step / 'recipe.json'}: [optim] must be a table, got 3"


DEEP = "[" * 5000 + "]" * 5000  # deeper than Python's recursion limit
LONG = "1" * 4400  # more digits than Python converts to an int (sys.get_int_max_str_digits(): 4300)
TOO_LONG = "an integer of 4400 digits; Python reads at most 4300"


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err.strip()


@pytest.mark.parametrize("command", [["generate", "{ckpt}"], ["evaluate", "{ckpt}"],
                                     ["serve", "--translator", "{ckpt}"],
                                     ["export-html", "--translator", "{ckpt}", "--out", "{ckpt}/x.html"]])
@pytest.mark.parametrize(("value", "problem"), [(DEEP, "nests its arrays or objects too deeply to read"),
                                                (LONG, f"(d_model): {TOO_LONG}")])
def test_a_config_json_nested_too_deep_or_with_a_huge_integer_names_the_file(tmp_path, capsys, command, value,
                                                                             problem):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(f'{{"model_type": "gpt", "d_model": {value}}}')
    argv = [a.format(ckpt=ckpt) for a in command] + (["--no-bert"] if "--translator" in command else [])
    assert main(argv) == 2
    err = one_line(capsys)
    assert err.startswith(f"attnlab {argv[0]}: error: checkpoint config {ckpt / 'config.json'} ")
    assert problem in err


@pytest.mark.parametrize(("value", "problem"), [(DEEP, "nests its arrays or objects too deeply to read"),
                                                (LONG, f"(max_steps): {TOO_LONG}")])
def test_a_recipe_json_nested_too_deep_or_with_a_huge_integer_names_the_file(tmp_path, capsys, value,
                                                                             problem):
    step = tmp_path / "run" / "checkpoints" / "step_00000010"
    step.mkdir(parents=True)
    for name in ("model.safetensors", "config.json", "trainer.pt"):
        (step / name).write_bytes(b"")
    (step / "recipe.json").write_text(f'{{"task": "algorithmic", "train": {{"max_steps": {value}}}}}')
    assert main(["train", "--resume", str(tmp_path / "run")]) == 2
    assert one_line(capsys).startswith(f"attnlab train: error: recipe {step / 'recipe.json'} {problem}")


def test_a_recipe_or_override_nested_too_deep_or_with_a_huge_integer_is_named(tmp_path, capsys):
    recipe, run = tmp_path / "r.toml", tmp_path / "run"
    ntm = ROOT / "configs" / "ntm_copy.toml"
    cases = [
        (f'task = "algorithmic"\n[data]\nbatch_size = {LONG}\n', [],
         f"config file {recipe} line 3 (batch_size): {TOO_LONG}"),
        (f'task = "algorithmic"\na = {DEEP}\n', [],
         f"config file {recipe} nests its arrays or tables too deeply to read (hundreds of levels)"),
        (None, [f"data.batch_size={LONG}"], f"override data.batch_size: {TOO_LONG}"),
        (None, [f"data.block_size={DEEP}"],
         "override data.block_size nests its arrays or tables too deeply to read (hundreds of levels)"),
    ]
    for text, overrides, message in cases:
        if text is not None:
            recipe.write_text(text)
        config = recipe if text is not None else ntm
        assert main(["train", "--config", str(config), "--run-dir", str(run), *overrides]) == 2
        assert one_line(capsys) == f"attnlab train: error: {message}"
        assert not run.exists()


@pytest.mark.parametrize(("line", "problem"), [
    (f'{{"event": "train", "step": {LONG}}}', f":2 (step): {TOO_LONG}"),
    (f'{{"event": "train", "step": 2, "loss": {DEEP}}}', ":2 nests its arrays or objects too deeply to read"),
    ('["event", "train"]', ":2 must hold a JSON object, got list"),
])
def test_a_metrics_line_nested_too_deep_or_with_a_huge_integer_names_the_file_and_line(tmp_path, capsys, line,
                                                                                       problem):
    (tmp_path / "metrics.jsonl").write_text('{"event": "train", "step": 1, "loss": 2.0}\n' + line + "\n")
    assert main(["plot", str(tmp_path)]) == 2
    assert one_line(capsys).startswith(f"attnlab plot: error: {tmp_path / 'metrics.jsonl'}{problem}")


def test_a_corpus_that_is_not_utf8_names_the_file_and_the_line(tmp_path, capsys):
    corpus = tmp_path / "data" / "tinyshakespeare" / "input.txt"
    corpus.parent.mkdir(parents=True)
    corpus.write_bytes(b"First Citizen:\nBefore we proceed any further, h\xe4ar me speak.\n")
    args = ["train", "--config", str(LM_RECIPE), "--run-dir", str(tmp_path / "run"), "--data-dir"]
    assert main([*args, str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    where = "(invalid continuation byte at byte 32 of the line, byte 47 of the file)"
    assert f"{corpus}:2: not valid UTF-8 {where}" in err
    assert main([*args, str(tmp_path / "empty")]) == 2  # a missing corpus: what to do from here
    err = capsys.readouterr().err
    assert "--data-dir" in err and "curl -L --create-dirs -o" in err


def test_a_directory_given_as_an_image_is_named_as_one(tmp_path):
    from attnlab.data.image_captions import load_image

    with pytest.raises(ValueError, match=f"image {tmp_path} is a directory, not an image file"):
        load_image(tmp_path)
    with pytest.raises(FileNotFoundError, match="not found"):
        load_image(tmp_path / "missing.png")
    with pytest.raises(ValueError, match="image /dev/zero is not a regular file"):
        load_image("/dev/zero")  # exists: never "not found", and never read to the end


@pytest.mark.parametrize("command", ["lab", "plot-alignment", "caption", "export-html"])
def test_an_output_that_cannot_be_written_is_refused_before_any_work(command, tmp_path, capsys):
    """A file where an output directory must be, or a directory where a picture must be, is
    refused in one line before any model is loaded (the checkpoints here do not even exist)."""
    (tmp_path / "afile").write_text("mine")
    (tmp_path / "adir").mkdir()
    argv = {"lab": ["lab", "pooling", "--quick", "--out", str(tmp_path / "afile")],
            "plot-alignment": ["plot-alignment", str(tmp_path / "no-ckpt"), "--src", "Ein Hund.",
                               "--out", str(tmp_path / "adir")],
            "caption": ["caption", str(tmp_path / "no-ckpt"), str(tmp_path / "no.png"),
                        "--attention", str(tmp_path / "afile" / "a.png")],
            "export-html": ["export-html", "--gpt", str(tmp_path / "no-ckpt"), "--no-bert",
                            "--out", str(tmp_path / "adir")]}[command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"attnlab {command}: error: cannot write ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile"]
    assert (tmp_path / "afile").read_text() == "mine"


# ---------------------------------------------------------------- newcomer friction
def test_a_short_run_shortens_a_longer_warmup_with_a_note(tmp_path, capsys):
    from attnlab.tasks import LMRecipe, load_recipe

    char = ROOT / "configs" / "shakespeare_char.toml"
    recipe = LMRecipe.from_dict(load_recipe(char, ["train.max_steps=30"]))
    assert (recipe.optim.warmup, recipe.train.max_steps) == (3, 30)
    assert capsys.readouterr().err.strip() == (
        "note: optim.warmup=100 is not shorter than train.max_steps=30: warming up over 3 steps instead "
        "(a tenth of the run; set optim.warmup to choose)")
    given = load_recipe(char, ["train.max_steps=30", "optim.warmup=50"])
    with pytest.raises(ValueError, match="decays over 30 steps, which must be more than optim.warmup=50"):
        LMRecipe.from_dict(given)  # a warmup the user chose is theirs to fix
    own = tmp_path / "own.toml"
    own.write_text('task = "language_model"\n[optim]\nwarmup = 100\n[train]\nmax_steps = 30\n')
    with pytest.raises(ValueError, match="must be more than optim.warmup=100"):
        LMRecipe.from_dict(load_recipe(own))  # so is a recipe file that contradicts itself
    assert capsys.readouterr().err == ""


def test_demo_help_names_where_each_demo_writes(monkeypatch, capsys):
    import attnlab.labs.demo as demo

    written = []
    monkeypatch.setattr(demo, "run_pooling_demo", lambda out: written.append(out))
    monkeypatch.setattr(demo, "run_translation_demo", lambda out, data_dir: written.append(out))
    assert main(["demo", "--pooling"]) == 0 and main(["demo"]) == 0
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert written == ["runs/demo_pooling", "runs/demo"]
    assert "default: runs/demo; with --pooling runs/demo_pooling" in help_text


def test_printed_counts_and_articles_agree(toys, tmp_path, capsys):
    import torch

    from attnlab.tasks import LanguageModelTask, LMRecipe, load_recipe
    from attnlab.tasks.base import run_header

    task = LanguageModelTask(LMRecipe.from_dict(load_recipe(LM_RECIPE)), tmp_path)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert " · 1 thread · " in run_header(task)
        torch.set_num_threads(2)
        assert " · 2 threads · " in run_header(task)
    finally:
        torch.set_num_threads(threads)
    assert main(["lab", "alignment", "--checkpoint", str(toys["gpt"]), "--out", str(tmp_path / "lab")]) == 2
    err = capsys.readouterr().err
    assert "lab alignment reads an attention_seq2seq or transformer checkpoint, but" in err


def test_a_count_of_one_is_singular():
    """Printed counts go through attnlab.validation.counted: "1 step", "2 steps", never "(s)"."""
    from attnlab.tasks.recipe import fit_warmup

    recipe = {"optim": {"schedule": "warmup_cosine", "warmup": 100}, "train": {"max_steps": 10}}
    assert "warming up over 1 step instead" in fit_warmup(recipe, ["train.max_steps=10"])
    count_then_s = re.compile(r"\{[^{}]*\} \w+\(s\)")  # f"{n} checkpoint(s)"
    found = [f"{path.relative_to(SRC)}:{number}: {line.strip()}"
             for path in sorted((SRC / "attnlab").rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
             if count_then_s.search(line)]
    assert found == []
