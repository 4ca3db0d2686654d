"""The language-model task end to end on the real tinyshakespeare: ``attnlab train`` with
nanoGPT's CPU recipe (shortened), ``attnlab generate`` and ``attnlab evaluate``, and the
clear errors on bad input."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from attnlab.cli import main
from attnlab.data import CharTokenizer, Tokenizer, WordTokenizer, load_tinyshakespeare, load_tokenizer
from attnlab.models import GPT, Transformer, TransformerConfig
from attnlab.tasks.language_model import LMRecipe
from attnlab.tasks.language_model.task import sample_prompt
from trained_toys import LM_FAST as FAST
from trained_toys import LM_RECIPE as CONFIG
from trained_toys import ROOT, train_gpt

pytestmark = pytest.mark.skipif(
    not (Path(os.environ.get("ATTNLAB_DATA", "/nonexistent")) / "tinyshakespeare").is_dir(),
    reason="needs $ATTNLAB_DATA/tinyshakespeare (the shared corpora)",
)


def run(*argv: str) -> int:
    return main([str(a) for a in argv])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """nanoGPT's CPU configuration, 30 steps, evaluated every 10, validated on the last 2 %."""
    return train_gpt(tmp_path_factory.mktemp("nanogpt_cpu"))


@pytest.fixture(scope="module")
def checkpoint(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / "step_00000030"


def test_train_writes_checkpoint_tokenizer_and_results(run_dir: Path, checkpoint: Path) -> None:
    for name in ("model.safetensors", "config.json", "tokenizer.json", "trainer.pt"):
        assert (checkpoint / name).is_file(), name
    tokenizer = load_tokenizer(checkpoint)
    text = load_tinyshakespeare()
    assert isinstance(tokenizer, CharTokenizer) and tokenizer.chars == sorted(set(text))
    model = GPT.from_pretrained(checkpoint)
    assert (model.config.num_layers, model.config.num_heads, model.config.d_model) == (4, 4, 128)
    assert model.config.block_size == 64 and model.config.vocab_size == tokenizer.vocab_size

    evals = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    evals = [e for e in evals if e["event"] == "eval"]
    assert [e["step"] for e in evals] == [10, 20, 30]
    assert evals[-1]["val_loss"] < evals[0]["val_loss"]

    results = json.loads((run_dir / "results.json").read_text())
    assert results["steps"] == 30 and results["stopped"] == "max_steps"
    assert results["perplexity"] == pytest.approx(math.exp(results["val_loss"]))
    assert results["val_loss"] < math.log(tokenizer.vocab_size)  # better than uniform
    assert len(results["sample"]) == 300 and results["wall_time_s"] > 0


def test_evaluate_matches_an_independent_recomputation(checkpoint: Path, capsys) -> None:
    assert run("evaluate", checkpoint) == 0
    words = capsys.readouterr().out.split()
    loss, ppl = float(words[words.index("loss") + 1]), float(words[words.index("perplexity") + 1])
    assert ppl == pytest.approx(math.exp(loss), rel=1e-3)

    # Reference: one batch of every non-overlapping 64-character window of the validation
    # tail (the recipe's train_fraction, saved with the checkpoint).
    model, text = GPT.from_pretrained(checkpoint), load_tinyshakespeare()
    val = text[int(len(text) * 0.98) :]
    ids = torch.tensor(load_tokenizer(checkpoint).encode(val))
    n = (ids.numel() - 1) // 64
    x, y = ids[: n * 64].view(n, 64), ids[1 : n * 64 + 1].view(n, 64)
    with torch.no_grad():
        ref = F.cross_entropy(model(x).flatten(0, 1), y.flatten()).item()
    assert loss == pytest.approx(ref, abs=1e-4)


def _generate(checkpoint: Path, capsys, *extra: str) -> str:
    assert run("generate", checkpoint, *extra) == 0
    return capsys.readouterr().out


def test_generate_prints_prompt_and_exact_length_reproducibly(checkpoint: Path, capsys) -> None:
    args = ("--prompt", "ROMEO:", "--max-new-tokens", "80", "--seed", "7")
    first = _generate(checkpoint, capsys, *args)
    assert first.startswith("ROMEO:") and first.endswith("\n")
    assert len(first) == len("ROMEO:") + 80 + 1  # + print's newline
    assert _generate(checkpoint, capsys, *args) == first
    other = _generate(checkpoint, capsys, "--prompt", "ROMEO:", "--max-new-tokens", "80", "--seed", "8")
    assert other != first


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--prompt", ""], "prompt must be non-empty"),
        (["--prompt", "ROMEO: ☃ é"], "prompt cannot be encoded"),
    ],
)
def test_generate_bad_input_is_a_clear_error(checkpoint: Path, capsys, argv, message) -> None:
    assert run("generate", checkpoint, *argv) == 2
    err = capsys.readouterr().err
    assert "attnlab generate: error:" in err and message in err
    assert "☃" in err or "☃" not in " ".join(argv)  # the unknown characters are named


