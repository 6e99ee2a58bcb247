"""The ARD option of ``RankRCClassifierCV(kernel="ard")``: a cheap start, then implicit gradients.

Two stages, both on the training rows only:

1. **Start** (:func:`univariate_scales`): after the isotropic (binary-aware) search has chosen
   σ², λ and the basis, each group of columns (a column, or the one-hot columns of one source
   variable) is scaled by how well it ranks alone, ``|2·AUC_g − 1|`` (floored at
   :data:`START_FLOOR` of the largest), on top of the binary-aware scales.
2. **Tuning** (:func:`tune_scales`): the log-scales and log λ by Adam from that start, on the
   mean smoothed held-out AUC of :func:`jaxrank.tune.heldout_loss` (the search's folds as masks,
   one compiled program, implicit derivatives), the log-scales shrunk toward the isotropic
   kernel (:data:`SHRINK`). The search's last fold is kept out of every gradient member,
   training and held-out alike: the isotropic kernel, the start and each step are judged by
   the exact AUC on it, and the best is kept (early stopping on data the gradient never saw;
   the isotropic kernel wins ties).
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
import optax

from jaxrank import _buckets, _random, metrics
from jaxrank import tune as _tune
from jaxrank.kernels import sigma2_heuristic

__all__ = ["SHRINK", "START_FLOOR", "STEPS", "check_groups", "tune_scales", "univariate_scales"]

#: Smallest start weight of a group, as a fraction of the largest.
START_FLOOR = 0.05
#: κ of the shrinkage ``κ ‖log s − log s₀‖²`` (the smoothed AUC is in [0, 1]).
SHRINK = 2e-3
#: The tuner's members hold at most this many rows (a fold's fit and its implicit derivative
#: cost O(m·|R|) each, and a step holds k of them).
MAX_ROWS = 1500
#: Adam's steps at most, its learning rate on the log scale, and the patience of the stop.
STEPS = 12
LEARNING_RATE = 0.15
PATIENCE = 3
#: The smoothing temperature of the held-out AUC, in standard deviations of the scores.
TAU = 0.25
#: The implicit solve of each member's derivative (``fit_core(implicit=)``): a step needs a
#: direction, not 1e-5 of the exact one. Measured on a 3000-row set (Arrests), 5 members: a
#: value-and-gradient took 16.5 s with the near-exact default (1024 CG steps per member).
IMPLICIT = (1e-3, 50)


@functools.cache
def _optimizer():
    # one object for every fit: the compiled step is cached on it (jaxrank.tune)
    return optax.adam(LEARNING_RATE)


def check_groups(groups, d: int) -> np.ndarray:
    """``groups`` as ``(d,)`` int32 group ids ``0 … G−1`` (renumbered by first appearance);
    ``None``: every column its own group."""
    if groups is None:
        return np.arange(d, dtype=np.int32)
    g = np.asarray(groups)
    if g.ndim != 1 or g.size != d:
        raise ValueError(
            f"feature_groups must have one entry per column ({d}), got shape {g.shape}."
        )
    _, first, inv = np.unique(g, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    return order[inv].astype(np.int32)


def univariate_scales(X, pos, groups) -> np.ndarray:
    """``(G,)`` start weights: ``max(|2·AUC_g − 1|, START_FLOOR · max)`` of each group's score
    ``X_g · (x̄_g⁺ − x̄_g⁻)`` (for one column, the column itself).

    Example:
      >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 1.0], [3.0, 0.0]])
      >>> univariate_scales(X, np.array([False, False, True, True]), np.array([0, 1])).tolist()
      [1.0, 0.05]
    """
    X = np.asarray(X, np.float64)
    G = int(groups.max()) + 1
    w = np.empty(G)
    for g in range(G):
        cols = X[:, groups == g]
        direction = cols[pos].mean(0) - cols[~pos].mean(0)
        auc = float(metrics.auc(pos, cols @ direction)) if np.any(direction) else 0.5
        w[g] = abs(2 * auc - 1)
    top = w.max() if w.max() > 0 else 1.0
    return np.maximum(w, START_FLOOR * top) / top


def tune_scales(X, pos, *, held_rows, groups, base, policy_basis, sigma2, lam, key, dtype,
                max_iter: int = 100, start=None):  # fmt: skip
    """Stage 2 of the module notes: the tuned per-column scales and λ.

    The members are the search's folds over at most :data:`MAX_ROWS` rows (every rare row up
    to half of them, majority rows drawn with ``key``): the last fold is the stopping fold,
    the others give the gradient. Candidates are the isotropic kernel (``base``), the
    univariate start and each Adam step from it; the one with the best exact AUC on the
    stopping fold is kept (the isotropic kernel on a tie).

    Args:
      X, pos: the training rows and rare-class mask.
      held_rows: the search's held-out folds (``k ≥ 3`` index arrays).
      groups: ``(d,)`` group ids; ``base``: ``(d,)`` fixed column factors (binary-aware).
      policy_basis: ``f(X_rows, pos_rows, key) -> indices`` of a member's basis.
      sigma2, lam: the isotropic search's pick.
      key: ``jax.random.key``; ``dtype``: the fits' dtype; ``max_iter``: Newton steps cap.
      start: ``(G,)`` start weights (then no isotropic candidate: the caller chose the start);
        ``None``: :func:`start_weights` with the isotropic kernel as a candidate.

    Returns:
      ``(scales, lam, result, kept)``: per-column scales, λ, the
      :class:`jaxrank.tune.TuneResult` (step 0: the isotropic kernel, 1: the univariate start)
      and what was kept (``"isotropic"``, ``"univariate"`` or ``"tuned"``).
    """
    m, d = X.shape
    k = len(held_rows)
    fold = np.empty(m, np.int64)
    for f, h in enumerate(held_rows):
        fold[h] = f
    rows = _subsample(pos, key)
    X, pos, fold = X[rows], pos[rows], fold[rows]
    m = rows.size
    helds = [np.flatnonzero(fold == f) for f in range(k)]
    dev = np.flatnonzero(fold != k - 1)
    # members: k − 1 gradient members on the development rows, then the stopping member
    trains = [np.flatnonzero((fold != f) & (fold != k - 1)) for f in range(k - 1)] + [dev]
    bases = []
    for f, tr in enumerate(trains):
        bases.append(tr[policy_basis(X[tr], pos[tr], _random.fold_in(key, f))])
    w = start_weights(X, pos, groups, base) if start is None else np.asarray(start, np.float64)
    # every shape on a ladder (rows, columns, groups, basis, held-out rows, class sizes): data
    # sets of similar sizes share the compiled step; padded rows are in no member, padded
    # columns are 0 (they move no distance) in a group of their own
    G = w.size
    m_pad, d_pad, g_pad = _buckets.bucket(m), _pow2(d), _pow2(G + 1)
    Xp = np.zeros((m_pad, d_pad), dtype)
    Xp[:m, :d] = X
    posp = np.zeros(m_pad, bool)
    posp[:m] = pos
    groups = np.concatenate([groups, np.full(d_pad - d, G, np.int32)])
    base = np.concatenate([np.asarray(base, np.float64), np.ones(d_pad - d)])
    w = np.concatenate([w, np.ones(g_pad - G)])
    nb = _buckets.bucket(max(b.size for b in bases))
    H = _buckets.bucket(max(h.size for h in helds))
    B = np.empty((k, nb, d_pad), dtype)
    held = np.zeros((k, H), np.int32)
    valid = np.zeros((k, H), bool)
    train = np.zeros((k, m_pad), bool)
    for f in range(k):
        B[f] = Xp[bases[f][0]]  # padding rows: copies of a real row
        B[f, : bases[f].size] = Xp[bases[f]]
        held[f, : helds[f].size] = helds[f]
        valid[f, : helds[f].size] = True
        train[f, trains[f]] = True
    X, pos = Xp, posp
    sizes = (
        _buckets.bucket(max(int(pos[t].sum()) for t in trains)),
        _buckets.bucket(max(int((~pos[t]).sum()) for t in trains)),
    )
    data = _tune.TuneData(
        X=jnp.asarray(X, dtype), pos=jnp.asarray(pos), train=jnp.asarray(train),
        held=jnp.asarray(held), held_valid=jnp.asarray(valid), basis=jnp.asarray(B),
        n_basis=jnp.asarray([b.size for b in bases], jnp.int32),
        groups=jnp.asarray(groups), base=jnp.asarray(base, dtype),
        weights=jnp.asarray([1.0] * (k - 1) + [0.0], dtype),
        anchor=jnp.zeros(w.size, dtype),  # shrunk toward the isotropic kernel
        shrink=jnp.asarray(SHRINK, dtype), tau=jnp.asarray(TAU, dtype),
    )  # fmt: skip
    as_params = lambda log_s: _tune.TuneParams(
        jnp.asarray(log_s, dtype), jnp.asarray(np.log(lam), dtype),
        jnp.asarray(np.log(sigma2), dtype),
    )  # fmt: skip
    res = _tune.tune(
        as_params(np.log(w)), data, sizes=sizes, optimizer=_optimizer(), steps=STEPS,
        patience=PATIENCE, max_iter=max_iter, tol=1e-4, implicit=IMPLICIT,
        candidates=[as_params(np.zeros(w.size))] if start is None else [],
    )  # fmt: skip
    labels = ("isotropic", "univariate") if start is None else ("start",)
    kept = labels[res.best_step] if res.best_step < len(labels) else "tuned"
    if kept == "tuned":
        log_s = np.asarray(res.params.log_scales, np.float64)
        scales = (base * np.exp(log_s)[groups])[:d]
        return scales, float(np.exp(np.float64(res.params.log_lam))), res, kept
    # a start kept: its exact values, not the round trip through their logarithms in `dtype`
    # (λ = 2⁻⁶ came back as 0.0156249998)
    w = np.ones(w.size) if kept == "isotropic" else w
    return (base * w[groups])[:d], lam, res, kept


def start_weights(X, pos, groups, base) -> np.ndarray:
    """:func:`univariate_scales` of the rows ``X · base``, scaled so that the σ² heuristic of the
    reweighted rows equals the isotropic one's (a σ² factor means the same on both)."""
    w = univariate_scales(X * base, pos, groups)
    return w * np.sqrt(sigma2_heuristic(X * base) / sigma2_heuristic(X * base * w[groups]))


def _pow2(n: int) -> int:
    return max(8, 1 << (int(n) - 1).bit_length())


def _subsample(pos, key) -> np.ndarray:
    """At most :data:`MAX_ROWS` row indices (sorted): every rare row up to half of them, the
    majority rows drawn with ``key``."""
    m = pos.size
    if m <= MAX_ROWS:
        return np.arange(m)
    rare, major = np.flatnonzero(pos), np.flatnonzero(~pos)
    n_rare = min(rare.size, MAX_ROWS // 2)
    perm = _random.permutation(_random.fold_in(key, 101), m)
    pick_rare = rare[np.argsort(perm[rare])[:n_rare]]
    pick_major = major[np.argsort(perm[major])[: MAX_ROWS - n_rare]]
    return np.sort(np.concatenate([pick_rare, pick_major]))
