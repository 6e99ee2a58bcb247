"""The p-norm push: a ranking loss that concentrates at the top of the list (seed 000, Sec. 7).

Seed 000 (Sec. 7, extension 2) proposes replacing the uniform AUC loss of RankRC by the p-norm
push of Rudin (*The P-Norm Push*, JMLR 10, 2009, eq. 1 with ``g(r) = r^p``), which sums, over the
negatives, a power of each negative's total loss against the positives: a negative ranked
above many positives ("at the top of the list") costs far more than several negatives each
above a few. With ``f = K_{·R} β`` jaxrank minimises::

    F(β) = P(f) + (λ/2) βᵀ K_RR β,
    P(f) = 1/m− Σ_{j∈−} s_j^p,      s_j = S_j / m+,      S_j = Σ_{i∈+} ℓ(f_i − f_j)

i.e. Rudin's ``Σ_j (Σ_i ℓ)^p`` divided by ``m+^p m−``. This normalisation is chosen so that
``p = 1`` gives exactly RankRC's ``1/(m+ m−) Σ_i Σ_j ℓ(f_i − f_j)`` (seed 000 eq. 13), and for
any ``p`` it is the mean over negatives of the p-th power of the per-negative mean loss (the
scale does not grow with m). For ``p ≥ 1`` and a convex ``ℓ ≥ 0`` (smoothed or squared hinge)
``P`` is convex: ``s ↦ s^p`` is convex and non-decreasing on ``s ≥ 0`` and each ``s_j`` is
convex. Rudin's loss is the exponential; here ℓ is the piecewise-quadratic surrogate of
:mod:`jaxrank.losses`, so the same sorted windows as :mod:`jaxrank.pairwise` apply.

Derivatives, with ``ℓ'_ij = ℓ'(f_i − f_j)``, ``G_j = Σ_i ℓ'_ij``, ``w_j = p s_j^{p−1}/(m+ m−)``
and ``c_j = p(p−1) s_j^{p−2} (∇S_j·d)/(m+² m−)``::

    ∂P/∂f_i = Σ_j w_j ℓ'_ij                       ∂P/∂f_j = −w_j G_j
    ∇S_j·d  = Σ_i ℓ'_ij d_i − G_j d_j
    (∇²P d)_i = Σ_j c_j ℓ'_ij + Σ_{j∈Q(i)} w_j ℓ''(d_i − d_j)
    (∇²P d)_j = −c_j G_j + w_j Σ_{i∈Q(j)} ℓ''(d_j − d_i)

The Hessian is not a sum over independent pairs: the outer power couples all positives of a
negative through the rank-one term ``p(p−1) s_j^{p−2} ∇s_j ∇s_jᵀ`` (Gauss-Newton part); the
second term is the pairwise Hessian of :func:`jaxrank.pairwise.hvp` with weight ``w_j`` per
negative.

Everything reuses one step's :class:`~jaxrank.pairwise.Windows` (positives sorted once): per
negative, ``S_j``, ``G_j`` and ``Σ_i ℓ'_ij d_i`` are differences of prefix sums of
``1, s, s², d, s·d`` over the sorted positives; per positive, ``Σ_j v_j`` over its linear
window (negatives with ``a_j > k``) and over its quadratic window (``a_j ≤ k < b_j``) for
several per-negative weights ``v_j`` come from one multi-column difference array (a single
scatter of ``3 m−`` rows and a cumulative sum). A value-and-gradient costs
O(m+ log m+ + m− log m+), a Hessian-vector product O(m) with two gathers per negative and one
scatter; with ``K`` two products each, as for RankRC.

At ``s_j = 0`` every pair of ``j`` is in the zero piece (a convex ``ℓ ≥ 0`` has ``ℓ' = 0``
where ``ℓ = 0``), so ``∇S_j = 0`` and the ``s^{p−2}`` factor (infinite for ``p < 2``) is
multiplied by zero: it is set to 0 there.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import io as _io
from jaxrank import kernels as _kernels
from jaxrank._fitting import Biclass, fit_biclass
from jaxrank._precision import HIGHEST as _HI
from jaxrank._validation import check_lam, check_X_y
from jaxrank.losses import PiecewiseQuadratic
from jaxrank.model import RankModel, rank_model_from_arrays, rank_model_to_arrays
from jaxrank.pairwise import (
    Windows,
    batched,
    flat_take,
    loss_col,
    prefix_sum,
    real_counts,
    row_sum,
    unsort,
    window_sums,
    windows_b,
)

__all__ = [
    "PushLin",
    "PushModel",
    "check_p",
    "fit_push",
    "push_hvp",
    "push_objective_closures",
    "push_value_and_grad",
]


class PushLin(NamedTuple):
    """What a p-norm push Hessian-vector product reuses from its point (one Newton step).

    Attributes:
      windows: the :class:`~jaxrank.pairwise.Windows` at the scores.
      s: ``(m−,)`` per-negative mean loss ``s_j = S_j / m+`` (clamped at 0).
      G: ``(m−,)`` per-negative ``G_j = Σ_i ℓ'(f_i − f_j)``.
      w: ``(m−,)`` gradient weights ``w_j = p s_j^{p−1} / (m+ m−)``.
      qw: ``(m+,)`` per sorted positive, ``Σ_{j∈Q(k)} w_j`` over its quadratic window.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.losses import get_loss
      >>> from jaxrank.push import push_value_and_grad
      >>> value, gp, gn, lin = push_value_and_grad(
      ...     jnp.array([1.0, 0.5]), jnp.array([0.0, 0.2, 0.4]), get_loss("smoothed_hinge"), 2.0)
      >>> lin.s.shape, lin.qw.shape  # per negative, per sorted positive
      ((3,), (2,))
    """

    windows: Windows
    s: jax.Array
    G: jax.Array
    w: jax.Array
    qw: jax.Array


def _sizes(fp, fn, counts, dt):
    # the normalisers m+, m− ((B, 1) columns of the real counts when padded) and, when padded,
    # the masks of the real sorted positives and real negatives
    if counts is None:
        return jnp.asarray(fp.shape[1], dt), jnp.asarray(fn.shape[1], dt), None, None
    n_pos, n_neg = (jnp.asarray(c, jnp.int32).reshape(-1, 1) for c in counts)
    vp = jnp.arange(fp.shape[1], dtype=jnp.int32)[None, :] < n_pos
    vn = jnp.arange(fn.shape[1], dtype=jnp.int32)[None, :] < n_neg
    return n_pos.astype(dt), n_neg.astype(dt), vp, vn


def _value_and_grad_b(fp, fn, loss, p, counts=None):
    # counts: as in jaxrank.pairwise.value_and_grad (padded entries enter no pair; their
    # gradient entries are exact zeros)
    w = windows_b(fp, fn, loss, counts=counts)
    dt = fp.dtype
    m_pos, m_neg, vp, vn = _sizes(fp, fn, counts, dt)
    n_pos = fp.shape[1]  # bins of the window sums
    q = loss_col(loss.q, dt)
    c = loss_col(loss.c, dt)
    p = loss_col(p, dt)
    P1 = prefix_sum(w.sp)
    P2 = prefix_sum(w.sp * w.sp)
    af = w.a.astype(dt)
    nqn = (w.b - w.a).astype(dt)
    P1a = flat_take(P1, w.a)
    S1 = flat_take(P1, w.b) - P1a
    S2 = flat_take(P2, w.b) - flat_take(P2, w.a)
    one_u = 1 + w.fn
    # Per negative (as in jaxrank.pairwise): S_j = Σ_i ℓ(s_i − u_j) and G_j = Σ_i ℓ'(s_i − u_j).
    S = af * (c + w.fn) - P1a + q * (nqn * one_u * one_u - 2 * one_u * S1 + S2)
    G = -(af + 2 * q * (nqn * one_u - S1))
    # S_j ≥ 0 exactly; the prefix-sum differences can leave −rounding, which s^p cannot take.
    s = jnp.maximum(S, 0) / m_pos
    value = row_sum(s**p) / m_neg.reshape(-1)  # a padded negative: S_j = 0, adds 0^p = 0
    wt = p * s ** (p - 1) / (m_pos * m_neg)
    if vn is not None:
        wt = jnp.where(vn, wt, 0)  # 0^0 = 1 at p = 1: no weight for padded negatives
    grad_neg = -wt * G
    # Window sums of w_j are taken about their mean: equal weights (p = 1, or many s_j alike)
    # would otherwise accumulate a systematic float32 rounding bias over the m− additions,
    # while the counts nl, nq of the windows are exact integers.
    wbar = jnp.sum(wt, axis=-1, keepdims=True) / m_neg
    wc = wt - wbar
    lin_sum, quad_sum = window_sums(
        w.a,
        w.b,
        wc[..., None],
        jnp.stack([jnp.where(w.active, wc, 0), jnp.where(w.active, wt * one_u, 0)], -1),
        n_pos,
    )
    qw = quad_sum[..., 0] + wbar * w.nq.astype(dt)
    # ℓ'(s_k − u_j) = −1 on the linear window, −2q (1 + u_j − s_k) on the quadratic one.
    grad_sorted = -(lin_sum[..., 0] + wbar * w.nl.astype(dt)) - 2 * q * (
        quad_sum[..., 1] - qw * w.sp
    )
    if vp is not None:  # padded positives sort last; their running sums hold only rounding
        grad_sorted = jnp.where(vp, grad_sorted, 0)
    lin = PushLin(windows=w, s=s, G=G, w=wt, qw=qw)
    return value, unsort(w.order, grad_sorted), grad_neg, lin


def _hvp_b(lin: PushLin, dp, dn, loss, p, counts=None):
    w = lin.windows
    dt = dp.dtype
    m_pos, m_neg, vp, _ = _sizes(dp, dn, counts, dt)
    n_pos = dp.shape[1]  # bins of the window sums
    q = loss_col(loss.q, dt)
    p = loss_col(p, dt)
    ds = jnp.take_along_axis(dp, w.order, axis=-1)
    DP = prefix_sum(ds)
    SDP = prefix_sum(w.sp * ds)
    Da = flat_take(DP, w.a)
    DQ = flat_take(DP, w.b) - Da
    SQ = flat_take(SDP, w.b) - flat_take(SDP, w.a)
    one_u = 1 + w.fn
    # ∇S_j·d = Σ_i ℓ'_ij d_i − G_j d_j, the i-sum over the windows by prefix sums of d and s·d.
    dot = -Da - 2 * q * (one_u * DQ - SQ) - lin.G * dn
    pos = lin.s > 0
    curv = jnp.where(pos, p * (p - 1) * jnp.where(pos, lin.s, 1) ** (p - 2), 0)
    cj = curv * dot / (m_pos * m_pos * m_neg)
    h_neg = -cj * lin.G + 2 * q * lin.w * ((w.b - w.a).astype(dt) * dn - DQ)
    # Per sorted positive k: Σ_j c_j ℓ'_kj + 2q Σ_{j∈Q(k)} w_j (d_k − d_j), with ℓ'_kj = −1 on
    # the linear window and −2q (1 + u_j − s_k) on the quadratic one.
    lin_sum, quad_sum = window_sums(
        w.a,
        w.b,
        cj[..., None],
        jnp.stack(
            [
                jnp.where(w.active, cj, 0),
                jnp.where(w.active, cj * one_u + lin.w * dn, 0),
            ],
            -1,
        ),
        n_pos,
    )
    h_sorted = (
        -lin_sum[..., 0]
        + 2 * q * (quad_sum[..., 0] * w.sp - quad_sum[..., 1])
        + 2 * q * lin.qw * ds
    )
    if vp is not None:
        h_sorted = jnp.where(vp, h_sorted, 0)
    return unsort(w.order, h_sorted), h_neg


_push_value_and_grad = batched(_value_and_grad_b)
_push_hvp = batched(_hvp_b)


def push_value_and_grad(
    fp: jax.Array, fn: jax.Array, loss: PiecewiseQuadratic, p, n_pos=None, n_neg=None
) -> tuple[jax.Array, jax.Array, jax.Array, PushLin]:
    """The p-norm push ``P(f) = 1/m− Σ_j (S_j/m+)^p`` and its score gradient (module notes).

    Rudin (2009) eq. (1) with ``g(r) = r^p``, normalised so that ``p = 1`` is RankRC's
    ``1/(m+ m−) Σ_i Σ_j ℓ(f_i − f_j)`` (seed 000 eq. 13). Unlike
    :func:`jaxrank.pairwise.value_and_grad` the result is already normalised (the power does
    not commute with a scale). ``jax.vmap`` runs a native batched implementation.

    Args:
      fp: positive scores ``(m+,)``.
      fn: negative scores ``(m−,)``.
      loss: the piece boundaries of a convex ``ℓ ≥ 0`` (smoothed or squared hinge).
      p: the push exponent, ``p ≥ 1`` (a scalar; dynamic).
      n_pos, n_neg: optional real counts (dynamic): the entries beyond are padding (shape
        buckets) and enter no pair; ``m+``, ``m−`` above are these counts.

    Returns:
      ``(value, grad_pos, grad_neg, lin)``: ``P(f)``, ``(m+,)`` and ``(m−,)`` gradients, and
      the :class:`PushLin` that :func:`push_hvp` reuses.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.losses import smoothed_hinge
      >>> fp, fn = jnp.array([1.0, 0.0]), jnp.array([0.0, 2.0])
      >>> v, gp, gn, _ = push_value_and_grad(fp, fn, smoothed_hinge(), 2.0)
      >>> float(v)  # s = [(0 + 0.5)/2, (1.5 + 2.5)/2] = [0.25, 2]; (0.25² + 2²)/2
      2.03125
    """
    dt = jnp.result_type(fp)
    return _push_value_and_grad(fp, fn, loss, jnp.asarray(p, dt), real_counts(n_pos, n_neg))


def push_hvp(
    lin: PushLin, dp: jax.Array, dn: jax.Array, loss: PiecewiseQuadratic, p, n_pos=None,
    n_neg=None,
) -> tuple[jax.Array, jax.Array]:  # fmt: skip
    """Exact Hessian-vector product of the p-norm push in score space, reusing ``lin``.

    Gauss-Newton part ``p(p−1) s_j^{p−2} (∇s_j·d) ∇s_j`` plus the second-order part
    ``p s_j^{p−1} ∇²s_j d`` summed over negatives (module notes), normalised as
    :func:`push_value_and_grad`.

    Args:
      lin: from :func:`push_value_and_grad` at the current scores.
      dp: direction on the positives ``(m+,)``.
      dn: direction on the negatives ``(m−,)``.
      loss: the loss given to :func:`push_value_and_grad`.
      p: the same exponent.
      n_pos, n_neg: the same counts.

    Returns:
      ``(h_pos, h_neg)`` of shapes ``(m+,)`` and ``(m−,)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.losses import get_loss
      >>> from jaxrank.push import push_hvp, push_value_and_grad
      >>> loss = get_loss("smoothed_hinge")
      >>> fp, fn = jnp.array([1.0, 0.5]), jnp.array([0.0, 0.2, 0.4])
      >>> lin = push_value_and_grad(fp, fn, loss, 2.0)[3]
      >>> hp, hn = push_hvp(lin, jnp.ones(2), jnp.ones(3), loss, 2.0)  # a shift: no change
      >>> bool(jnp.allclose(hp, 0, atol=1e-6)), bool(jnp.allclose(hn, 0, atol=1e-6))
      (True, True)
    """
    dt = jnp.result_type(dp)
    return _push_hvp(lin, dp, dn, loss, jnp.asarray(p, dt), real_counts(n_pos, n_neg))


def push_objective_closures(
    K,
    Krr,
    lam,
    loss: PiecewiseQuadratic,
    n_pos,
    n_neg,
    p,
    block: int | None = None,
    sizes: tuple[int, int] | None = None,
):
    """``(fun, hvp)`` of ``F(β) = P(K_{·R} β) + (λ/2) βᵀ K_RR β`` for
    :func:`~jaxrank.solver.trust_ncg`, shaped like :func:`jaxrank.objective.objective_closures`.

    Args:
      K: ``(m_pad, |R|)`` kernel block, rows ordered [positives; negatives; padding]; stored,
        or a :class:`~jaxrank.kernels.StreamedBlock`.
      Krr: ``(|R|, |R|)`` basis Gram matrix.
      lam: regulariser λ.
      loss: piecewise-quadratic pairwise loss.
      n_pos, n_neg: class sizes (rows beyond ``n_pos + n_neg`` are padding).
      p: push exponent ``p ≥ 1``.
      block: rows per block of the two-level transpose product (must divide ``m_pad``);
        ``None``: one plain product.
      sizes: ``(P, N)`` rows of each class in ``K`` when padded to shape buckets (the counts
        may then be traced), as in :func:`jaxrank.objective.objective_closures`.

    Returns:
      ``fun(β) -> (F, ∇F, (lin, None))`` and ``hvp((lin, None), v) -> ∇²F v``; each costs two
      products with ``K``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.losses import get_loss
      >>> from jaxrank.push import push_objective_closures
      >>> K = jnp.eye(3)  # rows: 1 positive, 2 negatives
      >>> fun, hvp = push_objective_closures(K, K, 0.1, get_loss("smoothed_hinge"), 1, 2, 1.0)
      >>> float(fun(jnp.zeros(3))[0])  # p = 1 is RankRC: ℓ(0) = 0.5
      0.5
    """
    dt = K.dtype
    lam = jnp.asarray(lam, dt)
    p = jnp.asarray(p, dt)
    P, N = (n_pos, n_neg) if sizes is None else sizes
    counts = () if sizes is None else (n_pos, n_neg)
    pad = K.shape[0] - P - N

    def rmat(gp, gn):
        g = jnp.concatenate([gp, gn, jnp.zeros((pad,), dt)])
        if block is None:
            return _kernels.rmatmul(g[None], K)[0]
        return _kernels.rmatvec(g, K, block)

    def fun(beta):
        f = _kernels.matmul(K, beta)
        value, gp, gn, lin = push_value_and_grad(f[:P], f[P : P + N], loss, p, *counts)
        kb = jnp.matmul(Krr, beta, precision=_HI)
        F = value + 0.5 * lam * jnp.vdot(beta, kb)
        return F, rmat(gp, gn) + lam * kb, (lin, None)

    def hvp(lin, v):
        d = _kernels.matmul(K, v)
        hp, hn = push_hvp(lin[0], d[:P], d[P : P + N], loss, p, *counts)
        return rmat(hp, hn) + lam * jnp.matmul(Krr, v, precision=_HI)

    return fun, hvp


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class _Push(Biclass):
    """Row layout [positives; negatives; padding] of the p-norm push objective. Static and
    hashable except for the class counts, which are traced leaves (the shared solver
    :func:`jaxrank._fitting.solve` compiles per padded size), so ``p`` is static here: a new ``p``
    compiles once, a new λ or a new size inside the buckets does not.

    ``groups``, ``pairs`` and ``curvature`` serve the spectral preconditioner of
    :func:`jaxrank.fit.fit` (``M = λ(K_RR + δI) + cG`` with ``G`` the mean pair outer product
    ``(k_i − k_j)(k_i − k_j)ᵀ``): ``c`` is the push's weight on ``G``, read off the step's
    :class:`PushLin` — ``2q Σ_j w_j |Q(j)|`` for the second-order term (each quadratic pair
    weighted by its negative's ``w_j``) plus ``Σ_j p(p−1) s_j^{p−2} G_j² / (m+² m−)`` for the
    Gauss-Newton term, taking ``∇S_j ≈ G_j (mean positive − k_j)``. Only the preconditioner
    uses it; at ``p = 1`` it is RankRC's ``2q |Q| / (m+ m−)``.
    """

    # the counts, the padded sizes and padded() are the biclass layout's
    p: float = dataclasses.field(default=1.0, metadata=dict(static=True))

    def closures(self, K, Krr, lam, loss, block, jacobi):
        if jacobi:
            raise ValueError("precondition='jacobi' is not available for the p-norm push.")
        return push_objective_closures(K, Krr, lam, loss, self.n_pos, self.n_neg, self.p, block,
                                       sizes=self.sizes)  # fmt: skip

    def curvature(self, lin, loss):
        pl = lin[0]
        dt = pl.s.dtype
        p = jnp.asarray(self.p, dt)
        nq = (pl.windows.b - pl.windows.a).astype(dt)
        second = 2 * jnp.asarray(loss.q, dt) * jnp.sum(pl.w * nq)
        pos = pl.s > 0
        curv = jnp.where(pos, p * (p - 1) * jnp.where(pos, pl.s, 1) ** (p - 2), 0)
        n_pos, n_neg = jnp.asarray(self.n_pos, dt), jnp.asarray(self.n_neg, dt)
        gn = jnp.sum(curv * pl.G * pl.G) / (n_pos * n_pos * n_neg)
        return second + gn


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class PushModel(RankModel):
    """A :class:`~jaxrank.model.RankModel` fitted by the p-norm push (:func:`fit_push`).

    Attributes (besides those of ``RankModel``):
      p: the push exponent (static).

    Example:
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
      >>> model = jaxrank.fit_push(X, y, 1e-2, p=4)
      >>> float(model.p), model.decision_function(X).shape
      (4.0, (300,))
    """

    p: float = dataclasses.field(default=1.0, metadata=dict(static=True))


# fit_push refuses the Jacobi diagonal before any work (the push's Hessian is not pairwise)
_NO_JACOBI = (
    "precondition='jacobi' is not available for the p-norm push; use 'auto', 'spectral', "
    "'cholesky' or 'none'."
)


def check_p(p) -> float:
    """The push exponent as a float; ``ValueError`` unless it is a finite number ≥ 1.

    Example:
      >>> from jaxrank.push import check_p
      >>> check_p(4)
      4.0
      >>> try:
      ...     check_p(0.5)
      ... except ValueError as err:
      ...     print("p" in str(err))
      True
    """
    if isinstance(p, bool) or np.ndim(p) != 0 or np.asarray(p).dtype.kind not in "iuf":
        raise ValueError(f"p must be a real number >= 1, got {p!r}.")
    v = float(p)
    if not np.isfinite(v) or v < 1:
        raise ValueError(
            f"p must be finite and >= 1 (the p-norm push is convex only for p >= 1), got {p!r}."
        )
    return v


def fit_push(
    X,
    y,
    lam,
    *,
    p: float = 4.0,
    basis="rare",
    loss: str = "smoothed_hinge",
    eps: float = 0.5,
    kernel=None,
    key=None,
    n_basis: int | None = None,
    tol: float = 1e-6,
    max_iter: int = 100,
    max_cg: int = 25,
    path: str = "batch",
    chains: int = 4,
    precondition: str = "auto",
    dtype=None,
    memory_budget: int | None = None,
    init=None,
    max_kernel_bytes: int | None = None,
) -> PushModel:
    """Fit a kernel ranker by the p-norm push (seed 000 Sec. 7 ext. 2; Rudin 2009 eq. 1).

    Minimises, with ``f = K_{·R} β``::

        F(β) = 1/m− Σ_{j∈−} (1/m+ Σ_{i∈+} ℓ_ε(f_i − f_j))^p + (λ/2) βᵀ K_RR β

    by the trust-region Newton-CG of :func:`jaxrank.fit.fit` (same kernel block, bases, λ grids,
    preconditioners, float32 gradient floor). ``p = 1`` is RankRC (seed 000 eq. 13);
    larger ``p`` pushes the negatives that score above many positives down, favouring the top
    of the ranking (the left end of the ROC curve).

    Args:
      X: ``(m, d)`` training rows, taken as given (no standardisation).
      y: two-valued labels; the rare class is ``+1``, ``1`` or ``True``.
      lam: λ > 0, or a 1-D grid.
      p: push exponent ``p ≥ 1`` (static: each new ``p`` compiles the solver once).
      basis: as in :func:`jaxrank.fit.fit`, and so are ``loss``, ``eps``, ``kernel``, ``key``,
        ``n_basis``, ``tol``, ``max_iter``, ``max_cg``, ``path``, ``chains``, ``dtype``,
        ``memory_budget``, ``init`` and ``max_kernel_bytes`` (a kernel block over
        ``max_kernel_bytes`` is streamed).
      precondition: ``"auto"`` / ``"spectral"`` (the spectral preconditioner of
        :func:`jaxrank.fit.fit` with the push's curvature, see ``_Push``), ``"cholesky"`` or
        ``"none"``; no Jacobi diagonal for the push.

    Returns:
      A :class:`PushModel` (a :class:`~jaxrank.model.RankModel` that records ``p``);
      ``model.info.objective`` is ``F`` above.

    Raises:
      ValueError: bad input as in :func:`jaxrank.fit.fit`, ``p < 1``, or
        ``precondition="jacobi"``.

    Warns:
      ConvergenceWarning: when some λ stopped before ``tol``.

    Example:
      >>> import jaxrank
      >>> from jaxrank.push import fit_push
      >>> X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
      >>> model = fit_push(X, y, 1e-2, p=4)
      >>> model.decision_function(X).shape
      (300,)
    """
    X, pos = check_X_y(X, y)
    lams, scalar = check_lam(lam)
    return push_rows(
        X, pos, lams, scalar, p=p, basis=basis, key=key, n_basis=n_basis, kernel=kernel,
        init=init, loss=loss, eps=eps, tol=tol, path=path, chains=chains,
        precondition=precondition, max_iter=max_iter, max_cg=max_cg, dtype=dtype,
        memory_budget=memory_budget, max_kernel_bytes=max_kernel_bytes,
    )  # fmt: skip


def push_rows(X, pos, lams, scalar, *, p, basis, key, n_basis, kernel, init, **options):
    """:func:`fit_push` on rows, rare-class mask and λ grid already checked (``check_X_y``,
    ``check_lam``), ``options`` the loss and solver options (:data:`jaxrank._fitting.FIT_OPTIONS`,
    checked here): what :func:`jaxrank.fit` calls with ``p=``, so that ``X`` is checked once."""
    p = check_p(p)
    model = fit_biclass(
        X, pos, lams, scalar, basis=basis, key=key, n_basis=n_basis, kernel=kernel, init=init,
        layout=functools.partial(_Push, p=p), no_jacobi=_NO_JACOBI, **options,
    )  # fmt: skip
    return PushModel(**{f.name: getattr(model, f.name) for f in dataclasses.fields(model)}, p=p)


def _to_arrays(model: PushModel) -> dict:
    return {**rank_model_to_arrays(model), "p": model.p}


def _from_arrays(fields: dict) -> PushModel:
    base = rank_model_from_arrays(fields)
    p = check_p(fields["p"])
    return PushModel(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)}, p=p)


_io.register_model("PushModel", PushModel, _to_arrays, _from_arrays)
