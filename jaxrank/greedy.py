"""Sparse kernel AUC by greedy basis selection (seed 001: Kakkar, Shevade, Sundararajan, Garg).

The ranker ``f(x) = Σ_{q∈J} β_q k(x_q, x)`` is grown one basis function at a time (seed 001
Algorithm 1, matching pursuit). It minimises the squared-hinge pairwise objective of seed 001
eq. (2.4) restricted to the basis J (eq. 4.5), in jaxrank's normalisation::

    F(β_J) = 1/(m+ m−) Σ_{i∈+} Σ_{j∈−} max(0, 1 − f_i + f_j)² + (λ/2) β_Jᵀ K_JJ β_J
    f = K_{·J} β_J

Seed 001 writes ``E(β_J) = ½ β_Jᵀ K_JJ β_J + (C/2) Σ max(0, 1 − f_i + f_j)²``; ``F = λ·E`` with
``λ = 2 / (C m+ m−)``, so both have the same minimiser (a paper C maps to that λ).

Each step (seed 001 Sec. 4.2):

1. κ candidates are drawn uniformly without replacement from the rows not yet in J;
2. each is scored by Method 2 (eq. 4.10): with β_J fixed, the 1-D problem
   ``φ_c(t) = F(β_J, β_c = t)`` is minimised exactly by a safeguarded Newton iteration
   (:func:`newton_candidates`, all κ candidates at once under ``jax.vmap``). The score is the
   decrease ``φ_c(0) − φ_c(t*)``;
3. the best candidate joins J with ``β_c = t*``;
4. on the retraining schedule (``|J| = ⌊2^{j/4}⌋``, seed 001 Sec. 5, and at the end) β_J is
   re-optimised over the whole basis by jaxrank's trust-region Newton-CG, warm-started at the
   current β_J (seed 001 Sec. 4.3 uses truncated Newton-CG too).

Along a candidate column ``d = K_{·c}`` the 1-D derivatives are the pairwise gradient and
Hessian in score space (:mod:`jaxrank.pairwise`, the sort + binary search of seed 001
Algorithm 2) projected on ``d``::

    φ'(t)  = (g_f · d)/(m+ m−) + λ (f_c + K_cc t)         g_f = ∂L/∂f at f + t d
    φ''(t) = (d · H_f d)/(m+ m−) + λ K_cc                 (K_cJ β_J = f_c: c is a training row)

so a candidate costs O(m log m+) per Newton iteration and the pair matrix is never formed. The
first iteration (t = 0) shares one set of windows for all candidates.

Cost per added basis function: O(κ m d) for the candidate columns, O(κ · n_newton · m log m+) for
the scores, O(m) to add the column; a retrain costs O(m·cap) per Newton-CG product, with the
capacity ``cap = min(n_basis, max(64, 2^⌈log2 |J|⌉)) < 2|J|`` beyond 64. Memory: the
``(m, n_basis)`` block ``K_{·J}`` (seed 001 stores ``l × d_max``) plus the κ candidate columns.
"""

from __future__ import annotations

import functools
import inspect
import math
import types
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import kernels as _kernels
from jaxrank import metrics, pairwise
from jaxrank._fitting import (
    Biclass,
    check_solver_options,
    cholesky_precond,
    choose_dtype,
    fit_rows,
    solve,
)
from jaxrank._precision import HIGHEST as _HI
from jaxrank._validation import (
    check_binary_labels,
    check_cast,
    check_int,
    check_key,
    check_lam,
    check_lam_dtype,
    check_positive,
    check_X,
    check_X_y,
)
from jaxrank.losses import PiecewiseQuadratic, get_loss, piecewise_loss

__all__ = [
    "CandidateSteps",
    "GreedyHistory",
    "fit_greedy",
    "newton_candidates",
    "retrain_sizes",
]


# Retrains pad K_{·J} to a capacity of 64, 128, 256, ... columns (capped at n_basis): zero
# columns with an identity block in K_JJ leave the solution and every solver iterate unchanged
# (their gradient and Hessian coupling are zero), and the solver then compiles once per
# capacity instead of once per basis size (each compile costs seconds).
_MIN_CAPACITY = 64