@pytest.mark.parametrize("value", ["0", "-5"])
def test_generate_refuses_fewer_than_one_new_token_as_its_argument(checkpoint: Path, capsys, value) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run("generate", checkpoint, "--prompt", "ROMEO:", "--max-new-tokens", value)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert f"attnlab generate: error: argument --max-new-tokens: must be in [1, 2^31 - 1], got {value}" in err


def test_generate_rejects_a_translation_checkpoint(tmp_path: Path, capsys) -> None:
    config = TransformerConfig(
        src_vocab_size=11, d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32
    )
    Transformer(config).save_pretrained(tmp_path / "mt")
    assert run("generate", tmp_path / "mt", "--prompt", "ROMEO:") == 2
    err = capsys.readouterr().err
    assert "has model_type 'transformer'; generate takes gpt, lstm, lstmn checkpoints" in err


def test_recipe_rejects_unknown_keys_by_name(tmp_path: Path, capsys) -> None:
    assert run("train", "--config", CONFIG, "--run-dir", tmp_path, "model.d_modle=64") == 2
    err = capsys.readouterr().err
    assert "d_modle" in err and "d_model" in err
    assert run("train", "--config", CONFIG, "--run-dir", tmp_path, "model.vocab_size=64") == 2
    assert "vocab_size" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["shakespeare_char", "shakespeare_bpe", "shakespeare_nanogpt_cpu"])
def test_shipped_recipes_parse(name: str) -> None:
    from attnlab.tasks import load_recipe

    recipe = LMRecipe.from_dict(load_recipe(ROOT / "configs" / f"{name}.toml"))
    assert recipe.data.train_fraction == 0.9 and recipe.train.max_steps >= 1000


def test_nanogpt_cpu_recipe_keeps_every_setting_of_nanogpts_run() -> None:
    """The ≤ 1.88 claim is about nanoGPT's documented CPU run: only the position scheme, a
    model choice nanoGPT's command line leaves open, and the precision (bf16 autocast, issue
    19; nanoGPT trains in float32 on a CPU) may differ from it."""
    from attnlab.tasks import load_recipe

    r = LMRecipe.from_dict(load_recipe(CONFIG))
    m, o, t, d = r.model.settings, r.optim, r.train, r.data
    assert (m["num_layers"], m["num_heads"], m["d_model"], m["dropout"], m["bias"]) == (4, 4, 128, 0.0, False)
    assert (d.block_size, d.batch_size, d.tokenizer, d.train_fraction) == (64, 12, "char", 0.9)
    assert (t.max_steps, t.clip_norm, t.bf16) == (2000, 1.0, True)
    assert (o.lr, o.min_lr, o.warmup, o.decay_steps) == (1e-3, 1e-4, 100, 2000)
    assert (o.weight_decay, o.decay_embeddings, list(o.betas)) == (0.1, True, [0.9, 0.99])
    assert m["tie_output"] and m["positional"] == "rope"  # attnlab's choices: positions, precision


