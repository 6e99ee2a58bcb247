"""Kernel parameters learned by implicit gradients: per-column scales, λ and σ² of an ARD ranker.

The solution ``β*(θ)`` of a RankRC fit is differentiable in its kernel parameters ``θ`` through
the implicit function theorem (:mod:`jaxrank.core`), so a held-out score of the fitted ranker
has a gradient with respect to every parameter of the kernel. This module tunes

    θ = (log s, log λ, log σ²),   k(u, v) = exp(−Σ_j s_{g(j)}² (u_j − v_j)² / σ²)

(:class:`jaxrank.kernels.ARDGaussian`, one scale per group ``g`` of columns) by minimising

    J(θ) = −(1/k) Σ_f AUC_τ(f; θ) + κ ‖log s − log s₀‖²,

the mean over ``k`` folds of a smoothed held-out AUC (:func:`smooth_auc`) of the ranker fitted
on the fold's training rows, plus a shrinkage of the log-scales toward their start ``s₀``.
Folds are row masks over the same arrays, so all folds are one ``jax.vmap`` of
:func:`jaxrank.core.fit_core` in one compiled program; any optax optimiser steps θ.

Everything here is a pure function of arrays (:func:`heldout_loss`, :func:`tune_step`) except
the driver :func:`tune`, a host loop that stops early on members that carry no gradient
(``weights`` 0): rows the gradient never saw (the estimator's use,
``RankRCClassifierCV(kernel="ard")``).
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxrank import kernels as _kernels
from jaxrank import metrics
from jaxrank.core import decision_function, fit_core

__all__ = [
    "TuneData",
    "TuneParams",
    "TuneResult",
    "heldout_loss",
    "make_kernel",
    "smooth_auc",
    "tune",
    "tune_step",
]


class TuneParams(NamedTuple):
    """The tuned parameters, on a log scale (a pytree: optax steps it).

    Attributes:
      log_scales: ``(G,)`` log of one scale per group of columns.
      log_lam: log λ (scalar).
      log_sigma2: log σ² (scalar).

    Example:
      >>> import jax.numpy as jnp
      >>> p = TuneParams(jnp.zeros(3), jnp.log(jnp.asarray(1e-2)), jnp.asarray(0.0))
      >>> p.log_scales.shape, round(float(jnp.exp(p.log_lam)), 4)
      ((3,), 0.01)
    """

    log_scales: jax.Array
    log_lam: jax.Array
    log_sigma2: jax.Array


class TuneData(NamedTuple):
    """Rows, folds and the fixed parts of the objective (a pytree of arrays).

    ``k`` members, each a fit on its training rows scored on its held-out rows: the held-out
    rows are given as ``H`` indices per member (padded, ``held_valid`` marks the real ones), so
    the smoothed AUC costs ``O(H²)`` per member, not ``O(m²)``.

    Attributes:
      X: ``(m, d)`` rows; ``pos``: ``(m,)`` rare-class mask.
      train: ``(k, m)`` bool, the rows each member is fitted on.
      held: ``(k, H)`` int32 row indices each member is scored on; ``held_valid``: ``(k, H)``.
      basis: ``(k, n_b, d)`` basis rows of each member; ``n_basis``: ``(k,)`` real ones.
      groups: ``(d,)`` int32 group of each column (``0 … G−1``).
      base: ``(d,)`` fixed per-column factors (e.g. the binary-aware scales,
        :func:`jaxrank.kernels.binary_scales`): column ``j``'s scale is
        ``base_j · exp(log_scales[groups[j]])``.
      weights: ``(k,)`` weight of each member in the loss (0: scored, not in the gradient).
      anchor: ``(G,)`` the log-scales the shrinkage pulls toward.
      shrink: κ ≥ 0, the shrinkage weight.
      tau: the smoothing temperature of :func:`smooth_auc`.

    Example (a whole one is built in :func:`tune`'s example):
      >>> TuneData._fields[:5]
      ('X', 'pos', 'train', 'held', 'held_valid')
    """

    X: jax.Array
    pos: jax.Array
    train: jax.Array
    held: jax.Array
    held_valid: jax.Array
    basis: jax.Array
    n_basis: jax.Array
    groups: jax.Array
    base: jax.Array
    weights: jax.Array
    anchor: jax.Array
    shrink: jax.Array
    tau: jax.Array


def make_kernel(params: TuneParams, groups, base=None) -> _kernels.ARDGaussian:
    """The ARD kernel of ``params``: σ² = exp(log σ²), column ``j`` scaled by
    ``base_j · exp(log_scales[groups[j]])``.

    Example:
      >>> import jax.numpy as jnp
      >>> p = TuneParams(jnp.zeros(2), jnp.asarray(0.0), jnp.asarray(0.0))
      >>> make_kernel(p, jnp.asarray([0, 1, 1]), jnp.asarray([1.0, 0.5, 2.0])).scales.tolist()
      [1.0, 0.5, 2.0]
    """
    scales = jnp.exp(params.log_scales)[groups]
    return _kernels.ARDGaussian(
        sigma2=jnp.exp(params.log_sigma2), scales=scales if base is None else scales * base
    )


def smooth_auc(scores, pos, where, tau) -> jax.Array:
    """Smoothed AUC: the mean over (rare, majority) pairs of ``sigmoid((f_i − f_j)/(τ·s))``,
    ``s`` the standard deviation of the scores over ``where`` (so the value does not depend
    on the scale of the scores, as the AUC does not); ``τ → 0`` gives the AUC (ties ½).

    Args:
      scores: ``(n,)``; ``pos``, ``where``: ``(n,)`` bool; ``tau`` > 0.

    Example:
      >>> import jax.numpy as jnp
      >>> f = jnp.asarray([3.0, 1.0, 0.0, 2.0])
      >>> p = jnp.asarray([True, False, False, True])
      >>> round(float(smooth_auc(f, p, jnp.ones(4, bool), 1e-3)), 4)  # AUC = 1
      1.0
    """
    w = where.astype(scores.dtype)
    n = jnp.maximum(jnp.sum(w), 1)
    mean = jnp.sum(w * scores) / n
    std = jnp.sqrt(jnp.sum(w * (scores - mean) ** 2) / n) + jnp.finfo(scores.dtype).tiny
    z = (scores - mean) / (tau * std)
    wp = jnp.where(pos, w, 0)
    wn = jnp.where(pos, 0, w)
    pair = jax.nn.sigmoid(z[:, None] - z[None, :])
    return jnp.sum(wp[:, None] * wn[None, :] * pair) / jnp.maximum(jnp.sum(wp) * jnp.sum(wn), 1)


def _member_scores(params, data: TuneData, train, held, basis, n_basis, *, static):
    sizes, max_iter, tol, implicit = static
    kernel = make_kernel(params, data.groups, data.base)
    res = fit_core(
        data.X, data.pos, jnp.exp(params.log_lam), basis, mask=train, n_basis=n_basis,
        kernel=kernel, sizes=sizes, tol=tol, max_iter=max_iter, implicit=implicit,
    )  # fmt: skip
    return decision_function(res, data.X[held]), res.info.status


def heldout_loss(params: TuneParams, data: TuneData, *, sizes, max_iter: int = 100, tol=1e-6,
                 implicit=None):  # fmt: skip
    """``J(θ)`` of the module notes and its parts, a pure function of ``params`` and ``data``.

    Every member is one :func:`jaxrank.core.fit_core` (all members one ``vmap``); its
    derivative in ``params`` is implicit (the fit's optimality condition), never through the
    solver's iterations.

    Args:
      params: :class:`TuneParams`; ``data``: :class:`TuneData`.
      sizes: ``(P, N)`` rows reserved per class for the training rows (static; at least the
        largest count of kept rare / majority rows of a member).
      max_iter: Newton step cap of each fit (static); ``tol``: its gradient tolerance.
      implicit: ``(tol, max_iter)`` of the implicit solve (static; ``None``: near-exact), as
        :func:`jaxrank.core.fit_core` takes it.

    Returns:
      ``(loss, (auc_tau, scores, status))``: the scalar ``J``, each member's smoothed AUC
      ``(k,)``, its held-out scores ``(k, H)`` and solver status ``(k,)``.

    Example (:func:`tune`'s example builds the data; ``jax.grad`` differentiates it):
      >>> import inspect
      >>> [n for n in inspect.signature(heldout_loss).parameters][:3]
      ['params', 'data', 'sizes']
    """
    static = (tuple(int(v) for v in sizes), int(max_iter), tol, implicit)
    member = functools.partial(_member_scores, params, data, static=static)
    scores, status = jax.vmap(member)(data.train, data.held, data.basis, data.n_basis)
    auc = jax.vmap(smooth_auc, in_axes=(0, 0, 0, None))(
        scores, data.pos[data.held], data.held_valid, data.tau
    )
    w = data.weights.astype(auc.dtype)
    fit_term = -jnp.sum(w * auc) / jnp.maximum(jnp.sum(w), 1e-30)
    shrink = data.shrink * jnp.sum((params.log_scales - data.anchor) ** 2)
    return fit_term + shrink, (auc, scores, status)


def tune_step(params, opt_state, data: TuneData, optimizer, *, sizes, max_iter=100, tol=1e-6,
              trainable=("log_scales", "log_lam"), implicit=None):  # fmt: skip
    """One optimiser step on :func:`heldout_loss` (pure; jit it with ``optimizer``, ``sizes``,
    ``max_iter``, ``trainable`` and ``implicit`` static). Fields of :class:`TuneParams` not in
    ``trainable`` keep their value.

    Returns:
      ``(params, opt_state, loss, aux)`` with ``aux`` as in :func:`heldout_loss` at the
      parameters before the step.

    Example (jitted, as :func:`tune` runs it):
      >>> import functools, jax, optax
      >>> step = jax.jit(functools.partial(tune_step, optimizer=optax.adam(0.1), sizes=(8, 64)))
      >>> callable(step)
      True
    """
    loss_fn = functools.partial(
        heldout_loss, sizes=sizes, max_iter=max_iter, tol=tol, implicit=implicit
    )
    (loss, aux), grad = jax.value_and_grad(loss_fn, has_aux=True)(params, data)
    grad = grad._replace(
        **{f: jnp.zeros_like(getattr(grad, f)) for f in grad._fields if f not in trainable}
    )
    # optax mixes Python floats with its int32 step counter (adam's bias correction): that
    # needs standard promotion, whatever the caller's jax_numpy_dtype_promotion says
    with jax.numpy_dtype_promotion("standard"):
        updates, opt_state = optimizer.update(grad, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss, aux


class TuneResult(NamedTuple):
    """What :func:`tune` returns.

    Attributes:
      params: the parameters of the best step by the stopping score.
      best_step: that step (0: the start).
      history: per step ``(loss, mean smoothed AUC of the gradient members, stopping score)``.
      stop_scores: the stopping score of every step evaluated.

    Example:
      >>> TuneResult._fields
      ('params', 'best_step', 'history', 'stop_scores')
    """

    params: TuneParams
    best_step: int
    history: np.ndarray
    stop_scores: np.ndarray


@functools.lru_cache(maxsize=8)
def _compiled_step(optimizer, sizes, max_iter, trainable, implicit):
    step = functools.partial(
        tune_step, optimizer=optimizer, sizes=sizes, max_iter=max_iter, trainable=trainable,
        implicit=implicit,
    )  # fmt: skip
    return jax.jit(step)


def tune(
    params: TuneParams,
    data: TuneData,
    *,
    sizes,
    optimizer: Any = None,
    steps: int = 20,
    patience: int = 4,
    max_iter: int = 100,
    tol=1e-6,
    trainable=("log_scales", "log_lam"),
    implicit=None,
    candidates=(),
) -> TuneResult:
    """Minimise :func:`heldout_loss` with ``optimizer`` (default ``optax.adam(0.1)``), keeping
    the step whose *stopping score* is best and stopping after ``patience`` steps without a
    better one.

    The stopping score is the exact held-out AUC (:func:`jaxrank.metrics.auc`) of the members
    of weight 0 — rows the gradient never saw — or, when every member carries weight, of all
    members (then the step is chosen on the data that gave the gradient, which over-fits).

    Args:
      params: the start; ``data``: :class:`TuneData`; ``sizes``, ``max_iter``, ``tol``: as in
        :func:`heldout_loss`.
      optimizer: an optax ``GradientTransformation``.
      steps: the most optimiser steps; ``patience``: steps without improvement before stopping.
      trainable: the fields of :class:`TuneParams` that move.
      implicit: the implicit solve's ``(tol, max_iter)`` (:func:`heldout_loss`): a direction
        for a step needs no near-exact solve.
      candidates: other :class:`TuneParams` judged by the same stopping score before the
        start (e.g. the kernel the start is shrunk toward); they are steps ``0 … C−1`` of the
        history, the start step ``C``, and an earlier step wins a tie.

    Returns:
      A :class:`TuneResult`.

    Example:
      >>> import jax, jax.numpy as jnp, numpy as np
      >>> import jaxrank
      >>> from jaxrank import tune as T
      >>> X, y = jaxrank.datasets.make_rare_class(120, 0.2, 0.75, seed=0)
      >>> X = jnp.asarray(X, jnp.float32); pos = jnp.asarray(y == 1)
      >>> k = 2; fold = np.arange(120) % k
      >>> train = jnp.asarray(np.stack([fold != f for f in range(k)]))
      >>> held = jnp.asarray(np.stack([np.flatnonzero(fold == f) for f in range(k)]), jnp.int32)
      >>> B = jnp.stack([X[np.flatnonzero(np.asarray(pos) & (fold != f))][:8] for f in range(k)])
      >>> data = T.TuneData(X, pos, train, held, jnp.ones(held.shape, bool), B,
      ...     jnp.full(k, 8), jnp.arange(5), jnp.ones(5), jnp.asarray([1.0, 0.0]), jnp.zeros(5),
      ...     jnp.asarray(0.01), jnp.asarray(0.2))
      >>> p0 = T.TuneParams(jnp.zeros(5), jnp.log(jnp.asarray(1e-2)), jnp.log(jnp.asarray(5.0)))
      >>> out = T.tune(p0, data, sizes=(24, 96), steps=2)
      >>> out.params.log_scales.shape, out.history.shape
      ((5,), (3, 3))
    """
    optimizer = optax.adam(0.1) if optimizer is None else optimizer
    sizes = tuple(int(v) for v in sizes)
    implicit = None if implicit is None else (float(implicit[0]), int(implicit[1]))
    step = _compiled_step(optimizer, sizes, int(max_iter), tuple(trainable), implicit)
    weights = np.asarray(data.weights)
    stop = weights == 0 if np.any(weights == 0) else np.ones_like(weights, bool)
    held_pos = np.asarray(data.pos)[np.asarray(data.held)]
    valid = np.asarray(data.held_valid)
    opt_state = optimizer.init(params)
    best, best_step, best_params = -np.inf, 0, params
    history, stops, since = [], [], 0
    queue = list(candidates)
    for t in range(len(queue) + steps + 1):
        current = queue.pop(0) if queue else params
        new_params, new_state, loss, (auc_tau, scores, _) = step(current, opt_state, data)
        sc = np.asarray(scores, np.float64)
        score = float(
            np.mean([
                metrics.auc(held_pos[i][valid[i]], sc[i][valid[i]]) for i in np.flatnonzero(stop)
            ])
        )  # fmt: skip
        g = np.asarray(auc_tau)[weights > 0]
        history.append((float(loss), float(np.mean(g)) if g.size else np.nan, score))
        stops.append(score)
        if score > best + 1e-12:
            best, best_step, best_params, since = score, t, current, 0
        elif t >= len(candidates):
            since += 1
        if t < len(candidates):
            continue
        if since >= patience or t == len(candidates) + steps:
            break
        params, opt_state = new_params, new_state
    return TuneResult(best_params, best_step, np.asarray(history), np.asarray(stops))
