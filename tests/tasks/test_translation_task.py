"""The translation task end to end through the CLI, on real Multi30k data with a tiny model:
train → checkpoint (+ tokenizer, recipe.json) → results.json + alignment picture; translate; evaluate."""

import io
import json
import math
import select
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from attnlab.cli import main
from attnlab.data import load_multi30k, load_tokenizers
from attnlab.generation import beam_search
from attnlab.models import GPT, GPTConfig, Transformer
from attnlab.tasks import EvaluateRequest, TranslationTask, load_recipe
from attnlab.tasks.translation.recipe import TranslationRecipe
from attnlab.training import plot_run
from trained_toys import TRANSLATION_RECIPE as DEMO
from trained_toys import TRANSLATION_TINY as TINY
from trained_toys import train_translator


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return train_translator(tmp_path_factory.mktemp("translation") / "run")


def test_train_writes_checkpoint_metrics_results_alignment(run_dir):
    final = run_dir / "final"
    for name in ("model.safetensors", "config.json", "tokenizer.json", "recipe.json"):
        assert (final / name).is_file(), name
    assert json.loads((final / "recipe.json").read_text())["data"]["src_lang"] == "de"
    events = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [e for e in events if e["event"] == "eval"]
    assert [e["step"] for e in evals] == [10, 20]
    assert all(math.isfinite(e["val_loss"]) and 0 <= e["val_bleu"] <= 100 for e in evals)
    results = json.loads((run_dir / "results.json").read_text())
    assert isinstance(results["bleu"], float) and 0.0 <= results["bleu"] <= 100.0
    assert results["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert results["sentences"] == 16 and len(results["samples"]) == 5
    png = run_dir / "alignment.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_draws_the_runs_validation_bleu(run_dir, tmp_path):
    paths = plot_run(run_dir, tmp_path)
    assert [p.name for p in paths] == ["loss.png", "lr.png", "bleu.png"]


def test_final_is_the_mean_of_the_last_two_checkpoints(run_dir):
    steps = sorted((run_dir / "checkpoints").iterdir())[-2:]
    models = [Transformer.from_pretrained(p) for p in steps]
    final = Transformer.from_pretrained(run_dir / "final")
    name = "encoder.layers.0.ff.linear1.weight"
    state = [dict(m.named_parameters()) for m in (*models, final)]
    if name not in state[0]:
        name = next(k for k in state[0] if k.startswith("stack.encoder") and k.endswith("weight"))
    expected = (state[0][name].double() + state[1][name].double()) / 2
    torch.testing.assert_close(state[2][name].double(), expected, rtol=0, atol=1e-6)


def test_translate_cli_keeps_lines_and_blank_lines(run_dir, monkeypatch, capsys):
    lines = ["Ein Hund läuft.", "", "Zwei Männer spielen Fußball im Park.", "   ", "Eine Frau."]
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    assert main(["translate", str(run_dir / "final"), "--beam", "2", "--batch-size", "2"]) == 0
    out = capsys.readouterr().out.split("\n")
    assert out[-1] == "" and len(out[:-1]) == len(lines)
    assert out[1] == "" and out[3] == ""
    # Order is kept: each line equals translating that sentence alone, by hand: the model's beam
    # search over the source ids, with the recipe's output-length rule (max_len_a = 1.0,
    # max_len_b = 4), which the CLI reads from recipe.json.
    model = Transformer.from_pretrained(run_dir / "final")
    src_tok, tgt_tok = load_tokenizers(run_dir / "final")

    def alone(sentence: str) -> str:
        ids = src_tok.encode(sentence.strip())
        if not ids:
            return ""
        ends = dict(bos_id=tgt_tok.bos_id, eos_id=tgt_tok.eos_id)
        (best,) = beam_search(model, torch.tensor([ids]), beam_size=2, length_penalty=0.6,
                              max_new_tokens=int(1.0 * len(ids) + 4), **ends)
        return tgt_tok.decode(best[0].tokens)

    assert out[:-1] == [alone(s) for s in lines]


def test_translate_encodes_sources_without_specials(run_dir):
    """A source decoded as in training: the encoder never saw <bos>/<eos> on the source side."""
    src_tok, _ = load_tokenizers(run_dir / "final")
    pairs = load_multi30k("val", "de", "en")[:3]
    ids = src_tok.encode_batch([s for s, _ in pairs])
    assert all(src_tok.bos_id not in row and src_tok.eos_id not in row for row in ids)


def test_evaluate_reads_the_pair_and_prints_signatures(run_dir, capsys, monkeypatch):
    from attnlab.data.pair_corpus import PreparedPairs

    calls, every = [], PreparedPairs.pairs

    def first_pairs(self, split):  # 24 pairs keep the test fast
        calls.append((split, self.sources.src_lang, self.sources.tgt_lang))
        return every(self, split)[:24]

    monkeypatch.setattr(PreparedPairs, "pairs", first_pairs)
    assert main(["evaluate", str(run_dir / "final"), "--split", "val", "--beam", "1"]) == 0
    out = capsys.readouterr().out
    assert calls[-1] == ("val", "de", "en")
    assert "de-en val: BLEU = " in out and "nrefs:1|case:mixed|eff:no|tok:13a" in out
    assert "chrF2 = " in out and "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no" in out


def test_unknown_recipe_key_is_named():
    with pytest.raises(ValueError, match="d_modle"):
        TranslationRecipe.from_dict(load_recipe(DEMO, ["model.d_modle=64"]))
    with pytest.raises(ValueError, match="beam_sise"):
        TranslationRecipe.from_dict(load_recipe(DEMO, ["eval.beam_sise=4"]))
    with pytest.raises(ValueError, match="src_vocab_size"):
        TranslationRecipe.from_dict(load_recipe(DEMO, ["model.src_vocab_size=100"]))
    with pytest.raises(ValueError, match="qualiy"):
        TranslationRecipe.from_dict(load_recipe(DEMO, ["qualiy.x=1"]))


def test_contradicting_recipe_settings_fail():
    with pytest.raises(ValueError, match="eval.val_bleu"):
        TranslationRecipe.from_dict(load_recipe(DEMO, ["eval.val_bleu=false"]))  # metric is val_bleu
    with pytest.raises(ValueError, match="keep_last_k"):
        TranslationRecipe.from_dict(load_recipe(DEMO, ["eval.average_last=9", "train.keep_last_k=3"]))


@pytest.mark.parametrize("name", ["multi30k_de_en", "multi30k_en_de", "multi30k_demo"])
def test_shipped_recipes_parse(name):
    recipe = TranslationRecipe.from_dict(load_recipe(f"configs/{name}.toml"))
    pair = (recipe.data.src_lang, recipe.data.tgt_lang)
    assert pair == (("en", "de") if name.endswith("en_de") else ("de", "en"))
    assert recipe.train.bf16 and recipe.optim.label_smoothing == 0.1


def test_unknown_key_through_cli_fails(tmp_path, capsys):
    code = main(["train", "--config", DEMO, "--run-dir", str(tmp_path), "train.max_stpes=3"])
    assert code == 2 and "max_stpes" in capsys.readouterr().err


def test_gpt_checkpoint_is_refused_by_translate(tmp_path, capsys):
    gpt = GPT(GPTConfig(vocab_size=16, block_size=8, d_model=8, num_heads=2, num_layers=1))
    gpt.save_pretrained(tmp_path / "gpt")
    assert main(["translate", str(tmp_path / "gpt")]) == 2
    err = capsys.readouterr().err
    assert "not a translation model" in err or "model_type 'gpt'" in err


def test_resume_continues_the_run_with_its_tokenizer(run_dir, tmp_path):
    run2 = tmp_path / "run2"
    shutil.copytree(run_dir, run2)
    args = ["train", "--config", DEMO, "--run-dir", str(run2), "--resume", str(run2)]
    assert main([*args, *TINY, "train.max_steps=30"]) == 0
    events = [json.loads(line) for line in (run2 / "metrics.jsonl").read_text().splitlines()]
    assert [e["step"] for e in events if e["event"] == "eval"] == [10, 20, 30]
    tokenizer = (run_dir / "final" / "tokenizer.json").read_bytes()
    assert (run2 / "final" / "tokenizer.json").read_bytes() == tokenizer


def _first_pairs(n):
    """``PreparedPairs.pairs`` cut to the first ``n`` pairs of a split."""
    from attnlab.data.pair_corpus import PreparedPairs

    every = PreparedPairs.pairs

    def pairs(self, split):
        return every(self, split)[:n]

    return pairs


def test_evaluation_with_the_device_given_everywhere(run_dir, monkeypatch, capsys):
    """The model, the validation batches and the decoder follow the device asked for: here
    ``cpu`` given explicitly at every step (a GPU machine runs the CUDA test below)."""
    from attnlab.data.pair_corpus import PreparedPairs

    monkeypatch.setattr(PreparedPairs, "pairs", _first_pairs(24))
    request = EvaluateRequest(split="val", device="cpu", beam_size=2)
    explicit = TranslationTask.evaluate(run_dir / "final", request)
    default = TranslationTask.evaluate(run_dir / "final", EvaluateRequest(split="val", beam_size=2))
    assert explicit["bleu"] == default["bleu"] and explicit["pair"] == "de-en"
    assert main(["evaluate", str(run_dir / "final"), "--split", "val", "--beam", "2", "--device", "cpu"]) == 0
    assert f"BLEU = {explicit['bleu']:.2f}" in capsys.readouterr().out
    assert main(["evaluate", str(run_dir / "final"), "--device", "cuda:99"]) == 2
    assert "device 'cuda:99' is not available" in capsys.readouterr().err


def test_validation_loss_equals_a_recomputation_on_the_device(run_dir):
    """``validate`` on a model put on the device explicitly: its loss is the token-weighted mean
    cross-entropy of the validation pairs, recomputed here batch by batch without attnlab's
    evaluation helpers."""
    overrides = [*TINY, "eval.val_bleu=false", "train.metric=val_loss"]
    recipe = TranslationRecipe.from_dict(load_recipe(DEMO, overrides))
    task = TranslationTask(recipe, run_dir / "validate", device="cpu")
    task.prepare(resume=run_dir)  # the run's tokenizers
    model = Transformer.from_pretrained(run_dir / "final", device="cpu")
    got = task.validate(model)["val_loss"]
    total, tokens = 0.0, 0
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        for batch in task.val_loader:
            logits = model(batch.src, batch.tgt_in).float()
            real = batch.tgt_out != task.tgt_tok.pad_id
            ce = torch.nn.functional.cross_entropy(logits[real], batch.tgt_out[real], reduction="sum")
            total += float(ce)
            tokens += int(real.sum())
    assert got == pytest.approx(total / tokens, rel=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_evaluation_on_cuda_matches_the_cpu(run_dir, monkeypatch):
    from attnlab.data.pair_corpus import PreparedPairs

    monkeypatch.setattr(PreparedPairs, "pairs", _first_pairs(64))
    cpu, cuda = (
        TranslationTask.evaluate(run_dir / "final", EvaluateRequest(split="val", device=d, beam_size=2))
        for d in ("cpu", "cuda")
    )
    assert abs(cuda["bleu"] - cpu["bleu"]) < 1.0


# ---------------------------------------------------------------- streams, bytes, signals
def _attnlab(*args: str) -> list[str]:
    return [sys.executable, "-m", "attnlab.cli", *map(str, args)]


def _read_line(stream, timeout: float = 60.0) -> bytes:
    ready, _, _ = select.select([stream], [], [], timeout)
    assert ready, f"no output within {timeout} s"
    return stream.readline()


def test_translate_answers_each_line_while_stdin_is_still_open(run_dir):
    proc = subprocess.Popen(_attnlab("translate", run_dir / "final", "--beam", "1"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        for line in ("Ein Hund läuft.", "Zwei Männer spielen."):
            proc.stdin.write((line + "\n").encode())
            proc.stdin.flush()
            assert _read_line(proc.stdout).endswith(b"\n")  # answered before stdin ends
        proc.send_signal(signal.SIGINT)  # Ctrl-C: what was written stays written
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130 and b"interrupted by SIGINT" in err


def test_undecodable_input_names_the_line_and_keeps_the_lines_before(run_dir):
    strict = subprocess.run(_attnlab("translate", run_dir / "final", "--beam", "1"),
                            input=b"Ein Hund.\n\xff\n", capture_output=True, timeout=120)
    assert strict.returncode == 2 and len(strict.stdout.splitlines()) == 1
    assert b"input line 2 is not valid UTF-8" in strict.stderr and b"--errors replace" in strict.stderr
    replaced = subprocess.run(_attnlab("translate", run_dir / "final", "--beam", "1", "--errors", "replace"),
                              input=b"Ein Hund.\n\xff\n", capture_output=True, timeout=120)
    assert replaced.returncode == 0 and len(replaced.stdout.splitlines()) == 2


def test_sigint_during_training_saves_and_skips_the_report(tmp_path):
    run = tmp_path / "run"
    args = ["train", "--config", DEMO, "--run-dir", run, *TINY, "train.max_steps=100000",
            "train.save_every=5", "train.eval_every=0", "eval.val_bleu=false", "train.metric=val_loss"]
    proc = subprocess.Popen(_attnlab(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while not list((run / "checkpoints").glob("step_*")) and time.time() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert b"interrupted: saved" in out and b"interrupted by SIGINT" in err
    assert not (run / "final").exists() and not (run / "results.json").exists()  # no next phase


def test_learned_positions_too_short_for_the_data_fail_before_training(tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", "--config", DEMO, "--run-dir", str(run), *TINY, 'model.positional="learned"',
            "model.max_len=8"]
    assert main(args) == 2
    assert "model.max_len=8 is shorter than the longest training source" in capsys.readouterr().err
    assert not (run / "checkpoints").exists()
