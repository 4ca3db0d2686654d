"""Attention pooling over a database of (key, value) pairs (López et al. (Attention Mechanisms),
"Queries, Keys and Values").

Given a database ``D = {(k_1, v_1), …, (k_m, v_m)}`` and a query ``q``, attention pooling is

    Attention(q, D) = Σ_i α(q, k_i) v_i                                              (eq. 2)

with weights ``α`` that are non-negative and sum to one (eq. 3). The deck's special cases:

* **kernel weights** (Nadaraya–Watson regression):
  ``α(q, k_i) = K(‖q − k_i‖ / h) / Σ_j K(‖q − k_j‖ / h)`` for a kernel ``K`` and bandwidth
  ``h`` — :func:`nadaraya_watson` with :func:`gaussian_kernel`, :func:`boxcar_kernel` or
  :func:`epanechnikov_kernel` (López et al. (Attention Mechanisms), "Attention Scoring Functions");
* **average pooling**: ``α = 1/m`` for every key — :func:`average_pooling`;
* **database lookup**: one weight is 1, all others 0 — :func:`database_lookup`.

Parametric attention pooling learns the bandwidth instead of choosing it:
:class:`ParametricAttentionPooling` holds ``w = log h`` as a parameter and
:func:`fit_bandwidth` trains it by gradient descent on the leave-one-out error over the
database (each ``v_i`` predicted from the other ``m − 1`` pairs, :func:`leave_one_out_mask`),
the recipe of Zhang et al., *Dive into Deep Learning*, §11.2 "Attention Pooling by Similarity"
that the deck's kernels come from.

Shapes: scalar data is ``queries (n_q,)``, ``keys (n_k,)``; vector data is ``queries (n_q, d)``,
``keys (n_k, d)``. Values are ``(n_k,)`` or ``(n_k, d_v)``; the output is ``(n_q,)`` or
``(n_q, d_v)`` accordingly and the weights are ``(n_q, n_k)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from attnlab.attention.masks import masked_softmax
from attnlab.validation import check_floating, check_positive, check_rank, check_tensor, shape_str

Kernel = Callable[[Tensor], Tensor]


def gaussian_kernel(u: Tensor) -> Tensor:
    """Gaussian kernel ``K(u) = exp(−u²/2)`` of the scaled distance ``u = ‖q − k‖ / h``.

    López et al. (Attention Mechanisms), "Gaussian Attention Function":
    ``α(q, k_i) = exp(−½ ‖q − k_i‖²)`` (``h = 1``).
    """
    return torch.exp(-0.5 * u * u)


def boxcar_kernel(u: Tensor) -> Tensor:
    """Boxcar kernel ``K(u) = 1 if |u| ≤ 1 else 0`` of the scaled distance ``u = ‖q − k‖ / h``.
    López et al. (Attention Mechanisms), "Boxcar Attention Function":
    ``α(q, k_i) = 1 if ‖q − k_i‖ ≤ 1``. Pooling with it averages the values of every key within
    distance ``h`` of the query.
    """
    return (u.abs() <= 1).to(u.dtype)


def epanechnikov_kernel(u: Tensor) -> Tensor:
    """The "Epanechnikov" kernel of López et al. (Attention Mechanisms), ``K(u) = max(0, 1 − |u|)``
    of ``u = ‖q − k‖ / h``.

    This is the deck's formula ``α(q, k_i) = max(0, 1 − ‖q − k_i‖)``. (Textbooks call that
    shape the *triangular* kernel and write Epanechnikov as ``¾ max(0, 1 − u²)``; both have
    support ``|u| ≤ 1`` and constant factors cancel in the normalisation.)
    """
    return torch.clamp(1.0 - u.abs(), min=0.0)


KERNELS: dict[str, Kernel] = {
    "gaussian": gaussian_kernel,
    "boxcar": boxcar_kernel,
    "epanechnikov": epanechnikov_kernel,
}


def _resolve_kernel(kernel: str | Kernel) -> Kernel:
    if isinstance(kernel, str):
        if kernel not in KERNELS:
            names = ", ".join(repr(k) for k in KERNELS)
            raise ValueError(f"kernel must be one of {names} or a callable, got {kernel!r}")
        return KERNELS[kernel]
    if not callable(kernel):
        raise ValueError(f"kernel must be a kernel name or a callable, got {type(kernel).__name__}")
    return kernel


def _as_vectors(name: str, x: Tensor) -> Tensor:
    """Check ``x`` is ``(n,)`` scalars or ``(n, d)`` vectors; return ``(n, d)``."""
    check_rank(name, x, (1, 2), "(n,) scalars or (n, d) vectors")
    check_floating(name, x)
    return x[:, None] if x.dim() == 1 else x


def _check_database(queries: Tensor, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
    """Validate the pooling arguments; return queries and keys as ``(n, d)``."""
    for name, t in (("queries", queries), ("keys", keys), ("values", values)):
        check_tensor(name, t)
    q, k = _as_vectors("queries", queries), _as_vectors("keys", keys)  # (n_q, d), (n_k, d)
    if queries.dim() != keys.dim():
        raise ValueError(
            f"queries and keys must both be scalars (n,) or both vectors (n, d), got queries "
            f"{shape_str(queries.shape)} and keys {shape_str(keys.shape)}"
        )
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"keys have width {k.shape[-1]} but queries have width {q.shape[-1]}")
    _check_values(values, k.shape[0])
    if not (queries.dtype == keys.dtype == values.dtype):
        raise ValueError(
            f"queries, keys and values must share a dtype, got {queries.dtype}, {keys.dtype} "
            f"and {values.dtype}"
        )
    return q, k


def _check_values(values: Tensor, n_k: int) -> None:
    check_rank("values", values, (1, 2), "(n_k,) or (n_k, d_v)")
    check_floating("values", values)
    if values.shape[0] != n_k:
        raise ValueError(f"values has length {values.shape[0]} but keys have length {n_k}")


def _check_pooling_mask(mask: Tensor | None, n_q: int, n_k: int) -> None:
    if mask is None:
        return
    check_tensor("mask", mask)
    if mask.dtype != torch.bool:
        raise ValueError(f"mask must be boolean (True = the key may be used), got dtype {mask.dtype}")
    try:
        full = torch.broadcast_shapes(mask.shape, (n_q, n_k))
    except RuntimeError:
        full = None
    if full != torch.Size((n_q, n_k)):
        raise ValueError(f"mask has shape {shape_str(mask.shape)}, which does not broadcast to the "
                         f"weights' shape ({n_q}, {n_k}) (n_q, n_k)")


def _pool(weights: Tensor, values: Tensor, return_weights: bool) -> Tensor | tuple[Tensor, Tensor]:
    """López et al. (Attention Mechanisms) eq. 2: ``Σ_i α(q, k_i) v_i`` for every query at once."""
    out = weights @ values  # (n_q,) or (n_q, d_v)
    return (out, weights) if return_weights else out


def nadaraya_watson(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    kernel: str | Kernel = "gaussian",
    bandwidth: float | Tensor = 1.0,
    return_weights: bool = False,
    *,
    mask: Tensor | None = None,
) -> Tensor | tuple[Tensor, Tensor]:
    """Nadaraya–Watson kernel regression as attention pooling (López et al. (Attention Mechanisms), eqs. 2–3).

    ``f(q) = Σ_i α(q, k_i) v_i`` with ``α(q, k_i) = K(‖q − k_i‖/h) / Σ_j K(‖q − k_j‖/h)``.

    For the Gaussian kernel this is exactly softmax attention with score ``−‖q − k_i‖² / (2h²)``
    (López et al. (Attention Mechanisms), eq. 4 and "Dot Product Attention Function"), and it is
    computed that way so that a small bandwidth never underflows every weight to zero. For
    kernels with bounded support (boxcar, Epanechnikov) a query with no key within ``h`` has
    all-zero weights and a zero output, never NaN.

    Args:
        queries: ``(n_q,)`` scalars or ``(n_q, d)`` vectors.
        keys: ``(n_k,)`` or ``(n_k, d)``, same layout as ``queries``.
        values: ``(n_k,)`` or ``(n_k, d_v)``.
        kernel: ``"gaussian"``, ``"boxcar"``, ``"epanechnikov"`` or a callable ``K(u)`` that
            maps scaled distances ``u ≥ 0`` to non-negative weights of the same shape.
        bandwidth: ``h > 0``; a float, or a 0-d tensor to learn it by gradient descent.
        return_weights: also return the weights ``(n_q, n_k)``.
        mask: optional boolean ``(n_q, n_k)`` (or broadcastable), ``True`` where a key may be
            used (docs/design.md's convention); blocked keys get weight 0, e.g.
            :func:`leave_one_out_mask` to predict each training value from the others.

    Returns:
        ``(n_q,)`` or ``(n_q, d_v)`` pooled values, or ``(output, weights)``.
    """
    q, k = _check_database(queries, keys, values)  # (n_q, d), (n_k, d)
    check_positive("bandwidth", bandwidth)
    kernel_fn = _resolve_kernel(kernel)
    _check_pooling_mask(mask, q.shape[0], k.shape[0])
    diff = q[:, None, :] - k[None, :, :]  # (n_q, n_k, d)
    if kernel_fn is gaussian_kernel:
        scores = -(diff * diff).sum(-1) / (2 * bandwidth**2)  # (n_q, n_k)
        return _pool(masked_softmax(scores, mask), values, return_weights)
    u = torch.linalg.vector_norm(diff, dim=-1) / bandwidth  # (n_q, n_k)
    raw = kernel_fn(u)  # (n_q, n_k)
    if not isinstance(raw, Tensor) or raw.shape != u.shape:
        got = shape_str(raw.shape) if isinstance(raw, Tensor) else type(raw).__name__
        raise ValueError(f"kernel must return a tensor of shape {shape_str(u.shape)}, got {got}")
    if (raw < 0).any():
        raise ValueError("kernel must return non-negative weights, got a negative value")
    if mask is not None:
        raw = torch.where(mask, raw, torch.zeros_like(raw))  # (n_q, n_k): blocked keys weigh 0
    total = raw.sum(-1, keepdim=True)  # (n_q, 1)
    weights = raw / torch.where(total > 0, total, torch.ones_like(total))  # (n_q, n_k)
    return _pool(weights, values, return_weights)


def average_pooling(
    queries: Tensor, values: Tensor, *, return_weights: bool = False
) -> Tensor | tuple[Tensor, Tensor]:
    """Average pooling: ``α(q, k_i) = 1/m`` for every query (López et al. (Attention Mechanisms),
    "Special Cases").

    The baseline that ignores the query: every output is the mean of all values.

    Args:
        queries: ``(n_q,)`` or ``(n_q, d)``; only their number is used.
        values: ``(n_k,)`` or ``(n_k, d_v)``, at least one.
        return_weights: also return the uniform weights ``(n_q, n_k)``.

    Returns:
        ``(n_q,)`` or ``(n_q, d_v)``, or ``(output, weights)``.
    """
    check_tensor("queries", queries)
    check_tensor("values", values)
    n_q = _as_vectors("queries", queries).shape[0]
    check_rank("values", values, (1, 2), "(n_k,) or (n_k, d_v)")
    check_floating("values", values)
    n_k = values.shape[0]
    if n_k == 0:
        raise ValueError("values must hold at least one value to average, got length 0")
    weights = torch.full((n_q, n_k), 1.0 / n_k, dtype=values.dtype, device=values.device)
    return _pool(weights, values, return_weights)


def database_lookup(
    queries: Tensor,
    keys: Tensor,
    values: Tensor,
    *,
    exact: bool = False,
    return_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """One-hot attention: each query gets the value of its nearest key (López et al. (Attention
    Mechanisms), "Special Cases").

    "One of the weights α(q, k_i) is 1, while all others are 0. This is akin to a traditional
    database query." A query equal to a key returns that key's value exactly; ties go to the
    first key. It is the ``h → 0`` limit of :func:`nadaraya_watson` with a Gaussian kernel.

    Args:
        queries, keys, values: as for :func:`nadaraya_watson`.
        exact: raise ``ValueError`` if some query equals no key (a missing database entry)
            instead of returning the nearest key's value.
        return_weights: also return the one-hot weights ``(n_q, n_k)``.

    Returns:
        ``(n_q,)`` or ``(n_q, d_v)``, or ``(output, weights)``.
    """
    q, k = _check_database(queries, keys, values)  # (n_q, d), (n_k, d)
    if k.shape[0] == 0:
        raise ValueError("keys must hold at least one entry to look up, got length 0")
    dist = torch.cdist(q, k, compute_mode="donot_use_mm_for_euclid_dist")  # (n_q, n_k)
    nearest, index = dist.min(dim=-1)  # (n_q,), (n_q,)
    if exact and bool((nearest > 0).any()):
        missing = int((nearest > 0).nonzero()[0, 0])
        raise ValueError(f"queries[{missing}] equals no key (exact=True), nearest distance "
                         f"{float(nearest[missing]):.3g}")
    weights = torch.zeros_like(dist).scatter_(-1, index[:, None], 1.0)  # (n_q, n_k)
    return _pool(weights, values, return_weights)


def leave_one_out_mask(n: int, device: torch.device | None = None) -> Tensor:
    """``(n, n)`` boolean mask, ``True`` off the diagonal: query ``i`` may use every key but its
    own, so each database value is predicted from the other ``n − 1`` pairs."""
    check_positive("n", n)
    return ~torch.eye(n, dtype=torch.bool, device=device)  # (n, n)


class ParametricAttentionPooling(nn.Module):
    """Nadaraya–Watson attention pooling whose bandwidth is learned (López et al. (Attention
    Mechanisms), eq. 2 with kernel weights; Zhang et al., *Dive into Deep Learning*, §11.2).

    The weight of key ``k_i`` for query ``q`` is ``K(‖q − k_i‖ / h) / Σ_j K(‖q − k_j‖ / h)``
    with ``h = exp(w)``: the parameter is ``w = log h``, so every gradient step keeps ``h > 0``.
    The kernel must be differentiable in ``h`` (Gaussian or Epanechnikov; the boxcar's weights
    are piecewise constant in ``h``, so their gradient is 0 almost everywhere).

    Shapes as :func:`nadaraya_watson`: ``queries (n_q,) | (n_q, d)``, ``keys (n_k,) | (n_k, d)``,
    ``values (n_k,) | (n_k, d_v)`` → ``(n_q,) | (n_q, d_v)``. ``dtype`` is the parameter's
    (default: torch's default dtype); give the data's, e.g. ``torch.float64``, so that
    ``log h`` is not rounded to float32.
    """

    def __init__(self, kernel: str = "gaussian", bandwidth: float = 1.0, *,
                 dtype: torch.dtype | None = None) -> None:
        super().__init__()
        if kernel not in ("gaussian", "epanechnikov"):
            raise ValueError(f"kernel must be 'gaussian' or 'epanechnikov' (differentiable in the "
                             f"bandwidth), got {kernel!r}")
        check_positive("bandwidth", bandwidth)
        self.kernel = kernel
        self.log_bandwidth = nn.Parameter(torch.tensor(math.log(bandwidth), dtype=dtype))  # w = log h

    @property
    def bandwidth(self) -> Tensor:
        """``h = exp(w)``, a 0-d tensor (differentiable)."""
        return self.log_bandwidth.exp()

    def forward(
        self, queries: Tensor, keys: Tensor, values: Tensor, *, mask: Tensor | None = None,
        return_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        return nadaraya_watson(queries, keys, values, self.kernel, self.bandwidth,
                               return_weights, mask=mask)

    def leave_one_out_loss(self, keys: Tensor, values: Tensor) -> Tensor:
        """Mean squared error of each ``v_i`` predicted from the other pairs (a 0-d tensor)."""
        pred = self(keys, keys, values, mask=leave_one_out_mask(keys.shape[0], keys.device))
        return ((pred - values) ** 2).mean()  # pred: (n_k,) or (n_k, d_v)


def fit_bandwidth(
    keys: Tensor,
    values: Tensor,
    *,
    kernel: str = "gaussian",
    bandwidth: float = 1.0,
    steps: int = 200,
    lr: float = 0.05,
) -> tuple[ParametricAttentionPooling, list[float]]:
    """Learn the bandwidth of :class:`ParametricAttentionPooling` on a database by gradient
    descent (Adam on ``w = log h``, full batch) on its leave-one-out squared error.

    Leaving each pair out is what makes the fit meaningful: with its own key in the database a
    query is matched best by ``h → 0`` (it returns its own value: the training error is 0).

    Args:
        keys: ``(m,)`` or ``(m, d)``, at least 2.
        values: ``(m,)`` or ``(m, d_v)``.
        kernel: ``"gaussian"`` or ``"epanechnikov"``.
        bandwidth: the starting ``h``.
        steps: gradient steps.
        lr: Adam's learning rate on ``log h``.

    Returns:
        the trained module (in ``keys``' dtype) and the leave-one-out loss before each step.
    """
    _check_database(keys, keys, values)
    if keys.shape[0] < 2:
        raise ValueError(f"keys must hold at least 2 pairs to leave one out, got {keys.shape[0]}")
    check_positive("steps", steps)
    check_positive("lr", lr)
    model = ParametricAttentionPooling(kernel, bandwidth, dtype=keys.dtype).to(keys.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = model.leave_one_out_loss(keys, values)
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return model, losses