class CandidateSteps(NamedTuple):
    """The 1-D Newton solutions of seed 001 Method 2 (eq. 4.10), one per candidate.

    Attributes:
      step: ``(κ,)`` the minimiser ``t*`` of ``φ_c(t) = F(β_J, β_c = t)`` (best point found).
      reduction: ``(κ,)`` ``φ_c(0) − φ_c(t*) ≥ 0``, the decrease of F: the candidate's score.
      grad: ``(κ,)`` ``φ_c'(t*)``, the derivative left at the returned step.
      iterations: ``()`` Newton iterations run (the batch stops when every candidate is done).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.greedy import newton_candidates
      >>> D = jnp.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # two candidate columns
      >>> s = newton_candidates(jnp.zeros(3), D, jnp.zeros(2), jnp.ones(2), 1.0, 1, 2)
      >>> s.step.shape, s.reduction.shape  # one 1-D Newton solution per candidate
      ((2,), (2,))
    """

    step: jax.Array
    reduction: jax.Array
    grad: jax.Array
    iterations: jax.Array


class GreedyHistory(NamedTuple):
    """Per-step record of :func:`fit_greedy` (numpy arrays of length T = steps taken).

    Attributes:
      basis_size: ``(T,)`` ``|J|`` after the step (1, 2, …).
      index: ``(T,)`` the row of ``X`` added at the step.
      reduction: ``(T,)`` the decrease of F by the added function's 1-D Newton step (its score).
      objective: ``(T,)`` F after the step (after retraining where retrained), at ``grow_lam``.
      val_auc: ``(T,)`` validation AUC after the step (NaN without ``validation``).
      retrained: ``(T,)`` bool, whether β_J was re-optimised after the step.
      status: ``(T,)`` the solver :class:`~jaxrank.Status` of the retrain, ``-1`` where none.
      grow_lam: the λ at which the basis was grown.
      best_size: size of the returned basis (``T`` unless stopped early on validation).
      stopped_early: whether validation AUC stalled for ``patience`` steps.

    Example:
      >>> import jax
      >>> import jaxrank
      >>> from jaxrank.greedy import fit_greedy
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> model, history = fit_greedy(X, y, 2.0**-6, n_basis=10, kappa=20, key=jax.random.key(0),
      ...                             return_history=True)
      >>> history.basis_size.tolist(), model.basis.shape  # one basis function per step
      ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], (10, 5))
    """

    basis_size: np.ndarray
    index: np.ndarray
    reduction: np.ndarray
    objective: np.ndarray
    val_auc: np.ndarray
    retrained: np.ndarray
    status: np.ndarray
    grow_lam: float
    best_size: int
    stopped_early: bool


def retrain_sizes(schedule, n_basis: int) -> np.ndarray:
    """Basis sizes after which β_J is re-optimised (seed 001 Sec. 5, "Effect of retraining").

    Args:
      schedule: ``"paper"`` — ``|J| = ⌊2^{j/4}⌋`` for some integer ``j ≥ 0`` (the paper's
        choice: 1, 2, 3, 4, 5, 6, 8, 9, 11, 13, 16, 19, 22, 26, 32, …); ``"doubling"`` —
        ``|J| = 2^j``; ``"always"`` — every size; or a sequence of positive sizes.
      n_basis: the final basis size, always included ("plus at the end").

    Returns:
      Sorted unique sizes in ``[1, n_basis]``.

    Example:
      >>> retrain_sizes("paper", 20).tolist()
      [1, 2, 3, 4, 5, 6, 8, 9, 11, 13, 16, 19, 20]
    """
    if isinstance(schedule, str):
        if schedule == "paper":
            sizes, j = [], 0
            # exact integer test of ⌊2^{j/4}⌋ ≤ n: s = ⌊2^{j/4}⌋ iff s⁴ ≤ 2^j < (s+1)⁴
            while True:
                s = math.isqrt(math.isqrt(2**j))
                if s > n_basis:
                    break
                sizes.append(s)
                j += 1
        elif schedule == "doubling":
            sizes = [2**j for j in range(n_basis.bit_length()) if 2**j <= n_basis]
        elif schedule == "always":
            sizes = list(range(1, n_basis + 1))
        else:
            raise ValueError(
                f"unknown schedule {schedule!r}; use 'paper', 'doubling', 'always' or a sequence "
                "of basis sizes."
            )
    else:
        try:
            arr = np.asarray(schedule)
        except (TypeError, ValueError) as err:
            raise ValueError(f"schedule must be a name or a sequence of sizes: {err}") from err
        if arr.ndim != 1 or arr.dtype.kind not in "iu" or np.any(arr < 1):
            raise ValueError(
                f"a schedule sequence must hold positive integer basis sizes, got {schedule!r}."
            )
        sizes = [int(s) for s in arr if s <= n_basis]
    return np.unique(np.asarray([*sizes, n_basis], dtype=np.int64))


