"""The NTM's algorithmic tasks through the one training seam: recipe checks, the metric, and
``attnlab train`` / ``evaluate`` end to end on a tiny copy task."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from attnlab.cli import main
from attnlab.tasks.algorithmic import bit_errors, fixed_episodes, sequence_cost, train_episodes
from attnlab.tasks.algorithmic.recipe import AlgorithmicData, AlgorithmicRecipe
from trained_toys import NTM_TABLE
from trained_toys import train_algorithmic as train


def recipe(**tables) -> AlgorithmicRecipe:
    raw = {"task": "algorithmic", "train": {"max_steps": 10}, "model": {"memory_size": 32}}
    for name, table in tables.items():
        raw[name] = {**raw.get(name, {}), **table}
    return AlgorithmicRecipe.from_dict(raw)


class OracleCopy(nn.Module):
    """Answers a copy episode perfectly (``sign`` = 1) or with every bit flipped (−1)."""

    def __init__(self, sign: float) -> None:
        super().__init__()
        self.sign, self.anchor = sign, nn.Parameter(torch.zeros(()))

    def forward(self, x):
        length, bits = (x.shape[1] - 1) // 2, x.shape[-1] - 1
        logits = torch.full((x.shape[0], x.shape[1], bits), -10.0)
        logits[:, length + 1:] = (x[:, :length, :bits] * 2 - 1) * 10
        return logits * self.sign + self.anchor


def test_bit_errors_count_wrong_bits_per_sequence():
    data = AlgorithmicData(task="copy", bits=8)
    batches = fixed_episodes(data, 25, seed=0, length=7)
    assert bit_errors(OracleCopy(1.0), batches) == 0
    assert bit_errors(OracleCopy(-1.0), batches) == 7 * 8  # every answer bit of every sequence
    loss, sequences = sequence_cost(OracleCopy(1.0), batches[0])
    per_bit = math.log1p(math.exp(-10.0))  # every answer bit right with a logit of ±10
    assert sequences == 10
    assert float(loss.detach()) == pytest.approx(10 * 7 * 8 * per_bit, rel=1e-2)  # float32


def test_training_stream_is_seeded_and_in_range():
    data = AlgorithmicData(task="copy", min_length=2, max_length=4, batch_size=3, seed=5)
    first = [next(iter(train_episodes(data)(0))) for _ in range(2)]
    assert torch.equal(first[0].inputs, first[1].inputs)
    stream = train_episodes(data)(1)
    lengths = {(next(stream).inputs.shape[1] - 1) // 2 for _ in range(40)}
    assert lengths == {2, 3, 4}


def test_curriculum_widens_the_range_batch_by_batch():
    data = AlgorithmicData(task="repeat_copy", min_length=1, max_length=9, min_repeats=1, max_repeats=5,
                           batch_size=2, seed=3, curriculum_steps=4)
    assert [data.range_at(i) for i in range(6)] == [(3, 2), (5, 3), (7, 4), (9, 5), (9, 5), (9, 5)]
    stream = train_episodes(data)(0)
    for batch in range(4):
        episode = next(stream)
        answer = int(episode.mask[0].sum()) - 1  # length · repeats, then the end marker
        length = episode.inputs.shape[1] - 1 - answer - 1
        cap_length, cap_repeats = data.range_at(batch)
        assert 1 <= length <= cap_length and answer // length <= cap_repeats
    off = AlgorithmicData(task="copy", max_length=7)
    assert off.range_at(0) == (7, 10)
    with pytest.raises(ValueError, match="data.curriculum_steps must be >= 0, got -1"):
        AlgorithmicData(curriculum_steps=-1)


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        ({"eval": {"test_lengths": [10, 40]}},
         r"eval.test_lengths = 40 asks the NTM to hold 40 vectors but model.memory_size is 32"),
        ({"data": {"max_length": 50}}, r"data.max_length = 50 asks the NTM to hold 50 vectors"),
        ({"data": {"min_length": 5, "max_length": 3}},
         r"data.min_length must be <= data.max_length, got 5 > 3"),
        ({"data": {"task": "sorting"}}, r"data.task must be one of copy, repeat_copy"),
        ({"data": {"task": "associative_recall", "min_length": 1, "max_length": 3}}, "at least 2, got 1"),
        ({"model": {"memory_size": 0}}, "memory_size"),
        ({"model": {"input_dim": 3}}, "set from the data"),
    ],
)
def test_bad_recipes_say_what_is_wrong(tables, message):
    with pytest.raises(ValueError, match=message):
        recipe(**tables)


def test_associative_recall_memory_counts_item_vectors():
    with pytest.raises(ValueError, match="hold 36 vectors"):
        recipe(data={"task": "associative_recall", "min_length": 2, "max_length": 6},
               eval={"test_lengths": [12]})


def test_ntm_trains_evaluates_and_draws(tmp_path, capsys):
    run_dir = train(tmp_path, NTM_TABLE)
    results = json.loads((run_dir / "results.json").read_text())
    assert results["model_type"] == "ntm" and results["sequences_seen"] == 40 * 16
    assert set(results["bit_errors"]) == {"3", "8"}
    assert all(0 <= v <= 8 * 8 for v in results["bit_errors"].values())
    assert results["bit_errors"]["3"] < results["bit_errors"]["8"]  # longer is harder
    for picture in results["pictures"]:
        assert Path(picture).stat().st_size > 10_000
    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e.get("event") == "eval"] == [20, 40]
    assert all("bit_errors" in e for e in events if e.get("event") == "eval")
    capsys.readouterr()
    assert main(["evaluate", str(run_dir / "checkpoints" / "step_00000040")]) == 0
    printed = capsys.readouterr().out
    for length in ("3", "8"):
        assert f"{length}: {results['bit_errors'][length]:.2f}" in printed


def test_lstm_baseline_on_the_same_seam(tmp_path):
    run_dir = train(tmp_path, 'type = "sequence_lstm"\nhidden_dim = 32\nnum_layers = 2')
    results = json.loads((run_dir / "results.json").read_text())
    assert results["model_type"] == "sequence_lstm" and results["pictures"] == []
    assert set(results["bit_errors"]) == {"3", "8"}
