"""The ``attnlab`` command: version, help, and clean errors (no tracebacks) for bad input."""

import subprocess
import sys

import pytest

import attnlab
from attnlab.cli import SUBCOMMANDS, main


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
    recipe.write_text('task = "speech"\n')
    assert main(["train", "--config", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "'speech'" in err and "translation" in err