class _Newton(NamedTuple):
    t: jax.Array
    lo: jax.Array
    hi: jax.Array
    best_t: jax.Array
    best_phi: jax.Array
    best_g: jax.Array
    done: jax.Array
    it: jax.Array


@functools.partial(jax.jit, static_argnames=("n_pos", "n_neg", "max_newton"))
def _newton(f, D, f_c, k_cc, lam, loss, tol, *, n_pos, n_neg, max_newton):
    dt = f.dtype
    scale = jnp.asarray(1.0 / (n_pos * n_neg), dt)
    lam = jnp.asarray(lam, dt)
    tol = jnp.asarray(tol, dt)
    fp, fn = f[:n_pos], f[n_pos : n_pos + n_neg]
    Dp, Dn = D[:, :n_pos], D[:, n_pos : n_pos + n_neg]
    kappa = D.shape[0]

    def phi_parts(t, value, gd, hd):
        phi = value * scale + lam * (f_c * t + 0.5 * k_cc * t * t)
        return phi, gd * scale + lam * (f_c + k_cc * t), hd * scale + lam * k_cc

    # t = 0: one set of windows at the current scores serves every candidate.
    v0, gp0, gn0, w0 = pairwise.value_and_grad(fp, fn, loss)
    g0 = jnp.sum(Dp * gp0, axis=1) + jnp.sum(Dn * gn0, axis=1)
    hp0, hn0 = jax.vmap(lambda dp, dn: pairwise.hvp(w0, dp, dn, loss))(Dp, Dn)
    h0 = jnp.sum(hp0 * Dp, axis=1) + jnp.sum(hn0 * Dn, axis=1)
    zero = jnp.zeros((kappa,), dt)
    phi0, dphi0, d2phi0 = phi_parts(zero, jnp.broadcast_to(v0, (kappa,)), g0, h0)

    def at(t):
        def one(ti, dp, dn):
            v, gp, gn, w = pairwise.value_and_grad(fp + ti * dp, fn + ti * dn, loss)
            hp, hn = pairwise.hvp(w, dp, dn, loss)
            return v, jnp.sum(gp * dp) + jnp.sum(gn * dn), jnp.sum(hp * dp) + jnp.sum(hn * dn)

        return phi_parts(t, *jax.vmap(one)(t, Dp, Dn))

    inf = jnp.full((kappa,), jnp.inf, dt)

    def update(s: _Newton, phi, g, h) -> _Newton:
        better = phi < s.best_phi
        best_t = jnp.where(better, s.t, s.best_t)
        best_phi = jnp.where(better, phi, s.best_phi)
        best_g = jnp.where(better, g, s.best_g)
        # φ is convex with continuous φ': the sign of φ'(t) brackets the minimiser.
        hi = jnp.where(g > 0, jnp.minimum(s.hi, s.t), s.hi)
        lo = jnp.where(g < 0, jnp.maximum(s.lo, s.t), s.lo)
        newton = s.t - g / jnp.where(h > 0, h, 1)
        # φ is piecewise quadratic, so a Newton step is exact once it stays in one piece; a step
        # that leaves the bracket (curvature changed across a breakpoint) is replaced by bisection.
        inside = (newton > lo) & (newton < hi)
        t_next = jnp.where(inside, newton, 0.5 * (lo + hi))
        width = hi - lo
        collapsed = jnp.isfinite(width) & (
            width <= 4 * jnp.finfo(dt).eps * jnp.maximum(jnp.abs(lo), jnp.abs(hi))
        )
        # h ≤ 0 only for a zero feature vector (K_cc = 0), where φ is constant.
        done = s.done | (jnp.abs(g) <= tol) | collapsed | (h <= 0) | ~jnp.isfinite(t_next)
        t = jnp.where(done, s.t, t_next)
        return _Newton(t, lo, hi, best_t, best_phi, best_g, done, s.it + 1)

    init = _Newton(
        t=zero, lo=-inf, hi=inf, best_t=zero, best_phi=phi0, best_g=dphi0,
        done=jnp.zeros((kappa,), bool), it=jnp.zeros((), jnp.int32),
    )  # fmt: skip
    state = update(init, phi0, dphi0, d2phi0)

    def body(s):
        return update(s, *at(s.t))

    state = jax.lax.while_loop(lambda s: (s.it < max_newton) & ~jnp.all(s.done), body, state)
    return CandidateSteps(
        step=state.best_t,
        reduction=phi0 - state.best_phi,
        grad=state.best_g,
        iterations=state.it,
    )


