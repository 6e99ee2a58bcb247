"""``jaxrank fit`` over several processes: one shard of the data per process, one model file.

Run under ``python -m jaxrank.launch -n P -m jaxrank fit ...`` (or with ``--distributed`` on a
cluster, where ``jax.distributed.initialize()`` finds the job): ``DATA`` is a comma-separated
list or a glob of CSV/LIBSVM/``.npz`` files, sorted; process ``p`` reads the ``p``-th contiguous
run of them, so the rows of every process in process order are the files in order. The mean
and standard deviation of the standardisation come from per-process moments, the labels are
judged over every process, λ is one value (``--lam``) or chosen by k-fold CV over every
process's rows (``--cv K``, :func:`jaxrank.distributed_search.select_lambda`), and process 0
writes the model file once the fit has returned on every process (``docs/multiprocess.md``).
"""

from __future__ import annotations

import glob
import os
import sys

import numpy as np

from jaxrank._validation import check_binary_labels
from jaxrank.cli._common import PAPER_LOG2_GRID, fmt_lam, label_keys, standardizer
from jaxrank.cli._modelfile import ModelFile, save_model_file

__all__ = ["cmd_fit_distributed", "shard_files", "wants_distributed"]


def wants_distributed(args) -> bool:
    """Whether ``jaxrank fit`` runs as one process of several (``--distributed``, or started by
    ``python -m jaxrank.launch``)."""
    from jaxrank.distributed import ENV_NUM_PROCESSES

    return bool(getattr(args, "distributed", False) or os.environ.get(ENV_NUM_PROCESSES))


def shard_files(spec: str, n_processes: int, process: int) -> list[str]:
    """This process's files of ``spec`` (comma-separated paths or globs, sorted within each
    glob): the ``process``-th of ``n_processes`` contiguous runs."""
    files = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        hits = sorted(glob.glob(part)) if any(c in part for c in "*?[") else [part]
        if not hits:
            raise ValueError(f"no file matches {part!r}.")
        files += hits
    if len(files) < n_processes:
        raise ValueError(
            f"{len(files)} data file(s) for {n_processes} processes: give at least one shard "
            "per process."
        )
    cuts = np.linspace(0, len(files), n_processes + 1).astype(int)
    return files[cuts[process] : cuts[process + 1]]


def _moments_standardizer(X: np.ndarray):
    """Mean and population standard deviation of every process's rows (Chan et al.'s update of
    per-process counts, means and centred sums of squares), scaled by
    :func:`jaxrank.cli._common.standardizer` (its rule for constant columns) as on all rows."""
    from jaxrank.distributed import gather_rows

    n = X.shape[0]
    mean = X.mean(axis=0)
    M2 = ((X - mean) ** 2).sum(axis=0)
    parts = np.concatenate(gather_rows(np.concatenate([[n], mean, M2])[None]))
    d = X.shape[1]
    counts, means, M2s = parts[:, 0], parts[:, 1 : 1 + d], parts[:, 1 + d :]
    m = counts.sum()
    mu = (counts[:, None] * means).sum(axis=0) / m
    var = (M2s.sum(axis=0) + (counts[:, None] * (means - mu) ** 2).sum(axis=0)) / m
    return standardizer(mean=mu, std=np.sqrt(var))


def _read_shard(args, P: int, me: int, check_output_path, io_data):
    """``(files, fmt, tables, d)``: this process's shard, read and checked against every other
    process's (issue 43). A collective: every process reaches one exchange of ``{error, d, n}``
    whatever its reading raised (a shard unreadable, empty, or of another width; process 0's
    output path), and every process refuses, naming the process and its files, before any other
    collective: a process that raised alone left the others waiting in their first exchange."""
    from jaxrank.distributed import InputMismatchError, gather_json

    files: list[str] = []
    fmt, tables, error, d = None, [], None, 0
    try:
        if me == 0:
            check_output_path(args.output)
        files = shard_files(args.data, P, me)
        fmt = args.format or io_data.detect_format(files[0])
        tables = [io_data.read_table(f, fmt=fmt, target=args.target, delimiter=args.delimiter)
                  for f in files]  # fmt: skip
        d = max(t.X.shape[1] for t in tables)
        if fmt != "libsvm" and any(t.X.shape[1] != d for t in tables):
            raise ValueError(f"its files {files} have different numbers of feature columns.")
        if sum(t.X.shape[0] for t in tables) == 0:
            raise ValueError(f"its files {files} hold no rows.")
    except Exception as err:
        error = f"{type(err).__name__}: {err}"
    summaries = gather_json({"error": error, "d": int(d), "files": [os.path.basename(f)
                                                                  for f in files]})  # fmt: skip
    for p, s in enumerate(summaries):
        if s["error"]:
            raise InputMismatchError(f"process {p} cannot use its shard {s['files']}: "
                                     f"{s['error']}")  # fmt: skip
    if fmt == "libsvm":  # sparse rows: a shard without the last features has fewer columns
        return files, fmt, tables, max(s["d"] for s in summaries)
    for p, s in enumerate(summaries):
        if s["d"] != summaries[0]["d"]:
            raise InputMismatchError(
                f"process {p}'s shard {s['files']} has {s['d']} feature columns, process 0's "
                f"{summaries[0]['files']} has {summaries[0]['d']}: every shard needs the same."
            )
    return files, fmt, tables, d


