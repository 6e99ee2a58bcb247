"""Choosing λ (and σ²) by stratified k-fold cross-validated AUC.

Seed 000 (Sec. 6) tunes the penalty λ of every ranker by 10-fold cross-validation over
``log2 λ = −20, −18, …, 10``, with the Gaussian kernel's σ² set by the heuristic
``σ² = (1/m²) Σ_ij ||x_i − x_j||²`` on the training rows. :func:`select_lambda` runs exactly this
protocol: for each fold the whole λ grid is fitted in one call of :func:`jaxrank.fit` (one batched
solve, docs/design.md §4) and scored on the held-out rows with :func:`jaxrank.metrics.auc`; the λ
with the largest mean AUC over the folds wins, and the ranker is refitted on every row at that λ.
"""

from __future__ import annotations

import math
import re
import warnings
from typing import Any, NamedTuple

import jax.numpy as jnp
import numpy as np

from jaxrank import _buckets, _cv_core, _random, metrics
from jaxrank import kernels as _kernels
from jaxrank._fitting import SHARED_GRID_MAX_BYTES, STAGED_MIN_BYTES, choose_dtype
from jaxrank._validation import (
    check_binary_labels,
    check_key,
    check_lam,
    check_positive,
    check_X_y,
)
from jaxrank.bases import MAJORITY_BASIS_WARNING, warn_majority_basis
from jaxrank.fit import fit
from jaxrank.model import RankModel

__all__ = [
    "SelectionResult", "select_lambda", "selection_result", "shared_floors", "stratified_folds",
]  # fmt: skip


class SelectionResult(NamedTuple):
    """The cross-validation table of :func:`select_lambda` and the chosen parameters.

    With ``S`` values of σ² (only when a ``sigma2_grid`` was given), ``k`` folds and ``L`` values
    of λ:

    Attributes:
      lams: ``(L,)`` the λ grid, in the order given.
      sigma2s: ``(S,)`` the σ² grid, or ``None`` (σ² by the heuristic on each training fold).
      cv_auc: ``(k, L)``, or ``(S, k, L)`` with a σ² grid: held-out AUC of every fit (float64).
      mean_auc: ``(L,)`` or ``(S, L)``: mean of ``cv_auc`` over the folds.
      se_auc: ``(L,)`` or ``(S, L)``: standard error of that mean (sample std / √k).
      best_lam: the λ of the largest mean AUC (ties go to the larger λ).
      best_sigma2: the σ² of the largest mean AUC (ties to the larger σ²), or ``None``.
      best_index: index of ``best_lam`` into ``lams``, or ``(s, l)`` with a σ² grid.
      fold: ``(m,)`` int: the fold of each row, ``stratified_folds(y, k, key=k0)`` with
        ``k0, _ = jax.random.split(key)``.
      model: the scalar-λ :class:`~jaxrank.RankModel` refitted on all rows at the best
        parameters, or ``None`` with ``refit=False``.

    Example:
      >>> import jax
      >>> import numpy as np
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.2, 0.75, seed=0)
      >>> lams = 2.0 ** np.array([-8, -4, 0])
      >>> res = jaxrank.select_lambda(X, y, lams, folds=3, key=jax.random.key(0))
      >>> res.cv_auc.shape, float(res.best_lam) in res.lams  # (folds, λ)
      ((3, 3), True)
    """

    lams: np.ndarray
    sigma2s: np.ndarray | None
    cv_auc: np.ndarray
    mean_auc: np.ndarray
    se_auc: np.ndarray
    best_lam: float
    best_sigma2: float | None
    best_index: int | tuple[int, int]
    fold: np.ndarray
    model: RankModel | None


def _check_folds(folds, pos: np.ndarray) -> int:
    if isinstance(folds, bool) or not isinstance(folds, int | np.integer) or folds < 2:
        raise ValueError(f"folds must be an integer >= 2, got {folds!r}.")
    n_pos = int(pos.sum())
    n_neg = int(pos.size - n_pos)
    if folds > min(n_pos, n_neg):
        cls, n = ("positive (rare)", n_pos) if n_pos <= n_neg else ("negative", n_neg)
        raise ValueError(
            f"folds={folds} is more than the {n} rows of the {cls} class: every held-out fold "
            f"needs rows of both classes. Use folds <= {n}."
        )
    return int(folds)


