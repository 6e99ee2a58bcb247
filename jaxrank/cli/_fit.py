"""``jaxrank fit``: read the data, choose λ (k-fold CV, a validation file, a holdout, or fixed),
fit, and write the model file (:mod:`jaxrank.cli`)."""

from __future__ import annotations

import math
import re
import sys
import warnings
from typing import NamedTuple

import numpy as np

from jaxrank.bases import MAJORITY_BASIS_WARNING, majority_basis
from jaxrank.cli._common import (
    PAPER_LOG2_GRID,
    Progress,
    check_grid_dtype,
    fmt_lam,
    label_keys,
    rare_class,
    same_file,
    standardizer,
)
from jaxrank.cli._modelfile import ModelFile, save_model_file

__all__ = ["Selection", "best_index", "cmd_fit", "holdout", "labelled", "read_like", "select_cv",
           "select_holdout", "select_validation"]  # fmt: skip


def labelled(table, where: str):
    if table.y is None:
        raise ValueError(f"{where} has no labels.")
    return table.y


def holdout(pos: np.ndarray, frac: float, key) -> np.ndarray:
    """Validation mask: ``round(frac·n)`` rows of each class (at least 1, at most ``n − 1``)."""
    from jaxrank import _random

    val = np.zeros(pos.size, dtype=bool)
    for sub, mask, name in zip(_random.split(key), (pos, ~pos), ("rare", "majority"),
                               strict=True):  # fmt: skip
        rows = np.flatnonzero(mask)
        if rows.size < 2:
            raise ValueError(
                f"a validation split needs at least 2 rows of each class, the {name} class has "
                f"{rows.size}: give one λ (--lam) or a --validation file."
            )
        n = min(max(round(frac * rows.size), 1), rows.size - 1)
        perm = _random.permutation(sub, rows.size)
        val[rows[perm[:n]]] = True
    return val


def best_index(score: np.ndarray, grid: np.ndarray) -> int:
    """Index of the largest score; ties to the larger λ (as :func:`jaxrank.select_lambda`)."""
    cand = np.flatnonzero(score == np.max(score))
    return int(cand[np.argmax(grid[cand])])


def read_like(path, args, train, *, require_labels: bool):
    """Read ``path`` with the training file's columns, index base and label name."""
    from jaxrank import _io_data

    fmt = args.format or _io_data.detect_format(path)
    d = train.X.shape[1]
    if fmt == "csv":
        t = _io_data.read_csv(
            path,
            target=train.target,
            columns=train.feature_names,
            delimiter=args.delimiter,
            optional_target=not require_labels,
        )
    elif fmt == "libsvm":
        t = _io_data.read_libsvm(path, n_features=d, zero_based=train.zero_based)
    else:
        t = _io_data.read_npz(path, target=train.target or "y", require_target=require_labels)
    if t.X.shape[1] != d:
        raise ValueError(f"{path} has {t.X.shape[1]} feature columns, the training data {d}.")
    if require_labels and t.y is None:
        raise ValueError(f"{path} has no label column {train.target!r}.")
    return t


class Selection(NamedTuple):
    model: object  # the scalar-λ model kept
    best: int  # its index in the grid
    score: np.ndarray  # (L,) validation AUC per λ (mean over folds with CV)
    score_se: np.ndarray  # (L,) standard error over folds, NaN otherwise
    selection: str  # "cv", "validation", "holdout" or "fixed"
    what: str | None  # how λ was scored, for the report


