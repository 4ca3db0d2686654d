"""The labs that read trained checkpoints (alignment, heads, memory, captions): their scores
against float64 NumPy recomputations and hand-built patterns, the checkpoint finder, the
one-line refusal naming the train command, and each lab in quick mode on a tiny checkpoint
trained in a fixture (tests/trained_toys.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attnlab.cli import main
from attnlab.data.algorithmic import TASKS
from attnlab.labs.checkpoints import checkpoint_in
from attnlab.labs.memory import SEED, answer_sources, read_follows_write
from attnlab.labs.pattern_scores import (
    diagonal_mass,
    head_scores,
    previous_token_weight,
    row_entropy,
)
from attnlab.labs.registry import LabUnavailable, run_lab
from attnlab.labs.report import LabOptions
from trained_toys import (
    requires_mnist,
    train_algorithmic,
    train_captioner,
    train_gpt,
    train_rnn_translator,
    train_translator,
)


def quick(checkpoint) -> LabOptions:
    return LabOptions(quick=True, checkpoint=str(checkpoint), progress=False)


def causal_softmax(scores: torch.Tensor) -> torch.Tensor:
    n = scores.shape[-1]
    blocked = torch.ones(n, n, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(blocked, float("-inf")), dim=-1)


# ----------------------------------------------------------------------------- the scores
def test_entropy_scores_equal_a_float64_recomputation():
    gen = torch.Generator().manual_seed(0)
    weights = causal_softmax(3 * torch.randn(3, 7, 7, generator=gen))  # (H, n, n)
    w = weights.double().numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        expected = -np.where(w > 0, w * np.log(w), 0.0).sum(-1)  # (H, n)
    assert np.allclose(row_entropy(weights).numpy(), expected, atol=1e-6)
    scores = head_scores(weights, causal=True)
    visible = np.arange(1, 8)  # row i sees i + 1 keys; row 0 has no choice and is left out
    for h, s in enumerate(scores):
        assert s.entropy == pytest.approx(expected[h, 1:].mean(), abs=1e-6)
        assert s.max_entropy == pytest.approx(np.log(visible[1:]).mean(), rel=1e-12)
        assert s.normalised_entropy == pytest.approx((expected[h, 1:] / np.log(visible[1:])).mean(), abs=1e-6)
        assert s.previous == pytest.approx(np.mean([w[h, i, i - 1] for i in range(1, 7)]), abs=1e-6)
        assert s.diagonal == pytest.approx(np.mean([w[h, i, i] for i in range(1, 7)]), abs=1e-6)
    uniform = head_scores(torch.full((1, 5, 5), 0.2), causal=False)[0]
    assert uniform.entropy == pytest.approx(math.log(5)) and uniform.normalised_entropy == pytest.approx(1.0)


def test_hand_built_previous_token_and_diagonal_heads_are_marked():
    n = 6
    previous = torch.zeros(n, n)
    previous[0, 0] = 1.0
    for i in range(1, n):
        previous[i, i - 1], previous[i, i] = 0.8, 0.2
    identity = torch.eye(n)
    scores = head_scores(torch.stack([previous, identity]), causal=True)
    assert scores[0].previous == pytest.approx(0.8) and scores[0].diagonal == pytest.approx(0.2)
    assert scores[0].marks == ["previous-token"]
    assert scores[0].entropy == pytest.approx(-(0.8 * math.log(0.8) + 0.2 * math.log(0.2)))
    assert scores[1].marks == ["diagonal"] and scores[1].entropy == 0.0 and scores[1].previous == 0.0
    assert previous_token_weight(previous)[1:].tolist() == pytest.approx([0.8] * (n - 1))
    cross = head_scores(torch.full((2, 3, 4), 0.25), causal=False, self_attention=False)
    assert cross[0].previous is None and cross[0].marks == []


def test_diagonal_mass_follows_the_monotone_diagonal_of_a_rectangle():
    # 3 output rows over 7 source keys: the diagonal runs through keys 0, 3, 6
    weights = torch.tensor([
        [0.5, 0.3, 0.2, 0.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 0.1, 0.6, 0.2, 0.1, 0.0],
        [0.4, 0.0, 0.0, 0.0, 0.0, 0.2, 0.4],
    ])
    assert diagonal_mass(weights, 0).tolist() == pytest.approx([0.5, 0.6, 0.4])
    assert diagonal_mass(weights, 1).tolist() == pytest.approx([0.8, 0.9, 0.6])
    uniform = diagonal_mass(torch.full((3, 7), 1 / 7), 1)
    assert uniform.tolist() == pytest.approx([2 / 7, 3 / 7, 2 / 7])


def test_scores_over_several_inputs_are_the_mean_of_each_score():
    from attnlab.labs.heads import mean_scores

    a = head_scores(torch.eye(4)[None], causal=True)  # one layer, one head
    b = head_scores(torch.full((1, 4, 4), 0.25), causal=False)
    (mean,), = mean_scores([[a], [b]])
    for field in ("entropy", "max_entropy", "normalised_entropy", "previous", "diagonal"):
        assert getattr(mean, field) == pytest.approx((getattr(a[0], field) + getattr(b[0], field)) / 2)
    cross = head_scores(torch.full((1, 2, 3), 1 / 3), causal=False, self_attention=False)
    assert mean_scores([[cross], [cross]])[0][0].previous is None


@pytest.mark.parametrize("call, message", [
    (lambda: head_scores(torch.ones(4, 4) / 4, causal=False), "weights must have 3 dimensions"),
    (lambda: previous_token_weight(torch.ones(2, 3, 4) / 4), r"square self-attention \(n, n\), got \(3, 4\)"),
    (lambda: diagonal_mass(torch.ones(3, 3) / 3, -1), "width must be >= 0, got -1"),
])
def test_bad_weights_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ----------------------------------------------------------------------------- the NTM's trace
def test_read_follows_write_on_a_hand_made_trace():
    steps, locations = 9, 8
    write, read = torch.zeros(steps, locations), torch.zeros(steps, locations)
    for t, n in enumerate([2, 3, 4, 5, 6, 0, 0, 0, 0]):
        write[t, n] = 1.0  # steps 0..4 write locations 2..6, the answer steps location 0
    for t, n in zip([5, 6, 7, 8], [3, 4, 7, 6], strict=True):
        read[t, n] = 0.9
        read[t, (n + 1) % locations] = 0.1
    pairs = [(5, 0), (6, 1), (7, 2), (8, 3)]  # answer step, input step
    assert read_follows_write(read, write, pairs, lag=0) == (0, 4)  # reads 3, 4, 7, 6 vs writes 2, 3, 4, 5
    assert read_follows_write(read, write, pairs, lag=1) == (3, 4)  # ... vs writes 3, 4, 5, 6
    assert read_follows_write(read, write, pairs, lag=6) == (0, 3)  # step 3 + 6 is past the end: not counted


@pytest.mark.parametrize("task, kwargs", [
    ("copy", {"length": 6}),
    ("repeat_copy", {"length": 4, "repeats": 3}),
    ("associative_recall", {"items": 5, "item_length": 3}),
    ("priority_sort", {"length": 8, "keep": 5}),
])
def test_answer_sources_point_at_the_input_each_answer_repeats(task, kwargs):
    bits = 6
    episode = TASKS[task](4, bits=bits, generator=torch.Generator().manual_seed(1), **kwargs)
    for inputs, targets, mask in zip(*episode, strict=True):
        pairs = answer_sources(task, inputs, bits)
        scored = int(mask.sum()) - (1 if task == "repeat_copy" else 0)  # repeat copy's end marker
        assert len(pairs) == scored and all(mask[a] for a, _ in pairs)
        for answer, source in pairs:
            assert torch.equal(targets[answer, :bits], inputs[source, :bits]), (answer, source)


# ----------------------------------------------------------------------------- finding a checkpoint
def test_checkpoint_in_prefers_final_then_best_then_the_newest_step(tmp_path):
    def make(path, trainer=False):
        path.mkdir(parents=True)
        for name in ["model.safetensors", "config.json", *(["trainer.pt"] if trainer else [])]:
            (path / name).write_text("{}")
        return path

    assert checkpoint_in(tmp_path) is None
    make(tmp_path / "checkpoints" / "step_00000002", trainer=True)
    newest = make(tmp_path / "checkpoints" / "step_00000010", trainer=True)
    assert checkpoint_in(tmp_path) == newest and checkpoint_in(newest) == newest
    best = make(tmp_path / "best")
    assert checkpoint_in(tmp_path) == best
    assert checkpoint_in(make(tmp_path / "final")) == tmp_path / "final"
    assert checkpoint_in(tmp_path) == tmp_path / "final"


@pytest.mark.parametrize("lab, command", [
    ("alignment", "attnlab train --config configs/multi30k_bahdanau.toml"),
    ("heads", "make demo"),
    ("memory", "attnlab train --config configs/ntm_copy.toml --run-dir runs/ntm/copy_ntm_seed0"),
    ("captions", "attnlab train --config configs/digits_caption.toml"),
])
def test_without_a_checkpoint_the_lab_names_the_train_command(lab, command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no runs/ here
    with pytest.raises(LabUnavailable, match="make one with .*" + command.replace(".", r"\.")):
        run_lab(lab, tmp_path / "out", LabOptions(quick=True))
    assert main(["lab", lab, "--quick", "--out", str(tmp_path / "cli")]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"attnlab lab: error: lab {lab} reads a trained checkpoint") and command in error
    with pytest.raises(LabUnavailable, match="neither a checkpoint"):
        run_lab(lab, tmp_path / "out", quick(tmp_path))


# ----------------------------------------------------------------------------- tiny trained runs
@pytest.fixture(scope="module")
def translator_run(tmp_path_factory):
    return train_translator(tmp_path_factory.mktemp("lab_translator") / "run")


@pytest.fixture(scope="module")
def bahdanau_run(tmp_path_factory):
    return train_rnn_translator(tmp_path_factory.mktemp("lab_bahdanau") / "run", "bahdanau")


def _band_mass_numpy(weights: np.ndarray, width: int) -> float:
    """Mean over rows of the mass within ``width`` of round(i (S - 1) / (T - 1)), in float64."""
    rows, keys = weights.shape
    total = 0.0
    for i in range(rows):
        centre = 0 if rows == 1 else math.floor(i * (keys - 1) / (rows - 1) + 0.5)
        total += sum(weights[i, j] for j in range(keys) if abs(j - centre) <= width)
    return total / rows


@pytest.mark.parametrize("which", ["translator_run", "bahdanau_run"])
def test_alignment_lab_diagonal_mass_equals_a_recomputation(which, request, tmp_path):
    from attnlab.pipelines import TranslationPipeline

    run = request.getfixturevalue(which)
    report = run_lab("alignment", tmp_path, quick(run))
    translator = TranslationPipeline.from_checkpoint(run / "final")
    model, src_tok, tgt_tok = translator.model, translator.src_tok, translator.tgt_tok
    ours, uniform = [], []
    for source, translation in report.numbers["translations"]:
        src = torch.tensor([src_tok.encode(source)])
        tgt = torch.tensor([[tgt_tok.bos_id, *tgt_tok.encode(translation)]])
        with torch.no_grad():
            memory, mask = model.encode(src)
            _, weights = model.decode(tgt, memory, mask, return_weights=True)
        last = weights[-1][0].double().mean(dim=0).numpy()  # (T, S), the last layer, mean of heads
        assert np.allclose(last.sum(-1), 1.0, atol=1e-6)  # rows sum to 1
        ours.append(_band_mass_numpy(last, 1))
        uniform.append(_band_mass_numpy(np.full_like(last, 1 / last.shape[1]), 1))
    assert report.numbers["sentences"] == 3 == len(ours)
    assert report.numbers["diagonal_mass"] == pytest.approx(np.mean(ours), abs=1e-5)
    assert report.numbers["uniform_band_mass"] == pytest.approx(np.mean(uniform), abs=1e-9)
    assert report.numbers["model_type"] == model.model_type
    assert all(p.is_file() and p.stat().st_size > 5_000 for p in report.figures)
    assert (tmp_path / "report.md").is_file()


def test_heads_lab_on_a_translator_records_what_decode_returns(translator_run, tmp_path):
    from attnlab.explain.recording import recording_attention
    from attnlab.pipelines import TranslationPipeline

    report = run_lab("heads", tmp_path, quick(translator_run))
    inputs = report.numbers["transformer.inputs"][0]  # quick: one sentence
    translator = TranslationPipeline.from_checkpoint(translator_run / "final")
    model = translator.model.eval()
    src = torch.tensor([translator.src_tok.encode(inputs["source"])])
    tgt = torch.tensor([[translator.tgt_tok.bos_id, *translator.tgt_tok.encode(inputs["translation"])]])
    with torch.no_grad():
        memory, mask = model.encode(src)
        plain_logits, cross = model.decode(tgt, memory, mask, return_weights=True)
        with recording_attention(model.encoder, model.decoder) as (encoder, decoder):
            memory2, _ = model.encode(src)
            logits = model.decode(tgt, memory2, mask)
    # outputs unchanged (the weights come from the explicit path: equal to the fused one to float precision)
    assert torch.allclose(memory, memory2, atol=1e-5) and torch.allclose(logits, plain_logits, atol=1e-5)
    for layer, (self_w, cross_w) in enumerate(decoder[0]):
        assert torch.allclose(cross_w, cross[layer], atol=1e-6)
        assert torch.allclose(self_w.sum(-1), torch.ones(()), atol=1e-5)
        assert torch.equal(self_w[0].triu(1), torch.zeros_like(self_w[0].triu(1)))  # causal
    for w in encoder[0]:
        assert torch.allclose(w.sum(-1), torch.ones(()), atol=1e-5)
    w = cross[-1][0].double().numpy()  # (H, T, S)
    expected = -(w * np.log(np.where(w > 0, w, 1.0))).sum(-1).mean(-1)
    assert report.numbers["transformer.cross.entropy"][-1] == pytest.approx(expected.tolist(), abs=1e-5)
    assert report.numbers["transformer.cross.previous"][-1] == [None] * w.shape[0]
    drawn = {p.name for p in report.figures}
    assert drawn == {f"heads_transformer_{k}.png" for k in ("encoder", "decoder", "cross")}


@pytest.fixture(scope="module")
def gpt_checkpoint(tmp_path_factory):
    return train_gpt(tmp_path_factory.mktemp("lab_gpt")) / "checkpoints" / "step_00000030"


def test_heads_lab_on_a_gpt_scores_equal_a_float64_recomputation(gpt_checkpoint, tmp_path):
    from attnlab.data import load_tokenizer
    from attnlab.models import load_pretrained

    report = run_lab("heads", tmp_path, quick(gpt_checkpoint))
    model, tok = load_pretrained(gpt_checkpoint).eval(), load_tokenizer(gpt_checkpoint)
    ids = tok.encode(report.numbers["gpt.inputs"][0]["line"])  # quick: one line
    with torch.no_grad():
        _, weights = model(torch.tensor([ids]), return_weights=True)
    n = len(ids)
    for layer, w in enumerate(weights):
        w = w[0].double().numpy()  # (H, n, n)
        assert np.allclose(w.sum(-1), 1.0, atol=1e-6)
        rows = range(1, n)  # row 0 sees one key only
        entropy = [np.mean([-sum(p * math.log(p) for p in w[h, i, : i + 1] if p > 0) for i in rows])
                   for h in range(w.shape[0])]
        previous = [np.mean([w[h, i, i - 1] for i in rows]) for h in range(w.shape[0])]
        assert report.numbers["gpt.self.entropy"][layer] == pytest.approx(entropy, abs=1e-5)
        assert report.numbers["gpt.self.previous"][layer] == pytest.approx(previous, abs=1e-5)
        for h, p in enumerate(previous):
            assert (f"self L{layer + 1} H{h + 1}" in report.numbers["gpt.previous-token_heads"]) == (p >= 0.5)
    assert report.numbers["gpt.tokens"]["self"][0] == tok.token_strings(ids)
    every = [p for layer in report.numbers["gpt.self.previous"] for p in layer]
    assert report.numbers["gpt.strongest_previous"][1] == max(every)


@pytest.fixture(scope="module")
def ntm_run(tmp_path_factory):
    return train_algorithmic(tmp_path_factory.mktemp("lab_ntm"))


def test_memory_lab_numbers_equal_a_recomputation_from_the_trace(ntm_run, tmp_path):
    from attnlab.models import load_pretrained
    from attnlab.tasks.algorithmic import fixed_episodes
    from attnlab.tasks.algorithmic.recipe import AlgorithmicRecipe
    from attnlab.tasks.base import saved_recipe

    report = run_lab("memory", tmp_path, quick(ntm_run))
    checkpoint = checkpoint_in(ntm_run)
    assert report.numbers["checkpoint"] == str(checkpoint) and report.numbers["task"] == "copy"
    recipe, model = AlgorithmicRecipe.from_dict(saved_recipe(checkpoint)), load_pretrained(checkpoint).eval()
    length, lag = recipe.data.max_length, report.numbers["write_lag"]
    reads, writes, follows = [], [], []
    for episode in fixed_episodes(recipe.data, 4, SEED + length, length=length):
        with torch.no_grad():
            _, trace = model(episode.inputs, return_trace=True)
        for b in range(episode.inputs.shape[0]):
            read = trace.read_weights[b, :, 0].double().numpy()  # (T, N)
            write = trace.write_weights[b, :, 0].double().numpy()
            assert np.allclose(read.sum(-1), 1.0, atol=1e-5) and np.allclose(write.sum(-1), 1.0, atol=1e-5)
            for k in range(length):  # copy: answer k at step length + 1 + k returns input k
                reads.append(read[length + 1 + k].max())
                writes.append(write[k + lag].max())
                follows.append(read[length + 1 + k].argmax() == write[k + lag].argmax())
    assert report.numbers["read_sharpness"] == pytest.approx(np.mean(reads), abs=1e-5)
    assert report.numbers["write_sharpness"] == pytest.approx(np.mean(writes), abs=1e-5)
    assert report.numbers["read_follows_write"] == pytest.approx(np.mean(follows))
    assert 1 / model.config.memory_size <= report.numbers["read_sharpness"] <= 1.0
    assert [p.name for p in report.figures] == [f"memory_train_length_{length}.png"]


def test_memory_lab_refuses_a_checkpoint_of_another_model(translator_run, tmp_path):
    with pytest.raises(LabUnavailable, match="lab memory reads a ntm checkpoint, but .* holds a transformer"):
        run_lab("memory", tmp_path, quick(translator_run))


@pytest.fixture(scope="module")
def captioner_run(tmp_path_factory):
    return train_captioner(tmp_path_factory.mktemp("lab_captioner") / "run")


@requires_mnist
def test_captions_lab_reports_the_task_measures_and_draws(captioner_run, tmp_path):
    from attnlab.labs.captions import QUICK_SCENES

    report = run_lab("captions", tmp_path, quick(captioner_run))
    numbers = report.numbers
    assert numbers["captions"] == QUICK_SCENES and numbers["beam_size"] == 1
    assert numbers["checkpoint"] == str(captioner_run / "final") and 0.0 <= numbers["exact_match"] <= 1.0
    if numbers["box_words"]:  # an untrained captioner may write no number word at all
        assert 0.0 <= numbers["box_attention"] <= 1.0
    else:
        assert math.isnan(numbers["box_attention"])
    assert report.figures[0].name == "attention.png" and report.figures[0].stat().st_size > 5_000


@requires_mnist
def test_box_attention_by_digit_count_splits_the_overall_measure(captioner_run):
    from attnlab.labs.captions import by_digit_count, load_test_scenes
    from attnlab.pipelines import CaptioningPipeline
    from attnlab.tasks.base import saved_recipe
    from attnlab.tasks.captioning.boxes import attention_on_digits
    from attnlab.tasks.captioning.recipe import CaptionRecipe

    checkpoint = captioner_run / "final"
    captioner = CaptioningPipeline.from_checkpoint(checkpoint)
    recipe = CaptionRecipe.from_dict(saved_recipe(checkpoint))
    test = load_test_scenes(checkpoint, recipe, LabOptions(), captioner.tokenizer)
    assert len(test) == 12 and test.digits is not None  # the run's own data/test
    hyps = test.ids  # the true captions name every digit, so every number word has a box
    overall = attention_on_digits(captioner, test.images, hyps, test.digits)
    rows = by_digit_count(captioner, test, hyps)
    assert sorted(r[0] for r in rows) == sorted({len(d) for d in test.digits})
    assert sum(r[1] for r in rows) == len(test) and all(r[2] == 1.0 for r in rows)  # exact match of the truth
    words = sum(r[5] for r in rows)
    assert words == overall["box_words"] == sum(len(d) for d in test.digits)
    assert overall["box_attention"] == pytest.approx(sum(r[3] * r[5] for r in rows) / words, abs=1e-9)
    for count, _, _, _, area, _ in rows:  # the boxes' share of the 64 x 64 image, by hand
        boxes = [d["box"] for digits in test.digits if len(digits) == count for d in digits]
        expected = np.mean([(x1 - x0) * (y1 - y0) / 64**2 for x0, y0, x1, y1 in boxes])
        assert area == pytest.approx(expected, abs=1e-12)
    words, maps = captioner.attention(test.images[0], hyps[0])
    assert maps.shape[0] == len(words)
    assert torch.allclose(maps.sum((-2, -1)), torch.ones(len(words)), atol=1e-5)  # each word's map sums to 1
