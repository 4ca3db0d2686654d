"""The command line's numbers (attnlab.cli.options): every value out of what an option can mean is
refused by argparse in one line naming the option, before anything runs. (The explorer's
commands check theirs with the API's own request checks: tests/explorer/test_explorer_cli.py.)"""

from __future__ import annotations

import argparse

import pytest

from attnlab.cli import main
from attnlab.cli.options import COUNT, MAX_SEED, NON_NEGATIVE, PROBABILITY, SEED, THREADS, number


@pytest.mark.parametrize(("kind", "text"), [
    (COUNT, "0"), (COUNT, "-3"), (COUNT, "2147483648"), (COUNT, "1.5"), (COUNT, "many"),
    (THREADS, "99999999999999999999"), (SEED, "-1"), (SEED, str(MAX_SEED + 1)),
    (NON_NEGATIVE, "-0.1"), (NON_NEGATIVE, "nan"), (NON_NEGATIVE, "inf"),
    (PROBABILITY, "0"), (PROBABILITY, "1.01"), (PROBABILITY, "nan"),
])
def test_out_of_range_values_are_refused(kind, text):
    with pytest.raises(argparse.ArgumentTypeError, match=r"^must be "):
        kind(text)


@pytest.mark.parametrize(("kind", "text", "value"), [
    (COUNT, "1", 1), (COUNT, "2147483647", 2**31 - 1), (SEED, "0", 0), (SEED, str(MAX_SEED), MAX_SEED),
    (NON_NEGATIVE, "0", 0.0), (PROBABILITY, "1", 1.0), (PROBABILITY, "1e-9", 1e-9),
    (number(int, -1024, 1023), "-1", -1),
])
def test_values_in_range_pass_as_their_type(kind, text, value):
    parsed = kind(text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize(("argv", "expected"), [
    (["lab", "pooling", "--seed", "99999999999999999999"],
     "attnlab lab: error: argument --seed: must be in [0, 2^64 - 1], got 99999999999999999999"),
    (["train", "--config", "x.toml", "--threads", "99999999999999999999"],
     "attnlab train: error: argument --threads: must be in [1, 4096], got 99999999999999999999"),
    (["generate", "ckpt", "--top-p", "nan"],
     "attnlab generate: error: argument --top-p: must be in (0, 1], got nan"),
    (["translate", "ckpt", "--batch-size", "0"],
     "attnlab translate: error: argument --batch-size: must be in [1, 2^31 - 1]"),
])
def test_the_command_refuses_a_number_in_one_line_naming_the_option(argv, expected, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and err[-1].startswith(expected)
