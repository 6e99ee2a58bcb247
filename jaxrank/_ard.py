"""The ARD option of ``RankRCClassifierCV(kernel="ard")``: a cheap start, then implicit gradients.

Two stages, both on the training rows only:

1. **Start** (:func:`univariate_scales`): each group of columns (a column, or the one-hot
   columns of one source variable) is scaled by how well it ranks alone, ``|2·AUC_g − 1|``
   (floored at :data:`START_FLOOR` of the largest), on top of the binary-aware scales. The
   estimator searches σ² × λ with this kernel and with the binary-aware isotropic one, and keeps
   the start only when its cross-validated AUC beats the isotropic pick's on the same folds.
2. **Tuning** (:func:`tune_scales`): the log-scales and log λ by Adam on the mean smoothed
   held-out AUC of :func:`jaxrank.tune.heldout_loss` (folds as masks, one compiled program,
   implicit derivatives), with the log-scales shrunk toward the start (:data:`SHRINK`). One fold
   of the search's folds is kept out of every gradient member, training and held-out alike: the
   step is chosen by the exact AUC on it (early stopping on data the gradient never saw).
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
import optax

from jaxrank import _buckets, _random, metrics
from jaxrank import tune as _tune

__all__ = ["SHRINK", "START_FLOOR", "STEPS", "check_groups", "tune_scales", "univariate_scales"]

#: Smallest start weight of a group, as a fraction of the largest.
START_FLOOR = 0.05
#: κ of the shrinkage ``κ ‖log s − log s₀‖²`` (the smoothed AUC is in [0, 1]).
SHRINK = 2e-3
#: Adam's steps at most, its learning rate on the log scale, and the patience of the stop.
STEPS = 16
LEARNING_RATE = 0.15
PATIENCE = 4
#: The smoothing temperature of the held-out AUC, in standard deviations of the scores.
TAU = 0.25


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


def tune_scales(X, pos, *, train_rows, held_rows, policy_basis, sigma2, lam, base, groups,
                start, key, dtype, max_iter: int = 100):  # fmt: skip
    """Stage 2 of the module notes: ``(log_scales, lam, result)`` from the folds of a search.

    Args:
      X, pos: the training rows and rare-class mask.
      train_rows, held_rows: the search's folds (lists of row indices, ``k ≥ 3``); the last
        fold is the stopping fold, the others give the gradient members.
      policy_basis: ``f(X_rows, pos_rows, key) -> indices`` of a member's basis.
      sigma2, lam: the search's pick; ``base``: ``(d,)`` fixed column factors; ``groups``,
        ``start``: group ids and start weights ``(G,)``.
      key: ``jax.random.key`` (basis draws); ``dtype``: the fits' dtype.

    Returns:
      ``(scales, lam, result)``: per-column scales ``base · exp(log s)[groups]``, λ, and the
      :class:`jaxrank.tune.TuneResult`.
    """
    m, d = X.shape
    k = len(held_rows)
    stop_rows = held_rows[-1]
    dev = np.setdiff1d(np.arange(m), stop_rows)
    # members: k − 1 gradient members on the development rows, then the stopping member
    trains = [np.setdiff1d(dev, held_rows[f]) for f in range(k - 1)] + [dev]
    helds = [held_rows[f] for f in range(k - 1)] + [stop_rows]
    bases = []
    for f, tr in enumerate(trains):
        idx = policy_basis(X[tr], pos[tr], _random.fold_in(key, f))
        bases.append(tr[idx])
    nb = _buckets.bucket(max(b.size for b in bases))
    H = _buckets.bucket(max(h.size for h in helds))
    B = np.empty((k, nb, d), dtype)
    held = np.zeros((k, H), np.int32)
    valid = np.zeros((k, H), bool)
    train = np.zeros((k, m), bool)
    for f in range(k):
        B[f] = X[bases[f][0]]  # padding rows: copies of a real row
        B[f, : bases[f].size] = X[bases[f]]
        held[f, : helds[f].size] = helds[f]
        valid[f, : helds[f].size] = True
        train[f, trains[f]] = True
    n_pos = max(int(pos[t].sum()) for t in trains)
    n_neg = max(int((~pos[t]).sum()) for t in trains)
    sizes = (_buckets.bucket(n_pos), _buckets.bucket(n_neg))
    log0 = np.log(start)
    data = _tune.TuneData(
        X=jnp.asarray(X, dtype), pos=jnp.asarray(pos), train=jnp.asarray(train),
        held=jnp.asarray(held), held_valid=jnp.asarray(valid), basis=jnp.asarray(B),
        n_basis=jnp.asarray([b.size for b in bases], jnp.int32),
        groups=jnp.asarray(groups), base=jnp.asarray(base, dtype),
        weights=jnp.asarray([1.0] * (k - 1) + [0.0], dtype), anchor=jnp.asarray(log0, dtype),
        shrink=jnp.asarray(SHRINK, dtype), tau=jnp.asarray(TAU, dtype),
    )  # fmt: skip
    p0 = _tune.TuneParams(
        jnp.asarray(log0, dtype), jnp.asarray(np.log(lam), dtype),
        jnp.asarray(np.log(sigma2), dtype),
    )  # fmt: skip
    res = _tune.tune(
        p0, data, sizes=sizes, optimizer=_optimizer(), steps=STEPS,
        patience=PATIENCE, max_iter=max_iter, tol=1e-4,
    )  # fmt: skip
    log_s = np.asarray(res.params.log_scales, np.float64)
    scales = np.asarray(base, np.float64) * np.exp(log_s)[groups]
    return scales, float(np.exp(np.float64(res.params.log_lam))), res
