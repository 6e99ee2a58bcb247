"""λ (and σ²) by cross-validated AUC over rows spread over processes, in one of two layouts.

:func:`select_lambda` is :func:`jaxrank.select.select_lambda` for rows held by several processes
(``jax.distributed``): the folds are drawn from every process's labels (one byte per row
gathered) exactly as one process draws them, and the table, the pick (largest mean AUC; ties to
the larger λ, then σ²) and the refit are the one-process ones. The (σ², fold) cells run in one
of two layouts:

- ``"rows"``: every cell is one row-sharded fit (:func:`jaxrank.distributed.fit`) of the λ
  grid on the training rows each process holds, its block split over the processes; the
  held-out scores each process computes on its own rows are gathered for the AUC. Each
  process's memory stays at its share of a block.
- ``"cells"``: every process gathers every row and fits whole cells alone, cell ``c`` of the
  ``S·k`` (fold-major) on process ``c mod P``, one-process fits with no collective inside; the
  table is gathered (every process gets the same one) and each process refits the pick on all
  rows. Each process holds every row and a whole training block per fit.

``layout="auto"`` (the default) takes ``"cells"`` when a cell's block fits one process's
memory budget (the machine's budget shared by the processes on it) and there are at least as
many cells as processes, ``"rows"`` otherwise. Chosen by
measurement (``bench/multiprocess.py --search-sizes``, ``RESULTS.md``): the row-sharded search
took 1.5-3.3x the cells layout's time at m = 2·10⁴-5·10⁴, P = 2 and 4. The cells run the
one-process solver with nothing exchanged until the table; every row-sharded cell compiles and
runs a multi-process solver that exchanges scores and gradients in every Newton and CG step.
The row-sharded layout is the one for data a single process cannot hold.
"""

from __future__ import annotations

import socket
from typing import Any

import jax
import numpy as np

from jaxrank import _random, metrics
from jaxrank import distributed as _dist
from jaxrank import kernels as _kernels
from jaxrank._validation import check_key, check_lam, check_X
from jaxrank.fit import fit as _fit_one
from jaxrank.select import (
    SelectionResult,
    best_cell,
    selection_result,
    shared_floors,
    sigma2_kernels,
    stratified_folds,
)

__all__ = ["LAYOUTS", "choose_layout", "select_lambda"]

#: The search layouts :func:`select_lambda` takes.
LAYOUTS = ("auto", "rows", "cells")


def choose_layout(m: int, n_basis: int, cells: int, processes: int, itemsize: int = 8, *,
                  memory_budget: int | None = None) -> str:  # fmt: skip
    """The layout ``layout="auto"`` runs: ``"cells"`` when a cell's kernel block (at most
    ``m × n_basis`` entries of ``itemsize`` bytes) fits one process's memory budget
    (``memory_budget``, default :func:`jaxrank.kernels.default_memory_budget`) and there are at
    least as many cells as processes; ``"rows"`` otherwise.

    Example:
      >>> choose_layout(10_000, 100, cells=10, processes=4)
      'cells'
      >>> choose_layout(10_000, 100, cells=2, processes=4)  # processes would sit idle
      'rows'
      >>> choose_layout(10**7, 10**5, cells=10, processes=4)  # 8 TB: no process holds it
      'rows'
    """
    budget = _kernels.default_memory_budget() if memory_budget is None else int(memory_budget)
    if cells < processes or m * n_basis * itemsize > budget:
        return "rows"
    return "cells"


