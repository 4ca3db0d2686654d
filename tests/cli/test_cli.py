"""The ``attnlab`` command: version, help, and clean errors (no tracebacks) for bad input."""

import subprocess
import sys

import pytest

import attnlab
from attnlab.cli import SUBCOMMANDS, build_parser, main, parse_args


def test_version_flag_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"attnlab {attnlab.__version__}"


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for name in ("train", "translate", "evaluate", "generate", "plot", "demo"):
        assert name in out
    assert set(SUBCOMMANDS) >= {"train", "translate", "evaluate", "generate", "plot", "demo"}


def test_console_script_runs_without_importing_torch():
    code = "import sys; from attnlab.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_parsing_imports_no_subcommand_and_no_heavy_library():
    """``attnlab --help`` (and parsing any command line) loads argparse and attnlab's light
    modules only: the subcommands' bodies (attnlab.cli.commands, .explorer, .labs) and what they
    import come when their subcommand runs."""
    heavy = ("torch", "numpy", "matplotlib", "tokenizers", "safetensors", "starlette", "uvicorn", "PIL",
             "tqdm", "attnlab.models", "attnlab.pipelines", "attnlab.tasks", "attnlab.cli.commands",
             "attnlab.cli.explorer", "attnlab.cli.labs", "attnlab.explorer.models", "attnlab.explorer.app")
    argvs = [["serve"], ["lab", "heads"], ["translate", "c"], ["demo"],
             ["finetune", "--checkpoint", "c", "--config", "r.toml"]]
    code = ("import sys; from attnlab.cli import build_parser, parse_args; parser = build_parser(); "
            f"[parse_args(parser, argv) for argv in {argvs!r}]; "
            f"print([m for m in {heavy!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_missing_config_is_a_clean_error(tmp_path, capsys):
    code = main(["train", "--config", str(tmp_path / "nope.toml")])
    assert code == 2
    err = capsys.readouterr().err
    assert "nope.toml" in err and "does not exist" in err


def test_recipe_without_task_is_rejected(tmp_path, capsys):
    recipe = tmp_path / "r.toml"
    recipe.write_text("[model]\nd_model = 8\n")
    assert main(["train", "--config", str(recipe)]) == 2
    assert "must name its task" in capsys.readouterr().err


def test_unknown_task_is_rejected_by_name(tmp_path, capsys):
    recipe = tmp_path / "r.toml"
    recipe.write_text('task = "telepathy"\n')
    assert main(["train", "--config", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "'telepathy'" in err and "translation" in err


# ---------------------------------------------------------------- range checks and one-line errors
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["translate", "ck", "--batch-size", "-1"],
         "argument --batch-size: must be in [1, 2^31 - 1], got -1"),
        (["translate", "ck", "--batch-size", "0"], "argument --batch-size: must be in [1, 2^31 - 1], got 0"),
        (["translate", "ck", "--max-len", "0"], "argument --max-len: must be in [1, 2^31 - 1], got 0"),
        (["translate", "ck", "--beam", "0"], "argument --beam: must be in [1, 2^31 - 1], got 0"),
        (["evaluate", "ck", "--length-penalty", "-0.5"], "argument --length-penalty: must be >= 0, got -0.5"),
        (["generate", "ck", "--top-p", "1.5"], "argument --top-p: must be in (0, 1], got 1.5"),
        (["generate", "ck", "--temperature", "nan"], "argument --temperature: must be >= 0, got nan"),
        (["plot", "r", "--threads", "0"], "argument --threads: must be in [1, 4096], got 0"),
    ],
)
def test_numeric_options_are_range_checked(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["train", "--config", "X", "train.max_steps=30", "--run-dir", "ov", "train.progress=false"],
    ["train", "train.max_steps=30", "--config", "X", "train.progress=false", "--run-dir", "ov"],
    ["finetune", "--checkpoint", "ck", "train.max_steps=30", "--out", "ov", "--config", "X",
     "train.progress=false"],
])
def test_overrides_may_stand_anywhere_among_the_options(argv):
    args = parse_args(build_parser(), argv)
    assert args.overrides == ["train.max_steps=30", "train.progress=false"]  # in their order
    assert (args.run_dir if argv[0] == "train" else args.out) == "ov"


