"""The RankRC objective as closures over the pairwise operators, and its curvature models.

The objective (seed 000 eq. 13; general R-subset eq. 11), with ``f = K_{·R} β``::

    F(β) = 1/(m+ m−) Σ_{i∈+} Σ_{j∈−} ℓ(f_i − f_j) + (λ/2) βᵀ K_RR β

:func:`objective_closures` gives the value/gradient and Hessian-vector product of ``F`` from one
product ``f = K β``, the sorted windows of :mod:`jaxrank.pairwise` and one product ``g_f @ K`` (the
hot path, docs/design.md §3); :func:`hessian_diagonal` the diagonal the paper's Jacobi
preconditioner uses (seed 000, footnote 2); :func:`pair_curvature` and :func:`moment_gram` the two
parts of the spectral preconditioner's Hessian model (:mod:`jaxrank._fitting`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import kernels as _kernels
from jaxrank import pairwise
from jaxrank._precision import HIGHEST as _HI
from jaxrank.losses import PiecewiseQuadratic

__all__ = [
    "hessian_diagonal",
    "inverse_pair_count",
    "moment_gram",
    "objective_closures",
    "pair_curvature",
]


_mm = functools.partial(jnp.matmul, precision=_HI)


def hessian_diagonal(
    K, Krr, lam, w: pairwise.Windows, loss, n_pos, n_neg, block: int | None = None, sizes=None,
    inv_pairs=None,
):  # fmt: skip
    """``diag ∇²F(β)`` from a step's windows: the Jacobi preconditioner (seed 000, footnote 2).

    With ``k_i`` the rows of ``K_{·R}`` and Q the quadratic-piece pairs (docs/design.md §3)::

        diag H = 2q/(m+ m−) Σ_{(i,j)∈Q} (k_i − k_j)² + λ diag K_RR
               = 2q/(m+ m−) [Σ_i nq_i k_i² + Σ_j n_j k_j² − 2 Σ_j k_j ∘ Σ_{i∈Q(j)} k_i]
                 + λ diag K_RR

    The window sums ``Σ_{i∈Q(j)} k_i`` are differences of prefix sums over the m+ sorted
    positive rows (a small ``(m+ + 1, |R|)`` table); everything else is one pass over ``K`` in
    row blocks (``lax.map``), so no ``(m, |R|)`` temporary is formed. Cost ≈ one product.

    ``sizes``: ``(P, N)`` rows of each class in ``K`` when padded (shape buckets; the counts
    ``n_pos``, ``n_neg`` may then be traced, ``inv_pairs = 1/(n_pos n_neg)`` given): padded
    rows have empty windows and weight 0.

    Returns:
      ``(|R|,)``, floored at ``λ diag K_RR`` (it is a sum of non-negative terms; the floor only
      absorbs rounding).
    """
    K = K.K if isinstance(K, _kernels.DualBlock) else K
    dt = K.dtype
    nb = K.shape[1]
    P, N = (n_pos, n_neg) if sizes is None else sizes
    pad = K.shape[0] - P - N
    zeros_i = lambda n: jnp.zeros((n,), jnp.int32)
    nq_pos = jnp.zeros((P,), jnp.int32).at[w.order].set(w.nq, unique_indices=True)
    weight = jnp.concatenate([nq_pos, w.b - w.a, zeros_i(pad)]).astype(dt)
    # positives and padding rows get the empty window [0, 0)
    a = jnp.concatenate([zeros_i(P), w.a, zeros_i(pad)])
    b = jnp.concatenate([zeros_i(P), w.b, zeros_i(pad)])
    P = jnp.concatenate([jnp.zeros((1, nb), dt), jnp.cumsum(K[w.order], axis=0)])

    def chunk(args):
        Kc, wc, ac, bc = args
        return jnp.matmul(wc, Kc * Kc, precision=_HI) - 2 * jnp.sum(Kc * (P[bc] - P[ac]), axis=0)

    block = block or K.shape[0]
    C = K.shape[0] // block
    parts = jax.lax.map(
        chunk,
        (K.reshape(C, block, nb), weight.reshape(C, block), a.reshape(C, block),
         b.reshape(C, block)),
    )  # fmt: skip
    reg = jnp.asarray(lam, dt) * jnp.diag(Krr)
    scale = (
        inverse_pair_count(n_pos, n_neg, dt) if inv_pairs is None else jnp.asarray(inv_pairs, dt)
    )
    data = 2 * jnp.asarray(loss.q, dt) * scale * jnp.sum(parts, axis=0)
    return reg + jnp.maximum(data, 0)


def objective_closures(
    K,
    Krr,
    lam,
    loss: PiecewiseQuadratic,
    n_pos,
    n_neg,
    block: int | None = None,
    jacobi: bool = False,
    sizes: tuple[int, int] | None = None,
    inv_pairs=None,
):
    """``(fun, hvp)`` of the R-subset objective for :func:`~jaxrank.solver.trust_ncg`.

    Args:
      K: ``(m_pad, |R|)`` kernel block, rows ordered [positives; negatives; padding].
      Krr: ``(|R|, |R|)`` basis Gram matrix.
      lam: regulariser λ.
      loss: piecewise-quadratic pairwise loss.
      n_pos, n_neg: class sizes (rows beyond ``n_pos + n_neg`` are padding).
      block: rows per block of the two-level transpose product
        (:func:`~jaxrank.kernels.rmatvec`; must divide ``m_pad``); ``None``: one plain product.

      jacobi: also return the Hessian diagonal (:func:`hessian_diagonal`) with each point.
      sizes: ``(P, N)``, the rows each class occupies in ``K`` when the classes are padded to
        shape buckets (:mod:`jaxrank._buckets`): rows [positives (``n_pos`` real, ``P − n_pos``
        padding); negatives likewise; padding]. The counts may then be traced (one compiled
        program serves every count of a bucket); padded rows enter no pair and no sum
        (:func:`jaxrank.pairwise.value_and_grad` with counts). ``None``: ``(n_pos, n_neg)``.
      inv_pairs: ``1/(n_pos n_neg)`` when the counts are traced (default: formed from them).

    Returns:
      ``fun(β) -> (F, ∇F, (windows, diag))`` and ``hvp((windows, diag), v) -> ∇²F v``; each
      costs two products with ``K`` (``K @ v`` and ``g @ K``, never ``K.T @ g``: docs/design.md §5);
      ``diag`` is ``None`` unless ``jacobi``.
    """
    dt = K.dtype
    scale = (
        inverse_pair_count(n_pos, n_neg, dt) if inv_pairs is None else jnp.asarray(inv_pairs, dt)
    )
    lam = jnp.asarray(lam, dt)
    P, N = (n_pos, n_neg) if sizes is None else sizes
    counts = () if sizes is None else (n_pos, n_neg)
    static = dict(sizes=(int(P), int(N)), block=block, jacobi=jacobi)

    def fun(beta):
        return _value_grad(K, Krr, lam, loss, counts, scale, beta, **static)

    def hvp(lin, v):
        w = lin[0]
        d = _kernels.matmul(K, v)
        hp, hn = pairwise.hvp(w, d[:P], d[P : P + N], loss)
        kv = jnp.matmul(Krr, v, precision=_HI)
        return _rmat(K, hp, hn, scale, block) + lam * kv

    return fun, hvp


def _rmat(K, gp, gn, scale, block):
    """``[g+; g−; 0] · scale @ K``: the data part of the gradient (or of a Hessian product)."""
    dt = K.dtype
    g = jnp.concatenate([gp, gn, jnp.zeros((K.shape[0] - gp.shape[0] - gn.shape[0],), dt)])
    g = g * scale
    if block is None:
        return _kernels.rmatmul(g[None], K)[0]
    return _kernels.rmatvec(g, K, block)


# A module-level jit, not a closure: the solver evaluates ``fun`` for its state's shapes
# (``jax.eval_shape`` at the start) and in every step, from two calls of the problem's
# constructor, so a jitted closure was two functions traced once each; this one is traced once
# for both (same argument types). The pairwise sort's trace is the largest part of a fit's.
@functools.partial(jax.jit, static_argnames=("sizes", "block", "jacobi"))
def _value_grad(K, Krr, lam, loss, counts, scale, beta, *, sizes, block, jacobi):
    P, N = sizes
    f = _kernels.matmul(K, beta)
    value, gp, gn, w = pairwise.value_and_grad(f[:P], f[P : P + N], loss, *counts)
    kb = jnp.matmul(Krr, beta, precision=_HI)
    F = value * scale + 0.5 * lam * jnp.vdot(beta, kb)
    grad = _rmat(K, gp, gn, scale, block) + lam * kb
    diag = None
    if jacobi:
        n_pos, n_neg = counts if counts else sizes
        diag = hessian_diagonal(K, Krr, lam, w, loss, n_pos, n_neg, block, sizes=sizes,
                                inv_pairs=scale)  # fmt: skip
    return F, grad, (w, diag)


def inverse_pair_count(n_pos, n_neg, dt) -> jax.Array:
    """``1/(m+ m−)`` in ``dt``; the counts may be traced ints (their product passes 2³¹ at
    m ≈ 3·10⁶, ρ = 0.1 %: formed in floating point)."""
    if isinstance(n_pos, int) and isinstance(n_neg, int):
        return jnp.asarray(1.0 / (n_pos * n_neg), dt)
    return 1 / (jnp.asarray(n_pos, dt) * jnp.asarray(n_neg, dt))


def pair_curvature(w: pairwise.Windows, loss: PiecewiseQuadratic, n_pairs) -> jax.Array:
    """``ℓ''`` averaged over all pairs: ``2q · #(pairs on the quadratic piece) / n_pairs``.

    The scale ``c`` of the spectral preconditioner's data term (module notes); ``w`` may carry
    leading batch axes (e.g. the per-level windows of the multi-level objective), all summed.
    """
    nq = jnp.sum((w.b - w.a).astype(w.sp.dtype))
    # n_pairs passes 2³¹ from m ≈ 3·10⁶ at ρ = 0.1 %: a float, not an int32 argument
    return 2 * loss.q * nq / jnp.asarray(n_pairs, nq.dtype)


#: Rows of the block per step of :func:`_centred_gram`: its temporaries are ``2·rows·|R|``
#: numbers instead of ``2·cap·|R|`` (at |R| = 2048, 32 MiB instead of 512 MiB in float64).
_GRAM_ROWS = 1024


def _centred_gram(K, rows: np.ndarray, w: jax.Array, mu: jax.Array) -> jax.Array:
    """``Σ_i w_i² (k_i − μ)(k_i − μ)ᵀ`` over the block rows ``rows`` (host indices), summed
    ``_GRAM_ROWS`` rows at a time (``lax.scan``), so the rows taken from ``K`` never exist
    all at once: this Gram matrix is built next to the stored block, and a copy of the strided
    rows would be a large part of a fit's memory beyond the block itself."""
    n = rows.size
    step = min(n, _GRAM_ROWS)
    n_steps = -(-n // step)
    pad = n_steps * step - n
    # padded steps take row rows[0] with weight 0: they add nothing
    idx = jnp.asarray(np.concatenate([rows, np.full(pad, rows[0])]).reshape(n_steps, step),
                      jnp.int32)  # fmt: skip
    wp = jnp.concatenate([w, jnp.zeros(pad, w.dtype)]).reshape(n_steps, step)

    def add(acc, part):
        i, wi = part
        Kc = (_kernels.take_rows(K, i) - mu) * wi[:, None]
        return acc + _mm(Kc.T, Kc), None

    acc = jnp.zeros((mu.shape[0], mu.shape[0]), mu.dtype)
    if n_steps == 1:  # one step: no loop (small blocks, the common case)
        return add(acc, (idx[0], wp[0]))[0]
    return jax.lax.scan(add, acc, (idx, wp))[0]


def moment_gram(K, counts, pairs, *, sizes=None, starts=None, cap: int = 16384) -> jax.Array:
    """``G = Σ_{(r,s)∈pairs} Σ_{i∈r, j∈s} (k_i − k_j)(k_i − k_j)ᵀ / Σ_{(r,s)} m_r m_s``.

    The data Hessian of a pairwise objective with every pair on a unit-curvature piece. With the
    per-group means ``μ_g`` and covariances ``C_g`` of the kernel rows ``k_i``::

        Σ_{i∈r, j∈s} (k_i − k_j)(k_i − k_j)ᵀ = m_r m_s (C_r + C_s + (μ_r − μ_s)(μ_r − μ_s)ᵀ)

    (for two classes, ``G = C_+ + C_− + (μ_+ − μ_−)(μ_+ − μ_−)ᵀ``). ``C_g`` is formed from rows
    centred on ``μ_g`` (no cancellation of large second moments in float32); a group occupying
    more than ``cap`` rows is estimated from ``cap`` evenly strided rows (it only shapes a
    preconditioner), ``μ_g`` is exact. In JAX, so it runs inside the compiled fit.

    Args:
      K: ``(m_pad, |R|)`` kernel block (stored, :class:`~jaxrank.kernels.DualBlock` or
        :class:`~jaxrank.kernels.StreamedBlock`).
      counts: real rows per group (may be traced); ``pairs``: ``(r, s)`` group pairs the
        objective compares.
      sizes: rows each group occupies in ``K`` (static; real rows first); default ``counts``.
      starts: first row of each group in ``K``; default: the groups stored consecutively from
        row 0.
      cap: most rows per group in ``C_g``.

    Returns:
      ``(|R|, |R|)`` in ``K``'s dtype.
    """
    sizes = tuple(int(c) for c in (counts if sizes is None else sizes))
    if starts is None:
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    starts = [int(v) for v in starts]
    dt = K.dtype
    m_rows = K.shape[0]
    row = jnp.arange(m_rows, dtype=jnp.int32)
    counts = [jnp.asarray(c, jnp.int32) for c in counts]
    ind = jnp.stack([(row >= s0) & (row < s0 + c) for s0, c in zip(starts, counts, strict=True)])
    mcount = [jnp.maximum(c, 1).astype(dt) for c in counts]
    S1 = _kernels.rmatmul(ind.astype(dt), K)
    mu = [S1[g] / mcount[g] for g in range(len(counts))]
    C = []
    for g, (s0, size) in enumerate(zip(starts, sizes, strict=True)):
        take = min(size, cap)
        rows = s0 + (np.arange(take, dtype=np.int64) * size) // take
        w = (jnp.asarray(rows - s0, jnp.int32) < counts[g]).astype(dt)
        C.append(_centred_gram(K, rows, w, mu[g]) / jnp.maximum(jnp.sum(w), 1))
    G = jnp.zeros_like(C[0])
    total = jnp.zeros((), dt)
    for r, s_ in pairs:
        w_rs = mcount[r] * mcount[s_]
        delta = mu[r] - mu[s_]
        G = G + w_rs * (C[r] + C[s_] + jnp.outer(delta, delta))
        total = total + w_rs
    return G / total
