"""The output an explanation explains: the log-probability a decoder gave a token it wrote.

A captioner's word or a translator's subword ``y_p`` is explained through
``f = log p(y_p | y_<p, input)``, read from teacher-forced logits (the decoder fed its own
output), one column per explained position, so that one forward pass serves every output of a
caption or sentence and each gets its own gradient.
"""

from __future__ import annotations

import torch
from torch import Tensor


def token_log_probs(logits: Tensor, targets: Tensor, positions: list[int]) -> Tensor:
    """``logits`` ``(k, T, V)``, ``targets`` ``(T,)`` → ``(k, m)``: the log-probability of
    ``targets[p]`` at each of the ``m`` ``positions``, for each of the ``k`` rows."""
    logits = logits if logits.dtype == torch.float64 else logits.float()  # half precision: float32
    logp = torch.log_softmax(logits, dim=-1)[:, positions]  # (k, m, V)
    index = targets[positions].view(1, -1, 1).expand(logp.shape[0], -1, 1)
    return logp.gather(-1, index).squeeze(-1)
