r"""DOPMID's cutting-plane loop: the 1-slack working set grown by the most violated labelling
and re-solved by the QP, in one compiled ``lax.while_loop`` per working-set size (seed 004).

Two variants (``LoopConfig.line_search``):

- plain cutting planes (seed Algorithm 1; Joachims 2005 Alg. 1): the next plane is cut at the
  working-set QP's solution :math:`w^c_t = \sum_c \alpha_c g_c`, which is also the model;
- OCAS (Franc & Sonnenburg 2009, *Optimized cutting plane algorithm for large-scale risk
  minimization*, JMLR 10, Alg. 2), the default: the model is the best point so far
  :math:`w^b_t = w^b_{t-1} + k^*(w^c_t - w^b_{t-1})`, :math:`k^* \approx \arg\min_{k \ge 0}
  F(w^b_{t-1} + k(w^c_t - w^b_{t-1}))` by a line search on the full objective :math:`F(w) =
  \tfrac12\|w\|^2 + C'\max_{\bar y} H_w(\bar y)` (:func:`line_search`), and the next plane
  is cut at :math:`(1-\mu) w^b_t + \mu w^c_t` (:data:`OCAS_MU`). The plain method zigzags at
  large C (its iteration bound grows like :math:`C R^2/\varepsilon`); with the line search the
  model stays near the optimum and few planes are needed.

Both stop on the same certificate. With :math:`D(\alpha) = \sum_c \alpha_c \Delta_c -
\tfrac12\|w^c\|^2` (the full problem's dual at the working set's multipliers, so a lower bound
on the optimum), the gap of the model is

.. math::

  F(w^b) - D(\alpha) = C'\Big(\max_{\bar y} H_{w^b}(\bar y) - \sum_c \frac{\alpha_c}{C'}
  \Delta_c\Big) + \tfrac12\big(\|w^b\|^2 + \|w^c\|^2\big),

formed so: a difference of two O(1) numbers plus small terms, with no cancellation between
:math:`O(C')` values.

**The model's representation.** Linear: :math:`w` itself, a vector over the ``p`` columns of
:math:`\Phi = [X, b]`, and each plane as :math:`g_c = \Phi^\top u_c`. Kernel: the expansion
:math:`\beta` of :math:`w = \sum_i \beta_i \phi(x_i)` and each plane as :math:`u_c`. At large C
the expansion is ill-conditioned: on satimage at C = 100, :math:`\sum_i |\beta_i|\,\|x_i\|`
is :math:`4 \cdot 10^5` times :math:`\|w\|`, so :math:`X^\top\beta` in float32 is wrong by
1.5 % of :math:`\|w\|`, while :math:`\sum_c \alpha_c g_c` cancels 40 times less.

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
from jaxrank.dopmid._oracle import most_violated_core
from jaxrank.dopmid._qp import qp_core
from jaxrank.solver import Status

__all__ = [
    "LINE_SEARCH_GROW",
    "LINE_SEARCH_STEPS",
    "MIN_PLANES",
    "OCAS_MU",
    "DOPMIDInfo",
    "LoopConfig",
    "LoopState",
    "buffer_size",
    "initial_state",
    "line_search",
    "resized",
    "run_loop",
    "scores_of",
]


# Working-set buffers are powers of two of at least MIN_PLANES slots (one compilation of the
# loop per size).
MIN_PLANES = 64
# OCAS cuts the next plane at (1 − μ) w_best + μ w_QP; Franc & Sonnenburg (2009) use 0.1.
OCAS_MU = 0.1
# Oracle calls that narrow the line search's bracket (alternating secant and bisection steps),
# per oracle: AM's thresholds cost O(n), QM's table O(n+ n).
LINE_SEARCH_STEPS = {"threshold": 12, "table": 4}
# The line search's bracket grows by doubling to at most k = 2**LINE_SEARCH_GROW.
LINE_SEARCH_GROW = 10


# --------------------------------------------------------------------------------------------
# the cutting-plane loop
# --------------------------------------------------------------------------------------------


class DOPMIDInfo(NamedTuple):
    """What happened in a DOPMID fit.

    Attributes:
      iterations: cutting-plane iterations (planes added; QPs solved).
      n_planes: cutting planes in the final working set (after pruning; the plane of
        ``ȳ = y`` is not counted).
      violation: ``max_ȳ H_w(ȳ)`` at the returned ``w`` (the model's most violated labelling).
      slack: ``ξ = max_{ȳ ∈ W} H_w(ȳ)`` over the working set at the returned ``w``.
      objective: the primal value ``P = ½||w||² + C'·violation`` of the full 1-slack problem
        (``C' = nC`` on the ``"svc"`` scale: for AM this is scikit-learn's SVC objective;
        on the ``"paper"`` scale ``C' = C`` with the paper's ``w``).
      dual: ``D = Σ_c α_c Δ_c − ½||Σ_c α_c g_c||²`` at the final multipliers, a lower bound on
        the optimum.
      status: a :class:`~jaxrank.solver.Status` code. ``CONVERGED``: ``gap ≤ C'·tol``, i.e. the
        model is within ``C'·tol`` of the optimum; ``MAX_ITER``; ``PRECISION``: the next plane
        adds nothing to the working set but the gap is open (the working-set QP cannot be
        solved that accurately in this dtype), or the QP value stopped increasing;
        ``NONFINITE``.
      gap: ``P − D``, computed without cancellation (module notes of
        ``jaxrank/dopmid/_loop.py``).

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


# named by its public path (pickles, jax.export's serialised name, doctest, the API reference)
DOPMIDInfo.__module__ = "jaxrank.dopmid"


class LoopConfig(NamedTuple):
    """Static (hashable) part of a fit: sizes and choices that fix the compiled loop."""

    measure: str
    method: str
    linear: bool
    qp_max_iter: int
    line_search: bool = True


class LoopState(NamedTuple):
    P: jax.Array  # (Kb, p) planes: g_c = Φᵀu_c (linear) or u_c = c ∘ (y − ȳ_c); row 0: ȳ = y
    G: jax.Array  # (Kb, Kb) g_cᵀg_c'
    delta: jax.Array  # (Kb,)
    live: jax.Array  # (Kb,) bool
    idle: jax.Array  # (Kb,) int32: consecutive QPs with α_c = 0
    alpha: jax.Array  # (Kb,)
    dual: jax.Array  # the working-set QP's value (its stall test)
    slack: jax.Array
    violation: jax.Array
    iterations: jax.Array
    stall: jax.Array
    status: jax.Array
    resize: jax.Array  # bool: leave the loop to grow or shrink the buffer
    w: jax.Array  # (p,) the model: w (linear) or its expansion β (kernel)
    scores: jax.Array  # (n,) the model's training scores
    norm2: jax.Array  # ||w||² of the model
    gap: jax.Array  # (F(w) − D(α)) / C


def scores_of(F, bias2, w, linear: bool):
    """Training scores of a model: ``Φw`` (linear, ``F = Φ``) or ``(K + b²)β`` (kernel,
    ``F = K``)."""
    if linear:
        return jnp.matmul(F, w, precision=_HI)
    return jnp.matmul(F, w, precision=_HI) + bias2 * jnp.sum(w)


def line_search(s_b, s_c, inner, C, oracle, steps: int):
    r"""OCAS's step :math:`k^* \approx \arg\min_{k \ge 0} F(w_b + k(w_c - w_b))` (Franc &
    Sonnenburg 2009, Alg. 2), from the training scores ``s_b``, ``s_c`` of :math:`w_b`,
    :math:`w_c` and ``inner = (||w_c − w_b||², w_bᵀ(w_c − w_b))``.

    Along the line, with :math:`d = w_c - w_b`, :math:`\varphi(k) = F(w_b + kd) -
    \tfrac12\|w_b\|^2 = \tfrac12 k^2\|d\|^2 + k\,w_b^\top d + C' R(s_b + k(s_c - s_b))`;
    :math:`R = \max_{\bar y} H` is convex and piecewise linear, and ``oracle`` (the most violated
    labelling ``u`` at given scores) gives its value and a slope :math:`-u^\top(s_c - s_b)`. The
    zero of :math:`\varphi'` is bracketed from :math:`k = 0` and 1 (doubling the upper end
    while :math:`\varphi' < 0`, to at most :math:`2^{10}`), then narrowed by ``steps``
    (:data:`LINE_SEARCH_STEPS`) steps alternating a secant step (kept inside the bracket's
    inner 90 %) and bisection. Returns the evaluated ``k`` with the smallest :math:`\varphi` (0 when
    none is below :math:`\varphi(0)`): the step sets the speed, never the certificate.
    """
    dt = s_b.dtype
    s_d = s_c - s_b
    a, b = inner

    def at(k):
        _, u, _, viol = oracle(s_b + k * s_d)
        return a * k + b - C * jnp.dot(u, s_d, precision=_HI), (0.5 * a * k + b) * k + C * viol

    def better(k, f, best):
        return jnp.where(f < best[1], k, best[0]), jnp.minimum(f, best[1])

    zero, one = jnp.zeros((), dt), jnp.ones((), dt)
    d0, f0 = at(zero)
    d1, f1 = at(one)

    def grow(c):
        _, _, hi, dhi, best, i = c
        d, f = at(2 * hi)
        return hi, dhi, 2 * hi, d, better(2 * hi, f, best), i + 1

    lo, dlo, hi, dhi, best, _ = jax.lax.while_loop(
        lambda c: (c[3] < 0) & (c[5] < LINE_SEARCH_GROW),
        grow,
        (zero, d0, one, d1, better(one, f1, (zero, f0)), jnp.zeros((), jnp.int32)),
    )

    def narrow(i, c):
        lo, dlo, hi, dhi, best = c
        width = hi - lo
        secant = lo - dlo * width / jnp.where(dhi > dlo, dhi - dlo, 1)
        k = jnp.where(
            i % 2 == 0, jnp.clip(secant, lo + 0.05 * width, hi - 0.05 * width), lo + 0.5 * width
        )
        d, f = at(k)
        left = d < 0
        return (
            jnp.where(left, k, lo),
            jnp.where(left, d, dlo),
            jnp.where(left, hi, k),
            jnp.where(left, dhi, d),
            better(k, f, best),
        )

    # φ'(0) ≥ 0: no descent towards w_c (so at the first iteration, where w_c = w_b = 0)
    best = jax.lax.cond(
        (d0 < 0) & (dhi >= 0),
        lambda c: jax.lax.fori_loop(0, steps, narrow, c)[4],
        lambda c: c[4],
        (lo, dlo, hi, dhi, best),
    )
    return best[0]


@partial(jax.jit, static_argnames=("cfg",))
def run_loop(state, F, bias2, pos, cp, cn, C, tol, max_iter, prune_after, *, cfg):
    """Cutting-plane iterations in one working-set buffer until a stop or a resize.

    ``F`` is ``Φ = [X, b]`` (linear, ``(n, p)``) or the kernel matrix ``K`` (``(n, n)``, with
    ``bias2 = b²`` added to it)."""
    dt = F.dtype
    Kb = state.G.shape[0]
    eps = jnp.finfo(dt).eps
    ids = jnp.arange(Kb, dtype=jnp.int32)
    n_pos = jnp.sum(pos, dtype=jnp.int32).astype(dt)
    n_neg = jnp.sum(~pos, dtype=jnp.int32).astype(dt)

    def oracle(s):
        return most_violated_core(s, pos, n_pos, n_neg, cp, cn, cfg.measure, cfg.method)

    def scores(w):
        return scores_of(F, bias2, w, cfg.linear)

    def inner(v, w, s_w):
        """``vᵀw`` in the model's space; ``s_w`` the scores of ``w`` (the kernel's ``vᵀK̃w``)."""
        return jnp.dot(v, w if cfg.linear else s_w, precision=_HI)

    def planes_at(st: LoopState, w, s_w):
        """``max_{c ∈ W} H_w(ȳ_c) = max_c Δ_c − g_cᵀw`` (``g_cᵀw = u_cᵀ s_w``: kernel)."""
        h = st.delta - jnp.matmul(st.P, w if cfg.linear else s_w, precision=_HI)
        return jnp.max(jnp.where(st.live, h, -jnp.inf))

    def body(st: LoopState) -> LoopState:
        w_c = jnp.matmul(st.alpha, st.P, precision=_HI)
        s_c = scores(w_c)
        # ||w_c||²: from the vector itself (linear), from the planes' Gram matrix (kernel: the
        # expansion β cancels badly at large C, the planes' u_cᵀK̃u_c' do not)
        if cfg.linear:
            norm2_c = jnp.dot(w_c, w_c, precision=_HI)
        else:
            norm2_c = jnp.dot(st.alpha, jnp.matmul(st.G, st.alpha, precision=_HI), precision=_HI)
        loss_c = jnp.dot(st.alpha, st.delta, precision=_HI) / C  # Σ_c (α_c/C) Δ_c
        if cfg.line_search:
            d = w_c - st.w
            s_d = s_c - st.scores
            k = line_search(
                st.scores,
                s_c,
                (inner(d, d, s_d), inner(st.w, d, s_d)),
                C,
                oracle,
                LINE_SEARCH_STEPS[cfg.method],
            )
            w_b = st.w + k * d
            s_b = scores(w_b)
        else:
            w_b, s_b = w_c, s_c
        norm2_b = norm2_c if not cfg.line_search else inner(w_b, w_b, s_b)
        _, u, loss, viol = oracle(s_b)
        slack = planes_at(st, w_b, s_b)
        gap = (viol - loss_c) + 0.5 * (norm2_b + norm2_c) / C
        if cfg.line_search:
            # The next plane: OCAS's, cut between the model and the QP's solution; when that
            # one adds too little to W (possible when the line search is inexact), the plain
            # cut at w_c, which with an exact QP adds more than the gap: C'·(viol_c − slack_c)
            # = F(w_c) − F_W(w_c) ≥ F(w_b) − D, F_W(w_c) = D being the QP's value and F(w_b) ≤
            # F(w_c) as the line search evaluates k = 1 too.
            w_t, s_t = w_b + OCAS_MU * (w_c - w_b), s_b + OCAS_MU * (s_c - s_b)
            _, u_t, loss_t, viol_t = oracle(s_t)

            def plain_cut(_):
                _, u_c, loss_c_, viol_c = oracle(s_c)
                return u_c, loss_c_, viol_c <= planes_at(st, w_c, s_c) + tol

            u, loss, stuck = jax.lax.cond(
                viol_t > planes_at(st, w_t, s_t) + OCAS_MU * tol,
                lambda _: (u_t, loss_t, jnp.zeros((), bool)),
                plain_cut,
                None,
            )
        else:
            stuck = viol <= slack + tol
        n_live = jnp.sum(st.live, dtype=jnp.int32)
        status = jnp.select(
            [
                ~jnp.isfinite(viol) | ~jnp.isfinite(slack) | ~jnp.isfinite(gap),
                gap <= tol,
                # The plane cut at the QP's solution w_c adds (almost) nothing to the working
                # set W, yet the gap is open: the QP over W is not solved to the accuracy the
                # stopping rule needs (with an exact QP it would add more than the gap).
                stuck,
                st.iterations >= max_iter,
            ],
            [Status.NONFINITE, Status.CONVERGED, Status.PRECISION, Status.MAX_ITER],
            Status.RUNNING,
        ).astype(jnp.int32)
        full = n_live >= Kb
        st = st._replace(
            violation=viol,
            slack=slack,
            status=status,
            w=w_b,
            scores=s_b,
            norm2=norm2_b,
            gap=gap,
        )

        def add(st: LoopState) -> LoopState:
            slot = jnp.argmin(st.live).astype(jnp.int32)  # first free slot
            if cfg.linear:
                plane = jnp.matmul(u, F, precision=_HI)  # g = Φᵀu
                P = st.P.at[slot].set(plane)
                h = plane
            else:
                P = st.P.at[slot].set(u)
                h = scores(u)  # K̃u
            live = st.live.at[slot].set(True)
            row = jnp.where(live, jnp.matmul(P, h, precision=_HI), 0)
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
                P=jnp.where(live[:, None], P, 0),
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


def initial_state(n: int, p: int, Kb: int, C: float, dt) -> LoopState:
    """The start: ``w = 0`` and the working set ``{y}`` (``α = (C, 0, …)``); ``p`` the width
    of a plane (``Φ``'s columns, or ``n`` for a kernel)."""
    live = jnp.zeros(Kb, bool).at[0].set(True)
    zero = jnp.zeros((), dt)
    return LoopState(
        P=jnp.zeros((Kb, p), dt),
        G=jnp.zeros((Kb, Kb), dt),
        delta=jnp.zeros(Kb, dt),
        live=live,
        idle=jnp.zeros(Kb, jnp.int32),
        alpha=jnp.zeros(Kb, dt).at[0].set(C),
        dual=zero,
        slack=zero,
        violation=zero,
        iterations=jnp.zeros((), jnp.int32),
        stall=jnp.zeros((), jnp.int32),
        status=jnp.asarray(Status.RUNNING, jnp.int32),
        resize=jnp.zeros((), bool),
        w=jnp.zeros(p, dt),
        scores=jnp.zeros(n, dt),
        norm2=zero,
        gap=zero,
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
        P=vec(st.P),
        G=G,
        delta=vec(st.delta),
        live=jnp.arange(Kb) < k,
        idle=vec(st.idle),
        alpha=vec(st.alpha),
    )


def buffer_size(n_live: int) -> int:
    """Slots for ``n_live`` planes: a power of two, at least ``2 n_live`` and ``MIN_PLANES``."""
    return max(MIN_PLANES, 1 << math.ceil(math.log2(2 * max(n_live, 1))))
