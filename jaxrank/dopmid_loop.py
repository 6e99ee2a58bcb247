"""DOPMID's cutting-plane loop: the 1-slack working set grown by the most violated labelling
and re-solved by the QP, in one compiled ``lax.while_loop`` per working-set size (seed 004).

Split from :mod:`jaxrank.dopmid` (the model and the fit), which re-exports :class:`DOPMIDInfo`.
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._precision import HIGHEST as _HI
from jaxrank.dopmid_oracle import most_violated_core
from jaxrank.dopmid_qp import qp_core
from jaxrank.solver import Status

__all__ = [
    "MIN_PLANES",
    "DOPMIDInfo",
    "LoopConfig",
    "LoopState",
    "apply_planes",
    "buffer_size",
    "initial_state",
    "resized",
    "run_loop",
]


# Working-set buffers are powers of two of at least MIN_PLANES slots (one compilation of the
# loop per size).
MIN_PLANES = 64


# --------------------------------------------------------------------------------------------
# the cutting-plane loop
# --------------------------------------------------------------------------------------------


class DOPMIDInfo(NamedTuple):
    """What happened in a DOPMID fit.

    Attributes:
      iterations: cutting-plane iterations (planes added; QPs solved).
      n_planes: cutting planes in the final working set (after pruning; the plane of
        ``ȳ = y`` is not counted).
      violation: ``max_ȳ H_w(ȳ)`` at the final ``w`` (the last most-violated constraint).
      slack: ``ξ = max_{ȳ ∈ W} H_w(ȳ)`` over the working set.
      objective: the primal value ``P = ½||w||² + C'·violation`` of the full 1-slack problem
        (``C' = nC`` on the ``"svc"`` scale: for AM this is scikit-learn's SVC objective;
        on the ``"paper"`` scale ``C' = C`` with the paper's ``w``).
      dual: ``D = Σ_c α_c Δ_c − ½||w||²`` at the final multipliers, a lower bound on the
        optimum.
      status: a :class:`~jaxrank.solver.Status` code. ``CONVERGED``: ``gap ≤ C'·tol``, i.e. the
        model is within ``C'·tol`` of the optimum; ``MAX_ITER``; ``PRECISION``: the most
        violated labelling is already in the working set but the gap is open (the working-set
        QP cannot be solved that accurately in this dtype), or the QP value stopped
        increasing; ``NONFINITE``.
      gap: ``P − D = C'(violation − Σ_c (α_c/C') H_w(ȳ_c))``, computed without cancellation.

    Example:
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> info = jaxrank.fit_dopmid(X, y, 1.0).info
      >>> jaxrank.Status(int(info.status)).name, int(info.n_planes) >= 1
      ('CONVERGED', True)
    """

    iterations: jax.Array
    n_planes: jax.Array
    violation: jax.Array
    slack: jax.Array
    objective: jax.Array
    dual: jax.Array
    status: jax.Array
    gap: jax.Array


class LoopConfig(NamedTuple):
    """Static (hashable) part of a fit: sizes and choices that fix the compiled loop."""

    measure: str
    method: str
    linear: bool
    qp_max_iter: int


class LoopState(NamedTuple):
    U: jax.Array  # (Kb, n) plane coefficients u_c = c ∘ (y − ȳ_c); row 0 is ȳ = y
    G: jax.Array  # (Kb, Kb) u_cᵀ K u_c'
    delta: jax.Array  # (Kb,)
    live: jax.Array  # (Kb,) bool
    idle: jax.Array  # (Kb,) int32: consecutive QPs with α_c = 0
    alpha: jax.Array  # (Kb,)
    dual: jax.Array
    slack: jax.Array
    mean_slack: jax.Array  # Σ_c (α_c/C) H_w(ȳ_c)
    violation: jax.Array
    iterations: jax.Array
    stall: jax.Array
    status: jax.Array
    resize: jax.Array  # bool: leave the loop to grow or shrink the buffer


def apply_planes(F, bias2, v, linear: bool):
    """``K̃ v`` with ``K̃ = ΦΦᵀ``: ``X (Xᵀ v) + b² Σv`` (linear) or ``(K + b²) v`` (kernel)."""
    if linear:
        return jnp.matmul(F, jnp.matmul(v, F, precision=_HI), precision=_HI) + bias2 * jnp.sum(v)
    return jnp.matmul(F, v, precision=_HI) + bias2 * jnp.sum(v)


@partial(jax.jit, static_argnames=("cfg",))
def run_loop(state, F, bias2, pos, cp, cn, C, tol, max_iter, prune_after, *, cfg):
    """Cutting-plane iterations in one working-set buffer until a stop or a resize."""
    dt = F.dtype
    Kb = state.G.shape[0]
    eps = jnp.finfo(dt).eps
    ids = jnp.arange(Kb, dtype=jnp.int32)
    n_pos = jnp.sum(pos, dtype=jnp.int32).astype(dt)
    n_neg = jnp.sum(~pos, dtype=jnp.int32).astype(dt)

    def body(st: LoopState) -> LoopState:
        beta = jnp.matmul(st.alpha, st.U, precision=_HI)
        s = apply_planes(F, bias2, beta, cfg.linear)
        _, u, loss, viol = most_violated_core(s, pos, n_pos, n_neg, cp, cn, cfg.measure, cfg.method)
        Galpha = jnp.matmul(st.G, st.alpha, precision=_HI)
        xi = jnp.where(st.live, st.delta - Galpha, 0)  # H_w(ȳ_c) of each plane
        slack = jnp.max(jnp.where(st.live, xi, -jnp.inf))
        # Σ_c (α_c/C) H_w(ȳ_c) = (Σ α_c Δ_c − αᵀGα)/C: with it the duality gap of the full
        # problem is C·(viol − mean_slack), a difference of two O(1) numbers (no cancellation
        # of ½||w||² terms). It equals viol − slack only when the working-set QP is solved
        # exactly; the stopping rule of the seed (viol ≤ slack + ε) alone would accept an
        # inaccurate QP (issue 17: C = 100 in float32 stopped at w = 0, gap 100 against 0).
        mean_slack = jnp.dot(st.alpha, xi, precision=_HI) / C
        gap = viol - mean_slack
        n_live = jnp.sum(st.live, dtype=jnp.int32)
        status = jnp.select(
            [
                ~jnp.isfinite(viol) | ~jnp.isfinite(slack) | ~jnp.isfinite(gap),
                gap <= tol,
                # the most violated plane is already in the working set, yet the gap is open:
                # the QP over it is not solved to the accuracy the stopping rule needs
                viol <= slack + tol,
                st.iterations >= max_iter,
            ],
            [Status.NONFINITE, Status.CONVERGED, Status.PRECISION, Status.MAX_ITER],
            Status.RUNNING,
        ).astype(jnp.int32)
        full = n_live >= Kb
        st = st._replace(violation=viol, slack=slack, mean_slack=mean_slack, status=status)

        def add(st: LoopState) -> LoopState:
            slot = jnp.argmin(st.live).astype(jnp.int32)  # first free slot
            U = st.U.at[slot].set(u)
            live = st.live.at[slot].set(True)
            h = apply_planes(F, bias2, u, cfg.linear)
            row = jnp.where(live, jnp.matmul(U, h, precision=_HI), 0)
            G = st.G.at[slot, :].set(row).at[:, slot].set(row)
            delta = st.delta.at[slot].set(loss)
            qp, active = qp_core(G, delta, C, live, cfg.qp_max_iter)
            # Adding a violated plane raises the QP value unless the QP lost its precision.
            gain = qp.dual - st.dual
            stall = jnp.where(gain <= 10 * eps * jnp.abs(qp.dual), st.stall + 1, 0)
            idle = jnp.where(active | ~live, 0, st.idle + 1)
            drop = live & (idle >= prune_after) & (ids != 0) & (ids != slot)
            live = live & ~drop
            keep = live[:, None] & live[None, :]
            status = jnp.where(
                ~jnp.all(jnp.isfinite(qp.alpha)),
                Status.NONFINITE,
                jnp.where(stall >= 5, Status.PRECISION, Status.RUNNING),
            ).astype(jnp.int32)
            n_live = jnp.sum(live, dtype=jnp.int32)
            # Shrink well below the size that buffer_size would pick, so sizes do not bounce.
            shrink = (8 * n_live <= Kb) & (Kb > MIN_PLANES)
            return st._replace(
                U=jnp.where(live[:, None], U, 0),
                G=jnp.where(keep, G, 0),
                delta=jnp.where(live, delta, 0),
                live=live,
                idle=jnp.where(live, idle, 0),
                alpha=jnp.where(live, qp.alpha, 0),
                dual=qp.dual,
                iterations=st.iterations + 1,
                stall=stall,
                status=status,
                resize=shrink,
            )

        go = (status == Status.RUNNING) & ~full
        st = jax.lax.cond(go, add, lambda st: st, st)
        return st._replace(resize=st.resize | ((status == Status.RUNNING) & full))

    def cond(st: LoopState):
        return (st.status == Status.RUNNING) & ~st.resize

    return jax.lax.while_loop(cond, body, state._replace(resize=jnp.zeros((), bool)))


def initial_state(n: int, Kb: int, C: float, dt) -> LoopState:
    live = jnp.zeros(Kb, bool).at[0].set(True)
    zero = jnp.zeros((), dt)
    return LoopState(
        U=jnp.zeros((Kb, n), dt),
        G=jnp.zeros((Kb, Kb), dt),
        delta=jnp.zeros(Kb, dt),
        live=live,
        idle=jnp.zeros(Kb, jnp.int32),
        alpha=jnp.zeros(Kb, dt).at[0].set(C),
        dual=zero,
        slack=zero,
        mean_slack=zero,
        violation=zero,
        iterations=jnp.zeros((), jnp.int32),
        stall=jnp.zeros((), jnp.int32),
        status=jnp.asarray(Status.RUNNING, jnp.int32),
        resize=jnp.zeros((), bool),
    )


def resized(st: LoopState, Kb: int) -> LoopState:
    """The live planes (in order, the plane of ``ȳ = y`` first) in a buffer of ``Kb`` slots."""
    idx = np.flatnonzero(np.asarray(st.live))
    k = idx.size
    j = jnp.asarray(idx)

    def vec(a):
        return jnp.zeros((Kb, *a.shape[1:]), a.dtype).at[:k].set(a[j])

    G = jnp.zeros((Kb, Kb), st.G.dtype).at[:k, :k].set(st.G[j][:, j])
    return st._replace(
        U=vec(st.U),
        G=G,
        delta=vec(st.delta),
        live=jnp.arange(Kb) < k,
        idle=vec(st.idle),
        alpha=vec(st.alpha),
    )


def buffer_size(n_live: int) -> int:
    """Slots for ``n_live`` planes: a power of two, at least ``2 n_live`` and ``MIN_PLANES``."""
    return max(MIN_PLANES, 1 << math.ceil(math.log2(2 * max(n_live, 1))))