def stratified_folds(y, folds: int, *, key) -> np.ndarray:
    """Assign each row to one of ``folds`` folds, stratified by class.

    The positive (rare) rows are permuted with ``jax.random`` (the order of random 32-bit keys)
    and dealt round-robin into the folds, then the negative rows likewise, the dealing carrying
    on where the positives stopped:
    each fold gets ``⌊m+/k⌋`` or ``⌈m+/k⌉`` positives, and fold sizes differ by at most one row.
    The result depends on ``key`` and ``y`` only.

    Args:
      y: two-valued labels; the rare class is ``+1``, ``1`` or ``True``.
      folds: number of folds ``k``, ``2 <= k <= min(m+, m−)``.
      key: ``jax.random.key``.

    Returns:
      ``(m,)`` int array of fold numbers in ``[0, k)``.

    Raises:
      ValueError: bad labels, or ``folds`` out of range.

    Example:
      >>> import jax, numpy as np
      >>> y = np.array([1, -1, -1, 1, -1, -1, -1, -1])
      >>> f = stratified_folds(y, 2, key=jax.random.key(0))
      >>> [int(np.sum(y[f == k] == 1)) for k in range(2)]
      [1, 1]
    """
    pos = check_binary_labels(y)
    k = _check_folds(folds, pos)
    check_key(key)
    key_pos, key_neg = _random.split(key)
    fold = np.empty(pos.size, dtype=np.int64)
    start = 0
    for sub, mask in ((key_pos, pos), (key_neg, ~pos)):
        rows = np.flatnonzero(mask)
        perm = _permutation(sub, rows.size)
        fold[rows[perm]] = (start + np.arange(rows.size)) % k
        start += rows.size
    return fold


def _permutation(key, n: int) -> np.ndarray:
    """A uniformly random permutation of ``range(n)``: the stable order of 32-bit random keys
    drawn for a ladder size ≥ n (:func:`jaxrank._buckets.rung`; the first n used), so that a
    new class size does not compile a new ``jax.random.permutation``."""
    bits = _random.key_bits(key, _buckets.rung(n))[:n]
    return np.argsort(bits, kind="stable")


def _shared_buckets(X, pos, n_lams: int, basis, fit_kwargs):
    """:func:`shared_floors` for a basis policy of :func:`select_lambda`."""
    m = pos.size
    n_pos = int(pos.sum())
    if basis == "rare":
        nb = n_pos
    elif basis == "all":
        nb = m
    else:  # random / landmark strategies: n_basis rows, default m+
        nb = fit_kwargs.get("n_basis") or n_pos
    return shared_floors(m, n_pos, int(nb), n_lams, X.dtype.itemsize)


def shared_floors(m: int, n_pos: int, n_basis: int, n_lams: int, itemsize: int, *,
                  coarse: bool = False):  # fmt: skip
    """Bucket floors at the sizes of the whole data set (:func:`jaxrank._buckets.at_least`), so
    that every fold's fit and the refit share one compiled solver.

    Only for problems whose compilation dominates (the kernel block under
    :data:`~jaxrank._fitting.STAGED_MIN_BYTES`): a fold of a large set would otherwise carry the
    padding up to the whole set's size (``1/k`` of its rows) as real work.

    With ``coarse``, a block under :data:`~jaxrank._fitting.SHARED_GRID_MAX_BYTES` has its class
    sizes and basis padded to powers of two instead (:func:`jaxrank._buckets.bucket_pow2`):
    at most twice the rows, in exchange for one program serving data sets of many sizes.

    Args:
      m, n_pos: rows and rare rows of the whole (training) set; ``n_basis``: its basis size;
      n_lams: the λ count; itemsize: bytes per kernel entry.
      coarse: the power-of-two ladder for small blocks (:func:`jaxrank._cv.search_floors`).

    Example:
      >>> from jaxrank.select import shared_floors
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(400, 0.1, 0.75, seed=0)
      >>> with shared_floors(400, 40, 40, 1, 4):  # the whole set's sizes: folds pad up to them
      ...     fold = jaxrank.fit_rankrc(X[:300], y[:300], 0.5)
      >>> fold.coef.shape  # the 29 rare rows among the first 300
      (29,)
    """
    groups = (_buckets.bucket(n_pos), _buckets.bucket(m - n_pos))
    nb = _buckets.bucket(int(n_basis))
    if sum(groups) * nb * itemsize >= STAGED_MIN_BYTES:
        return _buckets.at_least()
    if coarse and sum(groups) * nb * itemsize < SHARED_GRID_MAX_BYTES:
        groups = (_buckets.bucket_pow2(n_pos), _buckets.bucket_pow2(m - n_pos))
        nb = _buckets.bucket_pow2(int(n_basis))
    return _buckets.at_least(groups=groups, basis=nb, lams=_buckets.bucket_lams(n_lams))


