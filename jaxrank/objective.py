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

from jaxrank import _buckets, pairwise
from jaxrank import kernels as _kernels
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
    pad = K.shape[0] - P - N

    def rmat(gp, gn):
        g = jnp.concatenate([gp, gn, jnp.zeros((pad,), dt)]) * scale
        if block is None:
            return _kernels.rmatmul(g[None], K)[0]
        return _kernels.rmatvec(g, K, block)

    def fun(beta):
        f = _kernels.matmul(K, beta)
        value, gp, gn, w = pairwise.value_and_grad(f[:P], f[P : P + N], loss, *counts)
        kb = jnp.matmul(Krr, beta, precision=_HI)
        F = value * scale + 0.5 * lam * jnp.vdot(beta, kb)
        grad = rmat(gp, gn) + lam * kb
        diag = None
        if jacobi:
            diag = hessian_diagonal(K, Krr, lam, w, loss, n_pos, n_neg, block, sizes=(P, N),
                                    inv_pairs=inv_pairs)  # fmt: skip
        return F, grad, (w, diag)

    def hvp(lin, v):
        w = lin[0]
        d = _kernels.matmul(K, v)
        hp, hn = pairwise.hvp(w, d[:P], d[P : P + N], loss)
        kv = jnp.matmul(Krr, v, precision=_HI)
        return rmat(hp, hn) + lam * kv

    return fun, hvp


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


def moment_gram(K: jax.Array, counts, pairs, cap: int = 16384, starts=None) -> np.ndarray:
    """``G = Σ_{(r,s)∈pairs} Σ_{i∈r, j∈s} (k_i − k_j)(k_i − k_j)ᵀ / Σ_{(r,s)} m_r m_s``.

    The data Hessian of a pairwise objective with every pair on a unit-curvature piece, from
    per-group moments ``S1_g = Σ_{i∈g} k_i`` and ``S2_g = Σ_{i∈g} k_i k_iᵀ``::

        Σ_{i∈r, j∈s} (k_i − k_j)(k_i − k_j)ᵀ = m_s S2_r + m_r S2_s − S1_r S1_sᵀ − S1_s S1_rᵀ

    (for two classes, ``G = C_+ + C_− + (μ_+ − μ_−)(μ_+ − μ_−)ᵀ``). ``S2_g`` of a group larger
    than ``cap`` rows is estimated from ``cap`` evenly strided rows (it only shapes a
    preconditioner); ``S1_g`` is exact.

    Args:
      K: ``(m_pad, |R|)`` kernel block.
      counts: rows per group; ``pairs``: ``(r, s)`` group pairs the objective compares.
      cap: most rows per group in ``S2_g``.
      starts: first row of each group in ``K``; default: the groups stored consecutively from
        row 0 (padded layouts of shape buckets give their own).

    Returns:
      ``(|R|, |R|)`` float64 host array.
    """
    counts = [int(c) for c in counts]
    if starts is None:
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    starts = [int(v) for v in starts]
    ind = np.zeros((len(counts), K.shape[0]), np.float64)
    for g, (s0, m_g) in enumerate(zip(starts, counts, strict=True)):
        ind[g, s0 : s0 + m_g] = 1.0
    S1 = np.asarray(_jit_rmatmul(_buckets.put(ind, K.dtype), K), np.float64)
    S2 = []
    for s0, m_g in zip(starts, counts, strict=True):
        take = min(m_g, cap)
        rows = s0 + (np.arange(take, dtype=np.int64) * m_g) // take
        # padded to a bucket (weight 0) so that a new group size of the bucket reuses the program
        size = _buckets.bucket(take)
        w = np.zeros(size, np.float64)
        w[:take] = 1.0
        rows = np.concatenate([rows, np.full(size - take, s0)]).astype(np.int32)
        S2_g = _weighted_gram(K, _buckets.put(rows), _buckets.put(w, K.dtype))
        S2.append(np.asarray(S2_g, np.float64) * (m_g / take))
    G = np.zeros_like(S2[0])
    total = 0.0
    for r, s_ in pairs:
        m_r, m_s = float(counts[r]), float(counts[s_])
        cross = np.outer(S1[r], S1[s_])
        G += m_s * S2[r] + m_r * S2[s_] - cross - cross.T
        total += m_r * m_s
    return G / total


@jax.jit
def _jit_rmatmul(G, K):
    return _kernels.rmatmul(G, K)


#: Rows of ``K`` gathered at a time by :func:`moment_gram`'s second moments.
_GRAM_ROWS = 1024


@jax.jit
def _weighted_gram(K, rows, w):
    # Σ_t w_t k_t k_tᵀ over the rows ``rows`` of K, _GRAM_ROWS rows at a time, so the gathered
    # rows never exist at once (16384 rows of a 2000-column float64 block are 262 MB, and a
    # block split over processes would hold them on every process)
    c = min(rows.shape[0], _GRAM_ROWS)
    pad = -rows.shape[0] % c
    rows, w = jnp.pad(rows, (0, pad)), jnp.pad(w, (0, pad))  # weight 0: no contribution

    def step(acc, part):
        Ks = _kernels.take_rows(K, part[0])
        return acc + _mm((Ks * part[1][:, None]).T, Ks), None

    init = jnp.zeros((K.shape[1], K.shape[1]), K.dtype)
    return jax.lax.scan(step, init, (rows.reshape(-1, c), w.reshape(-1, c)))[0]