@pytest.mark.parametrize(("argv", "refused"), [
    (["train", "--config", "X", "a=1", "--run-dir", "ov", "stray"], "unrecognized arguments: stray"),
    (["train", "--config", "X", "--run-dir", "ov", "--bogus=1"], "unrecognized arguments: --bogus=1"),
    (["plot", "run", "--out", "o", "a=1"], "unrecognized arguments: a=1"),  # plot takes no overrides
    (["train", "--config", "X", "a=1", "--run-dir", "ov", "b=d\udce9"], "argument key=value: is not UTF-8"),
])
def test_anything_else_left_over_is_refused_in_the_subcommands_usage(argv, refused, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and f"attnlab {argv[0]}: error: {refused}" in err
    assert f"usage: attnlab {argv[0]} " in err


def _translation_recipe(tmp_path, *lines: str):
    recipe = tmp_path / "r.toml"
    recipe.write_text('task = "translation"\n' + "\n".join(lines) + "\n")
    return recipe


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["eval.test_limit=-1"], "eval.test_limit must be >= 0, got -1"),
        (["eval.test_split=x"], "eval.test_split must be one of val, test_2016_flickr, got 'x'"),
        (["optim.lr=inf"], "optim.lr must be a finite number > 0, got inf"),
        (["optim.betas=[0.9]"], "optim.betas must be two numbers in [0, 1), got [0.9]"),
        (["optim.schedule=noam", "optim.betas=[1.5, 0.9]"], "optim.betas must be two numbers in [0, 1)"),
        (["data=3"], "[data] must be a table, got 3"),
        (["train.max_time_s=-1"], "max_time_s must be > 0, got -1"),
        (["eval.max_len=0"], "eval.max_len must be > 0, got 0"),
        (["optim.schedule=warmup_cosine", "optim.warmup=2000", "train.max_steps=900"],
         "decays over 900 steps, which must be more than optim.warmup=2000"),
    ],
)
def test_bad_recipe_values_are_one_line_errors_before_any_data(tmp_path, capsys, overrides, message):
    run = tmp_path / "run"
    code = main(["train", "--config", "configs/multi30k_demo.toml", "--run-dir", str(run), *overrides])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not run.exists()  # refused before the run directory or the data


def test_files_that_are_not_what_they_claim_are_named(tmp_path, capsys):
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_bytes(b'task = "translation"\n# \xff\xfe\n')
    assert main(["train", "--config", str(bad_toml)]) == 2
    assert f"config file {bad_toml} is not valid TOML" in capsys.readouterr().err
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text('{"model_type": "transformer"')
    assert main(["translate", str(ckpt)]) == 2
    assert f"checkpoint config {ckpt / 'config.json'} is not valid JSON" in capsys.readouterr().err
    from attnlab.data import load_tokenizer

    (tmp_path / "tokenizer.json").write_text("not a tokenizer")
    with pytest.raises(ValueError, match=f"tokenizer file {tmp_path / 'tokenizer.json'} is not valid JSON"):
        load_tokenizer(tmp_path)


def test_an_unwritable_run_directory_is_one_line_naming_it(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the run directory should go")
    code = main(["train", "--config", "configs/multi30k_demo.toml", "--run-dir", str(blocker / "run")])
    err = capsys.readouterr().err
    assert code == 2 and str(blocker) in err and len(err.strip().splitlines()) == 1


def test_a_truncated_gzip_corpus_names_the_file(tmp_path):
    import gzip

    from attnlab.data import read_lines

    path = tmp_path / "train.de.gz"
    text = "".join(f"Satz {i} mit {i * 7919 % 104729} Wörtern.\n" for i in range(3000))
    whole = gzip.compress(text.encode())
    path.write_bytes(whole[: len(whole) // 2])  # a download or copy cut short
    with pytest.raises(ValueError, match=f"{path}: truncated or corrupt gzip file"):
        read_lines(path)


def test_a_defect_is_one_line_and_debug_shows_the_traceback(monkeypatch, capsys):
    import attnlab.cli.commands as commands

    def broken(args):
        raise TypeError("an attnlab bug")

    monkeypatch.setattr(commands, "plot", broken)
    assert main(["plot", "r"]) == 1
    err = capsys.readouterr().err
    assert "attnlab plot: internal error: TypeError: an attnlab bug (rerun with --debug" in err
    with pytest.raises(TypeError, match="an attnlab bug"):
        main(["plot", "r", "--debug"])


def test_a_diverged_run_is_an_error_not_a_defect(monkeypatch, capsys):
    import attnlab.cli.commands as commands
    from attnlab.training.config import NonFiniteLossError

    def diverges(args):
        raise NonFiniteLossError("gradient norm became nan at step 7; the last good checkpoint is X")

    monkeypatch.setattr(commands, "train", diverges)
    assert main(["train", "--config", "c.toml"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == "attnlab train: error: gradient norm became nan at step 7; the last good checkpoint is X"


@pytest.mark.parametrize(
    ("raised", "code", "name"), [(KeyboardInterrupt, 130, "SIGINT"), (None, 143, "SIGTERM")]
)
def test_interruptions_exit_with_the_signals_code(monkeypatch, capsys, raised, code, name):
    import attnlab.cli.commands as commands
    from attnlab.signals import Terminated

    def interrupted(args):
        raise (raised or Terminated)()

    monkeypatch.setattr(commands, "plot", interrupted)
    assert main(["plot", "r"]) == code
    assert f"attnlab plot: interrupted by {name}" in capsys.readouterr().err


def test_threads_option_and_its_default(monkeypatch):
    import torch

    from attnlab.runtime import set_threads

    before = torch.get_num_threads()
    try:
        assert set_threads(1) == 1 and torch.get_num_threads() == 1
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        assert set_threads(None) == 2  # $OMP_NUM_THREADS when --threads is not given
        monkeypatch.delenv("OMP_NUM_THREADS")
        assert set_threads(None) >= 1  # every core this process may use
    finally:
        torch.set_num_threads(before)