def select_cv(X, pos, grid, k: int, key, fit_one, bar_of) -> Selection:
    """Stratified k-fold CV AUC, then a refit at the best λ.

    :func:`jaxrank.select_lambda`'s protocol step by step (the same keys, folds and fits), so
    that each fold can report progress; the tests check the table and the model against it.
    """
    from jaxrank import _random, metrics
    from jaxrank.select import stratified_folds

    fold_key, fit_key = _random.split(key)
    fold = stratified_folds(pos, k, key=fold_key)
    keys = _random.split(fit_key, k + 1)
    bar = bar_of(k + 1)
    cv = np.empty((k, grid.size))
    for f in range(k):
        train = fold != f
        bar.start(f"fold {f + 1}/{k}: fitting {grid.size} λ")
        held = fit_one(X[train], pos[train], grid, keys[f]).decision_function(X[~train])
        cv[f] = np.asarray(metrics.auc(pos[~train], held), dtype=np.float64)
        bar.finish(f"fold {f + 1}/{k}: {grid.size} λ, held-out AUC up to {cv[f].max():.4f}")
    score = cv.mean(axis=0)
    best = best_index(score, grid)
    what = f"refit on all {pos.size} rows at λ = {fmt_lam(grid[best])}"
    bar.start(what)
    model = fit_one(X, pos, grid[best], keys[k])
    bar.finish(what)
    se = cv.std(axis=0, ddof=1) / math.sqrt(k)
    return Selection(model, best, score, se, "cv", f"{k}-fold stratified CV AUC")


def select_validation(X, pos, Xv, pos_v, grid, key, fit_one, bar) -> Selection:
    """The grid fitted on ``X``, λ by AUC on ``Xv`` (seed 000 Sec. 6.1); no refit."""
    from jaxrank import metrics

    bar.start(f"fitting {grid.size} λ on {pos.size} rows")
    grid_model = fit_one(X, pos, grid, key)
    score = np.atleast_1d(np.asarray(metrics.auc(pos_v, grid_model.decision_function(Xv)),
                                     dtype=np.float64))  # fmt: skip
    best = best_index(score, grid)
    model = grid_model if grid.size == 1 else grid_model.select(best)
    bar.finish(f"{grid.size} λ fitted, validation AUC up to {score.max():.4f}")
    return Selection(model, best, score, np.full(grid.size, np.nan), "validation", None)


def select_holdout(X, pos, grid, frac: float, key, fit_one, bar) -> Selection:
    """λ by AUC on a stratified hold-out of ``frac`` of each class, then a refit on all rows."""
    from jaxrank import _random, metrics

    split_key, fit_key, refit_key = _random.split(key, 3)
    val = holdout(pos, frac, split_key)
    bar.start(f"fitting {grid.size} λ on {int((~val).sum())} rows")
    held = fit_one(X[~val], pos[~val], grid, fit_key).decision_function(X[val])
    score = np.atleast_1d(np.asarray(metrics.auc(pos[val], held), dtype=np.float64))
    bar.finish(f"{grid.size} λ fitted, hold-out AUC up to {score.max():.4f}")
    best = best_index(score, grid)
    what = f"refit on all {pos.size} rows at λ = {fmt_lam(grid[best])}"
    bar.start(what)
    model = fit_one(X, pos, grid[best], refit_key)
    bar.finish(what)
    what = f"AUC on a stratified hold-out of {int(val.sum())} rows ({frac:.0%})"
    return Selection(model, best, score, np.full(grid.size, np.nan), "holdout", what)


