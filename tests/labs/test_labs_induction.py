"""The induction lab's scores on a GPT with one hand-built induction circuit (Elhage et al. 2021,
"A Mathematical Framework for Transformer Circuits": a previous-token head in layer 1 writes
each token's predecessor into the residual stream; an induction head in layer 2 matches the
current token against it and copies the token it finds). The scores must find that head and
no other; its copying flips sign with its output; silencing it undoes the in-context learning.
The scores on SmolLM2 itself are checked in tests/labs/test_labs_smollm2.py."""

from __future__ import annotations

import pytest
import torch

from attnlab.labs.induction import (
    COPYING_AT,
    PREFIX_AT,
    ablated,
    induction_scores,
    repeated_tokens,
    second_repeat_loss,
)
from attnlab.models import GPT, GPTConfig

V, T = 16, 8  # vocabulary, half length
TOKEN, POS, PREV = 0, V, V + 2 * T  # the residual stream's three blocks of one-hot dimensions


def induction_circuit(gain: float = 10.0) -> GPT:
    """2 layers × 2 query heads sharing 1 key/value head, learned positions, RMSNorm, MLPs off.
    Layer 1 head 1 attends to the previous position and writes its token into PREV; layer 2
    head 1 matches the query's token against PREV and writes the key's own token × ``gain``
    into TOKEN, which the tied unembedding reads as its logit. Heads 2 attend uniformly and
    write nothing."""
    config = GPTConfig(V, 2 * T, 2, d_model=V + 2 * T + V, num_heads=2, num_kv_heads=1, d_ff=8,
                       positional="learned", norm="rmsnorm", activation="gelu", bias=False)
    model = GPT(config).eval()
    d = config.d_model
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for name, p in model.named_parameters():
            if "norm" in name:
                p.fill_(1.0)
        model.tok_embed.weight[:, TOKEN:TOKEN + V] = torch.eye(V)
        model.pos.absolute.embedding.weight[:, POS:POS + 2 * T] = torch.eye(2 * T)
        first, second = (layer.self_attn for layer in model.decoder.layers)
        q, k, v = (slice(0, d), slice(d, d + d // 2), slice(d + d // 2, 2 * d))
        for p in range(2 * T):  # layer 1 head 1: query at p meets the key at p - 1
            first.in_proj.weight[q][p, POS + p] = 5.0
            if p + 1 < d // 2:
                first.in_proj.weight[k][p + 1, POS + p] = 1.0
        for t in range(V):
            first.in_proj.weight[v][t, TOKEN + t] = 1.0
            first.out_proj.weight[PREV + t, t] = 1.0  # head 1's value t → PREV block
            second.in_proj.weight[q][t, TOKEN + t] = 10.0  # layer 2 head 1: my token ...
            second.in_proj.weight[k][t, PREV + t] = 1.0  # ... against the key's predecessor
            second.in_proj.weight[v][t, TOKEN + t] = 1.0
            second.out_proj.weight[TOKEN + t, t] = gain  # copy the key's token into the logits
    return model


def distinct_repeats(batch: int, seed: int = 0) -> torch.Tensor:
    """``(batch, 2T)``: T distinct tokens (a permutation's prefix) repeated: no token twice in a half."""
    generator = torch.Generator().manual_seed(seed)
    half = torch.stack([torch.randperm(V, generator=generator)[:T] for _ in range(batch)])
    return torch.cat([half, half], dim=1)


def test_the_scores_find_the_planted_induction_head_and_no_other():
    scores = induction_scores(induction_circuit(), distinct_repeats(4))
    assert scores.prefix.shape == scores.copying.shape == (2, 2)
    assert scores.heads() == [(2, 1)]
    assert float(scores.prefix[1, 0]) > 0.9  # the stripe: α_{T+m, m+1}
    others = scores.prefix.flatten()[[0, 1, 3]]
    assert float(others.max()) < 0.2
    assert float(scores.copying[1, 0]) > 3  # z of a one-hot lift over 16 logits: √15
    assert float(scores.copying[0, 0]) == float(scores.copying[1, 1]) == 0.0  # write nothing the logits read
    assert scores.loss_second < 0.5 < 1.5 < scores.loss_first  # in-context learning


def test_a_head_that_writes_the_opposite_is_not_copying():
    scores = induction_scores(induction_circuit(gain=-10.0), distinct_repeats(4))
    assert float(scores.prefix[1, 0]) > 0.9
    assert float(scores.copying[1, 0]) < -3
    assert scores.heads() == []


def test_prefix_score_is_the_mean_of_the_stripe_recomputed_in_float64():
    model, ids = induction_circuit(), distinct_repeats(3, seed=1)
    scores = induction_scores(model, ids)
    _, weights = model.double()(ids, return_weights=True)
    for layer, w in enumerate(weights):
        stripe = [w[b, h, T + m, m + 1] for b in range(3) for h in range(2) for m in range(T)]
        expected = torch.stack(stripe).view(3, 2, T).mean(dim=(0, 2))
        torch.testing.assert_close(scores.prefix[layer].double(), expected, atol=1e-5, rtol=0)


def test_silencing_the_induction_head_undoes_in_context_learning():
    model, ids = induction_circuit(), distinct_repeats(4)
    with_it = second_repeat_loss(model, ids)
    with ablated(model, 2, 1):
        without = second_repeat_loss(model, ids)
    with ablated(model, 2, 2):  # the uniform head writes nothing: no change
        assert second_repeat_loss(model, ids) == pytest.approx(with_it, abs=1e-6)
    assert second_repeat_loss(model, ids) == pytest.approx(with_it, abs=1e-6)  # the hook is gone
    assert without > with_it + 1.0


def test_repeated_tokens_repeat_and_are_seeded():
    ids = repeated_tokens(3, 5, 100, seed=2, low=17)
    assert ids.shape == (3, 10) and torch.equal(ids[:, :5], ids[:, 5:])
    assert int(ids.min()) >= 17 and int(ids.max()) < 100
    assert torch.equal(ids, repeated_tokens(3, 5, 100, seed=2, low=17))
    with pytest.raises(ValueError, match="length >= 2"):
        repeated_tokens(3, 1, 100)
    with pytest.raises(ValueError, match="repeated twice"):
        induction_scores(induction_circuit(), torch.arange(2 * T).view(1, -1))


def test_the_thresholds_are_the_stated_ones():
    assert (PREFIX_AT, COPYING_AT) == (0.4, 0.0)
