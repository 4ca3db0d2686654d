"""The explanations lab: copied words found by hand, the grid's cells in a box, each task's
methods against the models' own weights and integrated gradients' completeness, the NTM's
answer recomputed from its memory, the lab in quick mode on tiny trained runs (with a perfect
copier and the true captions standing in for the untrained models' outputs, so that every task
has cases) and the one-line refusal naming the train commands."""

from __future__ import annotations

import pytest
import torch

from attnlab.explain import gradient_x_attention
from attnlab.labs.explanations.captioner import cells_in_box, explain_scene, pool_to_grid
from attnlab.labs.explanations.ntm import answer_likelihood, explain_step, recomputed_logits, run_steps
from attnlab.labs.explanations.tally import METHODS, Tally, key_of
from attnlab.labs.explanations.translator import copied_words, explain_sentence, name_sentences, words
from attnlab.labs.registry import LabUnavailable, run_lab
from attnlab.labs.report import LabOptions
from trained_toys import requires_mnist, train_algorithmic, train_captioner, train_translator


def quick(checkpoint=None) -> LabOptions:
    return LabOptions(quick=True, checkpoint=None if checkpoint is None else str(checkpoint), progress=False)


# ----------------------------------------------------------------------------- by hand
def test_copied_words_are_the_words_written_once_on_both_sides():
    source = ["Ein", " Mann", " wirft", " ein", " Fris", "bee", " in", " Reihe", " 3", " in", " Berlin", "."]
    output = ["A", " man", " throws", " a", " Fris", "bee", " in", " row", " 3", " near", " Berlin", "."]
    assert words(output)[-2:] == [("Berlin", [10]), (".", [11])]
    assert words(["a", ",", "b", "-", "c"]) == [("a", [0]), (",", [1]), ("b", [2]), ("-", [3]), ("c", [4])]
    copies = copied_words(source, output)
    # "in" twice in the source: no known source; "." holds no letter; "A" / "Ein" differ
    assert [(c.text, c.position, c.sources, c.named) for c in copies] == [
        ("Frisbee", 4, (4, 5), True), ("3", 8, (8,), True), ("Berlin", 10, (10,), True)]
    assert copied_words(["Hund", " in", " Park"], ["Dog", " in", " park"])[0].named is False
    assert copied_words(["Frau", " an", " der", " Wand"], ["Woman", " an", " the", " wall"]) == []  # a false
    # friend: German "an" (at) is not English "an"


def test_training_sentences_whose_reference_repeats_a_name_or_a_number():
    pairs = [("Ein Mann in Berlin.", "A man in Berlin."), ("Berlin bei Nacht.", "Berlin at night."),
             ("Zwei Hunde.", "Two dogs."), ("Die Nummer 7 rennt.", "Number 7 runs."),
             ("Ein Hund namens Rex und Rex.", "A dog called Rex.")]
    # Berlin first in the reference, no name, Rex twice in the source: left out
    assert name_sentences(pairs) == ["Ein Mann in Berlin.", "Die Nummer 7 rennt."]


def test_cells_in_a_box_and_pixels_pooled_to_the_grid():
    inside = cells_in_box((8, 0, 24, 9), (4, 4), (32, 32)).view(4, 4)  # cell centres at 4, 12, 20, 28
    expected = torch.zeros(4, 4, dtype=torch.bool)
    expected[0, 1:3] = True  # x 12, 20 in [8, 24); y 4 in [0, 9)
    assert torch.equal(inside, expected)
    pixels = torch.arange(16.0).view(4, 4)
    assert torch.equal(pool_to_grid(pixels, (2, 2)), torch.tensor([[10.0, 18.0], [42.0, 50.0]]))