def cmd_fit_distributed(args) -> int:
    import jax

    import jaxrank.distributed as dist

    dist.initialize()
    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    from jaxrank import _io_data, distributed_search, kernels, metrics
    from jaxrank.io import check_output_path

    P, me = jax.process_count(), jax.process_index()
    out = sys.stdout if me == 0 else open(os.devnull, "w")
    for flag, given in (("--validation", args.validation), ("--val-frac", args.val_frac)):
        if given is not None:
            raise ValueError(f"{flag} is not available across processes: use --lam or --cv K.")
    if args.basis == "greedy":
        raise ValueError("--basis greedy is not available across processes.")
    if args.lam is not None:
        grid = np.array([args.lam], dtype=np.float64)
    elif args.cv is None:
        raise ValueError("across processes give one λ (--lam) or choose it with --cv K.")
    else:
        grid = np.array(args.lam_grid or 2.0 ** np.array(PAPER_LOG2_GRID), dtype=np.float64)
    files, fmt, tables, d = _read_shard(args, P, me, check_output_path, _io_data)
    X = np.concatenate([np.pad(t.X, ((0, 0), (0, d - t.X.shape[1]))) for t in tables])
    keys = label_keys(np.concatenate([np.asarray(t.y) for t in tables]))
    classes = sorted({c for s in dist.gather_json({"c": np.unique(keys).tolist()}) for c in s["c"]})
    if len(classes) != 2:
        raise ValueError(f"the labels of all shards must be two-valued, got {classes[:6]}.")
    if args.positive is not None:
        positive = str(label_keys(np.array([args.positive]))[0])
        if positive not in classes:
            raise ValueError(f"--positive {args.positive!r} is not a label of the data {classes}.")
    else:  # the one-process rule (rare_class) on the labels of every shard
        positive = classes[int(np.flatnonzero(check_binary_labels(np.asarray(classes)))[0])]
    pos = keys == positive
    if args.no_standardize:
        mean, scale = np.zeros(d), np.ones(d)
    else:
        mean, scale = _moments_standardizer(X)
    Xs = (X - mean) / scale
    if args.kernel == "gaussian":
        kernel = kernels.gaussian(args.sigma2)
    elif args.kernel == "linear":
        kernel = kernels.linear()
    else:
        kernel = kernels.polynomial(2 if args.degree is None else args.degree)
    dtype = np.float64 if args.dtype == "float64" else np.float32
    opts = dict(basis=args.basis, kernel=kernel, dtype=dtype, max_iter=args.max_iter,
                **({} if args.n_basis is None else {"n_basis": args.n_basis}))  # fmt: skip
    key = jax.random.key(args.seed)
    m = int(sum(s["n"] for s in dist.gather_json({"n": int(X.shape[0])})))
    print(f"data: {len(files)} file(s) on process 0 of {P}; {m} rows x {d} features", file=out)
    if args.cv is not None:
        res = distributed_search.select_lambda(Xs, pos, grid, folds=args.cv, key=key, **opts)
        model = res.model
        score, score_se, selection = res.mean_auc, res.se_auc, "cv"
    else:
        model = dist.fit(Xs, pos, grid[0], key=key, **opts)
        score, score_se, selection = np.full(1, np.nan), np.full(1, np.nan), "fixed"
    scores = dist.gather_rows(np.asarray(model.decision_function(Xs), np.float64))
    auc = float(metrics.auc(np.concatenate(dist.gather_rows(pos)), np.concatenate(scores)))
    print(f"model: λ = {fmt_lam(float(model.lam))}, {model.n_basis} basis rows; training AUC "
          f"{auc:.4f}", file=out)  # fmt: skip
    if me == 0:  # after every process's fit has returned: a lost process leaves no file
        save_model_file(args.output, ModelFile(
            model=model, mean=mean, scale=scale, feature_names=tables[0].feature_names,
            target=tables[0].target, positive_label=positive, classes=tuple(classes),
            input_format=fmt, zero_based=tables[0].zero_based, selection=selection, grid=grid,
            score=score, score_se=score_se,
        ))  # fmt: skip
        print(f"saved {args.output}", file=out)
    return 0
