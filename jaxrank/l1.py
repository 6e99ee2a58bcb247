"""L1-penalised RankRC: sparse kernel rankers (seed 000, Sec. 7, extension 1).

Seed 000 (Sec. 7, "Regularization"): "In problem (13) we can use an ℓ1-regularizer, ||β||₁,
instead of βᵀ K_{++} β. This would lead to sparser solutions [Tibshirani 1996] and could be
solved using coordinate descent methods". With ``f = K_{·R} β`` jaxrank minimises::

    F(β) = 1/(m+ m−) Σ_{i∈+} Σ_{j∈−} ℓ_ε(f_i − f_j) + μ ||β||₁ + (λ/2) βᵀ K_RR β

where ``λ = 0`` (the default) is exactly the paper's proposal (the ℓ1 term *replaces* the RKHS
penalty) and ``λ > 0`` adds the RKHS term back as an elastic-net-like option (not in the paper;
it makes the problem strongly convex on the span of the basis, so the minimiser is unique).

Solver: FISTA (Beck & Teboulle, SIAM J. Imaging Sci. 2009, Alg. FISTA with backtracking) on
the smooth part ``s(β)`` (the pairwise loss plus the optional RKHS term, whose value and gradient
are those of :func:`jaxrank.objective.objective_closures`: sorted windows, two products with ``K``),
with the proximal map of ``μ||·||₁`` — soft thresholding, which sets coefficients to *exact*
zeros. Instead of the paper's suggested coordinate descent (one kernel column per coordinate
update, O(m) each) every step here is a full-vector update built from the same O(m log m)
operators as RankRC. Two standard safeguards make it fast in practice:

- the Lipschitz estimate ``L`` is decreased by a factor before each step and doubled until the
  sufficient-decrease condition ``s(z) ≤ s(y) + ∇s(y)ᵀ(z − y) + (L/2)||z − y||²`` holds
  (backtracking both ways);
- adaptive restart (O'Donoghue & Candès, Found. Comput. Math. 2015): the momentum is reset when
  it points uphill, ``(y − z)ᵀ(z − x) > 0``, and a step that would increase ``F`` is discarded
  and retried from the last iterate without momentum — so ``F`` never increases.

Stopping rule: the optimality residual ``r = dist(0, ∂F(β))`` (the minimum-norm subgradient)::

    r_r = |∇s(β)_r + μ sign β_r|     if β_r ≠ 0
    r_r = max(|∇s(β)_r| − μ, 0)      if β_r = 0

and ``||r||_∞ ≤ tol`` is convergence: exactly the subgradient optimality conditions of the
ℓ1 problem, to tolerance. ``μ ≥ ||∇s(0)||_∞`` makes ``β = 0`` optimal (:func:`l1_max`).

A μ grid is solved either as a warm-started path from large to small μ (``lax.scan``, the
default: each solve starts at the previous solution) or by ``jax.vmap`` of the single-μ solver
(the kernel block unbatched): one compiled loop for the whole grid.

Limitation, measured: with ``λ = 0`` and a small μ (below about ``2⁻¹⁰ μ_max`` on seed 000's
simulated data) the problem approaches the unregularised one, is very ill-conditioned, and
FISTA (sublinear there) may stop at ``max_iter`` with a residual ~1e-5: a
:class:`~jaxrank.ConvergenceWarning` says so; a small elastic ``λ`` or a larger μ avoids it.
(A Newton polish for that regime, tried and dropped: docs/design.md §12.)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _buckets
from jaxrank import io as _io
from jaxrank import kernels as _kernels
from jaxrank._fitting import choose_dtype, fit_causes, gram, pad_square
from jaxrank._validation import (
    check_cast,
    check_eps_dtype,
    check_fit_result,
    check_lam,
    check_positive,
    check_X_y,
)
from jaxrank.bases import resolve_basis
from jaxrank.losses import get_loss
from jaxrank.model import RankModel, rank_model_to_arrays, warn_stopped
from jaxrank.objective import objective_closures
from jaxrank.solver import Status, status_code

__all__ = [
    "L1Info",
    "L1Model",
    "fista_l1",
    "fit_l1",
    "l1_max",
    "l1_residual",
    "soft_threshold",
]


class L1Info(NamedTuple):
    """What happened in an L1 solve (each field a scalar, or one per μ of a grid).

    Attributes:
      objective: final ``F(β)`` (loss + μ||β||₁ + (λ/2)βᵀK_RRβ).
      grad_norm: final optimality residual ``||dist(0, ∂F(β))||_∞`` (module notes).
      iterations: proximal-gradient (FISTA) steps taken.
      evaluations: evaluations of the smooth part's value and gradient (backtracking included).
      n_nonzero: number of non-zero coefficients.
      status: a :class:`~jaxrank.solver.Status` code.

    Example:
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
      >>> info = jaxrank.fit_l1(X, y, l1=[1e-2, 1e-3]).info
      >>> bool(info.n_nonzero[0] < info.n_nonzero[1])  # the larger μ, the sparser β
      True
      >>> [jaxrank.Status(int(s)).name for s in info.status]
      ['CONVERGED', 'CONVERGED']
    """

    objective: jax.Array
    grad_norm: jax.Array
    iterations: jax.Array
    evaluations: jax.Array
    n_nonzero: jax.Array
    status: jax.Array


def soft_threshold(x: jax.Array, t) -> jax.Array:
    """The proximal map of ``t||·||₁``: ``sign(x) max(|x| − t, 0)`` (exact zeros).

    Example:
      >>> import jax.numpy as jnp
      >>> soft_threshold(jnp.array([-2.0, 0.5, 3.0]), 1.0).tolist()
      [-1.0, 0.0, 2.0]
    """
    return jnp.sign(x) * jnp.maximum(jnp.abs(x) - t, 0)


def l1_residual(beta: jax.Array, grad: jax.Array, mu) -> jax.Array:
    """Per coordinate, the minimum-norm subgradient of ``s(β) + μ||β||₁`` given ``∇s(β)``.

    Zero everywhere exactly when ``β`` is optimal: ``∇s_r = −μ sign β_r`` on the support and
    ``|∇s_r| ≤ μ`` off it.

    Example:
      >>> import jax.numpy as jnp
      >>> r = l1_residual(jnp.array([1.0, 0.0, 0.0]), jnp.array([-0.5, 0.3, -0.7]), 0.5)
      >>> [round(float(v), 6) for v in r]
      [0.0, 0.0, 0.2]
    """
    mu = jnp.asarray(mu, grad.dtype)
    on = jnp.abs(grad + mu * jnp.sign(beta))
    off = jnp.maximum(jnp.abs(grad) - mu, 0)
    return jnp.where(beta != 0, on, off)


class _State(NamedTuple):
    x: jax.Array  # last accepted iterate
    s: jax.Array  # smooth value at x
    g: jax.Array  # smooth gradient at x
    F: jax.Array  # composite value at x
    y: jax.Array  # extrapolated point
    sy: jax.Array
    gy: jax.Array
    t: jax.Array  # FISTA momentum parameter
    L: jax.Array  # Lipschitz estimate
    fails: jax.Array  # consecutive rejected steps without momentum
    iterations: jax.Array
    evaluations: jax.Array
    status: jax.Array


class _Try(NamedTuple):
    L: jax.Array
    z: jax.Array
    s: jax.Array
    g: jax.Array
    ok: jax.Array
    k: jax.Array


def fista_l1(
    fun: Callable[[jax.Array], tuple[jax.Array, jax.Array, Any]],
    x0: jax.Array,
    mu,
    *,
    L0,
    tol=1e-6,
    floor=0.0,
    max_iter: int | jax.Array = 5000,
    max_backtrack: int = 60,
    shrink: float = 0.8,
) -> tuple[jax.Array, L1Info]:
    """Minimise ``s(x) + μ||x||₁`` by FISTA with two-way backtracking and adaptive restart.

    Beck & Teboulle (2009), FISTA with backtracking; restart of O'Donoghue & Candès (2015);
    monotone: a step that increases the objective is discarded (module notes). ``lax.while_loop``
    throughout, so it jit-compiles once and vmaps over ``mu``.

    Args:
      fun: ``x -> (s(x), ∇s(x), anything)`` for a convex, L-smooth ``s``.
      x0: starting point ``(n,)``.
      mu: ℓ1 weight ``μ > 0`` (dynamic).
      L0: initial Lipschitz estimate (any positive value; it adapts).
      tol: stop when ``||dist(0, ∂F)||_∞ ≤ tol``.
      floor: the gradient's own rounding error; a residual at or below max(tol, floor) is
        ``CONVERGED`` (:func:`jaxrank.solver.status_code`).
      max_iter: cap on proximal-gradient steps (dynamic: changing it does not recompile).
      max_backtrack: cap on doublings of ``L`` per step (static).
      shrink: factor applied to ``L`` before each step's backtracking.

    Returns:
      ``(x, info)`` with ``info`` an :class:`L1Info`.

    Example:
      >>> import jax.numpy as jnp
      >>> b = jnp.array([3.0, 0.2, -1.0])
      >>> fun = lambda x: (0.5 * jnp.sum((x - b) ** 2), x - b, None)  # lasso with A = I
      >>> x, info = fista_l1(fun, jnp.zeros(3), 0.5, L0=1.0)
      >>> [round(float(v), 5) for v in x], int(info.status)
      ([2.5, 0.0, -0.5], 0)
    """
    dt = x0.dtype
    mu = jnp.asarray(mu, dt)
    tol = jnp.asarray(tol, dt)
    floor = jnp.asarray(floor, dt)
    shrink = jnp.asarray(shrink, dt)
    rounding = jnp.asarray(8 * jnp.finfo(dt).eps, dt)
    accurate_rel = jnp.asarray(1e4 * jnp.finfo(dt).eps, dt)
    one = jnp.ones((), dt)
    l1 = lambda x: jnp.sum(jnp.abs(x))

    def status_of(x, s, g, stalled, it):
        r = jnp.max(l1_residual(x, g, mu))
        finite = jnp.isfinite(s) & jnp.all(jnp.isfinite(g))
        return status_code(finite, r, stalled, it, tol=tol, floor=floor, max_iter=max_iter)

    s0, g0, _ = fun(x0)
    F0 = s0 + mu * l1(x0)
    init = _State(
        x=x0, s=s0, g=g0, F=F0, y=x0, sy=s0, gy=g0, t=one, L=jnp.asarray(L0, dt),
        fails=jnp.zeros((), jnp.int32), iterations=jnp.zeros((), jnp.int32),
        evaluations=jnp.ones((), jnp.int32),
        status=status_of(x0, s0, g0, jnp.asarray(False), 0),
    )  # fmt: skip

    def attempt(st: _State, L):
        z = soft_threshold(st.y - st.gy / L, mu / L)
        s, g, _ = fun(z)
        d = z - st.y
        dd = jnp.vdot(d, d)
        # Sufficient decrease s(z) ≤ s(y) + ∇s(y)ᵀd + (L/2)||d||² as a local curvature
        # 2(s(z) − s(y) − ∇s(y)ᵀd)/||d||² ≤ L; once that difference sinks into the rounding
        # error of s, the curvature (∇s(z) − ∇s(y))ᵀd/||d||² (exact for a quadratic, and free
        # of cancellation) takes over (the test of TFOCS, Becker, Candès & Grant 2011).
        diff = s - st.sy - jnp.vdot(st.gy, d)
        accurate = jnp.abs(diff) >= accurate_rel * jnp.maximum(jnp.abs(s), jnp.abs(st.sy))
        curv = jnp.where(accurate, 2 * diff, jnp.vdot(g - st.gy, d))
        ok = jnp.isfinite(s) & jnp.all(jnp.isfinite(g)) & ((dd == 0) | (curv <= L * dd))
        return s, g, z, ok

    def body(st: _State) -> _State:
        L = st.L * shrink
        s, g, z, ok = attempt(st, L)

        def bt_body(c: _Try) -> _Try:
            L = 2 * c.L
            s, g, z, ok = attempt(st, L)
            return _Try(L, z, s, g, ok, c.k + 1)

        c = jax.lax.while_loop(
            lambda c: ~c.ok & (c.k < max_backtrack), bt_body, _Try(L, z, s, g, ok, 0)
        )
        Fz = c.s + mu * l1(c.z)
        momentum = jnp.any(st.y != st.x)
        # A sufficient-decrease step from y = x cannot increase F; from an extrapolated y it
        # can: then it is dropped and the next step restarts at x. A change within F's rounding
        # error is no evidence either way: accepted (the residual, a gradient quantity, still
        # measures progress there).
        noise = jnp.abs(Fz - st.F) <= rounding * jnp.maximum(jnp.abs(Fz), jnp.abs(st.F))
        accept = c.ok & ((Fz <= st.F) | noise)
        # Without momentum a rise of F beyond its rounding means the curvature test let too
        # long a step through (it is exact only for a quadratic): retry with twice L; give up
        # (PRECISION) after 10 such rejections in a row.
        failed = ~accept & ~momentum
        fails = jnp.where(failed, st.fails + 1, 0)
        stalled = fails >= 10
        x = jnp.where(accept, c.z, st.x)
        s = jnp.where(accept, c.s, st.s)
        g = jnp.where(accept, c.g, st.g)
        F = jnp.where(accept, Fz, st.F)
        t_next = 0.5 * (1 + jnp.sqrt(1 + 4 * st.t * st.t))
        uphill = jnp.vdot(st.y - c.z, c.z - st.x) > 0
        restart = ~accept | uphill
        t_next = jnp.where(restart, one, t_next)
        coef = jnp.where(restart, 0, (st.t - 1) / t_next)
        y = x + coef * (x - st.x)
        sy, gy = jax.lax.cond(
            coef != 0, lambda: fun(y)[:2], lambda: (s, g)
        )  # fmt: skip
        it = st.iterations + 1
        evals = st.evaluations + c.k + 1 + (coef != 0).astype(jnp.int32)
        return _State(
            x=x, s=s, g=g, F=F, y=y, sy=sy, gy=gy, t=t_next,
            L=jnp.where(failed, 2 * c.L / shrink, c.L), fails=fails, iterations=it,
            evaluations=evals, status=status_of(x, s, g, stalled | ~c.ok, it),
        )  # fmt: skip

    out = jax.lax.while_loop(lambda st: st.status == Status.RUNNING, body, init)
    info = L1Info(
        objective=out.F,
        grad_norm=jnp.max(l1_residual(out.x, out.g, mu)),
        iterations=out.iterations,
        evaluations=out.evaluations,
        n_nonzero=jnp.sum(out.x != 0).astype(jnp.int32),
        status=out.status,
    )
    return out.x, info


def _lipschitz(hvp, lin, n: int, dt, steps: int = 20, n_real=None) -> jax.Array:
    # Power iteration on the Hessian at the start: a starting L for the backtracking. With a
    # padded basis (n_real < n real coordinates, dynamic) the start vector is zero on the
    # padding, which the block-diagonal Hessian then never reaches: the same L as unpadded.
    def step(_, v):
        hv = hvp(lin, v)
        return hv / jnp.maximum(jnp.linalg.norm(hv), jnp.finfo(dt).tiny)

    if n_real is None:
        v0 = jnp.ones((n,), dt) / math.sqrt(n)
    else:
        v0 = jnp.where(jnp.arange(n) < n_real, 1, 0).astype(dt) / jnp.sqrt(jnp.asarray(n_real, dt))
    v = jax.lax.fori_loop(0, steps, step, v0)
    return jnp.maximum(jnp.linalg.norm(hvp(lin, v)), jnp.finfo(dt).tiny)


@functools.partial(jax.jit, static_argnames=("sizes", "block", "path"))
def _solve(K, Krr, mus, lam, beta0, loss, tol, floor, max_iter, counts, *, sizes, block, path):
    # counts: (n_pos, n_neg, 1/(n_pos n_neg), n_basis), traced; sizes: the padded (P, N)
    n_pos, n_neg, inv_pairs, nb = counts
    fun, hvp = objective_closures(K, Krr, lam, loss, n_pos, n_neg, block, sizes=sizes,
                                  inv_pairs=inv_pairs)  # fmt: skip
    lin0 = fun(jnp.zeros_like(beta0[0]))[2]
    L0 = _lipschitz(hvp, lin0, beta0.shape[1], K.dtype, n_real=nb)

    def single(mu, b0):
        return fista_l1(fun, b0, mu, L0=L0, tol=tol, floor=floor, max_iter=max_iter)

    if path == "batch":
        return jax.vmap(single)(mus, beta0)

    # Warm path (μ sorted from large to small by the caller): each solve starts at the
    # previous solution, as a lasso path is usually computed.
    def step(b, mu):
        beta, info = single(mu, b)
        return beta, (beta, info)

    _, out = jax.lax.scan(step, beta0[0], mus)
    return out


@functools.partial(jax.jit, static_argnames=("sizes", "block"))
def _grad0(K, Krr, lam, loss, counts, *, sizes, block):
    n_pos, n_neg, inv_pairs, _ = counts
    fun, _ = objective_closures(K, Krr, lam, loss, n_pos, n_neg, block, sizes=sizes,
                                inv_pairs=inv_pairs)  # fmt: skip
    return fun(jnp.zeros((K.shape[1],), K.dtype))[1]


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class L1Model(RankModel):
    """A :class:`~jaxrank.model.RankModel` fitted with the ℓ1 penalty (:func:`fit_l1`).

    Attributes (besides those of ``RankModel``):
      l1: the ℓ1 weight μ, ``()`` or ``(L,)``; ``lam`` holds the elastic λ (0 for the paper's
        problem) with the same shape; ``info`` is an :class:`L1Info`.

    Example:
      >>> import numpy as np
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
      >>> model = jaxrank.fit_l1(X, y, l1=np.array([1e-2, 1e-3]))
      >>> model.coef.shape, model.decision_function(X).shape
      ((2, 30), (2, 300))
    """

    l1: Any = None

    def select(self, i: int) -> L1Model:
        """The model of the ``i``-th μ of a grid, as a scalar model."""
        if self.coef.ndim == 1:
            raise ValueError("select() needs a model fitted on a μ grid.")
        return dataclasses.replace(
            self,
            coef=self.coef[i],
            lam=self.lam[i],
            l1=self.l1[i],
            info=jax.tree.map(lambda a: a[i], self.info),
        )


class _Setup(NamedTuple):
    dt: Any
    idx: np.ndarray
    kernel: Any
    block: int
    B: jax.Array  # (|R|, d) real basis rows
    K: jax.Array  # (m_pad, nb_pad) block, rows [positives; pad; negatives; pad; pad]
    Krr: jax.Array  # (nb_pad, nb_pad): [[K_RR, 0], [0, s I]]
    floor: float
    sizes: tuple[int, int]  # padded (P, N)
    counts: tuple  # (n_pos, n_neg, 1/(n_pos n_neg), |R|): dynamic arguments of the solvers


def _setup(X, pos, basis, key, n_basis, kernel, dtype, memory_budget) -> _Setup:
    """Kernel block, ``K_RR`` and the float gradient floor as :func:`jaxrank._fitting.fit_rows`
    builds them: classes and basis padded to shape buckets (:mod:`jaxrank._buckets`; padded
    rows enter no pair, padded basis columns are zero with an identity block in ``K_RR``), so a
    new size inside the buckets compiles nothing."""
    dt = np.dtype(choose_dtype(X, dtype))
    check_cast(X, dt)
    idx = resolve_basis(basis, pos, key=key, n_basis=n_basis, X=X)
    kernel = _kernels.resolve_kernel(kernel, X, dtype=dt)
    nb = idx.size
    n_pos = int(pos.sum())
    n_neg = int(pos.size - n_pos)
    P, N = _buckets.bucket(n_pos), _buckets.bucket(n_neg)
    nb_pad = _buckets.bucket(nb)
    block = _kernels.product_block(P + N)
    rows, n_chunks = _kernels.chunk_rows(P + N, nb_pad, dt.itemsize, block)
    _kernels.check_memory(
        (rows * n_chunks + nb_pad) * nb_pad * dt.itemsize,
        memory_budget,
        f"the kernel block ({X.shape[0]} x {nb})",
    )
    Xn = np.asarray(X, dt)
    # padding rows are copies of a real row (as in fit_rows: the Gaussian kernel centres on the
    # mean basis row)
    Xo = np.empty((rows * n_chunks, Xn.shape[1]), dt)
    Xo[:] = Xn[idx[0]]
    Xo[:n_pos] = Xn[pos]
    Xo[P : P + n_neg] = Xn[~pos]
    Bp = np.empty((nb_pad, Xn.shape[1]), dt)
    Bp[:] = Xn[idx[0]]
    Bp[:nb] = Xn[idx]
    K = _kernels.kernel_block(kernel, Xo, Bp, padded=True, multiple=block, n_basis=nb)
    Krr_n = np.asarray(gram(kernel, _buckets.put(Bp)))[:nb, :nb]
    scale = float(np.mean(np.diag(Krr_n).astype(np.float64)))
    scale = scale if math.isfinite(scale) and scale > 0 else 1.0
    Krr = _buckets.put(pad_square(Krr_n, nb_pad, scale))
    # Rounding error of the two-level gradient sum, as in fit_rows: below it r is noise.
    kmax = float(np.max(np.abs(np.diag(Krr_n))))
    depth = math.sqrt(block) + math.sqrt(rows * n_chunks / block)
    floor = float(np.finfo(dt).eps) * depth * max(kmax, 1.0)
    counts = (n_pos, n_neg, 1.0 / (n_pos * n_neg), nb)
    return _Setup(dt, idx, kernel, block, _buckets.put(Bp[:nb]), K, Krr, floor, (P, N), counts)


def _check_elastic(lam) -> float:
    if isinstance(lam, bool) or np.ndim(lam) != 0 or np.asarray(lam).dtype.kind not in "iuf":
        raise ValueError(f"lam (the elastic RKHS weight) must be a number >= 0, got {lam!r}.")
    v = float(lam)
    if not np.isfinite(v) or v < 0:
        raise ValueError(f"lam (the elastic RKHS weight) must be finite and >= 0, got {lam!r}.")
    return v


def l1_max(
    X, y, lam=0.0, *, basis="rare", loss="smoothed_hinge", eps=0.5, kernel=None, key=None,
    n_basis=None, dtype=None, memory_budget=None,
) -> float:  # fmt: skip
    """The smallest ℓ1 weight for which ``β = 0`` is optimal: ``μ_max = ||∇s(0)||_∞``.

    A μ grid for :func:`fit_l1` is usually ``μ_max · 2^{−k}``; arguments as in :func:`fit_l1`.

    Example:
      >>> import numpy as np
      >>> import jaxrank
      >>> from jaxrank.l1 import l1_max
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> mu = l1_max(X, y)
      >>> path = jaxrank.fit_l1(X, y, l1=mu * 2.0 ** -np.arange(0.0, 3.0))  # from μ_max down
      >>> [int(n) for n in path.info.n_nonzero][0], int(path.info.n_nonzero[-1]) > 0
      (0, True)
    """
    X, pos = check_X_y(X, y)
    lam = _check_elastic(lam)
    _check_loss(loss, eps)
    st = _setup(X, pos, basis, key, n_basis, kernel, dtype, memory_budget)
    lossfn = jax.tree.map(lambda v: _buckets.put(v, st.dt), get_loss(loss, eps))
    g = _grad0(st.K, st.Krr, _buckets.put(lam, st.dt), lossfn, st.counts, sizes=st.sizes,
               block=st.block)  # fmt: skip
    return float(np.max(np.abs(np.asarray(g))))


def _check_loss(loss, eps):
    if loss == "hinge":
        raise ValueError("loss='hinge' is not differentiable; use 'smoothed_hinge'.")
    get_loss(loss, check_positive(eps, "eps") if loss == "smoothed_hinge" else eps)


#: :func:`fit_l1`'s defaults where they differ from :data:`jaxrank._fitting.FIT_OPTIONS` (FISTA
#: takes many cheap steps, and a μ grid is solved from large to small): the one definition that
#: its signature and :func:`jaxrank.fit` with ``penalty="l1"`` use.
L1_MAX_ITER = 5000
L1_PATH = "warm"


def fit_l1(
    X,
    y,
    lam=0.0,
    *,
    l1,
    basis="rare",
    loss: str = "smoothed_hinge",
    eps: float = 0.5,
    kernel=None,
    key=None,
    n_basis: int | None = None,
    tol: float = 1e-6,
    max_iter: int = L1_MAX_ITER,
    path: str = L1_PATH,
    dtype=None,
    memory_budget: int | None = None,
    init=None,
) -> L1Model:
    """Fit a sparse kernel ranker with the ℓ1 penalty (seed 000 Sec. 7, extension 1).

    Minimises, with ``f = K_{·R} β``::

        F(β) = 1/(m+ m−) Σ_{i∈+} Σ_{j∈−} ℓ_ε(f_i − f_j) + μ ||β||₁ + (λ/2) βᵀ K_RR β

    by FISTA with backtracking and adaptive restart (module notes); coefficients are exactly
    zero off the support. ``lam = 0`` (default) is the paper's problem: ℓ1 instead of the RKHS
    penalty of eq. (13).

    Args:
      X: ``(m, d)`` training rows, taken as given (no standardisation).
      y: two-valued labels; the rare class is ``+1``, ``1`` or ``True``.
      lam: elastic RKHS weight λ ≥ 0 (a scalar; 0 = pure ℓ1, the paper's proposal).
      l1: ℓ1 weight μ > 0, or a 1-D grid (vmapped: one model holding every μ). See
        :func:`l1_max` for the μ above which ``β = 0``.
      basis: ``"rare"`` (the paper's RankRC basis), ``"all"``, ``"random"`` or row indices, as
        in :func:`jaxrank.fit.fit`.
      loss: ``"smoothed_hinge"`` (ε = ``eps``) or ``"squared_hinge"``.
      eps, kernel, key, n_basis, dtype, memory_budget: as in :func:`jaxrank.fit.fit`.
      tol: stop when the optimality residual ``||dist(0, ∂F)||_∞ ≤ tol``.
      max_iter: cap on proximal-gradient steps per μ.
      path: ``"warm"`` (μ from large to small, each solve starting at the previous solution,
        as lasso paths are computed) or ``"batch"`` (the μ grid vmapped: one loop, as long as
        its slowest member; measured 7x slower: docs/design.md §12).
      init: optional start ``(|R|,)`` or ``(L, |R|)`` (default zeros); with ``path="warm"``
        only the largest μ starts there.

    Returns:
      An :class:`L1Model`: ``coef`` with exact zeros, ``l1`` = μ, ``lam`` = λ, ``info`` an
      :class:`L1Info` (objective, optimality residual, iterations, evaluations, non-zeros,
      status per μ).

    Raises:
      ValueError: bad ``X``/``y`` (as in :func:`jaxrank.fit.fit`), μ ≤ 0 or not finite,
        λ < 0, a bad loss or option.

    Warns:
      ConvergenceWarning: when some μ stopped before ``tol`` (status in ``info.status``).

    Example:
      >>> import jaxrank
      >>> from jaxrank.l1 import fit_l1
      >>> X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
      >>> model = fit_l1(X, y, l1=[1e-2, 1e-3])
      >>> bool(model.info.n_nonzero[0] < model.info.n_nonzero[1] <= 30)
      True
    """
    X, pos = check_X_y(X, y)
    return l1_rows(
        X, pos, lam, l1=l1, basis=basis, loss=loss, eps=eps, kernel=kernel, key=key,
        n_basis=n_basis, tol=tol, max_iter=max_iter, path=path, dtype=dtype,
        memory_budget=memory_budget, init=init,
    )  # fmt: skip


def l1_rows(
    X, pos, lam, *, l1, basis, loss, eps, kernel, key, n_basis, tol, max_iter, path, dtype,
    memory_budget, init,
) -> L1Model:  # fmt: skip
    """:func:`fit_l1` on rows and a rare-class mask already checked (``check_X_y``): what
    :func:`jaxrank.fit` calls with ``penalty="l1"``, so that ``X`` is checked once. Its
    :class:`~jaxrank.ConvergenceWarning` names the caller of its caller (``fit_l1``'s or
    ``fit``'s)."""
    try:
        mus, scalar = check_lam(l1)
    except ValueError as err:
        raise ValueError(str(err).replace("lam", "l1 (the ℓ1 weight μ)", 1)) from err
    lam = _check_elastic(lam)
    _check_loss(loss, eps)
    tol = check_positive(tol, "tol")
    if isinstance(max_iter, bool) or int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}.")
    if path not in ("batch", "warm"):
        raise ValueError(f"path must be 'batch' or 'warm', got {path!r}.")
    st = _setup(X, pos, basis, key, n_basis, kernel, dtype, memory_budget)
    dt, idx, nb = st.dt, st.idx, st.idx.size
    if loss == "smoothed_hinge":
        check_eps_dtype(eps, dt)
    nb_pad = st.Krr.shape[0]
    L = mus.size
    beta0 = np.zeros((L, nb_pad), dt)
    if init is not None:
        with np.errstate(over="ignore"):  # beyond the dtype (1e39 in float32): refused below
            init = np.asarray(init, dt)
        if init.shape not in ((nb,), (L, nb)) or not np.all(np.isfinite(init)):
            raise ValueError(
                f"init must be finite with shape ({nb},) or ({L}, {nb}), got {init.shape}."
            )
        beta0[:, :nb] = init
    # the μ count to its bucket: extra members repeat the largest μ (batch; the fastest) or
    # the smallest (warm: last, started at its own solution), and are dropped below
    L_pad = _buckets.bucket_lams(L)
    if path == "warm":
        sort = np.argsort(-mus, kind="stable")
        sort = np.concatenate([sort, np.full(L_pad - L, sort[-1])])
    else:
        sort = np.concatenate([np.arange(L), np.full(L_pad - L, int(np.argmax(mus)))])
    put = _buckets.put
    betas, info = _solve(
        st.K, st.Krr, put(mus[sort], dt), put(lam, dt), put(beta0[sort]),
        jax.tree.map(lambda v: put(v, dt), get_loss(loss, eps)), put(tol, dt),
        put(st.floor, dt), put(max_iter, np.int32), st.counts, sizes=st.sizes, block=st.block,
        path=path,
    )  # fmt: skip
    unsort = np.argsort(sort[:L])
    betas = np.asarray(betas)[unsort, :nb]
    info = jax.tree.map(lambda a: np.asarray(a)[unsort], info)
    check_fit_result(
        betas, info.status, "μ", mus, who="fit_l1", dtype=dt,
        zero=bool(np.all(betas == 0)),  # one μ ≥ μ_max has the optimum 0; every μ, no model
        causes=lambda: fit_causes(X, st.kernel, eps),
    )  # fmt: skip
    # The solver's CONVERGED already includes the dtype's floor (jaxrank.solver): every other
    # status is an early stop and warns, as jaxrank.fit does.
    warn_stopped(
        info.status, info.iterations, "μ", mus, "residual ", info.grad_norm,
        head="fit_l1 stopped before the optimality tolerance",
        stacklevel=4,  # the caller of fit_l1 (or of fit)
    )  # fmt: skip
    if scalar:
        betas = betas[0]
        info = jax.tree.map(lambda a: a[0], info)
    shape = () if scalar else (L,)
    return L1Model(
        basis=st.B,
        coef=put(betas),
        lam=put(np.full(shape, lam), dt),
        kernel=st.kernel,
        info=jax.tree.map(put, info),
        basis_index=put(idx, np.int32),
        loss=loss,
        eps=float(eps),
        l1=put(mus[0] if scalar else mus, dt),
    )


def _to_arrays(model: L1Model) -> dict[str, Any]:
    return {**rank_model_to_arrays(model), "l1": model.l1}


def _from_arrays(fields: dict[str, Any]) -> L1Model:
    model = L1Model(
        basis=fields["basis"],
        coef=fields["coef"],
        lam=fields["lam"],
        kernel=fields["kernel"],
        info=L1Info(**{f: fields[f"info.{f}"] for f in L1Info._fields}),
        basis_index=fields["basis_index"],
        loss=fields["loss"],
        eps=fields["eps"],
        l1=fields["l1"],
    )
    b, c, mu = np.shape(model.basis), np.shape(model.coef), np.shape(model.l1)
    shapes_ok = (
        len(b) == 2
        and len(mu) <= 1
        and c == (*mu, b[0])
        and np.shape(model.lam) == mu
        and np.shape(model.basis_index) == (b[0],)
        and all(np.shape(getattr(model.info, f)) == mu for f in L1Info._fields)
    )
    if not shapes_ok:
        raise ValueError(f"inconsistent L1Model: basis {b}, coef {c}, l1 {mu} disagree.")
    # as fit_l1 checks its arguments: μ finite > 0 (check_lam), loss / ε, status codes, counts
    _io.check_fitted_fields(
        model, "L1Model", penalty="l1", counts=("iterations", "evaluations", "n_nonzero")
    )
    # the elastic λ may be 0 (_check_elastic); it is stored in the coefficients' dtype
    problems = _io.float_problems(model.lam, "lam", dtype=np.asarray(model.coef).dtype, lo=0.0)
    nnz = np.asarray(model.info.n_nonzero)
    if nnz.size and nnz.max() > b[0]:
        problems.append(f"info.n_nonzero {nnz.max()} exceeds the {b[0]} basis rows")
    if problems:
        raise ValueError("invalid L1Model: " + "; ".join(problems) + ".")
    return model


_io.register_model("L1Model", L1Model, _to_arrays, _from_arrays)
_io.register_export(L1Info)  # its info (the field is annotated as RankModel's SolverInfo)