def _losses(run_dir: Path) -> dict[int, float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return {e["step"]: e["loss"] for e in map(json.loads, lines) if e["event"] == "train"}


def test_resume_continues_exactly(tmp_path: Path) -> None:
    tiny = [
        "model.num_layers=1",
        "model.d_model=32",
        "model.num_heads=2",
        "data.block_size=16",
        "optim.warmup=2",
        "optim.decay_steps=6",
        "train.max_steps=6",
        "eval.eval_iters=2",
        "eval.sample_chars=10",
        *FAST,
    ]
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert run("train", "--config", CONFIG, "--run-dir", whole, *tiny) == 0
    assert (
        run(
            "train",
            "--config",
            CONFIG,
            "--run-dir",
            part,
            *tiny[: -len(FAST)],
            *FAST[:2],
            "train.max_steps=3",
            "train.keep_last_k=0",
        )
        == 0
    )
    assert run("train", "--config", CONFIG, "--run-dir", part, "--resume", part, *tiny) == 0
    assert _losses(part) == _losses(whole)  # exact: same windows, same updates


def test_bpe_recipe_trains_and_generates(tmp_path: Path, capsys) -> None:
    small = [
        "data.vocab_size=300",
        "model.num_layers=1",
        "model.d_model=32",
        "model.num_heads=2",
        "data.block_size=16",
        "optim.warmup=1",
        "train.max_steps=2",
        "train.bf16=false",
        "eval.eval_iters=1",
        "eval.sample_chars=20",
        *FAST,
    ]
    config = ROOT / "configs" / "shakespeare_bpe.toml"
    assert run("train", "--config", config, "--run-dir", tmp_path, *small) == 0
    ckpt = tmp_path / "checkpoints" / "step_00000002"
    assert isinstance(load_tokenizer(ckpt), Tokenizer)
    capsys.readouterr()
    out = _generate(ckpt, capsys, "--prompt", "ROMEO: ☃", "--max-new-tokens", "5", "--seed", "0")
    assert out.startswith("ROMEO: ☃")  # byte-level BPE represents any text


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["eval.eval_iters=0"], "eval.eval_iters must be > 0, got 0"),
        (["eval.sample_chars=0"], "eval.sample_chars must be > 0, got 0"),
        (["data.train_fraction=0.99999"], "the validation text has 12 tokens, fewer than"),
    ],
)
def test_settings_that_would_fail_after_training_fail_before_it(tmp_path, capsys, overrides, message):
    assert run("train", "--config", CONFIG, "--run-dir", tmp_path / "run", *overrides, *FAST) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_text_stream_writes_each_piece_and_holds_back_half_characters():
    from attnlab.pipelines.streams import TextStream

    tokenizer = Tokenizer.train(["Grüße aus Köln, ihr Lieben. " * 50], 300)
    ids = tokenizer.encode("Grüße aus Köln")
    pieces: list[str] = []
    stream = TextStream(tokenizer, pieces.append)
    for token in ids:
        stream(0, token)
    stream.finish(tokenizer.decode(ids))
    assert "".join(pieces) == "Grüße aus Köln"
    assert all("\ufffd" not in piece for piece in pieces) and len(pieces) > 1


def test_the_sample_starts_at_a_newline_or_where_the_tokenizer_has_none_at_the_first_word():
    """A word tokenizer drops newlines (``"\\n"`` encodes to nothing): its sample starts from
    the first token of the held-out text instead."""
    text = "In the beginning God created the heaven and the earth.\nAnd the earth was without form"
    assert sample_prompt(CharTokenizer(text), text) == "\n"
    words = WordTokenizer.train(text.splitlines())
    assert words.encode("\n") == [] and sample_prompt(words, text) == "In"