def _held_out_auc(model: RankModel, X_test: np.ndarray, pos_test: np.ndarray) -> np.ndarray:
    """AUC of every λ of ``model`` on the held-out rows, computed on rows padded to a shape
    bucket (``where`` masks the padding) so that folds of nearly equal sizes share a program."""
    n = pos_test.size
    size = _buckets.bucket(n)
    scores = np.zeros((*np.shape(model.coef)[:-1], size), np.asarray(model.coef).dtype)
    scores[..., :n] = np.asarray(model.decision_function(X_test))
    y = np.zeros(size, bool)
    y[:n] = pos_test
    keep = np.arange(size) < n
    auc = metrics.auc(jnp.asarray(y), jnp.asarray(scores), where=jnp.asarray(keep))
    return np.asarray(auc, dtype=np.float64)


def best_cell(mean: np.ndarray, lams: np.ndarray, sigma2s: np.ndarray | None):
    """Index of the largest mean AUC; ties to the larger λ, then to the larger σ²."""
    s2 = np.ones(1) if sigma2s is None else sigma2s
    table = mean.reshape(s2.size, lams.size)
    cand = np.argwhere(table == table.max())
    s, j = cand[np.lexsort((s2[cand[:, 0]], lams[cand[:, 1]]))[-1]]
    return int(s), int(j)


def sigma2_kernels(sigma2_grid, fit_kwargs: dict):
    """``(sigma2s, kernels)`` a search runs over: the σ² grid as a float64 array and one Gaussian
    kernel per value, or ``(None, [fit_kwargs' kernel])`` without a grid. Pops ``kernel`` from
    ``fit_kwargs``; refuses a grid beside an explicit kernel, an empty or non-1-D grid, and a
    value that is not positive.

    Example:
      >>> sigma2_kernels([1.0, 4.0], {})[1]
      [Gaussian(sigma2=1.0), Gaussian(sigma2=4.0)]
    """
    if sigma2_grid is None:
        return None, [fit_kwargs.pop("kernel", None)]
    if fit_kwargs.get("kernel") is not None:
        raise ValueError("sigma2_grid sets a Gaussian kernel: do not pass kernel= as well.")
    fit_kwargs.pop("kernel", None)
    sigma2s = np.atleast_1d(np.asarray(sigma2_grid, dtype=np.float64))
    if sigma2s.ndim != 1 or sigma2s.size == 0:
        raise ValueError(f"sigma2_grid must be a non-empty 1-D grid, got {sigma2_grid!r}.")
    for s in sigma2s:
        check_positive(s, "every sigma2_grid value")
    return sigma2s, [_kernels.gaussian(float(s)) for s in sigma2s]


#: How :func:`select_lambda` can fill its table (its ``engine``): ``"fits"`` (one
#: :func:`jaxrank.fit` per fold and kernel; the default) or ``"core"`` (batched calls of the pure
#: core, :mod:`jaxrank._cv_core`, for the ``"rare"`` and ``"all"`` bases with Gaussian kernels;
#: otherwise the fits).
ENGINES = ("fits", "core")


