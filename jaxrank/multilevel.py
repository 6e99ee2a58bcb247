"""Multi-level (ordinal) RankRC: ``fit_multilevel`` and the ``make_ordinal`` generator (seed 003).

Ordinal levels ``r = 0, 1, …, R−1`` (level 0 the lowest; on rare-class data the majority),
``m_r`` rows at level ``r`` (the paper numbers the levels ``0 … R``; here ``R`` counts them).
Seed 003, Sec. 5, eq. (47) (every row a basis function: multi-level RankSVM) and eq. (48)
(basis = the non-majority rows, ``y_i ≠ 0``: multi-level RankRC) minimise, with
``f = K_{·R} β``::

    F(β) = 1/(Σ_{r<s} m_r m_s) Σ_{s≥1} Σ_{i: y_i=s} Σ_{j: y_j<s} ℓ(f_i − f_j) + (λ/2) βᵀ K_RR β

The paper, after (47): "For each r value, the objective in (47) reduces to a biclass ranking
problem with r as the positive class label and all examples with label less than r as the
negative class. Thus Problem (47) can be seen as combining R separate biclass ranking problems
using the same hypothesis", and after (48): it is solved "by noting the gradient and Hessian of the
loss function is simply the sum of R biclass ranking loss functions". Every pair from two
different levels counts once; the normaliser is the denominator of the paper's MAUC (the display
after eq. 48, :func:`jaxrank.metrics.mauc`): with the 0/1 loss ``𝕀[f_i ≤ f_j]`` in place of ℓ
the loss term would be ``1 − MAUC``.

Implementation (docs/design.md §3): rows are reordered by level, ascending, so the negatives of
level ``s`` ("all lower levels") are the prefix ``[0, o_s)`` of the reordered rows and its positives
the slice ``[o_s, o_{s+1})``, with ``o_s = Σ_{r<s} m_r``; the level counts are static. Each of the
``R − 1`` biclass terms is the sorted-window operator :func:`jaxrank.pairwise.value_and_grad` /
:func:`jaxrank.pairwise.hvp` (reused, not copied); the terms are padded to common shapes and run
as one ``jax.vmap`` of those operators (their native batched code), and the score-space
gradients and Hessian-vector products are summed before the single product with ``K``; the
batched form compiles in the same time for any ``R`` (a loop over the levels did not: docs/design.md
§12).
Each term sorts only its positive level (the small side), so a Newton step costs
``O(Σ_s (m_s + o_s) log m_s) ≤ O(R · m log m)`` and ``O(R · m)`` memory for the windows, plus two
products with ``K``; the ``Σ_{r<s} m_r m_s`` pairs are never formed.

Kernel block, memory budget, trust-region Newton-CG, preconditioner (spectral or ``K_RR + δI``),
float32 gradient floor and λ grids (``path="batch"``: vmapped; ``"warm"``: large to small λ,
each solve warm-started at the previous one) are those of :func:`jaxrank.fit.fit`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import kernels as _kernels
from jaxrank import pairwise
from jaxrank._fitting import check_fit_options, fit_rows
from jaxrank._precision import HIGHEST as _HI
from jaxrank._random import random_permutation, resolve_key, standard_normal
from jaxrank._validation import (
    check_int,
    check_lam,
    check_positive,
    check_real,
    check_X,
    label_vector,
)
from jaxrank.losses import PiecewiseQuadratic
from jaxrank.model import RankModel
from jaxrank.objective import pair_curvature

__all__ = [
    "check_levels",
    "fit_multilevel",
    "hvp",
    "make_ordinal",
    "n_pairs",
    "objective_closures",
    "value_and_grad",
]


# --------------------------------------------------------------------------------------------
# validation of ordinal labels
# --------------------------------------------------------------------------------------------


def check_levels(levels, majority=0, *, n: int | None = None):
    """Check ordinal labels; return ``(values, index, counts)``.

    Only the order of the level values matters (as for :func:`jaxrank.metrics.mauc`): the levels
    are the distinct values present, so each is non-empty by construction; gaps between values
    carry no pairs and change nothing.

    Args:
      levels: ``(n,)`` integer labels (or integral floats), at least two distinct values.
      majority: the value of the majority level, whose rows are left out of the basis (eq. 48);
        it must be present in ``levels``.
      n: the expected length (rows of ``X``).

    Returns:
      ``(values, index, counts, majority_index)``: the sorted distinct levels, the ``(n,)`` int64
      rank of each row's level in ``values``, the ``(R,)`` rows per level, and the rank of the
      majority level in ``values``.

    Raises:
      ValueError: not 1-D, empty, length mismatch, not integer-valued (bool, strings, non-integral
        floats, NaN/inf), fewer than two levels, or ``majority`` is not an integer or not present.

    Example:
      >>> import numpy as np
      >>> from jaxrank.multilevel import check_levels
      >>> values, index, counts, majority = check_levels(np.array([0, 2, 2, 0, 0, 5]))
      >>> values.tolist(), index.tolist(), counts.tolist(), majority
      ([0, 2, 5], [0, 1, 1, 0, 0, 2], [3, 2, 1], 0)
    """
    arr = label_vector(levels, "levels")
    if n is not None and arr.shape[0] != n:
        raise ValueError(
            f"X and levels have different lengths: X has {n} rows, levels has {arr.shape[0]}."
        )
    if arr.dtype.kind not in "iuf":
        raise ValueError(
            f"levels must be integer ordinal labels, got dtype {arr.dtype}"
            + (" (for two classes use jaxrank.fit)." if arr.dtype.kind == "b" else ".")
        )
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ValueError("levels contain NaN or infinite values.")
        if not np.all(arr == np.round(arr)):
            raise ValueError("levels must be integer ordinal labels; got non-integral values.")
    values, index, counts = np.unique(arr, return_inverse=True, return_counts=True)
    if values.size < 2:
        raise ValueError(
            f"levels has one level only ({values[0]!r}); a multi-level ranker needs at least two "
            "ordinal levels."
        )
    if isinstance(majority, bool | np.bool_):
        raise ValueError(f"majority must be an integer level value, got {majority!r}.")
    try:
        maj = operator.index(majority)
    except TypeError:
        if isinstance(majority, float | np.floating) and float(majority).is_integer():
            maj = int(majority)
        else:
            raise ValueError(
                f"majority must be an integer level value, got {majority!r}."
            ) from None
    if maj not in values:
        shown = ", ".join(str(v) for v in values[:8]) + (" ..." if values.size > 8 else "")
        raise ValueError(
            f"majority={maj} is not one of the levels ({shown}); pass majority= the value of the "
            "majority (lowest) level."
        )
    index = index.reshape(-1).astype(np.int64)
    return values, index, counts.astype(np.int64), int(np.searchsorted(values, maj))


def _offsets(counts) -> tuple[int, ...]:
    return tuple(int(v) for v in np.concatenate([[0], np.cumsum(counts)]))


# --------------------------------------------------------------------------------------------
# the multi-level pairwise loss in score space (sums of biclass sorted-window operators)
# --------------------------------------------------------------------------------------------


class _Layout(NamedTuple):
    """Static index tables of the ``R − 1`` biclass terms, padded to common shapes.

    Built from the rows each level occupies (``sizes``; with shape buckets, the padded level
    sizes); which of those rows are real is decided by the (possibly traced) level counts in
    :func:`_masks`."""

    offsets: tuple[int, ...]  # o_s = Σ_{r<s} S_r, s = 0 … R
    pos_idx: np.ndarray  # (R−1, P) rows of level s (padded with row 0), P = max_{s≥1} S_s
    neg_level: np.ndarray  # (N,) level of row j < N = o_{R−1}
    neg_local: np.ndarray  # (N,) j − o_{level(j)}: the row's index within its level


@functools.lru_cache(maxsize=64)
def _layout(sizes: tuple[int, ...]) -> _Layout:
    if len(sizes) < 2 or min(sizes) < 1:
        raise ValueError(f"counts must hold at least two level sizes, each >= 1, got {sizes}.")
    o = _offsets(sizes)
    S = np.asarray(sizes[1:], np.int64)
    P, N = int(S.max()), o[-2]
    k = np.arange(P)
    pos_idx = np.where(k[None, :] < S[:, None], np.asarray(o[1:-1])[:, None] + k[None, :], 0)
    level = np.repeat(np.arange(len(sizes) - 1), sizes[:-1])
    local = np.arange(N) - np.asarray(o)[level]
    return _Layout(o, pos_idx.astype(np.int32), level.astype(np.int32), local.astype(np.int32))


def _masks(lay: _Layout, counts):
    """``(pos_mask (R−1, P), neg_mask (R−1, N))``: the real entries of each term's positives
    (level s) and negatives (levels < s), from the level counts (static or traced)."""
    c = jnp.asarray(counts, jnp.int32)
    P, N = lay.pos_idx.shape[1], lay.offsets[-2]
    pos_mask = jnp.arange(P, dtype=jnp.int32)[None, :] < c[1:, None]
    below = np.arange(N)[None, :] < np.asarray(lay.offsets[1:-1])[:, None]  # static
    neg_mask = jnp.asarray(below) & (lay.neg_local < c[lay.neg_level])[None, :]
    return pos_mask, neg_mask


def _split(f: jax.Array, lay: _Layout, masks, pad_pos, pad_neg):
    # per level s ≥ 1: positives = level s, negatives = the prefix [0, o_s) of lower levels
    pos_mask, neg_mask = masks
    N = lay.offsets[-2]
    fp = jnp.where(pos_mask, f[lay.pos_idx], pad_pos)
    fn = jnp.where(neg_mask, jnp.broadcast_to(f[:N], neg_mask.shape), pad_neg)
    return fp, fn


def _merge(hp: jax.Array, hn: jax.Array, lay: _Layout, n: int) -> jax.Array:
    # Σ over levels of the per-level score vectors, back onto the level-ordered rows
    o = lay.offsets
    L = len(o) - 2
    pos = jnp.concatenate([hp[s, : o[s + 2] - o[s + 1]] for s in range(L)])  # rows [o_1, o_R)
    neg = jnp.sum(hn, axis=0)  # rows [0, o_{R−1})
    return jnp.pad(neg, (0, n - o[-2])) + jnp.pad(pos, (o[1], n - o[-1]))


def _real_scores(f, lay: _Layout, counts):
    # the scores of real rows, others replaced by a real one (for the extremes)
    c = jnp.asarray(counts, jnp.int32)
    n = lay.offsets[-1]
    level = np.repeat(np.arange(len(lay.offsets) - 1), np.diff(lay.offsets))
    local = (np.arange(n) - np.asarray(lay.offsets)[level]).astype(np.int32)
    real = local < c[level]
    return real, f[:n]


def value_and_grad(f: jax.Array, counts, loss: PiecewiseQuadratic, sizes=None):
    """``L(f) = Σ_{s≥1} Σ_{i: level s} Σ_{j: level < s} ℓ(f_i − f_j)`` and ``∂L/∂f``.

    One :func:`jaxrank.pairwise.value_and_grad` per level ``s ≥ 1`` (positives: level ``s``,
    negatives: every lower level, a prefix of the level-ordered rows), the score gradients
    summed. The ``R − 1`` biclass problems are padded to common shapes and run as one
    ``jax.vmap`` of the pairwise operator (its native batched code), so the traced program, and
    the compile time, do not grow with the number of levels. Padding entries are placed where
    every pair they form lies in the zero piece of ℓ (positives at ``max f + gap``, negatives at
    ``min f − gap``, ``gap ≥ 2``): they add exactly zero to the value, the gradient and
    :func:`hvp`.

    Args:
      f: ``(n,)`` scores of the rows **ordered by level, ascending** (``counts[0]`` rows of the
        lowest level first); rows beyond ``sum(counts)`` are padding (zero gradient).
      counts: sequence of level sizes ``(m_0, …, m_{R−1})``, each ≥ 1; static, or traced when
        ``sizes`` is given.
      loss: the piece boundaries of ℓ.
      sizes: ``None``, or the static rows each level occupies (``≥ counts``; shape buckets):
        level ``r`` then holds rows ``[Σ_{t<r} sizes_t, …)``, its first ``counts[r]`` real and
        the rest padding (zero gradient).

    Returns:
      ``(value, grad, windows)``: the unnormalised sum, ``(n,)`` gradient, and the per-level
      :class:`~jaxrank.pairwise.Windows` (batched over the ``R − 1`` terms) for :func:`hvp`.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.losses import get_loss
      >>> from jaxrank.multilevel import value_and_grad
      >>> f = jnp.array([0.0, 0.0, 5.0, 10.0])  # levels 0, 0, 1, 2: every pair ordered by > 1
      >>> value, grad, ws = value_and_grad(f, (2, 1, 1), get_loss("smoothed_hinge"))
      >>> float(value), grad
      (0.0, Array([0., 0., 0., 0.], dtype=float32))
    """
    if sizes is None:
        sizes = counts = tuple(int(c) for c in counts)
    lay = _layout(tuple(int(c) for c in sizes))
    if f.shape[0] < lay.offsets[-1]:
        raise ValueError(f"f has {f.shape[0]} entries, fewer than sum(counts) = {lay.offsets[-1]}.")
    real, fr = _real_scores(f, lay, counts)
    fmax = jnp.max(jnp.where(real, fr, -jnp.inf))
    fmin = jnp.min(jnp.where(real, fr, jnp.inf))
    # ≥ 2 (and many ulps) beyond the extremes: f_pad − f_j ≥ 1 and f_i − f_pad ≥ 1 hold exactly
    pad_pos = fmax + (2 + jnp.abs(fmax) / 256)
    pad_neg = fmin - (2 + jnp.abs(fmin) / 256)
    fp, fn = _split(f, lay, _masks(lay, counts), pad_pos, pad_neg)
    v, gp, gn, ws = jax.vmap(pairwise.value_and_grad, in_axes=(0, 0, None))(fp, fn, loss)
    return jnp.sum(v), _merge(gp, gn, lay, f.shape[0]), ws


def hvp(ws, d: jax.Array, counts, loss: PiecewiseQuadratic, sizes=None) -> jax.Array:
    """Score-space Hessian-vector product of :func:`value_and_grad`'s ``L``, reusing its windows.

    Args:
      ws: the windows from :func:`value_and_grad` at the current scores.
      d: ``(n,)`` direction, rows ordered as in :func:`value_and_grad`.
      counts: the same level sizes.
      loss: the piece boundaries of ℓ (only ``q`` is used).
      sizes: the same rows per level (or ``None``).

    Returns:
      ``(n,)`` ``∇²L · d`` (zero on padding rows).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.losses import get_loss
      >>> from jaxrank.multilevel import hvp, value_and_grad
      >>> f = jnp.array([0.0, 0.1, 0.3, 0.4])  # levels 0, 0, 1, 2 (ascending)
      >>> value, grad, ws = value_and_grad(f, (2, 1, 1), get_loss("smoothed_hinge"))
      >>> hvp(ws, jnp.ones(4), (2, 1, 1), get_loss("smoothed_hinge"))  # a shift changes no margin
      Array([0., 0., 0., 0.], dtype=float32)
    """
    if sizes is None:
        sizes = counts = tuple(int(c) for c in counts)
    lay = _layout(tuple(int(c) for c in sizes))
    dp, dn = _split(d, lay, _masks(lay, counts), 0, 0)
    hp, hn = jax.vmap(pairwise.hvp, in_axes=(0, 0, 0, None))(ws, dp, dn, loss)
    return _merge(hp, hn, lay, d.shape[0])


def n_pairs(counts) -> int:
    """``Σ_{r<s} m_r m_s``, the number of cross-level pairs (the normaliser of eq. 47-48).

    Example:
      >>> from jaxrank.multilevel import n_pairs
      >>> n_pairs((5, 3, 2))  # 5·3 + 5·2 + 3·2
      31
    """
    o = _offsets(counts)
    return int(sum(int(counts[s]) * o[s] for s in range(1, len(counts))))


def objective_closures(
    K, Krr, lam, loss: PiecewiseQuadratic, counts, block: int | None = None, sizes=None,
    inv_pairs=None,
):  # fmt: skip
    """``(fun, hvp)`` of the multi-level objective (seed 003 eq. 47-48) for ``trust_ncg``.

    Args:
      K: ``(m_pad, |R|)`` kernel block, rows ordered by level (ascending), then padding.
      Krr: ``(|R|, |R|)`` basis Gram matrix.
      lam: regulariser λ.
      loss: piecewise-quadratic pairwise loss.
      counts: static level sizes ``(m_0, …, m_{R−1})`` (rows beyond their sum are padding).
      block: rows per block of the two-level transpose product (must divide ``m_pad``);
        ``None``: one plain product.
      sizes: ``None``, or the static rows each level occupies in ``K`` (shape buckets); the
        counts may then be traced, with ``inv_pairs = 1/Σ_{r<s} m_r m_s`` given.
      inv_pairs: see ``sizes``.

    Returns:
      ``fun(β) -> (F, ∇F, windows)`` and ``hvp(windows, v) -> ∇²F v``, ``F`` normalised by
      ``Σ_{r<s} m_r m_s``; each costs two products with ``K`` whatever the number of levels.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.losses import get_loss
      >>> from jaxrank.multilevel import objective_closures
      >>> K = jnp.eye(4)  # rows ordered by level: 2 at level 0, then 1 and 1
      >>> fun, hvp = objective_closures(K, jnp.eye(4), 0.1, get_loss("smoothed_hinge"), (2, 1, 1))
      >>> F, grad, ws = fun(jnp.zeros(4))
      >>> float(F)  # every pair at margin 0: ℓ(0) = 1 − ε = 0.5
      0.5
    """
    dt = K.dtype
    if sizes is None:
        counts = tuple(int(c) for c in counts)
        scale = jnp.asarray(1.0 / n_pairs(counts), dt)
    else:
        scale = jnp.asarray(inv_pairs, dt)
    lam = jnp.asarray(lam, dt)

    def rmat(g):
        g = g * scale
        if block is None:
            return _kernels.rmatmul(g[None], K)[0]
        return _kernels.rmatvec(g, K, block)

    def fun(beta):
        f = _kernels.matmul(K, beta)
        value, g, ws = value_and_grad(f, counts, loss, sizes)
        kb = jnp.matmul(Krr, beta, precision=_HI)
        F = value * scale + 0.5 * lam * jnp.vdot(beta, kb)
        return F, rmat(g) + lam * kb, ws

    def hvp_(ws, v):
        d = _kernels.matmul(K, v)
        h = hvp(ws, d, counts, loss, sizes)
        return rmat(h) + lam * jnp.matmul(Krr, v, precision=_HI)

    return fun, hvp_


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class _Levels:
    """Row layout of the multi-level objective: rows sorted by level, ``counts`` real rows per
    level in ``sizes`` rows each (shape buckets). A pytree: the counts are traced leaves, the
    sizes static (the shared solver :func:`jaxrank._fitting.solve` compiles per padded size)."""

    counts: tuple  # real rows per level: pytree leaves, traced in the solver
    sizes: tuple | None = dataclasses.field(default=None, metadata=dict(static=True))
    inv_pairs: Any = None  # 1/Σ_{r<s} m_r m_s, formed on the host in float64

    def __post_init__(self):
        if self.sizes is None:
            object.__setattr__(self, "sizes", tuple(int(c) for c in self.counts))
        if self.inv_pairs is None:
            object.__setattr__(self, "inv_pairs", 1.0 / n_pairs(self.counts))

    @property
    def groups(self) -> tuple[int, ...]:
        return self.counts

    def padded(self, sizes) -> _Levels:
        """This layout with each level padded to ``sizes`` rows (shape buckets)."""
        return _Levels(self.counts, tuple(int(v) for v in sizes), self.inv_pairs)

    @property
    def pairs(self) -> tuple[tuple[int, int], ...]:
        R = len(self.counts)
        return tuple((r, s) for s in range(R) for r in range(s))

    def closures(self, K, Krr, lam, loss, block, jacobi):
        if jacobi:
            raise ValueError("precondition='jacobi' is not available for fit_multilevel.")
        return objective_closures(K, Krr, lam, loss, self.counts, block, sizes=self.sizes,
                                  inv_pairs=self.inv_pairs)  # fmt: skip

    def curvature(self, lin, loss):
        return pair_curvature(lin, loss, 1 / jnp.asarray(self.inv_pairs, lin.sp.dtype))


#: the row layout under a public name (not in ``__all__``), for :mod:`jaxrank.internals`
LevelsLayout = _Levels


# fit_multilevel refuses the Jacobi diagonal before any work
_NO_JACOBI = "precondition must be 'auto', 'spectral', 'cholesky' or 'none' for fit_multilevel."


def fit_multilevel(
    X,
    levels,
    lam,
    *,
    majority=0,
    kernel=None,
    eps: float = 0.5,
    loss: str = "smoothed_hinge",
    tol: float = 1e-6,
    max_iter: int = 100,
    max_cg: int = 25,
    precondition: str = "auto",
    dtype=None,
    path: str = "batch",
    chains: int = 4,
    memory_budget: int | None = None,
    max_kernel_bytes: int | None = None,
) -> RankModel:
    """Multi-level RankRC (seed 003 eq. 48): an ordinal ranker over the non-majority basis.

    Minimises, with ``f = K_{·R} β`` and ``R`` the rows whose level is not ``majority``::

        F(β) = 1/(Σ_{r<s} m_r m_s) Σ_{s} Σ_{i: y_i=s} Σ_{j: y_j<s} ℓ_ε(f_i − f_j) + (λ/2) βᵀ K_RR β

    i.e. the sum of the biclass RankRC terms "level s vs all lower levels" (see module notes).
    With two levels it is :func:`jaxrank.fit` with ``basis="rare"``.

    Args:
      X: ``(m, d)`` training rows, taken as given (no standardisation).
      levels: ``(m,)`` integer ordinal labels (higher = rarer / more important); only their
        order matters; at least two distinct values.
      lam: λ > 0, or a 1-D grid (one model holding every λ).
      majority: the value of the majority level (default 0), left out of the basis. Seed 003
        takes the lowest level; another level is accepted (it only changes the basis).
      kernel: a kernel object or name; default Gaussian with the σ² heuristic on ``X``.
      eps: ε of the smoothed hinge (paper default 0.5).
      loss: ``"smoothed_hinge"`` or ``"squared_hinge"``.
      tol: stop when ``||∇F||_∞ ≤ tol`` (paper: 1e-6).
      max_iter: cap on Newton (trust-region) iterations per λ.
      max_cg: cap on CG iterations per Newton iteration (paper: 25).
      precondition: ``"auto"``, ``"spectral"``, ``"cholesky"`` or ``"none"``, as in
        :func:`jaxrank.fit` (the spectral model sums over every pair of levels).
      dtype: ``float32`` or ``float64``; default float64 when ``X`` is float64 and x64 is on.
      path: ``"batch"`` (vmapped λ grid) or ``"warm"`` (λ from large to small, warm starts;
        ``chains`` consecutive λ per batched step, as in :func:`jaxrank.fit`).
      memory_budget: bytes the kernel block may take (default as in :func:`jaxrank.fit`).
      max_kernel_bytes: the largest kernel block stored; beyond it the block is streamed (as in
        :func:`jaxrank.fit`).

    Returns:
      A :class:`~jaxrank.model.RankModel` (``decision_function`` as for :func:`jaxrank.fit`);
      ``model.info.objective`` in the normalisation above.

    Raises:
      ValueError: bad ``X`` (NaN/inf, empty, not 2-D), bad ``levels`` (see :func:`check_levels`),
        length mismatch, λ ≤ 0, or a bad option.

    Warns:
      ConvergenceWarning: when some λ stopped before ``tol``.

    Example:
      >>> import jax, jaxrank
      >>> from jaxrank.multilevel import fit_multilevel, make_ordinal
      >>> X, lv = make_ordinal(400, key=jax.random.key(0))
      >>> model = fit_multilevel(X, lv, 1e-3)
      >>> model.coef.shape == (int((lv != 0).sum()),)
      True
      >>> float(jaxrank.metrics.mauc(lv, model.decision_function(X))) > 0.7
      True
    """
    mesh = _kernels.row_mesh(X)
    X = check_X(X)
    _, index, counts, maj = check_levels(levels, majority, n=X.shape[0])
    lams, scalar = check_lam(lam)
    options = check_fit_options(
        X, loss=loss, eps=eps, tol=tol, path=path, chains=chains, precondition=precondition,
        max_iter=max_iter, max_cg=max_cg, dtype=dtype, memory_budget=memory_budget,
        max_kernel_bytes=max_kernel_bytes, no_jacobi=_NO_JACOBI,
    )  # fmt: skip
    idx = np.flatnonzero(index != maj)  # basis: every non-majority row (eq. 48)
    order = np.argsort(index, kind="stable")  # rows by level, ascending; stable within a level
    layout = _Levels(tuple(int(c) for c in counts))
    return fit_rows(X, order, idx, lams, scalar, layout, kernel=_kernels.resolve_kernel(kernel, X),
                    mesh=mesh, **options._asdict())  # fmt: skip


# --------------------------------------------------------------------------------------------
# simulated skewed ordinal data (an analogue of seed 003 Fig. 4, not the paper's data)
# --------------------------------------------------------------------------------------------


def _level_sizes(m: int, levels: int, majority_frac: float) -> np.ndarray:
    """Level 0 gets ``round(majority_frac·m)`` rows; the rest are split ∝ 2^{−r}, each ≥ 1."""
    n0 = min(max(round(majority_frac * m), 1), m - (levels - 1))
    rest = m - n0
    w = 0.5 ** np.arange(levels - 1)
    share = w / w.sum() * rest
    sizes = np.maximum(np.floor(share).astype(np.int64), 1)
    # hand out what rounding left over (largest remainders first), never below 1 per level
    left = rest - int(sizes.sum())
    frac = share - np.floor(share)
    for k in np.argsort(-frac, kind="stable"):
        if left == 0:
            break
        if left > 0:
            sizes[k] += 1
            left -= 1
    for k in np.argsort(sizes, kind="stable")[::-1]:  # took too many: take back from the largest
        while left < 0 and sizes[k] > 1:
            sizes[k] -= 1
            left += 1
    return np.concatenate([[n0], sizes])


def make_ordinal(
    m: int,
    *,
    levels: int = 4,
    majority_frac: float = 0.85,
    d: int = 5,
    sep: float = 1.0,
    key: jax.Array | None = None,
    seed: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Simulated skewed ordinal data, an analogue of the hospital-days data of seed 003, Fig. 4.

    **Not the paper's data** (the Heritage Health Prize claims data are not public): a toy with
    the same shape of label distribution — one majority level, rarer levels progressively
    smaller — and progressively separable levels, for tests and examples.

    Construction:

    - sizes: level 0 has ``round(majority_frac · m)`` rows (the "0 days" majority; 85 % in
      Fig. 4); the other ``m − m_0`` rows are split over levels ``1 … levels−1`` in proportion
      ``1, 1/2, 1/4, …`` (largest-remainder rounding, at least one row per level). The sizes are
      exact, not sampled.
    - features: level ``r`` is a spherical unit-variance Gaussian in ``d`` dimensions centred at
      ``r · sep · u`` with the fixed direction ``u = (1, …, 1)/√d``: adjacent levels overlap
      (their centres are ``sep`` apart), distant levels are progressively better separated. The
      Bayes ranking is monotone in ``uᵀx`` (a linear score); the distribution does not depend on
      ``key``, so training and test sets are independent draws with different keys.
    - rows are shuffled.

    Randomness as in :mod:`jaxrank.datasets`: draws in float32 with ``jax.random``, returned as
    float64, so a key gives the same data with or without x64:
    ``k_noise, k_perm = jax.random.split(key)``.

    Args:
      m: number of rows, ``>= levels``.
      levels: number of ordinal levels, ``>= 2``.
      majority_frac: fraction of level-0 rows, in ``(0, 1)``.
      d: dimension, ``>= 1``.
      sep: distance between consecutive level centres, ``> 0``.
      key: a ``jax.random.key``.
      seed: an integer, used as ``key=jax.random.key(seed)``; pass exactly one of ``key``/``seed``.

    Returns:
      ``(X, levels)``: ``X`` float64 ``(m, d)``, ``levels`` int32 ``(m,)`` in ``0 … levels−1``.

    Example:
      >>> import jax
      >>> X, lv = make_ordinal(1000, key=jax.random.key(0))
      >>> X.shape, X.dtype, lv.dtype, [int((lv == r).sum()) for r in range(4)]
      ((1000, 5), dtype('float64'), dtype('int32'), [850, 86, 43, 21])
    """
    levels = check_int(levels, "levels", 2)
    m = check_int(m, "m", levels)
    d = check_int(d, "d", 1)
    majority_frac = check_real(majority_frac, "majority_frac", 0.0, 1.0, lo_open=True,
                                hi_open=True)  # fmt: skip
    sep = check_positive(sep, "sep")
    key = resolve_key(key, seed)
    k_noise, k_perm = jax.random.split(key)

    sizes = _level_sizes(m, levels, majority_frac)
    lv = np.repeat(np.arange(levels, dtype=np.int32), sizes)
    u = np.full(d, 1.0 / math.sqrt(d))
    X = (lv[:, None] * sep) * u[None, :] + standard_normal(k_noise, m * d).reshape(m, d)
    perm = random_permutation(k_perm, m)
    return np.ascontiguousarray(X[perm]), lv[perm]
