"""The benchmarks' reusable readers: a run's evaluations against steps, examples and minutes
(``benchmarks/curves.py``) and the NTM's step time (``benchmarks/ntm_steps.py``)."""

from __future__ import annotations

import json
import sys

import pytest

from repo_paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import curves  # noqa: E402
import ntm_steps  # noqa: E402


def _write_run(run, events):
    run.mkdir()
    (run / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def test_evaluations_read_the_clock_at_the_last_logged_step(tmp_path):
    events = [
        {"event": "train", "step": 50, "tokens": 2048.0, "elapsed_s": 30.0},
        {"event": "train", "step": 150, "tokens": 2048.0, "elapsed_s": 90.0},
        {"event": "eval", "step": 160, "bit_errors": 52.0},
        {"event": "train", "step": 200, "tokens": 2048.0, "elapsed_s": 120.0},
        {"event": "eval", "step": 200, "bit_errors": 48.5},
        {"event": "eval", "step": 240, "val_loss": 3.0},  # no bit_errors: not a point
    ]
    _write_run(tmp_path / "run", events)
    points = curves.evaluations(tmp_path / "run", "bit_errors")
    assert [p.step for p in points] == [160, 200]
    assert [p.minutes for p in points] == [1.5, 2.0]
    assert [p.examples for p in points] == [160 * 2048, 200 * 2048]
    assert [p.value for p in points] == [52.0, 48.5]


def test_an_evaluation_before_any_logged_step_has_no_minutes(tmp_path):
    _write_run(tmp_path / "run", [{"event": "train", "step": 100, "tokens": 32.0, "elapsed_s": 5.0},
                                  {"event": "eval", "step": 10, "bit_errors": 9.0}])
    (point,) = curves.evaluations(tmp_path / "run", "bit_errors")
    assert point.minutes != point.minutes  # NaN


def test_a_metric_no_evaluation_recorded_names_the_run(tmp_path):
    _write_run(tmp_path / "run", [{"event": "eval", "step": 10, "val_loss": 1.0}])
    with pytest.raises(SystemExit, match="run.*'val_cer'"):
        curves.evaluations(tmp_path / "run", "val_cer")


def test_curves_main_draws_a_chart_and_prints_each_run(tmp_path, capsys):
    _write_run(tmp_path / "a", [{"event": "train", "step": 10, "tokens": 4.0, "elapsed_s": 6.0},
                                {"event": "eval", "step": 10, "bit_errors": 3.0},
                                {"event": "eval", "step": 20, "bit_errors": 2.0}])
    chart = tmp_path / "c.png"
    assert curves.main([f"first={tmp_path / 'a'}", "--metric", "bit_errors", "--out", str(chart)]) == 0
    out = capsys.readouterr().out
    assert "| first | 20 | 4 | 0.1 | 3.00 | 2.00 (20) | 2.00 |" in out
    assert chart.stat().st_size > 0


def test_ntm_step_time_is_measured_on_the_recipes_model():
    import torch

    from attnlab.tasks import load_recipe
    from attnlab.tasks.algorithmic.recipe import AlgorithmicRecipe

    small = ["data.min_length=3", "data.max_length=3", "data.keep=2",
             "model.read_heads=1", "model.write_heads=1"]
    recipe = AlgorithmicRecipe.from_dict(load_recipe(ROOT / "configs" / "ntm_priority_sort.toml", small))
    seconds = ntm_steps.time_batch(recipe, 2, 1, torch.device("cpu"))
    assert 0 < seconds < 60
