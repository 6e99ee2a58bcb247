"""λ (and σ²) by cross-validated AUC over rows spread over processes: the row-sharded fit under
every cell.

:func:`select_lambda` is :func:`jaxrank.select.select_lambda` for rows held by several processes
(``jax.distributed``): the folds are drawn from every process's labels (one byte per row
gathered) exactly as one process draws them, every (σ², fold) cell is one multi-process fit
(:func:`jaxrank.distributed.fit`) of the whole λ grid on the training rows each process holds,
and the held-out scores each process computes on its own rows are gathered for the AUC. The table,
the pick (largest mean AUC; ties to the larger λ, then σ²) and the refit are the one-process ones.

Why the row-sharded fit under every cell, rather than the folds × σ² cells dealt out to the
processes: the cells-over-processes search needs every process to hold every row and a whole
kernel block per cell, which is exactly what a multi-process run is for avoiding (a data set
that fits one process is searched there); the row-sharded search keeps each process's memory at
its share of the block, the property measured in ``bench/multiprocess.py``.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import numpy as np

from jaxrank import distributed as _dist
from jaxrank import metrics
from jaxrank._validation import check_key, check_lam, check_X
from jaxrank.select import SelectionResult, best_cell, sigma2_kernels, stratified_folds

__all__ = ["select_lambda"]


def select_lambda(
    X_local,
    y_local,
    lams,
    *,
    folds: int = 10,
    key,
    basis: str = "rare",
    sigma2_grid=None,
    refit: bool = True,
    **fit_kwargs: Any,
) -> SelectionResult:
    """:func:`jaxrank.select.select_lambda` over the rows of every process (each passes its own).

    A collective: every process calls it with its own rows and the same arguments, and each
    gets the same :class:`~jaxrank.select.SelectionResult` (``fold`` for the rows of every
    process, in process order) — the one-process result on those rows concatenated.

    Args:
      X_local, y_local: this process's rows and labels.
      lams, folds, key, basis, sigma2_grid, refit: as in :func:`jaxrank.select.select_lambda`
        (``basis``: ``"rare"``, ``"all"`` or ``"random"``).
      **fit_kwargs: the fit's options, as in :func:`jaxrank.select.select_lambda`.

    Raises:
      jaxrank.distributed.InputMismatchError: as :func:`jaxrank.distributed.fit` (the first
        cell's fit checks the processes agree before any work).

    Example (one process; under ``python -m jaxrank.launch -n 4`` each passes its own rows):
      >>> import jax, numpy as np, jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> sel = select_lambda(X, y, 2.0 ** -np.arange(0, 8, 4.0), folds=2, key=jax.random.key(0))
      >>> float(sel.best_lam) in (1.0, 2.0**-4)
      True
    """
    X = check_X(X_local)
    pos = _dist.rare_mask(y_local)
    if X.shape[0] != pos.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows, y has {pos.shape[0]}.")
    grid, _ = check_lam(lams)
    check_key(key)
    if not isinstance(basis, str):
        raise ValueError("select_lambda needs a named basis ('rare', 'all', 'random').")
    fold_key, fit_key = jax.random.split(key)
    pieces = _dist.gather_rows(pos.astype(np.uint8))
    pos_all = np.concatenate(pieces).astype(bool)
    start = int(sum(p.size for p in pieces[: jax.process_index()]))
    fold_all = stratified_folds(pos_all, folds, key=fold_key)
    fold = fold_all[start : start + pos.size]
    k = int(folds)
    sigma2s, kernel_list = sigma2_kernels(sigma2_grid, fit_kwargs)

    keys = jax.random.split(fit_key, k + 1)
    cv = np.empty((len(kernel_list), k, grid.size), dtype=np.float64)
    for f in range(k):
        train = fold != f
        held_pos = np.concatenate(_dist.gather_rows(pos[~train].astype(np.uint8))).astype(bool)
        for s, kernel in enumerate(kernel_list):
            model = _dist.fit(X[train], pos[train], grid, basis=basis, key=keys[f],
                              kernel=kernel, **fit_kwargs)  # fmt: skip
            mine = np.asarray(model.decision_function(X[~train]), np.float64).reshape(grid.size, -1)
            scores = np.concatenate(_dist.gather_rows(mine.T), axis=0).T
            cv[s, f] = np.asarray(metrics.auc(held_pos, scores), np.float64)
    mean = cv.mean(axis=1)
    s_best, l_best = best_cell(mean, grid, sigma2s)
    model = None
    if refit:
        model = _dist.fit(X, pos, float(grid[l_best]), basis=basis, key=keys[k],
                          kernel=kernel_list[s_best], **fit_kwargs)  # fmt: skip
    se = cv.std(axis=1, ddof=1) / math.sqrt(k)
    best_sigma2 = None if sigma2s is None else float(sigma2s[s_best])
    if sigma2s is None:
        cv, mean, se, index = cv[0], mean[0], se[0], l_best
    else:
        index = (s_best, l_best)
    return SelectionResult(
        lams=grid, sigma2s=sigma2s, cv_auc=cv, mean_auc=mean, se_auc=se,
        best_lam=float(grid[l_best]), best_sigma2=best_sigma2, best_index=index, fold=fold_all,
        model=model,
    )  # fmt: skip
