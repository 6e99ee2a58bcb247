"""DOPMID's working-set QP: a primal-dual interior-point method (Mehrotra predictor-corrector)
with an active-set polish (seed 004; :mod:`jaxrank.dopmid` notes).

:mod:`jaxrank.dopmid` re-exports :class:`QPResult` and :func:`solve_qp`. The
predictor-corrector step it shares with MIBC's QP is :mod:`jaxrank._ipm`; the simplex's Newton
system, the Frank-Wolfe certificate and the polish are here.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrank import _linalg
from jaxrank._ipm import keep_best, mehrotra_direction
from jaxrank._precision import HIGHEST as _HI
from jaxrank._validation import (
    check_positive,
)

__all__ = ["QPResult", "dot", "qp_core", "solve_qp"]


# --------------------------------------------------------------------------------------------
# the working-set QP
# --------------------------------------------------------------------------------------------


class QPResult(NamedTuple):
    """Solution of the working-set dual QP (see :func:`solve_qp`).

    Attributes:
      alpha: ``(K,)`` multipliers, ``α ≥ 0``, ``Σ α = C`` (0 on entries outside ``mask``).
      dual: the dual value ``Σ α_c Δ_c − ½ αᵀGα`` (= the primal value of the working-set QP).
      iterations: interior-point iterations.
      converged: the interior-point residuals reached the tolerance.
      polished: the active-set polish was accepted (the solution is exact to rounding).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.dopmid import solve_qp
      >>> res = solve_qp(jnp.eye(2), jnp.array([1.0, 0.5]), 1.0)  # max bᵀa − ½aᵀGa on C·simplex
      >>> res.alpha.shape, bool(res.converged)
      ((2,), True)
    """

    alpha: jax.Array
    dual: jax.Array
    iterations: jax.Array
    converged: jax.Array
    polished: jax.Array


# named by its public path (pickles, jax.export's serialised name, doctest, the API reference)
QPResult.__module__ = "jaxrank.dopmid"


def dot(a, b):
    """Matrix / vector product at full precision (no TF32 on GPUs)."""
    return jnp.matmul(a, b, precision=_HI)


def qp_core(G, delta, C, live, max_iter: int):
    """Interior point + polish for ``max Δᵀα − ½αᵀGα`` over ``α ≥ 0, Σα = C`` (``live`` only).

    Returns ``(QPResult, active)`` with ``active`` the planes in the solution's support.

    Solved in scaled variables ``α = sγ``, ``s = min(C, Δ_max / G_max)``: as
    ``min ½γᵀQγ − bᵀγ`` over ``γ ≥ 0, Σγ = T = C/s ≥ 1`` with ``Q = sG/N``, ``b = Δ/N`` and
    ``N = max(s G_max, Δ_max)``, so that ``max |Q|, max |b| ≤ 1`` with one of them 1. Without
    ``s``, a large ``C G`` (large C, or the ``"paper"`` scale's ``||Ψ|| ∝ n``) shrinks the
    planes' share of the simplex below the interior point's absolute tolerance and the QP
    returns ``α ≈ (C, 0, …)``, i.e. ``w ≈ 0`` (issue 17); with it the multipliers of the real
    planes are O(1) and the plane of ``ȳ = y`` (``g = 0``) takes up the rest of the mass.

    Entries outside ``live`` are padding: they get ``Q_ii = 1, b_i = −1`` and no share of the
    simplex, a decoupled problem whose solution is 0, so one compiled solver serves every
    working-set size up to ``K``.

    Interior point: KKT ``Qβ − b − νm − z = 0``, ``mᵀβ = T``, ``βz = μ → 0`` (``m`` the live
    mask); one complementary pair ``(β, z)`` of :func:`jaxrank._ipm.mehrotra_direction`, each
    direction a Cholesky solve of ``Q + diag(z/β)`` and the Schur complement in ``Δν``; the
    step is ``0.99 min(1, α_max)``. Stops when the Frank-Wolfe gap is at most ``100 ε`` or has
    not improved for 8 iterations.
    """
    dt = G.dtype
    K = G.shape[0]
    eps = jnp.finfo(dt).eps
    fw_tol = 100 * eps  # on the Frank-Wolfe gap relative to T (fw_gap below)
    livef = live.astype(dt)
    both = live[:, None] & live[None, :]
    g_max = jnp.max(jnp.where(live, jnp.abs(jnp.diag(G)), 0))  # = max |G_cc'| (G is PSD)
    d_max = jnp.max(jnp.where(live, jnp.abs(delta), 0))
    ratio = d_max / jnp.where(g_max > 0, g_max, 1)
    s = jnp.where((g_max > 0) & (d_max > 0), jnp.minimum(C, ratio), C)
    T = C / s
    norm = jnp.maximum(s * g_max, d_max)
    norm = jnp.where(norm > 0, norm, 1)
    Q = jnp.where(both, (s / norm) * G, 0) + jnp.diag(1 - livef)
    b = jnp.where(live, delta / norm, -1)
    m = livef
    eye = jnp.eye(K, dtype=dt)
    jitter = 10 * eps * (1 + jnp.max(jnp.abs(jnp.diag(Q))))

    def residuals(beta, z, nu):
        rd = dot(Q, beta) - b - nu * m - z
        rp = dot(m, beta) - T
        return rd, rp

    def feasible(v):
        """``v`` clipped to ``≥ 0`` and rescaled to the mass ``T``: a point of the simplex."""
        v = jnp.where(live & jnp.isfinite(v), jnp.maximum(v, 0), 0)
        return T * v / jnp.maximum(dot(m, v), jnp.finfo(dt).tiny)

    def fw_gap(v):
        """Frank-Wolfe gap over ``T`` of a feasible ``v``: ``Σ_c v_c (∇_c − min ∇)/T``, an upper
        bound on ``(f(v) − f*)/T``. ``−∇ = b − Qv`` are the planes' violations ξ_c (scaled),
        so this is ``max_c ξ_c − Σ_c (v_c/T) ξ_c``: exactly what the cutting-plane certificate
        needs (the slack against the multiplier-weighted slack), a sum of terms ≥ 0."""
        grad = dot(Q, v) - b
        low = jnp.min(jnp.where(live, grad, jnp.inf))
        return dot(v, jnp.where(live, grad - low, 0)) / T

    def body(state):
        beta, z, nu, it, _, best, best_z, best_fw, stall = state
        rd, rp = residuals(beta, z, nu)
        chol = _linalg.cholesky(Q + jnp.diag(z / beta) + jitter * eye)

        def solve(r):
            return _linalg.cho_solve(chol, r)

        Mm = solve(m)
        mMm = dot(m, Mm)

        def direction(target, cross):
            # complementarity rows z Δβ + β Δz = rc; the Schur complement in Δν of mᵀΔβ = −r_p
            rc = -beta * z - cross[0] + target
            Mr = solve(-rd + rc / beta)
            dnu = (-rp - dot(m, Mr)) / mMm
            db = Mr + Mm * dnu
            return (db,), ((rc - z * db) / beta,), dnu

        (db,), (dz,), dnu, step = mehrotra_direction((beta,), (z,), K, direction)
        t = 0.99 * jnp.minimum(step, 1.0)
        beta, z, nu = beta + t * db, z + t * dz, nu + t * dnu
        bad = ~(jnp.all(jnp.isfinite(beta)) & jnp.all(jnp.isfinite(z)) & jnp.isfinite(nu))
        fw = jnp.where(bad, jnp.inf, fw_gap(feasible(beta)))
        best_fw, (best, best_z), stall = keep_best(
            fw, (feasible(beta), z), best_fw, (best, best_z), stall
        )
        return beta, z, nu, it + 1, bad, best, best_z, best_fw, stall

    def cond(state):
        *_, it, bad, _, _, best_fw, stall = state
        # the certified gap stopped shrinking for 8 iterations: the rounding floor of the dtype
        return (it < max_iter) & ~bad & (best_fw > fw_tol) & (stall < 8)

    k = jnp.sum(m)
    beta0 = jnp.where(live, T / k, 1).astype(dt)
    state = (
        beta0,
        jnp.ones(K, dt),
        jnp.zeros((), dt),
        jnp.zeros((), jnp.int32),
        jnp.zeros((), bool),
        feasible(beta0),
        jnp.ones(K, dt),
        fw_gap(feasible(beta0)),
        jnp.zeros((), jnp.int32),
    )
    *_, iters, _, beta_ip, z_ip, fw_ip, _ = jax.lax.while_loop(cond, body, state)

    # Polish (primal-dual active set, started from the interior point's support guess by strict
    # complementarity): on a support S solve the KKT system of the face
    #   Q_SS β_S − ν 1 = b_S,  1ᵀβ_S = T,  β_i = 0 off S
    # by proximal-point steps  (Q_SS + δI) β⁺ − ν⁺ 1 = b_S + δ β  anchored at the interior point:
    # Q_SS is often singular (more planes than features), and the anchored steps converge to the
    # face's solution nearest the interior point instead of amplifying the null space. Then
    # S ← {i ∈ S: β_i > 0} ∪ {i ∉ S: z_i < 0} until the KKT conditions hold.
    ptol = 1e4 * eps
    prox = 0.1 * jnp.sqrt(eps)

    def face(S, beta_start):
        Sf = S.astype(dt)
        Qs = jnp.where(S[:, None] & S[None, :], Q, 0) + jnp.diag(prox * Sf + (1 - Sf))
        chol = _linalg.cholesky(Qs)

        def solve(r):
            return _linalg.cho_solve(chol, r)

        y1 = solve(Sf)
        s1 = dot(Sf, y1)

        # In residual form, so that the accuracy is set by the residual, not by cond(Q_SS + δI).
        def step(_, carry):
            beta, nu = carry
            dx = solve(jnp.where(S, b + nu - dot(Q, beta), 0))
            dnu = (T - dot(Sf, beta) - dot(Sf, dx)) / s1
            return jnp.where(S, beta + dx + dnu * y1, 0), nu + dnu

        beta0 = jnp.where(S, beta_start, 0)
        nu0 = dot(Sf, dot(Q, beta0) - b) / jnp.maximum(jnp.sum(Sf), 1)
        beta, nu = jax.lax.fori_loop(0, 12, step, (beta0, nu0))
        Qb = dot(Q, beta)
        z = Qb - b - nu
        # Qβ carries a rounding error relative to its own size, which grows with the mass T
        # when C binds (every plane then holds O(T) of it)
        ztol = ptol * (1 + jnp.max(jnp.where(live, jnp.abs(Qb), 0)))
        ok = (
            jnp.all(jnp.isfinite(beta))
            & jnp.isfinite(nu)
            & jnp.all(jnp.where(S, beta >= -ptol * T, True))
            & jnp.all(jnp.where(live & ~S, z >= -ztol, True))
            & jnp.all(jnp.where(S, jnp.abs(z) <= ztol, True))
        )
        return beta, z, ok

    def round_(carry):
        S, beta, _, _, r = carry
        beta, z, ok = face(S, beta)
        S_next = jnp.where(ok, S, live & jnp.where(S, beta > 0, z < 0))
        return S_next, beta, z, ok, r + 1

    S0 = live & (beta_ip > z_ip)
    carry = (S0, beta_ip, jnp.zeros(K, dt), jnp.zeros((), bool), jnp.zeros((), jnp.int32))
    S, beta, _, polish_ok, _ = jax.lax.while_loop(
        lambda c: ~c[3] & (c[4] < 4) & jnp.any(c[0]), round_, carry
    )
    beta_pol = feasible(jnp.where(S, beta, 0))
    fw_pol = fw_gap(beta_pol)
    # Keep whichever point has the smaller certified gap; a polish that met the KKT conditions
    # is the exact face solution (exact zeros off the support), so it is preferred while its
    # gap is at the rounding level (the interior point's can be smaller still: its multipliers
    # off the support are tiny but positive).
    use_pol = (fw_pol <= fw_ip) | (polish_ok & (fw_pol <= 10 * fw_tol))
    beta = jnp.where(use_pol, beta_pol, beta_ip)
    fw = jnp.minimum(fw_pol, fw_ip)
    # Which planes carry weight: the polished support, else strict complementarity.
    active = live & jnp.where(use_pol, beta_pol > 0, beta_ip > z_ip)
    alpha = jnp.where(live, s * beta, 0)
    Galpha = dot(jnp.where(both, G, 0), alpha)
    dual = dot(jnp.where(live, delta, 0), alpha) - 0.5 * dot(alpha, Galpha)
    converged = fw <= 1e3 * eps
    return QPResult(alpha, dual, iters, converged, use_pol & polish_ok), active


@partial(jax.jit, static_argnames=("max_iter",))
def _qp_jit(G, delta, C, live, *, max_iter):
    return qp_core(G, delta, C, live, max_iter)[0]


def solve_qp(G, delta, C, *, mask=None, max_iter: int = 100) -> QPResult:
    r"""Solve the working-set dual of the 1-slack QP: a QP over a scaled simplex.

    .. math::

      \max_{\alpha}\ \Delta^\top \alpha - \tfrac12 \alpha^\top G \alpha
      \quad\text{s.t.}\quad \alpha \ge 0,\ \textstyle\sum_c \alpha_c = C

    (the dual of seed OP1 restricted to the working set; Joachims 2005, JFY 2009 eq. 9, with the
    plane :math:`g = 0` of :math:`\bar y = y` making :math:`\sum \alpha = C` an equality). ``G``
    may be singular (more planes than features). Solved in the variables :math:`\alpha / s`,
    :math:`s = \min(C, \Delta_{max}/G_{max})`, so that the multipliers are O(1) whether or not
    C binds; the result is the interior point or its polish, whichever has the smaller
    Frank-Wolfe gap :math:`\max_c \xi_c - \sum_c (\alpha_c/C)\xi_c`,
    :math:`\xi = \Delta - G\alpha` (``converged``: at most 1000 ε). Solved by a Mehrotra
    predictor-corrector interior-point method followed by an exact active-set polish (module
    notes); jit-able, ``C`` and the data dynamic.

    Args:
      G: ``(K, K)`` symmetric positive semi-definite Gram matrix of the planes.
      delta: ``(K,)`` losses :math:`\Delta_c`.
      C: the regularisation constant, > 0.
      mask: optional ``(K,)`` bool; entries with ``False`` are left out (``α = 0``).
      max_iter: cap on interior-point iterations (static).

    Returns:
      :class:`QPResult`.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.dopmid import solve_qp
      >>> r = solve_qp(jnp.array([[0.0, 0.0], [0.0, 4.0]]), jnp.array([0.0, 1.0]), 1.0)
      >>> [round(float(a), 6) for a in r.alpha]  # max α₁ − 2 α₁², α₀ + α₁ = 1
      [0.75, 0.25]
    """
    G = jnp.asarray(G)
    if not jnp.issubdtype(G.dtype, jnp.floating):
        G = G.astype(jax.dtypes.canonicalize_dtype(jnp.float64))
    if G.ndim != 2 or G.shape[0] != G.shape[1] or G.shape[0] == 0:
        raise ValueError(f"G must be a non-empty square matrix, got shape {G.shape}.")
    K = G.shape[0]
    delta = jnp.asarray(delta, G.dtype)
    if delta.shape != (K,):
        raise ValueError(f"delta must have shape ({K},), got {delta.shape}.")
    C = check_positive(C, "C")
    live = jnp.ones(K, bool) if mask is None else jnp.asarray(mask, bool)
    if live.shape != (K,) or not bool(jnp.any(live)):
        raise ValueError(f"mask must be a ({K},) boolean array with at least one True entry.")
    return _qp_jit(G, delta, jnp.asarray(C, G.dtype), live, max_iter=int(max_iter))
