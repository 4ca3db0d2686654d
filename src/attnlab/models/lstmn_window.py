"""One LSTMN layer over a whole window as one autograd function: the forward steps through the
window on preallocated tapes, the backward (back-propagation through time) is written out.

Cheng, Dong & Lapata (2016), "Long Short-Term Memory-Networks for Machine Reading", eqs. 13-16
(Hasegawa-Johnson (ECE 417 Lecture 21), intra-attention). Step ``t`` of the window reads the
tape through one masked matmul: the tape lives in one buffer ``[h; c]`` ``(B, L + n, 2H)`` and
its keys ``W_h h_i`` in ``(B, L + n, A)``, each state projected once as it joins; step ``t``
scores the first ``W = L + n - 1`` slots with the layer's
:class:`~attnlab.attention.scoring.AdditiveScore`, row ``t`` of the causal mask
(:func:`~attnlab.attention.masks.causal_mask`) lets it see the ``L + t`` written ones, and
``s^t [h; c]`` is one ``(B, 1, W) @ (B, W, 2H)`` matmul. The LSTM cell's input half
``W_ih x_t + b`` is one product for the whole window, as ``nn.LSTM`` does.

The backward runs the recurrence in reverse, one step at a time (step ``t`` needs the
gradients of every later step), and keeps only what is sequential inside the loop: the
gradients of the states, of the gates ``(B, n, 4H)`` and of the queries ``(B, n, A)``. The
weight gradients are then one product each over the whole window (``W_ih``, ``W_hh``, ``W_h̃``
of the queries, ``W_h`` of the keys); ``W_x`` and the embeddings get theirs by autograd
outside. The additive score's own backward is
:meth:`~attnlab.attention.scoring.AdditiveScore.hidden_grad`. The products by ``W_hh`` at every
step and the window's products go through oneDNN's prepacked inner product where it is faster
(:func:`~attnlab.attention.linear.prepack`, :func:`~attnlab.attention.linear.gemm`), as
``nn.LSTM`` itself runs on oneDNN.

Shapes: ``x (B, n, D)``, ``inputs`` ``W_x x_t`` ``(B, n, A)``, the tape before the
window ``h, c (B, L, H)``, ``keys (B, L, A)``, ``summary`` ``h̃`` ``(B, H)`` → the tape after it
``h, c (B, L + n, H)``, ``keys (B, L + n, A)``, ``summary (B, H)`` and the attention rows
``(B, n, W)`` (slot ``j`` of row ``t`` is 0 for ``j >= L + t``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from attnlab.attention.linear import gemm, prepack, product
from attnlab.attention.masks import causal_mask

CHUNK = 16  # a step reads the tape's slots in whole chunks of this many


def reach(seen: int, width: int) -> int:
    """How many slots a step that sees the first ``seen`` reads: ``seen`` rounded up to whole
    :data:`CHUNK` s (the mask blocks the rest), at most ``width``."""
    return min(width, -(-seen // CHUNK) * CHUNK)


class LSTMNWindow(torch.autograd.Function):
    """``apply(layer, x, inputs, h, c, keys, summary, w_ih, bias, w_hh, w_q, w_k, w_v)``: see the module
    doc. ``layer`` is the :class:`~attnlab.models.lstmn.LSTMNLayer` (its ``read`` and ``score``);
    the weights come in as tensors so that autograd hands their gradients back."""

    @staticmethod
    def forward(ctx: Any, layer: nn.Module, x: Tensor, inputs: Tensor, h: Tensor, c: Tensor,
                keys: Tensor, summary: Tensor, w_ih: Tensor, bias: Tensor, w_hh: Tensor, w_q: Tensor,
                w_k: Tensor, w_v: Tensor) -> tuple[Tensor, ...]:
        B, n, _ = x.shape  # noqa: N806
        gates_x = gemm(x.flatten(0, 1), w_ih.t()).add_(bias).view(B, n, -1)  # W_ih x_t + b, every t
        L, H = h.shape[1], h.shape[2]  # noqa: N806
        width = L + n - 1  # slots any step of this window reads
        states = gates_x.new_zeros(B, L + n, 2 * H)  # the tape [h; c]; 0 × unwritten must be 0
        states[:, :L, :H], states[:, :L, H:] = h, c
        tape_keys = gates_x.new_zeros(B, L + n, keys.shape[-1])  # W_h h_i
        tape_keys[:, :L] = keys
        allowed = causal_mask(n, width, device=gates_x.device)  # (n, W): step t sees j < L + t
        queries, rows, features, gates, mixed = [summary], [], [], [], []  # one entry a step
        packed = prepack(w_hh, summary)  # W_hh in oneDNN's layout where that is faster
        for t in range(n):
            w = reach(L + t, width)
            mix, p, z = layer.read(tape_keys[:, :w], states[:, :w], queries[t], inputs[:, t],
                                   allowed[t, :w])  # eqs. 13-15: [h̃_t; c̃_t], s^t, tanh(...)
            pre = product(mix[:, :H], w_hh, packed).add_(gates_x[:, t])  # eq. 16's gates
            act = pre.sigmoid()
            act[:, 2 * H : 3 * H] = pre[:, 2 * H : 3 * H].tanh()
            i, f, g, o = act.chunk(4, 1)
            c_t = torch.addcmul(f * mix[:, H:], i, g, out=states[:, L + t, H:])
            h_t = torch.mul(o, torch.tanh(c_t), out=states[:, L + t, :H])
            tape_keys[:, L + t] = layer.score.prepare(h_t)
            queries.append(mix[:, :H])
            rows.append(p)
            features.append(z)
            gates.append(act)
            mixed.append(mix)
        square = gates_x.new_zeros(B, n, width)
        for t, p in enumerate(rows):
            square[:, t, : p.shape[-1]] = p
        ctx.layer, ctx.sizes, ctx.steps = layer, (L, H), (rows, features, gates, mixed)
        read_by = gates_x.new_zeros(B, L + n, n)  # slot j was read by step t with weight [j, t]
        read_by[:, :width] = square.transpose(1, 2)
        ctx.save_for_backward(x, inputs, w_ih, w_hh, w_q, w_k, states, tape_keys, torch.stack(queries, 1),
                              read_by)
        ctx.mark_non_differentiable(square)
        return (states[..., :H].contiguous(), states[..., H:].contiguous(), tape_keys.clone(),
                queries[n].clone(), square)

    @staticmethod
    def backward(ctx: Any, d_h: Tensor | None, d_c: Tensor | None, d_keys: Tensor | None,
                 d_summary: Tensor | None, _rows: Tensor | None) -> tuple[Tensor | None, ...]:
        x, inputs, w_ih, w_hh, w_q, w_k, states, tape_keys, queries, read_by = ctx.saved_tensors
        (L, H), score = ctx.sizes, ctx.layer.score  # noqa: N806
        rows, features, gates, mixed = ctx.steps
        n = len(rows)
        d_states = torch.zeros_like(states)  # from outside; the reads' part is read_by @ d_mixes
        if d_h is not None:
            d_states[..., :H] += d_h
        if d_c is not None:
            d_states[..., H:] += d_c
        d_mixes = states.new_zeros(states.shape[0], n, 2 * H)  # d [h̃_t; c̃_t]
        d_tape_keys = torch.zeros_like(tape_keys) if d_keys is None else d_keys.clone()
        d_query = torch.zeros_like(queries[:, 0]) if d_summary is None else d_summary.clone()
        d_gates, d_queries, d_w_v = [], [], 0
        by_column = states.transpose(1, 2).contiguous()  # (B, 2H, L + n): d s^t as a row-vector product
        w_hh_t = w_hh.t().contiguous()  # (H, 4H): d h̃ = d gates W_hh
        packed = prepack(w_hh_t, d_query)
        for t in reversed(range(n)):
            slot = L + t  # every step that reads this slot is done: its gradient is whole
            d_slot = d_states[:, slot] + torch.bmm(read_by[:, slot, None, t + 1 :], d_mixes[:, t + 1 :])[:, 0]
            d_h_t = torch.addmm(d_slot[:, :H], d_tape_keys[:, slot], w_k)
            i, f, g, o = gates[t].chunk(4, 1)
            tanh_c = torch.tanh(states[:, slot, H:])
            d_c_t = d_slot[:, H:] + d_h_t * o * (1 - tanh_c * tanh_c)
            d_act = torch.cat([d_c_t * g, d_c_t * mixed[t][:, H:], d_c_t * i, d_h_t * tanh_c], 1)
            slope = gates[t] * (1 - gates[t])  # σ' = σ (1 - σ); tanh' = 1 - tanh² for g
            slope[:, 2 * H : 3 * H] = 1 - g * g
            d_gates.append(d_act * slope)
            d_mix = d_mixes[:, t]  # (B, 2H)
            torch.add(d_query, product(d_gates[-1], w_hh_t, packed), out=d_mix[:, :H])
            torch.mul(d_c_t, f, out=d_mix[:, H:])
            p = rows[t]  # (B, w)
            w = p.shape[-1]
            d_p = torch.bmm(d_mix.unsqueeze(1), by_column[:, :, :w]).squeeze(1)  # eq. 15
            d_scores = p * (d_p - (p * d_p).sum(-1, keepdim=True))  # eq. 14's softmax
            d_hidden, d_v = score.hidden_grad(d_scores.unsqueeze(1), features[t])  # eq. 13
            d_w_v = d_w_v + d_v
            d_hidden = d_hidden[:, 0]  # (B, w, A); 0 on the slots step t does not see
            d_tape_keys[:, :w] += d_hidden
            d_queries.append(d_hidden.sum(1))  # W_h̃ h̃_{t-1} + W_x x_t
            d_query = d_queries[-1] @ w_q
        d_gates, d_queries = torch.stack(d_gates[::-1], 1), torch.stack(d_queries[::-1], 1)
        flat = (lambda m: m.flatten(0, 1))  # noqa: E731
        d_g = flat(d_gates)  # (B n, 4H)
        d_x = gemm(d_g, w_ih).view_as(x)
        d_w_ih, d_w_hh = gemm(d_g.t(), flat(x)), gemm(d_g.t(), flat(queries[:, 1:]))
        d_w_q = flat(d_queries).t() @ flat(queries[:, :n])
        d_w_k = flat(d_tape_keys[:, L:]).t() @ flat(states[:, L:, :H])
        d_before = d_states[:, :L] + read_by[:, :L] @ d_mixes  # (B, L, 2H): the tape carried in
        return (None, d_x, d_queries, d_before[..., :H], d_before[..., H:], d_tape_keys[:, :L], d_query,
                d_w_ih, d_g.sum(0), d_w_hh, d_w_q, d_w_k, d_w_v)