def newton_candidates(
    f,
    D,
    f_c,
    k_cc,
    lam,
    n_pos: int,
    n_neg: int,
    *,
    loss: PiecewiseQuadratic | None = None,
    tol: float = 1e-6,
    max_newton: int = 20,
) -> CandidateSteps:
    """Score candidate basis functions by their exact 1-D Newton problem (seed 001 eq. 4.10).

    With β_J fixed and the candidate's coefficient ``t`` free, the objective along candidate
    column ``d`` (with ``f_c = K_cJ β_J`` and ``K_cc`` its kernel diagonal) is::

        φ(t) = 1/(m+ m−) Σ_{i∈+} Σ_{j∈−} ℓ(f_i − f_j + t (d_i − d_j))
               + (λ/2) β_Jᵀ K_JJ β_J + λ f_c t + (λ/2) K_cc t²

    convex and piecewise quadratic in ``t`` with a continuous derivative. It is minimised by a
    Newton iteration (seed 001 Sec. 4.2.2, after Keerthi et al. 2006), safeguarded by bisection
    on the bracket given by the sign of ``φ'``; each iteration re-locates the sorted windows at
    ``f + t d`` (:func:`jaxrank.pairwise.value_and_grad`, :func:`jaxrank.pairwise.hvp`), all
    candidates at once under ``jax.vmap``. A candidate stops when ``|φ'(t)| ≤ tol`` (``φ'`` is
    the gradient of F with respect to its coefficient), its bracket collapses to rounding, or
    after ``max_newton`` iterations; the best point evaluated is returned, so the reduction is
    never negative.

    Args:
      f: ``(m_pad,)`` current scores ``K_{·J} β_J``, rows ordered [positives; negatives; padding].
      D: ``(κ, m_pad)`` candidate columns ``K_{·c}`` in the same row order.
      f_c: ``(κ,)`` current score of each candidate's own row (``K_cJ β_J``).
      k_cc: ``(κ,)`` ``k(x_c, x_c)``.
      lam: λ > 0.
      n_pos, n_neg: class sizes; rows beyond ``n_pos + n_neg`` are padding (ignored).
      loss: the pairwise loss (default: squared hinge, seed 001 eq. 2.4).
      tol: derivative tolerance (same units as the solver's gradient tolerance).
      max_newton: cap on Newton iterations after the first (static).

    Returns:
      :class:`CandidateSteps`: step ``t*``, reduction ``φ(0) − φ(t*)``, ``φ'(t*)``, iterations.

    Example:
      >>> import jax.numpy as jnp
      >>> f = jnp.zeros(3)                        # J empty: all scores 0; one positive first
      >>> D = jnp.array([[1.0, 0.0, 0.0]])        # a candidate that scores only the positive
      >>> s = newton_candidates(f, D, jnp.zeros(1), jnp.ones(1), 1.0, 1, 2)
      >>> round(float(s.step[0]), 6), round(float(s.reduction[0]), 6)  # φ(t) = (1−t)² + t²/2
      (0.666667, 0.666667)
    """
    loss = get_loss("squared_hinge") if loss is None else loss
    f = jnp.asarray(f)
    dt = f.dtype
    D = jnp.asarray(D, dt)
    if D.ndim != 2 or D.shape[1] != f.shape[0]:
        raise ValueError(f"D must have shape (κ, {f.shape[0]}), got {D.shape}.")
    if n_pos < 1 or n_neg < 1 or n_pos + n_neg > f.shape[0]:
        raise ValueError(f"need 1 ≤ n_pos, 1 ≤ n_neg, n_pos + n_neg ≤ {f.shape[0]}.")
    return _newton(
        f, D, jnp.asarray(f_c, dt), jnp.asarray(k_cc, dt), jnp.asarray(lam, dt),
        jax.tree.map(lambda v: jnp.asarray(v, dt), loss), jnp.asarray(tol, dt),
        n_pos=int(n_pos), n_neg=int(n_neg), max_newton=int(max_newton),
    )  # fmt: skip