def cmd_fit(args) -> int:
    import jax

    if args.dtype == "float64":
        # The library never switches x64 on; the command line does when asked for float64.
        jax.config.update("jax_enable_x64", True)
    import jaxrank
    from jaxrank import _io_data, kernels, metrics
    from jaxrank.solver import Status

    out = sys.stdout
    if args.cv is not None and (args.validation is not None or args.val_frac is not None):
        raise ValueError("--cv cannot be combined with --validation or --val-frac.")
    if args.validation is not None and args.val_frac is not None:
        raise ValueError("--validation and --val-frac exclude each other.")
    if args.n_basis is not None and args.basis not in ("random", "greedy"):
        raise ValueError("--n-basis applies to --basis random and greedy only.")
    if args.kappa is not None and args.basis != "greedy":
        raise ValueError("--kappa applies to --basis greedy only.")
    if args.sigma2 is not None and args.kernel not in ("gaussian", "binary"):
        raise ValueError("--sigma2 is the Gaussian kernel's σ²; it needs --kernel gaussian.")
    if args.degree is not None and args.kernel != "poly":
        raise ValueError("--degree needs --kernel poly.")
    val_frac = 0.25 if args.val_frac is None else args.val_frac
    if not 0 < val_frac < 1:
        raise ValueError(f"--val-frac must lie in (0, 1), got {val_frac}.")
    if args.lam is not None:
        grid = np.array([args.lam], dtype=np.float64)
    elif args.lam_grid is not None:
        grid = np.array(args.lam_grid, dtype=np.float64)
    else:
        grid = 2.0 ** np.array(PAPER_LOG2_GRID, dtype=np.float64)
    if np.unique(grid).size != grid.size:
        raise ValueError("the λ grid repeats a value.")
    dtype = np.float64 if args.dtype == "float64" else np.float32
    check_grid_dtype(grid, dtype, "--lam" if args.lam is not None else "--lam-grid value")

    # before reading the data and fitting, not after: a missing or read-only folder, a folder
    # given as the output, a device
    from jaxrank.io import check_output_path

    check_output_path(args.output)
    for path, what in ((args.data, "the data file"), (args.validation, "the validation file")):
        if path is not None and same_file(args.output, path):
            raise ValueError(f"-o/--output {args.output} is {what}: the fit would overwrite it.")
    fmt = args.format or _io_data.detect_format(args.data)
    if fmt == "libsvm" and args.target is not None:
        raise ValueError("LIBSVM files carry the label first on each line: drop --target.")
    table = _io_data.read_table(args.data, fmt=fmt, target=args.target, delimiter=args.delimiter)
    where = f"the target column {table.target!r}" if fmt == "csv" else f"the labels of {args.data}"
    pos, positive, classes = rare_class(labelled(table, args.data), args.positive, where)
    X = table.X
    m, d = X.shape
    if args.no_standardize:
        mean, scale = np.zeros(d), np.ones(d)
    else:
        mean, scale = standardizer(X)
    Xs = (X - mean) / scale

    if args.kernel in ("gaussian", "binary"):
        # binary: kernels.binary_scales on the standardised training rows (the rule of
        # jaxrank.fit(kernel="binary") and the estimators): a dummy column moves a squared
        # distance by 0 or 1, whatever the standardisation made of it
        scales = kernels.binary_scales(Xs) if args.kernel == "binary" else None
        kernel = (
            kernels.gaussian(args.sigma2) if scales is None else kernels.ard(args.sigma2, scales)
        )
    elif args.kernel == "linear":
        kernel = kernels.linear()
    else:
        kernel = kernels.polynomial(2 if args.degree is None else args.degree)
    extra = {} if args.n_basis is None else {"n_basis": args.n_basis}
    kappa = 100 if args.kappa is None else args.kappa

    n_greedy = args.n_basis if args.n_basis is not None else math.ceil(m / 10)

    def fit_one(Xf, yf, lam, key):
        try:
            if args.basis == "greedy":
                from jaxrank.greedy import fit_greedy

                return fit_greedy(Xf, yf, lam, n_basis=n_greedy, key=key, kappa=kappa,
                                  kernel=kernel, dtype=dtype, max_iter=args.max_iter)  # fmt: skip
            return jaxrank.fit(Xf, yf, lam, basis=args.basis, kernel=kernel, key=key,
                               dtype=dtype, max_iter=args.max_iter, **extra)  # fmt: skip
        except ValueError as err:  # a refused fit names the data file it came from
            raise type(err)(f"fitting {args.data}: {err}") from None

    n_pos = int(pos.sum())
    print(
        f"data: {args.data} ({fmt}), {m} rows x {d} features; rare class {positive!r}: "
        f"{n_pos} rows ({n_pos / m:.1%})" + ("" if args.no_standardize else "; standardised"),
        file=out,
    )
    if args.basis == "rare" and majority_basis(n_pos, m):
        # the library's warning, said once and in the command line's terms (not per fold)
        if not args.quiet:
            print(f"jaxrank: warning: the rare class {positive!r} holds {n_pos / m:.1%} of the "
                  "rows, so RankRC's basis is the majority class; name the rare class with "
                  "--positive LABEL", file=sys.stderr)  # fmt: skip
        warnings.filterwarnings("ignore", message=re.escape(MAJORITY_BASIS_WARNING))
    key = jax.random.key(args.seed)
    bar_of = lambda n: Progress(n, enabled=not args.quiet)
    if args.cv is not None:
        sel = select_cv(Xs, pos, grid, args.cv, key, fit_one, bar_of)
    elif args.validation is not None:
        vt = read_like(args.validation, args, table, require_labels=True)
        keys_v = label_keys(vt.y)
        unknown = sorted(set(keys_v.tolist()) - set(classes))
        if unknown:
            raise ValueError(
                f"{args.validation} has labels {unknown[:4]} not seen in {args.data} {classes}."
            )
        pos_v = keys_v == positive
        if pos_v.all() or not pos_v.any():
            raise ValueError(f"{args.validation} needs rows of both classes to score λ.")
        Xv = (vt.X - mean) / scale
        sel = select_validation(Xs, pos, Xv, pos_v, grid, key, fit_one, bar_of(1))
        sel = sel._replace(what=f"AUC on {args.validation}")
    elif grid.size > 1 or args.val_frac is not None:
        sel = select_holdout(Xs, pos, grid, val_frac, key, fit_one, bar_of(2))
    else:
        bar = bar_of(1)
        bar.start(f"fitting λ = {fmt_lam(grid[0])} on {m} rows")
        model = fit_one(Xs, pos, grid[0], key)
        bar.finish(f"fitted λ = {fmt_lam(grid[0])} on {m} rows")
        nan = np.full(1, np.nan)
        sel = Selection(model, 0, nan, nan, "fixed", None)
    model, best, score, score_se, selection, what = sel

    if what is not None:
        print(f"λ by {what} over {grid.size} value(s):", file=out)
        print(f"{'lambda':>10} {'AUC':>8} {'s.e.':>7}", file=out)
        for j in np.argsort(grid):
            se = "" if np.isnan(score_se[j]) else f"{score_se[j]:7.4f}"
            mark = "  <- best" if j == best else ""
            print(f"{fmt_lam(grid[j]):>10} {score[j]:8.4f} {se:>7}{mark}", file=out)
    names = {"rare": "RankRC", "all": "RankSVM", "random": "RANK-RND", "greedy": "greedy basis"}
    kdesc = f"{args.kernel} kernel"
    if isinstance(model.kernel, kernels.ARDGaussian):
        n = int(np.sum(np.asarray(model.kernel.scales) != 1))
        kdesc = f"gaussian kernel (σ² = {float(model.kernel.sigma2):.4g}; {n} column(s) rescaled)"
    elif isinstance(model.kernel, kernels.Gaussian):
        kdesc = f"gaussian kernel (σ² = {float(model.kernel.sigma2):.4g})"
    elif isinstance(model.kernel, kernels.Polynomial):
        kdesc = f"polynomial kernel (degree {model.kernel.degree})"
    info = model.info
    train_auc = float(metrics.auc(pos, model.decision_function(Xs)))
    print(
        f"model: {names[args.basis]} ({model.n_basis} basis rows), {kdesc}, "
        f"λ = {fmt_lam(float(model.lam))}, {args.dtype}; solver "
        f"{Status(int(info.status)).name} after {int(info.iterations)} Newton / "
        f"{int(info.cg_iterations)} CG steps; training AUC {train_auc:.4f}",
        file=out,
    )
    save_model_file(
        args.output,
        ModelFile(
            model=model,
            mean=mean,
            scale=scale,
            feature_names=table.feature_names,
            target=table.target,
            positive_label=positive,
            classes=classes,
            input_format=fmt,
            zero_based=table.zero_based,
            selection=selection,
            grid=grid,
            score=score,
            score_se=score_se,
        ),
    )
    print(f"saved {args.output}", file=out)
    return 0