def _basis_size(pos: np.ndarray, basis: str, fit_kwargs: dict) -> int:
    if basis == "all":
        return pos.size
    if basis == "random":
        return int(fit_kwargs.get("n_basis") or pos.sum())
    return int(pos.sum())


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
    layout: str = "auto",
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
      layout: ``"rows"`` (a row-sharded fit per cell), ``"cells"`` (cells dealt out to the
        processes, each holding every row) or ``"auto"`` (:func:`choose_layout`; module
        docstring).
      **fit_kwargs: the fit's options, as in :func:`jaxrank.select.select_lambda`.

    Raises:
      jaxrank.distributed.InputMismatchError: processes given different arguments or rows of
        different widths or dtypes (named), before any fit.

    Example (one process; under ``python -m jaxrank.launch -n 4`` each passes its own rows):
      >>> import jax, numpy as np, jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> sel = select_lambda(X, y, 2.0 ** -np.arange(0, 8, 4.0), folds=2, key=jax.random.key(0))
      >>> float(sel.best_lam) in (1.0, 2.0**-4)
      True
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
    X = check_X(X_local)
    pos = _dist.rare_mask(y_local)
    if X.shape[0] != pos.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows, y has {pos.shape[0]}.")
    grid, _ = check_lam(lams)
    check_key(key)
    if not isinstance(basis, str):
        raise ValueError("select_lambda needs a named basis ('rare', 'all', 'random').")
    fold_key, fit_key = _random.split(key)
    pieces = _dist.gather_rows(pos.astype(np.uint8))
    pos_all = np.concatenate(pieces).astype(bool)
    start = int(sum(p.size for p in pieces[: jax.process_index()]))
    fold_all = stratified_folds(pos_all, folds, key=fold_key)
    k = int(folds)
    sigma2s, kernel_list = sigma2_kernels(sigma2_grid, fit_kwargs)
    keys = _random.split(fit_key, k + 1)
    summaries = _agree_on_search(X, grid, k, basis, sigma2s, kernel_list, key, refit, layout,
                                 fit_kwargs)  # fmt: skip
    if layout == "auto":
        # the tightest process decides: its budget shared by the processes on its host
        hosts = [sm["host"] for sm in summaries]
        budget = min(sm["budget"] // hosts.count(sm["host"]) for sm in summaries)
        layout = choose_layout(pos_all.size, _basis_size(pos_all, basis, fit_kwargs),
                               len(kernel_list) * k, jax.process_count(),
                               np.dtype(fit_kwargs.get("dtype") or X.dtype).itemsize,
                               memory_budget=budget)  # fmt: skip
    args = (grid, k, basis, kernel_list, keys, fit_kwargs)
    if layout == "cells":
        X_all = np.concatenate(_dist.gather_rows(X))
        cv, (s_best, l_best), model = _cells(X_all, pos_all, fold_all, sigma2s, refit, *args)
    else:
        fold = fold_all[start : start + pos.size]
        cv, (s_best, l_best), model = _rows(X, pos, fold, sigma2s, refit, *args)
    return selection_result(grid, sigma2s, cv, (s_best, l_best), fold_all, model)


def _agree_on_search(X, grid, k, basis, sigma2s, kernel_list, key, refit, layout, fit_kwargs):
    """Every process's summary (host, memory budget), after refusing, on every process and
    before any fit, arguments that differ across processes (the cells layout runs one-process
    fits, which compare nothing themselves)."""
    fp = _dist.fingerprint
    budget = fit_kwargs.get("memory_budget")
    summary = {
        "error": None,
        "host": socket.gethostname(),
        "budget": int(_kernels.default_memory_budget() if budget is None else budget),
        "d": int(X.shape[1]),
        "x_dtype": str(X.dtype),
        "lams": fp((grid.tobytes(), k, bool(refit), layout)),
        "lams_text": f"{grid.size} λ, {k} folds, refit={bool(refit)}, layout={layout!r}",
        "kernel": fp((None if sigma2s is None else sigma2s.tobytes(), repr(kernel_list))),
        "kernel_text": repr(kernel_list),
        "basis": fp((basis, fp(key))),
        "basis_text": f"{basis!r} (key {fp(key)})",
        "options": fp(sorted((n, repr(v)) for n, v in fit_kwargs.items())),
        "options_text": repr(sorted((n, repr(v)) for n, v in fit_kwargs.items())),
    }
    return _dist.agree(summary)


def _rows(X, pos, fold, sigma2s, refit, grid, k, basis, kernel_list, keys, fit_kwargs):
    """The row-sharded layout: every cell one multi-process fit; held-out scores gathered."""
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
    best = best_cell(cv.mean(axis=1), grid, sigma2s)
    model = None
    if refit:
        model = _dist.fit(X, pos, float(grid[best[1]]), basis=basis, key=keys[k],
                          kernel=kernel_list[best[0]], **fit_kwargs)  # fmt: skip
    return cv, best, model


def _cells(X, pos, fold, sigma2s, refit, grid, k, basis, kernel_list, keys, fit_kwargs):
    """The cells layout: every process holds every row and fits the cells ``c ≡ p (mod P)``
    alone (fold-major, as the one-process loop); the table is gathered, the pick refitted on
    every process."""
    S, P, me = len(kernel_list), jax.process_count(), jax.process_index()
    mine = np.zeros((S, k, grid.size), dtype=np.float64)
    owner = np.arange(S * k).reshape(k, S).T % P  # (S, k): cell (s, f) is number f·S + s
    error = None
    # the one-process search's bucket floors: every cell and the refit share its programs
    floors = shared_floors(pos.size, int(pos.sum()), _basis_size(pos, basis, fit_kwargs),
                           grid.size, X.dtype.itemsize)  # fmt: skip
    with floors:
        for f in range(k):
            train = fold != f
            for s, kernel in enumerate(kernel_list):
                if owner[s, f] != me or error is not None:
                    continue
                try:
                    model = _fit_one(X[train], pos[train], grid, basis=basis, key=keys[f],
                                     kernel=kernel, **fit_kwargs)  # fmt: skip
                    scores = np.asarray(model.decision_function(X[~train]), np.float64)
                    mine[s, f] = np.asarray(metrics.auc(pos[~train], scores), np.float64)
                except Exception as err:  # reported to every process below, not raised here
                    error = f"{type(err).__name__}: {err}"
        # every process learns of a failed cell before the table is gathered (no one waits)
        for p, summary in enumerate(_dist.gather_json({"error": error})):
            if summary["error"]:
                raise RuntimeError(f"process {p} failed a cell of the search: {summary['error']}")
        tables = np.stack([t.reshape(mine.shape) for t in _dist.gather_rows(mine.reshape(1, -1))])
        cv = np.take_along_axis(tables, owner[None, :, :, None], axis=0)[0]
        best = best_cell(cv.mean(axis=1), grid, sigma2s)
        model = None
        if refit:  # each process holds every row: the same one-process refit everywhere
            model = _fit_one(X, pos, float(grid[best[1]]), basis=basis, key=keys[k],
                             kernel=kernel_list[best[0]], **fit_kwargs)  # fmt: skip
    return cv, best, model