@functools.partial(jax.jit, static_argnums=2)
def _draw_bits(key, step, m):
    return jax.random.bits(jax.random.fold_in(key, step), (m,), jnp.uint32)


@jax.jit
def _columns(kernel, Xc, Xo):
    return kernel(Xc, Xo)


@functools.partial(jax.jit, donate_argnums=0)
def _set_column(K, col, k):
    # In place (the buffer is donated): adding a basis function costs O(m), not O(m·n_basis).
    return K.at[:, k].set(col)


@jax.jit
def _matvec(K, beta):
    return jnp.matmul(K, beta, precision=_HI)


def _check_validation(validation, d: int):
    if not isinstance(validation, tuple | list) or len(validation) != 2:
        raise ValueError("validation must be a pair (X_val, y_val).")
    Xv = check_X(validation[0], name="validation X")
    pos_v = check_binary_labels(validation[1], name="validation y")
    if Xv.shape[0] != pos_v.shape[0]:
        raise ValueError(
            f"validation X and y have different lengths: {Xv.shape[0]} rows, {pos_v.shape[0]} "
            "labels."
        )
    if Xv.shape[1] != d:
        raise ValueError(f"validation X has {Xv.shape[1]} features, X has {d}.")
    return Xv, pos_v


def _floor(dt, kmax: float, m_pad: int, block: int) -> float:
    # The gradient's rounding error with the two-level product, as in jaxrank._fitting.fit_rows.
    depth = math.sqrt(block) + math.sqrt(m_pad / block)
    return float(np.finfo(dt).eps) * depth * max(kmax, 1.0)