def _core_table(X, pos, fold, grid, basis, kernel_list, cv, fit_kwargs) -> bool:
    """``cv[s, f]`` for every kernel and fold in calls of the core (False: not applicable)."""
    if basis not in ("rare", "all"):
        return False
    if not all(kern is None or isinstance(kern, _kernels.Gaussian) for kern in kernel_list):
        return False
    k = int(fold.max()) + 1
    trains = [np.flatnonzero(fold != f) for f in range(k)]
    bases = [t[pos[t]] if basis == "rare" else t for t in trains]
    fit_kwargs = {**fit_kwargs, "dtype": choose_dtype(np.asarray(X), fit_kwargs.get("dtype"))}
    X = np.asarray(X, fit_kwargs["dtype"])
    padded = _cv_core.masked_folds(X, pos, trains, bases, fit_kwargs)
    if padded is None:
        return False
    Xp, posp, keeps, B, n_basis, held, sizes = padded
    # σ² of each member: the kernel's, or the heuristic on the fold's training rows (as fit)
    members = [
        (f, float(_kernels.sigma2_heuristic(X[trains[f]]) if kern is None else kern.sigma2))
        for kern in kernel_list for f in range(k)
    ]  # fmt: skip
    auc, status = _cv_core.fold_table(Xp, posp, keeps, B, n_basis, held, members, grid,
                                      sizes=sizes, fit_kwargs=fit_kwargs, chunk=k)  # fmt: skip
    if np.any(status == 3) or not np.all(np.isfinite(auc)):
        return False  # the loop of fits then raises the fit's own error
    cv[:] = auc.reshape(cv.shape)
    return True


def selection_result(grid, sigma2s, cv, best, fold, model) -> SelectionResult:
    """The :class:`SelectionResult` of a filled ``(n_σ², folds, L)`` table ``cv`` and its pick
    ``best = (s, l)`` (mean and standard error over the folds; without a σ² grid the σ² axis is
    dropped and the index is λ's alone). Shared by the one-process and multi-process searches.

    Example:
      >>> import numpy as np
      >>> cv = np.asarray([[[0.6, 0.8], [0.7, 0.9]]])  # no σ² grid, 2 folds, 2 λ
      >>> r = selection_result(np.asarray([0.1, 1.0]), None, cv, (0, 1), np.zeros(4, int), None)
      >>> r.best_lam, r.mean_auc.round(2).tolist(), r.best_index
      (1.0, [0.65, 0.85], 1)
    """
    s_best, l_best = best
    mean = cv.mean(axis=1)
    se = cv.std(axis=1, ddof=1) / math.sqrt(cv.shape[1])
    if sigma2s is None:
        cv, mean, se, index = cv[0], mean[0], se[0], l_best
    else:
        index = (s_best, l_best)
    return SelectionResult(
        lams=grid, sigma2s=sigma2s, cv_auc=cv, mean_auc=mean, se_auc=se,
        best_lam=float(grid[l_best]),
        best_sigma2=None if sigma2s is None else float(sigma2s[s_best]),
        best_index=index, fold=fold, model=model,
    )  # fmt: skip


