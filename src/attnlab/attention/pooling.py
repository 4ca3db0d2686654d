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

Shapes: scalar data is ``queries (n_q,)``, ``keys (n_k,)``; vector data is ``queries (n_q, d)``,
``keys (n_k, d)``. Values are ``(n_k,)`` or ``(n_k, d_v)``; the output is ``(n_q,)`` or
``(n_q, d_v)`` accordingly and the weights are ``(n_q, n_k)``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

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

    Returns:
        ``(n_q,)`` or ``(n_q, d_v)`` pooled values, or ``(output, weights)``.
    """
    q, k = _check_database(queries, keys, values)  # (n_q, d), (n_k, d)
    check_positive("bandwidth", bandwidth)
    kernel_fn = _resolve_kernel(kernel)
    diff = q[:, None, :] - k[None, :, :]  # (n_q, n_k, d)
    if kernel_fn is gaussian_kernel:
        scores = -(diff * diff).sum(-1) / (2 * bandwidth**2)  # (n_q, n_k)
        return _pool(torch.softmax(scores, dim=-1), values, return_weights)
    u = torch.linalg.vector_norm(diff, dim=-1) / bandwidth  # (n_q, n_k)
    raw = kernel_fn(u)  # (n_q, n_k)
    if not isinstance(raw, Tensor) or raw.shape != u.shape:
        got = shape_str(raw.shape) if isinstance(raw, Tensor) else type(raw).__name__
        raise ValueError(f"kernel must return a tensor of shape {shape_str(u.shape)}, got {got}")
    if (raw < 0).any():
        raise ValueError("kernel must return non-negative weights, got a negative value")
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