def fit_greedy(
    X,
    y,
    lam,
    *,
    n_basis: int,
    key,
    kappa: int = 100,
    kernel=None,
    loss: str = "squared_hinge",
    eps: float = 0.5,
    schedule="paper",
    validation=None,
    patience: int | None = None,
    min_delta: float = 0.0,
    grow_lam: float | None = None,
    tol: float = 1e-6,
    max_iter: int = 100,
    max_cg: int = 25,
    max_newton: int = 20,
    path: str = "batch",
    chains: int = 4,
    precondition: str = "auto",
    dtype=None,
    memory_budget: int | None = None,
    return_history: bool = False,
):
    """Sparse kernel AUC (seed 001): grow a basis greedily, retraining on the paper's schedule.

    Minimises seed 001 eq. (4.5) (squared hinge, eq. 2.4) in jaxrank's normalisation::

        F(β_J) = 1/(m+ m−) Σ_{i∈+} Σ_{j∈−} max(0, 1 − f_i + f_j)² + (λ/2) β_Jᵀ K_JJ β_J

    (``F = λ·E`` for the paper's ``E`` with ``C = 2/(λ m+ m−)``) over a basis J grown one row at a
    time (Algorithm 1): κ random candidates from the rows not in J are scored by the exact 1-D
    Newton problem of Method 2, eq. (4.10) (:func:`newton_candidates`); the best joins J with its
    1-D coefficient; β_J is re-optimised by jaxrank's trust-region Newton-CG (warm start) when
    ``|J|`` is in :func:`retrain_sizes` (paper: ``⌊2^{j/4}⌋``) and at the end. See the module
    notes for the cost.

    λ grid: the basis is grown at one λ, ``grow_lam`` (default: the grid's median value, the
    element at position ``L // 2`` of the sorted grid), then the final basis is refitted for every
    λ of the grid in one batched solve (:func:`jaxrank._fitting.fit_rows`, warm-started at the grown
    β). To grow one basis per λ, call ``fit_greedy`` once per λ.

    Validation: with ``validation=(X_val, y_val)`` the validation AUC is recorded after every
    step; with ``patience`` as well, growth stops once it has not improved by more than
    ``min_delta`` for ``patience`` consecutive steps, and the returned model keeps the basis
    prefix of the best validation AUC (refitted at the end; seed 001 Sec. 5 stops "when there was
    not significant change in the validation set AUC").

    Args:
      X: ``(m, d)`` training rows, taken as given (no standardisation).
      y: two-valued labels; the rare class is ``+1``, ``1`` or ``True``.
      lam: λ > 0 or a 1-D grid.
      n_basis: the basis size to grow to (``d_max`` of seed 001; it suggests 5-10 % of m).
      key: ``jax.random.key`` for the candidate draws (the fit is deterministic given it).
      kappa: candidates per step (seed 001 Sec. 5: κ = 100).
      kernel: a kernel object or name; default Gaussian with σ² from the paper's heuristic.
      loss: ``"squared_hinge"`` (seed 001) or ``"smoothed_hinge"`` (seed 000, with ``eps``).
      eps: ε of the smoothed hinge.
      schedule: retraining schedule, see :func:`retrain_sizes`.
      validation: optional ``(X_val, y_val)``.
      patience: stop after this many steps without validation improvement (needs
        ``validation``); ``None``: grow to ``n_basis``.
      min_delta: the validation AUC improvement that counts.
      grow_lam: the λ to grow at for a grid (see above); a scalar ``lam`` grows at ``lam``.
      tol, max_iter, max_cg, path, chains, dtype, memory_budget: as in :func:`jaxrank.fit`
        (``tol`` also stops each candidate's 1-D Newton iteration).
      precondition: the final fit's preconditioner, as in :func:`jaxrank.fit`. The retrains
        while growing use ``M = K_JJ + δI`` (``"cholesky"``) unless this is ``"jacobi"`` or
        ``"none"``: it needs no moments of the data, so it stays exact and cheap on the
        zero-padded capacity blocks.
      max_newton: cap on the 1-D Newton iterations per step (static).
      return_history: also return a :class:`GreedyHistory`.

    Returns:
      A :class:`~jaxrank.RankModel` (``basis_index`` in the order the rows were selected; loss
      ``loss``), or ``(model, history)`` with ``return_history=True``.

    Raises:
      ValueError: on bad input (as :func:`jaxrank.fit`; ``n_basis`` outside ``[1, m]``,
        ``kappa < 1``, a missing or malformed key, an unknown schedule, validation data that do
        not match ``X``, ``patience`` without validation).

    Warns:
      ConvergenceWarning: when the final solve stopped before ``tol`` for some λ (intermediate
        retrains record their status in the history).

    Example:
      >>> import jax, jaxrank
      >>> from jaxrank.greedy import fit_greedy
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> model = fit_greedy(X, y, 2.0**-6, n_basis=10, kappa=20, key=jax.random.key(0))
      >>> model.coef.shape, model.decision_function(X).shape
      ((10,), (200,))
    """
    X, pos = check_X_y(X, y)
    lams, scalar = check_lam(lam)
    return greedy_rows(
        X, pos, lams, scalar, n_basis=n_basis, key=key, kappa=kappa, kernel=kernel, loss=loss,
        eps=eps, schedule=schedule, validation=validation, patience=patience,
        min_delta=min_delta, grow_lam=grow_lam, tol=tol, max_iter=max_iter, max_cg=max_cg,
        max_newton=max_newton, path=path, chains=chains, precondition=precondition, dtype=dtype,
        memory_budget=memory_budget, return_history=return_history,
    )  # fmt: skip


#: :func:`fit_greedy`'s own options (those :func:`jaxrank.fit` does not take) at their defaults,
#: read from its signature: what ``fit(basis="greedy")`` passes.
GREEDY_DEFAULTS = types.MappingProxyType(
    {
        name: param.default
        for name, param in inspect.signature(fit_greedy).parameters.items()
        if name in ("kappa", "schedule", "validation", "patience", "min_delta", "grow_lam",
                    "max_newton", "return_history")
    }
)  # fmt: skip