def select_lambda(
    X,
    y,
    lams,
    *,
    folds: int = 10,
    key,
    basis="rare",
    sigma2_grid=None,
    refit: bool = True,
    engine: str = "fits",
    **fit_kwargs: Any,
) -> SelectionResult:
    """Pick λ (and optionally the Gaussian σ²) by stratified k-fold cross-validated AUC.

    The protocol of seed 000 (Sec. 6): rows are split into ``folds`` stratified folds
    (:func:`stratified_folds`); for each fold the ranker is fitted on the other folds over the
    whole λ grid in ONE call of :func:`jaxrank.fit` (the grid is solved batched, one
    matrix-matrix product per CG step) and its held-out AUC is taken for every λ. The folds run
    one after the other: each fold's training rows differ, so do their kernel blocks, and
    batching folds would hold ``folds`` blocks in memory at once. The λ with the largest mean AUC
    wins; ties go to the larger λ (more regularisation).

    Args:
      X: ``(m, d)`` rows, taken as given (standardise first, as the paper does).
      y: two-valued labels; the rare class is ``+1``, ``1`` or ``True``.
      lams: λ grid (or one λ), e.g. ``2.0 ** np.arange(-20, 11, 2)`` (the paper's grid).
      folds: number of folds, ``2 <= folds <= min(m+, m−)`` (paper: 10).
      key: ``jax.random.key`` for the folds (and for ``basis="random"``, one basis per fit);
        required: the same key gives the same folds and the same table.
      basis: ``"rare"`` (RankRC), ``"all"`` (RankSVM), ``"random"`` (RANK-RND), as in
        :func:`jaxrank.fit`. Index arrays are refused: they name rows of the full ``X``.
      sigma2_grid: optional Gaussian-kernel σ² values to cross-validate as well (the table gains
        a leading σ² axis); default ``None``: the default kernel of :func:`jaxrank.fit` (Gaussian
        with σ² from the heuristic on each training fold) or the ``kernel=`` passed.
      refit: refit on all rows at the best parameters (``result.model``).
      engine: how the table is filled (:data:`ENGINES`): ``"fits"`` (one :func:`jaxrank.fit`
        per fold and kernel) or ``"core"`` (batched calls of the pure core; docs/core.md).
      **fit_kwargs: passed to every :func:`jaxrank.fit` call (``kernel``, ``loss``, ``eps``,
        ``tol``, ``max_iter``, ``dtype``, ``path``, ...).

    Returns:
      A :class:`SelectionResult`.

    Raises:
      ValueError: bad ``X``, ``y`` or ``lams`` (as :func:`jaxrank.fit`), ``folds`` out of range,
        no ``key``, an index-array basis, a bad ``sigma2_grid`` or one given with ``kernel=``.

    Example:
      >>> import jax, numpy as np, jaxrank
      >>> from jaxrank.select import select_lambda
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.2, 0.75, seed=0)
      >>> res = select_lambda(X, y, 2.0 ** np.array([-8, -4, 0]), folds=3, key=jax.random.key(0))
      >>> res.cv_auc.shape, res.model.lam.shape
      ((3, 3), ())
    """
    X, pos = check_X_y(X, y)
    grid, _ = check_lam(lams)
    check_key(key)
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}.")
    fold_key, fit_key = _random.split(key)
    fold = stratified_folds(pos, folds, key=fold_key)
    k = int(folds)
    if not isinstance(basis, str):
        raise ValueError(
            "select_lambda needs a named basis ('rare', 'all', 'random'): an index array names "
            "rows of the full X, which differ from the rows of each training fold."
        )
    sigma2s, kernel_list = sigma2_kernels(sigma2_grid, fit_kwargs)
    if basis == "rare":  # once, on the whole data; not again for every fold's fit
        warn_majority_basis(pos)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=re.escape(MAJORITY_BASIS_WARNING))
        return _select(X, pos, grid, fold, k, basis, sigma2s, kernel_list, fit_key, refit,
                       fit_kwargs, engine)  # fmt: skip


def _select(X, pos, grid, fold, k, basis, sigma2s, kernel_list, fit_key, refit, fit_kwargs,
            engine="fits"):  # fmt: skip
    keys = _random.split(fit_key, k + 1)  # one per fold (random bases) and one for the refit
    cv = np.empty((len(kernel_list), k, grid.size), dtype=np.float64)
    with _shared_buckets(X, pos, grid.size, basis, fit_kwargs):
        done = engine == "core" and _core_table(X, pos, fold, grid, basis, kernel_list,
                                                       cv, fit_kwargs)  # fmt: skip
        for f in range(0 if done else k):
            train = fold != f
            for s, kernel in enumerate(kernel_list):
                model = fit(X[train], pos[train], grid, basis=basis, key=keys[f], kernel=kernel,
                            **fit_kwargs)  # fmt: skip
                cv[s, f] = _held_out_auc(model, X[~train], pos[~train])
        mean = cv.mean(axis=1)
        s_best, l_best = best_cell(mean, grid, sigma2s)
        model = None
        if refit:
            model = fit(X, pos, float(grid[l_best]), basis=basis, key=keys[k],
                        kernel=kernel_list[s_best], **fit_kwargs)  # fmt: skip

    return selection_result(grid, sigma2s, cv, (s_best, l_best), fold, model)
