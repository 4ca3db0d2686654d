"""plot_run draws PNG curves from metrics.jsonl."""

import json

import pytest

from attnlab.training import plot_run

PNG = b"\x89PNG\r\n\x1a\n"


def _write(run, events):
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


def _train(step):
    return {"event": "train", "step": step, "loss": 5.0 / step, "lr": 1e-3 * step}


@pytest.mark.parametrize("key", ["val_bleu", "bleu"])
def test_loss_lr_and_bleu_curves(tmp_path, key):
    events = [_train(s) for s in range(1, 11)]
    events += [
        {"event": "eval", "step": 5, "val_loss": 1.2, key: 10.0},
        {"event": "eval", "step": 10, "val_loss": 1.0, key: 20.0},
    ]
    _write(tmp_path, events)
    paths = plot_run(tmp_path)
    assert [p.name for p in paths] == ["loss.png", "lr.png", "bleu.png"]
    for p in paths:
        assert p.parent == tmp_path / "plots" and p.read_bytes()[:8] == PNG


def test_bleu_is_drawn_only_when_logged(tmp_path):
    _write(
        tmp_path, [_train(s) for s in range(1, 4)] + [{"event": "eval", "step": 3, "val_loss": 2}]
    )
    assert [p.name for p in plot_run(tmp_path, tmp_path / "out")] == ["loss.png", "lr.png"]


def test_every_other_eval_metric_gets_its_own_curve(tmp_path):
    events = [_train(s) for s in range(1, 5)]
    events += [{"event": "eval", "step": s, "val_loss": 1.0 / s, "perplexity": 3.0, "bit_errors": 8.0 / s}
               for s in (2, 4)]
    _write(tmp_path, events)
    assert [p.name for p in plot_run(tmp_path)] == ["loss.png", "lr.png", "bit_errors.png"]


def test_empty_or_missing_metrics_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="metrics file .* does not exist"):
        plot_run(tmp_path)
    _write(tmp_path, [{"event": "eval", "step": 1, "val_loss": 2.0}])
    with pytest.raises(ValueError, match="hold no train events"):
        plot_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_text("{broken\n")
    with pytest.raises(ValueError, match="metrics.jsonl:1 is not valid JSON"):
        plot_run(tmp_path)