def test_the_tally_scores_methods_and_both_baselines():
    tally = Tally("toy")
    truth = torch.tensor([False, True, False, False])
    points, misses = torch.tensor([0.1, 0.6, 0.2, 0.1]), torch.tensor([0.4, 0.3, 0.2, 0.1])
    tally.add({"attention": points, "rollout": misses}, truth)
    assert tally.pointing("attention") == 1.0 and tally.pointing("rollout") == 0.0
    assert tally.mass("attention") == pytest.approx(0.6) and tally.mass("uniform") == pytest.approx(0.25)
    assert tally.pointing("uniform") == 0.25 and tally.cases == 1 and tally.best() == ["attention"]
    noise = torch.rand(4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert tally.pointing("random") == float(bool(truth[noise.argmax()]))  # the lab's seeded noise


# ----------------------------------------------------------------------------- tiny runs
@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A working directory whose runs/ holds a tiny NTM and a tiny Transformer translator."""
    root = tmp_path_factory.mktemp("explanations")
    (root / "ntm_scratch").mkdir()
    ntm = train_algorithmic(root / "ntm_scratch")
    (root / "runs" / "ntm").mkdir(parents=True)
    ntm.rename(root / "runs" / "ntm" / "copy_ntm_seed0")
    train_translator(root / "runs" / "demo")
    return root


def test_the_ntms_answer_is_recomputed_from_the_memory_it_reads(runs):
    from attnlab.models import load_pretrained

    model = load_pretrained(runs / "runs" / "ntm" / "copy_ntm_seed0" / "best").eval().double()
    inputs = torch.zeros(3, 9, 9, dtype=torch.float64)
    inputs[:, :4, :8] = torch.randint(0, 2, (3, 4, 8), generator=torch.Generator().manual_seed(0)).double()
    inputs[:, 4, 8] = 1.0
    with torch.enable_grad():
        run = run_steps(model, inputs)
    with torch.no_grad():
        logits, trace = model(inputs, return_trace=True)
    for t in range(9):
        assert torch.allclose(run.logits[t], logits[:, t], atol=1e-6)
        again = recomputed_logits(model, run.h[t], run.memory[t], run.reads[t])
        assert torch.allclose(again, logits[:, t], atol=1e-6)
        assert torch.allclose(run.read[t], trace.read_weights[:, t, 0], atol=1e-7)
    # gradient × attention of the answer at step 6 over its own read = finite differences of the answer
    signs = torch.where(run.logits[6] >= 0, 1.0, -1.0).detach()
    with torch.enable_grad():
        f = answer_likelihood(run.logits[6], signs).sum()
        (term,) = gradient_x_attention(f, [run.reads[6]], retain_graph=True)

    def scaled(n: int, eps: float) -> float:
        reads = run.reads[6].detach().clone()
        reads[:, 0, n] *= 1 + eps
        logits = recomputed_logits(model, run.h[6].detach(), run.memory[6].detach(), reads)
        return float(answer_likelihood(logits, signs).sum().detach())

    for n in (0, 3, 9):
        estimate = (scaled(n, 1e-5) - scaled(n, -1e-5)) / 2e-5
        assert float(term[:, 0, n].sum()) == pytest.approx(estimate, rel=1e-6, abs=1e-10)
    found, ig = explain_step(model, run, 6, steps=64)
    assert float(sum(found[b]["gradient × attention"].abs().sum() for b in range(3))) > 0
    assert len(found) == 3 and all(found[b]["attention"].shape == (16,) for b in range(3))
    assert torch.allclose(found[1]["attention"], trace.read_weights[1, 6, 0])
    assert abs(float(ig.gap[0])) <= 1e-3 * max(abs(float(ig.ends[0, 1] - ig.ends[0, 0])), 1e-3)
    for b in range(3):  # at least the direct edge's 0.5 α_a(n), at most the one unit the state takes in
        flow, direct = found[b]["flow"], 0.5 * found[b]["attention"]
        assert bool((flow >= direct - 1e-9).all()) and float(flow.max()) <= 1 + 1e-9


def test_a_translators_methods_on_a_copied_sentence(runs):
    from attnlab.pipelines import TranslationPipeline

    translator = TranslationPipeline.from_checkpoint(runs / "runs" / "demo" / "final")
    model, tok = translator.model.eval(), translator.tgt_tok
    src = translator.src_tok.encode("Zwei Hunde spielen im Schnee.")
    found, ig = explain_sentence(model, src, src, tok.bos_id, tok.eos_id, [1, 2], steps=64)
    with torch.no_grad():
        memory, mask = model.encode(torch.tensor([src]))
        _, cross = model.decode(torch.tensor([[tok.bos_id, *src]]), memory, mask, return_weights=True)
    for k, p in enumerate([1, 2]):
        assert set(found[k]) == set(METHODS) and all(v.shape == (len(src),) for v in found[k].values())
        assert torch.allclose(found[k]["attention"].float(), cross[-1][0, :, p].mean(0), atol=1e-6)
        assert 0.0 <= float(found[k]["rollout"].sum()) <= 1.0 + 1e-9
    delta = (ig.ends[:, 1] - ig.ends[:, 0]).abs()
    assert bool((ig.gap.abs() <= 0.02 * delta + 1e-4).all())  # complete up to the midpoint rule


def test_bahdanaus_methods_read_its_alignments():
    from attnlab.models import AttentionSeq2Seq
    from attnlab.models.attention_seq2seq import AttentionSeq2SeqConfig

    torch.manual_seed(0)
    config = AttentionSeq2SeqConfig(src_vocab_size=30, embed_dim=8, encoder_dim=8, hidden_dim=16,
                                    attention_dim=8, dropout=0.0)
    model = AttentionSeq2Seq(config).eval().double()
    src, out = [5, 6, 7, 8, 9], [10, 11, 12, 13]
    found, ig = explain_sentence(model, src, out, 1, 2, [0, 3], steps=64)

    def log_prob(step: int, key: int, eps: float) -> float:  # α_step(key) scaled by 1 + eps
        calls = []

        def scale(module, args, alpha):
            calls.append(None)
            if len(calls) - 1 == step:
                alpha = alpha.clone()
                alpha[:, key] *= 1 + eps
            return alpha

        handle = model.alignment.register_forward_hook(scale)
        try:
            memory, mask = model.encode(torch.tensor([src]))
            logits = model.decode(torch.tensor([[1, *out]]), memory, mask)
        finally:
            handle.remove()
        return float(torch.log_softmax(logits[0, step], -1)[[*out, 2][step]].detach())

    for key in (0, 2, 4):  # the step's own term: finite differences of the word's log-probability
        estimate = (log_prob(3, key, 1e-5) - log_prob(3, key, -1e-5)) / 2e-5
        assert float(found[1]["gradient × attention"][key]) == pytest.approx(estimate, rel=1e-6, abs=1e-10)
    with torch.no_grad():
        memory, mask = model.encode(torch.tensor([src]))
        _, (alphas,) = model.decode(torch.tensor([[1, *out]]), memory, mask, return_weights=True)
    alphas = alphas[0, 0].double()  # (T, S)
    for k, p in enumerate([0, 3]):
        assert torch.allclose(found[k]["attention"], alphas[p], atol=1e-6)
        mixed = torch.zeros(5, dtype=torch.float64)  # rollout: the running half mix of the reads
        for alpha in alphas[:p + 1]:
            mixed = 0.5 * alpha + 0.5 * mixed
        assert torch.allclose(found[k]["rollout"], mixed, atol=1e-6)
    delta = (ig.ends[:, 1] - ig.ends[:, 0]).abs()
    assert bool((ig.gap.abs() <= 0.02 * delta + 1e-4).all())


def test_the_lab_in_quick_mode_scores_every_task_it_finds(runs, tmp_path, monkeypatch):
    import attnlab.pipelines.decoding as decoding

    monkeypatch.chdir(runs)
    monkeypatch.setattr(decoding, "search", lambda model, src, *a, **k: src.tolist())  # a perfect copier
    report = run_lab("explanations", tmp_path / "out", quick())
    numbers = report.numbers
    assert numbers["ntm_cases"] == 2 * 5 and numbers["transformer_cases"] > 0  # 2 sequences of length 5
    for task in ("ntm", "transformer"):
        for method in METHODS + ("random",):
            assert 0.0 <= numbers[f"{task}_pointing_{key_of(method)}"] <= 1.0
    assert numbers["ntm_pointing_uniform"] == pytest.approx(1 / 16) and numbers["ntm_write_lag"] in (0, 1, 2)
    assert numbers["ntm_ig_gap"] < numbers["ntm_ig_delta"]
    assert "Not run here: lab explanations reads a trained checkpoint and none of runs/digits_caption" in \
        (tmp_path / "out" / "report.md").read_text()
    assert {p.name for p in report.figures} == {"explanations_pointing.png", "explanations_ntm.png",
                                                "explanations_transformer.png"}
    only = run_lab("explanations", tmp_path / "ntm", quick(runs / "runs" / "ntm" / "copy_ntm_seed0"))
    assert "transformer_cases" not in only.numbers and only.numbers["ntm_cases"] == 10


def test_without_checkpoints_the_lab_names_every_train_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LabUnavailable) as refused:
        run_lab("explanations", tmp_path / "out", quick())
    for command in ("configs/digits_caption.toml", "configs/ntm_copy.toml", "make demo",
                    "configs/multi30k_bahdanau.toml"):
        assert command in str(refused.value)


@requires_mnist
def test_the_captioners_methods_on_its_true_captions(tmp_path, monkeypatch):
    from attnlab.labs.captions import load_test_scenes
    from attnlab.pipelines import CaptioningPipeline
    from attnlab.tasks.base import load_saved_recipe
    from attnlab.tasks.captioning.recipe import CaptionRecipe

    run = train_captioner(tmp_path / "runs" / "digits_caption")
    captioner = CaptioningPipeline.from_checkpoint(run / "final")
    test = load_test_scenes(run / "final", load_saved_recipe(run / "final", CaptionRecipe), quick(),
                            captioner.tokenizer)
    # the true captions name every digit: the untrained model's own might name none
    monkeypatch.setattr(CaptioningPipeline, "caption_ids", lambda self, images, *a, **k: test.ids)
    model, tok = captioner.model.eval(), captioner.tokenizer
    found, ig = explain_scene(model, test.images[0], test.ids[0], tok.bos_id, tok.eos_id, [0, 2], steps=64)
    maps = captioner.attention(test.images[0], test.ids[0]).maps
    assert torch.allclose(found[1]["attention"].float(), maps[2].flatten(), atol=1e-6)
    pooled, pixels = found[0]["integrated gradients"].sum(), ig.attributions[0].sum().double()
    assert torch.allclose(pooled, pixels, atol=1e-5)
    monkeypatch.chdir(tmp_path)
    report = run_lab("explanations", tmp_path / "out", quick())
    assert report.numbers["show_attend_tell_cases"] == sum(len(d) for d in test.digits)
    assert [p.name for p in report.figures] == ["explanations_pointing.png", "explanations_captioner.png"]

