"""The primal-dual interior-point step shared by MIBC's and DOPMID's QPs.

Both QPs (`jaxrank/mibc/_qp.py`: ``min ½γᵀHγ − 1ᵀγ`` over the box ``0 ≤ γ ≤ 1``;
`jaxrank/dopmid/_qp.py`: ``min ½βᵀQβ − bᵀβ`` over the simplex ``β ≥ 0, 1ᵀβ = T``) are solved
by Mehrotra's predictor-corrector method (Mehrotra, SIAM J. Optim. 2(4), 1992; Nocedal &
Wright, *Numerical Optimization*, 2nd ed., §16.6, Algorithm 16.4, with the centring rule of
§14.2). Their complementary pairs ``(x_i, z_i)``, ``x_i z_i = μ → 0``, are ``(γ, z)`` and
``(1 − γ, s)`` for the box, ``(β, z)`` for the simplex; what a step does with them is the same
and lives here:

- the complementarity measure ``μ = Σ_i x_iᵀz_i / n`` (:func:`complementarity`);
- the affine-scaling predictor (complementarity rows ``−XZe``), its step to the boundary
  (:func:`step_to_boundary`, capped at 1), ``μ_aff`` there and the centring parameter
  ``σ = (μ_aff/μ)³``; the corrector with rows ``σμe − XZe − ΔX_aff ΔZ_aff e``
  (:func:`mehrotra_direction`);
- the best certified iterate so far and the count of iterations since it last improved, the
  stall test both loops stop on at the rounding floor (:func:`keep_best`).

What stays with each QP: its constraints, residuals and Newton-system solve (the ``direction``
callback, which also forms the complementarity rows from ``σμ`` and the cross term), the
damping of the corrector's step (the fraction-to-boundary rule, N&W eq. 19.9, each in its own
form), its certificate of optimality, its stop test and its active-set polish.

Example:
  >>> import jax.numpy as jnp
  >>> float(step_to_boundary((jnp.array([1.0, 2.0]),), (jnp.array([-4.0, 1.0]),)))
  0.25
"""

from __future__ import annotations

import functools
import operator

import jax
import jax.numpy as jnp

from jaxrank._precision import HIGHEST as _HI

__all__ = ["complementarity", "keep_best", "mehrotra_direction", "step_to_boundary"]


def step_to_boundary(xs, dxs):
    """Largest ``α`` with every ``x + α dx ≥ 0`` for the arrays of ``xs`` (each ``> 0``) and the
    steps ``dxs``: ``min_{i: dx_i < 0} −x_i/dx_i``, ``inf`` when no component decreases. The
    fraction-to-boundary rule (N&W eq. 19.9) takes a fraction ``τ < 1`` of it."""

    def one(x, dx):
        return jnp.min(jnp.where(dx < 0, -x / jnp.where(dx < 0, dx, -1), jnp.inf))

    return jnp.min(jnp.stack([one(x, dx) for x, dx in zip(xs, dxs, strict=True)]))


def complementarity(xs, zs, n: int):
    """The duality measure ``μ = Σ_i x_iᵀz_i / n`` (N&W §16.6) over the complementary
    pairs ``(x_i, z_i)``, ``n`` their total length."""
    dots = (jnp.matmul(x, z, precision=_HI) for x, z in zip(xs, zs, strict=True))
    return functools.reduce(operator.add, dots) / n


def mehrotra_direction(xs, zs, n: int, direction):
    """One Mehrotra predictor-corrector direction (Mehrotra 1992; N&W Algorithm 16.4).

    ``direction(target, cross)`` solves the QP's Newton system (N&W §16.6) with the
    complementarity rows ``Z_i Δx_i + X_i Δz_i = target·e − X_i Z_i e − cross_i`` and returns
    ``(dxs, dzs, extra)``: the steps of the pairs and of any free variables (``extra``, e.g. an
    equality multiplier). It forms those rows itself, in its own order of operations: MIBC's
    ``(σμ − xz) − cross``, DOPMID's ``(−xz − cross) + σμ``; one common order changes the
    other's rounding and, at the rounding floor where the stall test decides, its iteration
    counts. With
    ``μ = complementarity(xs, zs, n)``:

    1. predictor (affine scaling): ``target = 0``, ``cross = 0``; its step
       ``α_aff = min(1, step_to_boundary)``, ``μ_aff`` at ``x + α_aff Δx_aff, z + α_aff Δz_aff``;
    2. centring ``σ = (μ_aff/μ)³`` (N&W eq. 14.34);
    3. corrector: ``target = σμ``, ``cross_i = ΔX_aff ΔZ_aff e`` (N&W eq. 14.35).

    Returns the corrector's ``(dxs, dzs, extra)`` and its uncapped :func:`step_to_boundary`;
    the caller damps it by its fraction-to-boundary rule.
    """
    xs, zs = tuple(xs), tuple(zs)
    mu = complementarity(xs, zs, n)
    dxs, dzs, _ = direction(0.0, (0.0,) * len(xs))
    alpha = jnp.minimum(1.0, step_to_boundary(xs + zs, tuple(dxs) + tuple(dzs)))
    moved_x = tuple(x + alpha * dx for x, dx in zip(xs, dxs, strict=True))
    moved_z = tuple(z + alpha * dz for z, dz in zip(zs, dzs, strict=True))
    sigma = (complementarity(moved_x, moved_z, n) / mu) ** 3
    cross = tuple(dx * dz for dx, dz in zip(dxs, dzs, strict=True))
    dxs, dzs, extra = direction(sigma * mu, cross)
    return dxs, dzs, extra, step_to_boundary(xs + zs, tuple(dxs) + tuple(dzs))


def keep_best(gap, point, best_gap, best, stall):
    """The best certified iterate so far: ``point`` (any pytree) replaces ``best`` when its
    certified ``gap`` is strictly smaller than ``best_gap``; ``stall`` counts the iterations
    since the last improvement (both solvers stop when it reaches their patience: the
    certificate has hit the rounding floor of the dtype). Returns ``(best_gap, best, stall)``."""
    better = gap < best_gap
    best = jax.tree.map(lambda new, old: jnp.where(better, new, old), point, best)
    return jnp.where(better, gap, best_gap), best, jnp.where(better, 0, stall + 1)
