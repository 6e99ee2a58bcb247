"""MIBC's dual box QP (seed 002, problem D): a primal-dual interior-point method with an
active-set polish, batched over ν. :mod:`jaxrank.mibc` re-exports
:class:`MIBCInfo` and :func:`solve_dual`. The predictor-corrector step it shares with DOPMID's
QP is :mod:`jaxrank._ipm`; the box's Newton system, certificate and polish are here.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _linalg
from jaxrank._ipm import keep_best, mehrotra_direction
from jaxrank._precision import HIGHEST as _HI
from jaxrank._validation import check_positive
from jaxrank.solver import Status

__all__ = ["MIBCInfo", "default_tol", "solve_dual", "solve_dual_batch"]


# --------------------------------------------------------------------------------------------
# The dual box QP (D): a primal-dual interior-point method with an active-set polish
# --------------------------------------------------------------------------------------------


class MIBCInfo(NamedTuple):
    """What happened in the dual solve (each field a scalar, or one per ν of a grid).

    Attributes:
      objective: the primal objective of eq. (10a), ``wᵀΣ_m w + C Σ_i ξ_i``, at the returned
        ``w = ½Σ_m⁻¹Zᵀβ`` with the smallest feasible slacks ``ξ_i = max(0, 1 − (x_i − x̄)ᵀw)``.
      dual_objective: ``1ᵀβ − ¼βᵀQβ`` at the returned (feasible) ``β``.
      gap: ``objective − dual_objective ≥ 0``, a certificate: the returned classifier's
        objective is within ``gap`` of the optimum of eq. (10).
      iterations: interior-point iterations.
      status: a :class:`jaxrank.Status` code (``CONVERGED``: ``gap ≤ tol·objective``).

    Example:
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> info = jaxrank.fit_mibc(X, y, nu=0.5).info
      >>> jaxrank.Status(int(info.status)).name, bool(info.gap >= 0)
      ('CONVERGED', True)
    """

    objective: jax.Array
    dual_objective: jax.Array
    gap: jax.Array
    iterations: jax.Array
    status: jax.Array


# named by its public path (pickles, jax.export's serialised name, doctest, the API reference)
MIBCInfo.__module__ = "jaxrank.mibc"


class _IPM(NamedTuple):
    g: jax.Array  # γ = β/C ∈ [0, 1]
    t: jax.Array  # slack 1 − γ
    z: jax.Array  # multiplier of γ ≥ 0
    s: jax.Array  # multiplier of γ ≤ 1
    best: jax.Array  # best certified γ so far
    best_gap: jax.Array
    stall: jax.Array  # iterations since the certified gap last improved
    it: jax.Array
    status: jax.Array


class _DenseGram(NamedTuple):
    """``H = cQ`` held as the ``m × m`` matrix (any kernel)."""

    Q: jax.Array
    c: jax.Array

    def hv(self, g):
        return self.c * jnp.matmul(self.Q, g, precision=_HI)

    def factor(self, d):
        # A jitter relative to H keeps the factorisation finite when H is rank-deficient and
        # the barrier terms of free variables have shrunk below rounding; it only perturbs the
        # Newton direction, the iterate stays interior and the certificate is exact.
        jitter = jnp.finfo(d.dtype).eps * self.c * jnp.max(jnp.abs(jnp.diag(self.Q)))
        return _linalg.cholesky(self.c * self.Q + jnp.diag(d + jitter))

    def solve(self, L, r):
        return _linalg.cho_solve(L, r)

    def polish(self, gamma, free, at1):
        """``H_FF γ_F = 1 − H_{F,A1} 1`` by Cholesky (jitter at rounding level) and two steps of
        iterative refinement against the unjittered matrix: when ``H_FF`` is singular (more
        free positives than the rank of ``Q``) that is a solution of the consistent system near
        the least-norm one; all solutions have the same margins."""
        dt = gamma.dtype
        H = self.c * self.Q
        fixed = jnp.where(at1, 1, 0).astype(dt)
        keep = free[:, None] & free[None, :]
        jitter = jnp.finfo(dt).eps * jnp.max(jnp.abs(jnp.diag(H)))
        Hff = jnp.where(keep, H, 0) + jnp.diag(jnp.where(free, 0, 1).astype(dt))
        L = _linalg.cholesky(Hff + jnp.diag(jnp.where(free, jitter, 0).astype(dt)))
        rhs = jnp.where(free, 1 - jnp.matmul(H, fixed, precision=_HI), fixed)
        sol = _linalg.cho_solve(L, rhs)
        for _ in range(2):
            res = rhs - jnp.matmul(Hff, sol, precision=_HI)
            sol = sol + _linalg.cho_solve(L, res)
        return jnp.where(free, sol, fixed)


class _LowRankGram(NamedTuple):
    """``H = cZZᵀ`` held as its ``m × k`` factor (linear kernel, ``k = d < m``): every product
    and Newton solve costs O(m k²) instead of O(m³)."""

    Z: jax.Array
    c: jax.Array

    def hv(self, g):
        return self.c * jnp.matmul(self.Z, jnp.matmul(g, self.Z, precision=_HI), precision=_HI)

    def factor(self, d):
        # Woodbury: (D + cZZᵀ)⁻¹ = D⁻¹ − D⁻¹Z(I/c + ZᵀD⁻¹Z)⁻¹ZᵀD⁻¹, a k × k Cholesky (the
        # "normal equations" of LP interior-point methods).
        k = self.Z.shape[1]
        dinv = 1 / d
        M = jnp.eye(k, dtype=d.dtype) / self.c + jnp.matmul(
            self.Z.T, dinv[:, None] * self.Z, precision=_HI
        )
        return d, dinv, _linalg.cholesky(M)

    def solve(self, fac, r):
        d, dinv, L = fac

        def base(r):
            y = _linalg.cho_solve(L, jnp.matmul(dinv * r, self.Z, precision=_HI))
            return dinv * (r - jnp.matmul(self.Z, y, precision=_HI))

        # one step of iterative refinement: the Woodbury difference cancels for free
        # variables (large D⁻¹) near the end
        x = base(r)
        return x + base(r - self.hv(x) - d * x)

    def polish(self, gamma, free, at1):
        """In the whitened primal: ``ŵ = ½Ẑᵀβ = cZᵀγ`` must give margins ``Z_F ŵ = 1`` on the
        free set, with ``ŵ − ŵ₀ = cZ_Fᵀγ_F`` in the row space of ``Z_F`` (``ŵ₀`` from the
        upper-bound positives). Both least-norm solutions go through the pseudo-inverse of the
        ``k × k`` matrix ``G = Z_FᵀZ_F`` (an eigendecomposition; ``Z_F`` may be rank-deficient):
        ``ŵ − ŵ₀ = G⁺Z_Fᵀb`` and ``γ_F = Z_F G⁺ (ŵ − ŵ₀)/c``."""
        dt = gamma.dtype
        fixed = jnp.where(at1, 1, 0).astype(dt)
        Zf = jnp.where(free[:, None], self.Z, 0)
        lam, V = _linalg.eigh(jnp.matmul(Zf.T, Zf, precision=_HI))
        keep = lam > jnp.finfo(dt).eps * Zf.shape[1] * jnp.max(lam)
        inv = jnp.where(keep, 1 / jnp.where(keep, lam, 1), 0)
        pinv = lambda v: jnp.matmul(V, inv * jnp.matmul(v, V, precision=_HI), precision=_HI)
        w0 = self.c * jnp.matmul(fixed, self.Z, precision=_HI)
        rhs = jnp.where(free, 1 - jnp.matmul(self.Z, w0, precision=_HI), 0)
        dw = pinv(jnp.matmul(rhs, Zf, precision=_HI))
        gf = jnp.matmul(Zf, pinv(dw), precision=_HI) / self.c
        return jnp.where(free, gf, fixed)


def _certificate(op, gamma):
    """``(P/C, D/C, gap/C)`` at ``β = Cγ``, γ clipped into the box (so β is dual feasible).

    With ``f = Hγ = ½Qβ`` the margins, ``‖ŵ‖² = ½βᵀf`` and the gap is a sum of non-negative
    terms ``β_i(f_i − 1) + C·max(0, 1 − f_i)`` (no cancellation between P and D).
    """
    gamma = jnp.clip(gamma, 0, 1)
    f = op.hv(gamma)
    slack = jnp.maximum(1 - f, 0)
    half_norm = 0.5 * jnp.vdot(gamma, f)
    primal = half_norm + jnp.sum(slack)
    gap = jnp.sum(gamma * (f - 1) + slack)
    return primal, primal - gap, gap


def _ipm_solve(op, m: int, tol, max_iter: int):
    """min_γ ½γᵀHγ − 1ᵀγ over 0 ≤ γ ≤ 1: Mehrotra predictor-corrector (Nocedal & Wright §16.6).

    Variables ``γ, t = 1 − γ`` and multipliers ``z, s ≥ 0``; KKT ``Hγ − 1 − z + s = 0``,
    ``γ + t = 1``, ``γz = ts = μ → 0``: complementary pairs ``(γ, z)``, ``(t, s)`` of
    :func:`jaxrank._ipm.mehrotra_direction`, which calls ``direction`` twice per step. Each
    call solves one system ``(H + diag(z/γ + s/t)) Δγ = r`` on the same factor (``op.factor``
    / ``op.solve``: dense Cholesky, or Woodbury for a low-rank ``H``). The step is
    ``min(1, 0.995 α_max)``. Stops when the certified relative duality gap
    (:func:`_certificate`) is at most ``tol``, or when it has not improved for 10 iterations.
    """
    dt = op.c.dtype
    one = jnp.ones((m,), dt)
    tiny = jnp.asarray(jnp.finfo(dt).tiny, dt)

    def rel_gap(gamma):
        P, _, gap = _certificate(op, gamma)
        return gap / jnp.maximum(P, tiny)

    def body(st: _IPM) -> _IPM:
        g, t, z, s = st.g, st.t, st.z, st.s
        r_d = op.hv(g) - one - z + s
        r_p = g + t - one
        fac = op.factor(z / g + s / t)

        def direction(target, cross):
            # complementarity rows z Δγ + γ Δz = r_l, s Δt + t Δs = r_u; Δt = −r_p − Δγ
            r_l = target - g * z - cross[0]
            r_u = target - t * s - cross[1]
            rhs = -r_d + r_l / g - (r_u + s * r_p) / t
            dg = op.solve(fac, rhs)
            dtt = -r_p - dg
            return (dg, dtt), ((r_l - z * dg) / g, (r_u - s * dtt) / t), None

        (dg, dtt), (dz, ds), _, step = mehrotra_direction((g, t), (z, s), 2 * m, direction)
        alpha = jnp.minimum(1.0, 0.995 * step).astype(dt)
        g, t, z, s = g + alpha * dg, t + alpha * dtt, z + alpha * dz, s + alpha * ds
        # the certified gap stopped shrinking: the rounding floor of this dtype (on degenerate,
        # rank-deficient problems it can plateau for a few iterations before dropping again)
        best_gap, best, stall = keep_best(rel_gap(g), g, st.best_gap, st.best, st.stall)
        it = st.it + 1
        finite = jnp.all(jnp.isfinite(g)) & jnp.all(jnp.isfinite(z)) & jnp.all(jnp.isfinite(s))
        status = jnp.select(
            [best_gap <= tol, ~finite, (alpha < 1e-10) | (stall >= 10), it >= max_iter],
            [Status.CONVERGED, Status.NONFINITE, Status.PRECISION, Status.MAX_ITER],
            Status.RUNNING,
        ).astype(jnp.int32)
        return _IPM(g, t, z, s, best, best_gap, stall, it, status)

    g0 = jnp.full((m,), 0.5, dt)
    zero = jnp.zeros((), jnp.int32)
    st = _IPM(g0, g0, one, one, g0, rel_gap(g0), zero, zero, jnp.asarray(Status.RUNNING, jnp.int32))
    st = jax.lax.while_loop(lambda st: st.status == Status.RUNNING, body, st)
    return st


def _polish(op, gamma):
    """Active-set refinement: fix the bounds the IPM found, solve the free block exactly.

    With ``A0 = {γ ≈ 0}``, ``A1 = {γ ≈ 1}`` and ``F`` the rest, the KKT conditions on ``F``
    are ``(Hγ)_F = 1``; ``op.polish`` solves them. The caller keeps the result only if it is
    feasible and its certified gap is smaller.
    """
    dt = gamma.dtype
    thresh = jnp.asarray(1e3, dt) * jnp.finfo(dt).eps ** 0.5
    at1 = gamma >= 1 - thresh
    free = ~((gamma <= thresh) | at1)
    return op.polish(gamma, free, at1)


@functools.partial(jax.jit, static_argnames=("max_iter", "low_rank"))
def solve_dual_batch(A, C, tol, *, max_iter, low_rank=False):
    """Solve (D) for every ``C`` of a 1-D batch (vmapped). ``A`` is the Gram matrix ``Q``, or
    with ``low_rank`` a factor ``Z`` with ``Q = ZZᵀ``. Returns ``(β, info)``."""
    m = A.shape[0]

    def single(c):
        # γ = β/C: ½γᵀHγ − 1ᵀγ = −D(Cγ)/C with H = (C/2)Q
        op = (_LowRankGram if low_rank else _DenseGram)(A, 0.5 * c)
        st = _ipm_solve(op, m, tol, max_iter)
        gamma = st.best
        polished = _polish(op, gamma)
        gap_p = _certificate(op, polished)
        ok = jnp.all(jnp.isfinite(polished)) & (jnp.min(polished) >= 0) & (jnp.max(polished) <= 1)
        ok = ok & (gap_p[2] / jnp.maximum(gap_p[0], jnp.finfo(A.dtype).tiny) < st.best_gap)
        gamma = jnp.where(ok, polished, gamma)
        P, D, gap = _certificate(op, gamma)
        status = jnp.where(gap <= tol * P, Status.CONVERGED, st.status).astype(jnp.int32)
        info = MIBCInfo(
            objective=c * P, dual_objective=c * D, gap=c * gap, iterations=st.it, status=status
        )
        return c * jnp.clip(gamma, 0, 1), info

    if C.shape[0] == 1:
        # a batch of one without vmap: batched linear algebra inside a while loop costs ~10x
        # on CPU
        return jax.tree.map(lambda a: a[None], single(C[0]))
    return jax.vmap(single)(C)


def solve_dual(Q, C, *, tol: float | None = None, max_iter: int = 100, low_rank: bool = False):
    """Solve MIBC's dual box QP (D): ``max 1ᵀβ − ¼βᵀQβ`` s.t. ``0 ≤ β ≤ C``.

    The dual of seed 002 eq. (10) (derived in the module notes). Solved in JAX by a primal-dual
    interior-point method (Mehrotra predictor-corrector, iterations jit-compiled in a
    ``lax.while_loop``), followed by an active-set polish that fixes the bounds the interior
    point identified and solves the free block exactly; the polished point is kept when it is
    feasible and has a smaller duality gap. Convergence is certified by the duality gap between
    the primal objective (eq. 10a) at ``w = ½Σ⁻¹Zᵀβ`` and the dual objective at ``β``.

    Each iteration solves one Newton system: with a dense ``Q`` by an ``m × m`` Cholesky
    (O(m³)); with ``low_rank=True`` (``Q = ZZᵀ`` given by its ``m × k`` factor ``Z``: the
    linear kernel, ``Z`` the whitened positives) by the Woodbury identity and a ``k × k``
    Cholesky (O(m k²)), the ``m × m`` matrix never formed.

    Args:
      Q: ``(m, m)`` positive semidefinite Gram matrix of the whitened positives, or with
        ``low_rank=True`` a factor ``(m, k)`` of it.
      C: ``C = 1/(ν m)``, a scalar or a 1-D batch (solved vmapped).
      tol: relative duality gap to stop at (default 1e-12 in float64, 1e-5 in float32).
      max_iter: cap on interior-point iterations (static).
      low_rank: ``Q`` is the factor ``Z`` of ``ZZᵀ``.

    Returns:
      ``(β, info)``: ``β`` of shape ``(m,)`` (or ``(L, m)`` for a batch of ``C``) and a
      :class:`MIBCInfo`.

    Example:
      >>> import jax.numpy as jnp
      >>> beta, info = solve_dual(jnp.eye(2) * 4.0, 1.0)
      >>> beta.tolist(), int(info.status)   # unconstrained optimum β = 2 Q⁻¹ 1, clipped
      ([0.5, 0.5], 0)
    """
    Q = jnp.asarray(Q)
    if Q.ndim != 2 or (not low_rank and Q.shape[0] != Q.shape[1]):
        raise ValueError(
            f"Q must be a square Gram matrix (or a factor with low_rank=True), got shape {Q.shape}."
        )
    dt = Q.dtype
    scalar = jnp.ndim(C) == 0
    Cb = jnp.atleast_1d(jnp.asarray(C, dt))
    tol = default_tol(dt) if tol is None else check_positive(tol, "tol")
    beta, info = solve_dual_batch(
        Q, Cb, jnp.asarray(tol, dt), max_iter=int(max_iter), low_rank=bool(low_rank)
    )
    if scalar:
        return beta[0], jax.tree.map(lambda a: a[0], info)
    return beta, info


def default_tol(dt) -> float:
    return 1e-12 if np.dtype(dt) == np.float64 else 1e-5