def greedy_rows(
    X, pos, lams, scalar, *, n_basis, key, kappa, kernel, loss, eps, schedule, validation,
    patience, min_delta, grow_lam, tol, max_iter, max_cg, max_newton, path, chains, precondition,
    dtype, memory_budget, return_history,
):  # fmt: skip
    """:func:`fit_greedy` on rows, rare-class mask and λ grid already checked (``check_X_y``,
    ``check_lam``): what :func:`jaxrank.fit` calls with ``basis="greedy"``, so that ``X`` is
    checked once; every other argument is checked here."""
    tol = check_solver_options(
        loss=loss, eps=eps, tol=tol, path=path, chains=chains, precondition=precondition,
        max_iter=max_iter, max_cg=max_cg,
    )  # fmt: skip
    m = X.shape[0]
    n_basis = check_int(n_basis, "n_basis", 1, m)
    kappa = check_int(kappa, "kappa", 1)
    max_newton = check_int(max_newton, "max_newton", 1)
    key = check_key(key)
    sizes = set(retrain_sizes(schedule, n_basis).tolist())
    if validation is not None:
        Xv, pos_v = _check_validation(validation, X.shape[1])
    if patience is not None:
        if validation is None:
            raise ValueError("patience needs validation=(X_val, y_val) to watch.")
        patience = check_int(patience, "patience", 1)
    if min_delta != 0:
        min_delta = check_positive(min_delta, "min_delta")
    if grow_lam is None:
        grow_lam = float(np.sort(lams)[lams.size // 2])
    else:
        grow_lam = check_positive(grow_lam, "grow_lam")
    dt = choose_dtype(X, dtype)
    check_cast(X, dt)  # X + 1e8 in float32: the PrecisionWarning fit() gives, before the growth
    check_lam_dtype(lams, dt)
    kernel = _kernels.resolve_kernel(kernel, X, dtype=dt)
    lossfn = jax.tree.map(lambda v: jnp.asarray(v, dt), get_loss(loss, eps))
    grow_precondition = precondition if precondition in ("jacobi", "none") else "cholesky"

    n_pos = int(pos.sum())
    n_neg = m - n_pos
    order = np.concatenate([np.flatnonzero(pos), np.flatnonzero(~pos)])
    row_of = np.empty(m, np.int32)
    row_of[order] = np.arange(m, dtype=np.int32)
    block = _kernels.product_block(m)
    # the same padded row count as jaxrank.fit's block over n_basis columns, so that the final
    # refit reuses the compiled solver
    rows, n_chunks = _kernels.chunk_rows(m, n_basis, dt.itemsize, block)
    m_pad = rows * n_chunks
    n_val = Xv.shape[0] if validation is not None else 0
    k_eff = min(kappa, m)
    _kernels.check_memory(  # K_{·J}, the candidate columns and their Newton temporaries, K_vJ
        (m_pad * (n_basis + 8 * k_eff) + n_val * n_basis + 2 * n_basis * n_basis) * dt.itemsize,
        memory_budget,
        f"the greedy kernel blocks ({m} x ({n_basis} + {k_eff} candidates))",
    )

    Xd = jnp.asarray(X, dt)
    Xo = jnp.pad(Xd[jnp.asarray(order)], ((0, m_pad - m), (0, 0)))
    K = jnp.zeros((m_pad, n_basis), dt)
    f = jnp.zeros((m_pad,), dt)
    beta = np.zeros(n_basis, dt)
    if validation is not None:
        Xvd = jnp.asarray(Xv, dt)
        Kv = jnp.zeros((n_val, n_basis), dt)
        fv = jnp.zeros((n_val,), dt)
    layout = Biclass(n_pos, n_neg)
    kmax = float(jnp.max(jnp.abs(kernel.diag(Xd))))
    floor = _floor(dt, kmax, m_pad, block)
    tol_1d = max(tol, floor)

    objective = float(piecewise_loss(lossfn, jnp.zeros((), dt)))  # J = ∅: every margin is 0
    in_basis = np.zeros(m, bool)
    J: list[int] = []
    hist = {k: [] for k in ("index", "reduction", "objective", "val_auc", "retrained", "status")}
    best_auc, best_size, best_beta, wait = -np.inf, 0, beta, 0
    stopped = False

    for step in range(n_basis):
        bits = np.asarray(_draw_bits(key, np.uint32(step), m))
        avail = np.flatnonzero(~in_basis)
        pick = avail[np.argsort(bits[avail], kind="stable")[:k_eff]]
        if pick.size < k_eff:  # fewer rows left than κ: repeat one (a duplicate scores the same)
            pick = np.concatenate([pick, np.full(k_eff - pick.size, pick[0])])
        D = _columns(kernel, Xd[jnp.asarray(pick)], Xo)
        rows_c = jnp.asarray(row_of[pick])
        fc = f[rows_c]
        kcc = D[jnp.arange(k_eff), rows_c]
        res = _newton(
            f, D, fc, kcc, jnp.asarray(grow_lam, dt), lossfn, jnp.asarray(tol_1d, dt),
            n_pos=n_pos, n_neg=n_neg, max_newton=max_newton,
        )  # fmt: skip
        red = np.asarray(res.reduction)
        best = int(np.argmax(red))
        c = int(pick[best])
        t = np.asarray(res.step)[best]
        J.append(c)
        in_basis[c] = True
        size = len(J)
        K = _set_column(K, D[best], size - 1)
        beta[size - 1] = t
        f = f + jnp.asarray(t, dt) * D[best]
        objective -= float(red[best])
        if validation is not None:
            colv = _columns(kernel, Xd[c : c + 1], Xvd)[0]
            Kv = _set_column(Kv, colv, size - 1)
            fv = fv + jnp.asarray(t, dt) * colv
        status = -1
        if size in sizes:
            cap = min(n_basis, max(_MIN_CAPACITY, 1 << (size - 1).bit_length()))
            B = Xd[jnp.asarray(J + [J[0]] * (cap - size))]
            new, info = _retrain(
                K, cap, size, B, kernel, grow_lam, beta[:cap], lossfn, tol,
                floor, layout, block, max_iter, max_cg, grow_precondition,
            )  # fmt: skip
            beta[:cap] = new
            beta[size:] = 0
            f = _matvec(K, jnp.asarray(beta))
            if validation is not None:
                fv = _matvec(Kv, jnp.asarray(beta))
            objective = float(info.objective)
            status = int(info.status)
        hist["index"].append(c)
        hist["reduction"].append(float(red[best]))
        hist["objective"].append(objective)
        hist["retrained"].append(status >= 0)
        hist["status"].append(status)
        auc = float(metrics.auc(pos_v, fv)) if validation is not None else float("nan")
        hist["val_auc"].append(auc)
        if validation is not None:
            if auc > best_auc + min_delta:
                best_auc, best_size, best_beta, wait = auc, size, beta.copy(), 0
            else:
                wait += 1
            if patience is not None and wait >= patience:
                stopped = True
                break

    if not stopped:
        best_size, best_beta = len(J), beta
    idx = np.asarray(J[:best_size], np.int64)
    model = fit_rows(
        X, order, idx, lams, scalar, layout, kernel=kernel, dtype=dt, loss=loss, eps=eps,
        tol=tol, max_iter=max_iter, max_cg=max_cg, path=path, chains=chains,
        precondition=precondition, memory_budget=memory_budget, init=best_beta[:best_size],
    )  # fmt: skip
    if not return_history:
        return model
    history = GreedyHistory(
        basis_size=np.arange(1, len(J) + 1),
        index=np.asarray(hist["index"], np.int64),
        reduction=np.asarray(hist["reduction"]),
        objective=np.asarray(hist["objective"]),
        val_auc=np.asarray(hist["val_auc"]),
        retrained=np.asarray(hist["retrained"], bool),
        status=np.asarray(hist["status"], np.int32),
        grow_lam=grow_lam,
        best_size=int(best_size),
        stopped_early=stopped,
    )
    return model, history


@jax.jit
def _padded_gram(kernel, B, size):
    # K_JJ in the top-left block, identity elsewhere: fixed shape (cap, cap) for every size.
    keep = jnp.arange(B.shape[0], dtype=jnp.int32) < size
    eye = jnp.eye(B.shape[0], dtype=B.dtype)
    return jnp.where(keep[:, None] & keep[None, :], kernel(B, B), eye)


def _retrain(K, cap, size, B, kernel, lam, beta0, lossfn, tol, floor, layout, block, max_iter,
             max_cg, precondition):  # fmt: skip
    """Re-optimise β_J over the first ``size`` columns of ``K``, padded to ``cap`` columns.

    ``B``: ``(cap, d)`` basis rows (rows beyond ``size`` are ignored). Every array has a shape
    fixed by ``cap``, so nothing recompiles as the basis grows within a capacity.
    """
    dt = K.dtype
    Krr = _padded_gram(kernel, B, jnp.asarray(size, jnp.int32))
    # block-diagonal [[K_JJ, 0], [0, I]]: its Cholesky factor is that of K_JJ padded with I
    chol = cholesky_precond(Krr) if precondition == "cholesky" else None
    if chol is None and precondition == "cholesky":
        precondition = "none"
    beta, info = solve(
        K[:, :cap], Krr, chol if chol is not None else Krr, jnp.asarray([lam], dt),
        jnp.asarray(beta0, dt)[None], lossfn, jnp.asarray(tol, dt), jnp.asarray(floor, dt),
        layout=layout, block=block, max_iter=int(max_iter), max_cg=int(max_cg), path="batch",
        chains=1, precondition=precondition,
    )  # fmt: skip
    return np.asarray(beta[0]), jax.tree.map(lambda a: a[0], info)
