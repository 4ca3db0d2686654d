"""Decoding with and without the KV cache (Ba (CSC413 Lecture 8), "Computational Cost and
Parallelism": "when generating sentences, the computation in the self-attention decoder grows as
the sequence gets longer").

attnlab's :class:`~attnlab.models.GPT` generates ``N`` tokens greedily twice: feeding one token a
step against its cached keys and values, and computing the whole prefix again at every step
(``greedy_search(..., use_cache=False)``). FLOPs are counted with ``FlopCounterMode`` (math
attention backend) and set beside :func:`attnlab.analysis.decoding_flops`; time is the median of
interleaved rounds. The cache must not change a single token.

The model has random weights drawn with standard deviation 0.5, wide enough that greedy
decoding wanders over the vocabulary instead of repeating one token, so "same tokens" means
something; the costs do not depend on the weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from attnlab.analysis import decoding_flops
from attnlab.generation import greedy_search
from attnlab.measure import timing
from attnlab.models import GPT, GPTConfig

PROMPT_LEN = 4
MODES = ("cached", "recomputed")


def decoding_model(d: int, num_heads: int, num_layers: int, vocab_size: int, block_size: int,
                   seed: int = 0) -> GPT:
    """A GPT of random weights (std 0.5 on every matrix) in eval mode."""
    torch.manual_seed(seed)
    config = GPTConfig(vocab_size=vocab_size, block_size=block_size, d_model=d, num_heads=num_heads,
                       num_layers=num_layers)
    model = GPT(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.5)
    return model


@dataclass
class DecodingMeasurements:
    """Per mode (:data:`MODES`), at each number of new tokens of ``lengths``."""

    lengths: list[int]
    flops: dict[str, list[int]] = field(default_factory=lambda: {m: [] for m in MODES})
    predicted: dict[str, list[int]] = field(default_factory=lambda: {m: [] for m in MODES})
    seconds: dict[str, list[float]] = field(default_factory=lambda: {m: [] for m in MODES})
    same_tokens: list[bool] = field(default_factory=list)
    distinct_tokens: list[int] = field(default_factory=list)


def _generate(model: GPT, prompt: torch.Tensor, n: int, mode: str) -> list[int]:
    return greedy_search(model, prompt=prompt, max_new_tokens=n, use_cache=mode == "cached")[0]


def measure_decoding(
    model: GPT, lengths: Sequence[int], *, rounds: int, min_sample_s: float, seed: int = 0,
) -> DecodingMeasurements:
    """Generate ``N`` tokens after a fixed prompt of :data:`PROMPT_LEN` for each ``N`` of
    ``lengths``, cached and recomputed: counted and predicted FLOPs, time, same tokens."""
    from torch.utils.flop_counter import FlopCounterMode

    gen = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, model.config.vocab_size, (1, PROMPT_LEN), generator=gen)  # (1, P)
    result = DecodingMeasurements(list(lengths))
    for n in lengths:
        tokens = {}
        for mode in MODES:
            with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
                tokens[mode] = _generate(model, prompt, n, mode)
            result.flops[mode].append(counter.get_total_flops())
            predicted = decoding_flops(model.config, PROMPT_LEN, n, use_cache=mode == "cached")
            result.predicted[mode].append(predicted)
        result.same_tokens.append(tokens["cached"] == tokens["recomputed"])
        result.distinct_tokens.append(len(set(tokens["cached"])))
    fns = {(mode, n): (lambda m=mode, k=n: _generate(model, prompt, k, m)) for mode in MODES for n in lengths}
    samples = timing.time_interleaved(fns, rounds=rounds, min_sample_s=min_sample_s)
    for (mode, _), times in samples.items():
        result.seconds[mode].append(timing.median(times))
    return result
