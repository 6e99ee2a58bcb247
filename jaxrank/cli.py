"""The ``jaxrank`` command line: ``demo``, ``fit``, ``predict`` and ``bench``.

Run it as ``jaxrank COMMAND ...`` (console script) or ``python -m jaxrank COMMAND ...``; with no
command it prints its help and exits with code 0 (it used to run the 15 s demo).

``jaxrank demo``
  reproduces one cell of seed 000 Table 2 on the paper's simulated data (Sec. 6.1): 1,000
  training, 1,000 validation and 10,000 test rows, medium overlap (t = 0.75), ρ = 10 %, RankRC
  fitted over the paper's λ grid (log₂ λ = −20, −18, …, 10) in one batched solve, λ picked by
  validation AUC, test AUC printed beside the generator's true-Bayes AUC.

``jaxrank fit DATA --target COL -o model.npz``
  reads CSV (header row; ``--target`` names the label column or gives its 0-based index),
  LIBSVM/svmlight or ``.npz`` (arrays ``X``, ``y``), standardises every feature to zero mean and
  unit variance on these training rows (seed 000 Sec. 6: "all datasets are standardized"; the
  mean and scale are stored in the model file and applied by ``predict``), and fits a kernel
  ranker (``--basis rare``: RankRC, ``all``: RankSVM, ``random``: RANK-RND, ``greedy``: the
  sparse greedy basis of seed 001 through :func:`jaxrank.greedy.fit_greedy`, squared hinge,
  ``--n-basis`` rows, default ⌈m/10⌉). λ is chosen over a grid, by default the paper's
  log₂ λ = −20, −18, …, 10:

  - ``--cv K``: stratified K-fold cross-validated AUC (seed 000 Sec. 6.2, K = 10 there), the
    protocol of :func:`jaxrank.select_lambda` with the same folds and keys (``--seed``), then a
    refit on every row at the best λ;
  - ``--validation FILE``: the grid is fitted on DATA and λ chosen by AUC on FILE (seed 000
    Sec. 6.1: separate training and validation sets); the model is the fit on DATA;
  - otherwise, with more than one λ: a stratified hold-out of ``--val-frac`` (default 1/4) of
    the rows of each class scores the grid fitted on the rest, then the ranker is refitted on
    every row at the best λ;
  - a single λ (``--lam``) is fitted on every row, no selection.

  Ties in AUC go to the larger λ. The features are standardised once on all rows of DATA
  before any split (as when :func:`jaxrank.select_lambda` is given standardised rows).

``jaxrank predict model.npz DATA [--out FILE]``
  prints one score per row of DATA (higher: more likely the rare class), with the stored
  standardisation applied; CSV columns are matched to the training columns by name. When DATA
  carries labels, the AUC goes to stderr.

``jaxrank bench NAME [ARGS...]``
  runs ``bench/NAME.py`` of the source repository with ``ARGS``.

Errors are one line on stderr (``jaxrank: error: ...``) and a non-zero exit code: 2 for bad
input or usage, 1 for an internal error (``--debug`` shows the traceback). A model file is
untrusted input: a damaged, truncated, foreign or tampered one is exit 2 with one line naming
the file (:func:`load_model_file`). Warnings are one line each (``jaxrank: warning: ...``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from jaxrank import _cache
from jaxrank._cli_common import PAPER_LOG2_GRID as PAPER_LOG2_GRID
from jaxrank._cli_common import (
    Parser,
    UsageError,
    delimiter_char,
    label_keys,
    one_line,
    positive_float,
    positive_int,
    same_file,
    seed_int,
    standardizer,
)
from jaxrank._cli_distributed import cmd_fit_distributed, wants_distributed
from jaxrank._cli_fit import cmd_fit
from jaxrank._cli_modelfile import MODEL_FORMAT as MODEL_FORMAT
from jaxrank._cli_modelfile import MODEL_VERSION as MODEL_VERSION
from jaxrank._cli_modelfile import ModelFile as ModelFile
from jaxrank._cli_modelfile import (
    load_model_file,
    model_from_arrays,
    read_model_arrays,
    save_model_file,
)

__all__ = ["demo", "load_model_file", "main", "save_model_file"]
# MODEL_FORMAT, MODEL_VERSION, ModelFile (jaxrank._cli_modelfile) and PAPER_LOG2_GRID
# (jaxrank._cli_common) are re-exported: they were names of this module before the split.


def demo(*, trials: int = 3, t: float = 0.75, rho: float = 0.1, seed: int = 0, out=None) -> dict:
    """Run the simulated-data demo; returns the per-trial AUCs (in %) and timings.

    Args:
      trials: number of independent draws of the generator (the paper uses 10).
      t: class overlap (0.9 high, 0.75 medium, 0.6 low).
      rho: rare-class fraction.
      seed: base seed; trial ``k`` uses ``seed + k``.
      out: text stream for the report (default stdout).

    Example:
      >>> import io
      >>> from jaxrank.cli import demo
      >>> result = demo(trials=1, out=io.StringIO())  # ~5 s: fit, select λ, test AUC
      >>> sorted(result)
      [...]
    """
    import jax

    import jaxrank
    from jaxrank import datasets, metrics

    out = out or sys.stdout
    lams = 2.0 ** np.arange(-20, 11, 2)
    print(
        f"jaxrank {jaxrank.__version__} on {jax.devices()[0].platform.upper()}: RankRC on the "
        f"simulated data of seed 000 Sec. 6.1 (t={t}, rho={rho:.0%}, d=5; 1000 train / "
        "1000 validation / 10000 test rows)",
        file=out,
    )
    print(f"{'trial':>5} {'best log2 lam':>13} {'test AUC %':>10} {'true Bayes %':>12} "
          f"{'fit s':>6}", file=out)  # fmt: skip
    rows = []
    for k in range(trials):
        key = jax.random.key(seed + k)
        kc, ktr, kva, kte = jax.random.split(key, 4)
        centers = datasets.rare_class_centers(t, key=kc)
        Xtr, ytr = datasets.make_rare_class(1000, rho, None, centers=centers, key=ktr)
        Xva, yva = datasets.make_rare_class(1000, rho, None, centers=centers, key=kva)
        Xte, yte = datasets.make_rare_class(10000, rho, None, centers=centers, key=kte)
        mu, sd = standardizer(Xtr)  # standardise on the training split, as the paper
        Xtr, Xva, Xte = ((A - mu) / sd for A in (Xtr, Xva, Xte))
        t0 = time.perf_counter()
        model = jaxrank.fit_rankrc(Xtr, ytr, lams)
        jax.block_until_ready(model.coef)
        seconds = time.perf_counter() - t0
        val = np.asarray(metrics.auc(yva, model.decision_function(Xva)))
        best = int(np.argmax(val))
        test = float(metrics.auc(yte, model.select(best).decision_function(Xte))) * 100
        bayes = float(metrics.auc(yte, datasets.bayes_scores(Xte * sd + mu, centers))) * 100
        rows.append((float(np.log2(lams[best])), test, bayes, seconds))
        print(f"{k:>5} {rows[-1][0]:>13.0f} {test:>10.1f} {bayes:>12.1f} {seconds:>6.2f}",
              file=out)  # fmt: skip
    tests = np.array([r[1] for r in rows])
    bayes = np.array([r[2] for r in rows])
    se = tests.std(ddof=1) / np.sqrt(len(tests)) if len(tests) > 1 else float("nan")
    print(
        f"mean test AUC {tests.mean():.1f} ± {se:.1f} (s.e.)  |  true Bayes {bayes.mean():.1f}  "
        f"|  paper (Table 2, medium overlap, 10%): RANK-RC 61.4, true Bayes 69.5",
        file=out,
    )
    return {"test_auc": tests.tolist(), "bayes_auc": bayes.tolist(),
            "seconds": [r[3] for r in rows]}  # fmt: skip


# --------------------------------------------------------------------------------------------
# jaxrank predict
# --------------------------------------------------------------------------------------------


def _cmd_predict(args) -> int:
    import jax

    from jaxrank import _io_data, metrics

    if args.out not in (None, "-"):
        for path, what in ((args.data, "the data file"), (args.model, "the model file")):
            if same_file(args.out, path):
                raise ValueError(f"--out {args.out} is {what}: it would be overwritten.")
    arrays = read_model_arrays(args.model)
    if str(arrays["model_dtype"]) == "float64":
        jax.config.update("jax_enable_x64", True)
    mf = model_from_arrays(arrays, args.model)
    d = mf.mean.size
    target = mf.target if args.target is None else args.target
    fmt = args.format or _io_data.detect_format(args.data)
    if fmt == "csv":
        t = _io_data.read_csv(args.data, target=target, columns=mf.feature_names,
                              delimiter=args.delimiter, optional_target=True)  # fmt: skip
    elif fmt == "libsvm":
        t = _io_data.read_libsvm(args.data, n_features=d, zero_based=mf.zero_based)
    else:
        t = _io_data.read_npz(args.data, target=target or "y", require_target=False)
    if t.X.shape[1] != d:
        hint = " (name its label column with --target)" if fmt == "csv" and t.y is None else ""
        raise ValueError(f"{args.data} has {t.X.shape[1]} feature columns, the model {d}{hint}.")
    with np.errstate(over="ignore"):
        Z = (t.X - mf.mean) / mf.scale
    try:
        scores = np.asarray(mf.model.decision_function(Z))
    except ValueError as err:
        if not str(err).startswith("X "):
            raise
        raise ValueError(
            f"{args.data} standardised with the scaling of the model file {args.model} (mean "
            f"up to {np.max(np.abs(mf.mean)):.3g}, scale {np.min(mf.scale):.3g} to "
            f"{np.max(mf.scale):.3g}): {err} Check that the model was fitted on data like it."
        ) from None
    text = "\n".join(str(s) for s in scores) + "\n"
    if args.out in (None, "-"):
        sys.stdout.write(text)
    else:
        with open(args.out, "w", encoding="utf-8") as fh:
            fh.write(text)
    if t.y is not None and not args.quiet:
        keys = label_keys(t.y)
        pos = keys == mf.positive_label
        if set(keys.tolist()) <= set(mf.classes) and pos.any() and not pos.all():
            auc = float(metrics.auc(pos, scores))
            print(f"jaxrank: AUC {auc:.4f} on {t.X.shape[0]} labelled rows of {args.data} "
                  f"(rare class {mf.positive_label!r}: {int(pos.sum())})",
                  file=sys.stderr)  # fmt: skip
    return 0


# --------------------------------------------------------------------------------------------
# jaxrank bench
# --------------------------------------------------------------------------------------------


def _bench_dir(explicit) -> Path:
    if explicit is not None:
        path = Path(explicit)
        if not path.is_dir():
            raise FileNotFoundError(f"--bench-dir {explicit}: no such directory")
        return path
    candidates = [Path(__file__).resolve().parent.parent / "bench", Path.cwd() / "bench"]
    for path in candidates:
        if path.is_dir():
            return path
    raise FileNotFoundError(
        "no bench/ directory found (looked in "
        + ", ".join(str(c) for c in dict.fromkeys(candidates))
        + "): the benchmarks ship with the source repository, not with the installed package; "
        "run from a clone of jaxrank or pass --bench-dir DIR"
    )


def _cmd_bench(args) -> int:
    folder = _bench_dir(args.bench_dir)
    names = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    if args.name is None:
        print(f"benchmarks in {folder}: {', '.join(names) if names else '(none)'}")
        return 0
    if args.name not in names:
        raise ValueError(
            f"no benchmark {args.name!r} in {folder}; available: {', '.join(names) or 'none'}."
        )
    return subprocess.call([sys.executable, str(folder / f"{args.name}.py"), *args.args])


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    debug = Parser(add_help=False)
    debug.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show the traceback of an error")  # fmt: skip
    parser = Parser(
        prog="jaxrank",
        description="Kernel rankers that maximise AUC on rare-class data (RankRC and friends).",
        epilog="Run 'jaxrank COMMAND --help' for the options of a command. Errors are one line "
        "on stderr with exit code 2 (bad input or usage) or 1 (an internal error; --debug "
        "shows the traceback). With no command, this help is printed (exit code 0).",
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p_demo = sub.add_parser(
        "demo", parents=[debug], help="fit RankRC on the paper's simulated data",
        description="Reproduce one cell of seed 000 Table 2 (Sec. 6.1): RankRC on simulated "
        "data (1000 training, 1000 validation and 10000 test rows), lambda chosen over the "
        "paper's grid by validation AUC, test AUC printed beside the true-Bayes AUC.",
    )  # fmt: skip
    p_demo.add_argument(
        "--trials", type=positive_int, default=3,
        help="independent draws of the data (default 3; the paper uses 10)",
    )  # fmt: skip
    p_demo.add_argument(
        "--overlap", type=float, default=0.75,
        help="class overlap t: 0.9 high, 0.75 medium (default), 0.6 low",
    )  # fmt: skip
    p_demo.add_argument("--rho", type=float, default=0.1,
                        help="rare-class fraction of the rows (default 0.1)")  # fmt: skip
    p_demo.add_argument("--seed", type=seed_int, default=0,
                        help="base seed; trial k draws with seed + k (default 0)")  # fmt: skip

    data = Parser(add_help=False)
    data.add_argument("--format", choices=("csv", "libsvm", "npz"), default=None,
                      help="data format (default: from the file name, else sniffed)")  # fmt: skip
    data.add_argument("--delimiter", type=delimiter_char, default=None,
                      help="CSV field separator, one character (default ',')")  # fmt: skip
    data.add_argument("-q", "--quiet", action="store_true", help="no progress or notes on stderr")

    p_fit = sub.add_parser(
        "fit", parents=[debug, data], help="fit a ranker on a data file and save it",
        description="Fit a kernel ranker (RankRC by default) on DATA, choosing λ over a grid; "
        "features are standardised on DATA and the scaling is saved with the model.",
    )  # fmt: skip
    p_fit.add_argument("data", metavar="DATA", help="CSV (with header), LIBSVM or .npz file")
    p_fit.add_argument(
        "--target",
        default=None,
        help="CSV label column (name or 0-based index); npz label array (y)",
    )
    p_fit.add_argument(
        "--positive",
        default=None,
        metavar="LABEL",
        help="the rare class (default: the label +1, 1, true or positive)",
    )
    p_fit.add_argument(
        "-o", "--output", required=True, metavar="MODEL.npz",
        help="where to save the model (checked before the fit)",
    )  # fmt: skip
    p_fit.add_argument(
        "--basis",
        choices=("rare", "all", "random", "greedy"),
        default="rare",
        help="rare: RankRC, all: RankSVM, random: RANK-RND, greedy: seed 001",
    )
    p_fit.add_argument(
        "--n-basis",
        type=positive_int,
        default=None,
        help="basis size: random (default m+), greedy (default ceil(m/10))",
    )
    p_fit.add_argument(
        "--kappa",
        type=positive_int,
        default=None,
        help="greedy: random candidates scored per added basis row (default 100, seed 001)",
    )
    lam = p_fit.add_mutually_exclusive_group()
    lam.add_argument(
        "--lam",
        type=positive_float,
        default=None,
        metavar="λ",
        help="one λ, no selection (e.g. 2^-8 or 0.004)",
    )
    lam.add_argument(
        "--lam-grid",
        type=positive_float,
        nargs="+",
        default=None,
        metavar="λ",
        help="λ values to choose from (default: 2^-20 2^-18 ... 2^10)",
    )
    p_fit.add_argument(
        "--cv",
        type=positive_int,
        default=None,
        metavar="K",
        help="choose λ by stratified K-fold CV AUC (seed 000: K = 10)",
    )
    p_fit.add_argument(
        "--validation",
        default=None,
        metavar="FILE",
        help="choose λ by AUC on this labelled file (fit on DATA only)",
    )
    p_fit.add_argument(
        "--val-frac",
        type=float,
        default=None,
        metavar="F",
        help="without --cv/--validation: hold out this fraction of each class "
        "to choose λ, then refit on all rows (default 0.25)",
    )
    p_fit.add_argument(
        "--kernel", choices=("gaussian", "binary", "linear", "poly"), default="gaussian",
        help="kernel k(u, v) (default gaussian, exp(-|u - v|^2 / sigma2); binary: the same with "
        "every two-valued column's values 1 apart, so one-hot dummies do not own the distance)",
    )  # fmt: skip
    p_fit.add_argument(
        "--sigma2",
        type=positive_float,
        default=None,
        help="Gaussian σ² (default: mean squared pairwise distance)",
    )
    p_fit.add_argument("--degree", type=positive_int, default=None, help="poly degree (2)")
    p_fit.add_argument("--seed", type=seed_int, default=0, help="folds, splits, random bases")
    p_fit.add_argument(
        "--dtype", choices=("float32", "float64"), default="float32",
        help="precision of the fit (default float32; λ must lie in its range)",
    )  # fmt: skip
    p_fit.add_argument(
        "--max-iter", type=positive_int, default=100, help="Newton steps per λ (default 100)"
    )
    p_fit.add_argument(
        "--no-standardize", action="store_true", help="take the features as they are"
    )
    p_fit.add_argument(
        "--distributed", action="store_true",
        help="one process of a jax.distributed job (set by python -m jaxrank.launch): DATA is "
        "a list or glob of shards, one run of them per process (docs/multiprocess.md)",
    )  # fmt: skip
    p_fit.set_defaults(
        func=lambda args: (cmd_fit_distributed if wants_distributed(args) else cmd_fit)(args)
    )

    p_pred = sub.add_parser(
        "predict", parents=[debug, data], help="score a data file with a saved model",
        description="Print one score per row of DATA (higher: more likely the rare class).",
    )  # fmt: skip
    p_pred.add_argument("model", metavar="MODEL.npz")
    p_pred.add_argument("data", metavar="DATA")
    p_pred.add_argument("--out", default=None, metavar="FILE", help="write scores here")
    p_pred.add_argument(
        "--target",
        default=None,
        help="label column (CSV) or array (npz) of DATA, if any: left out of the "
        "features, used for the AUC (default: the training file's)",
    )
    p_pred.set_defaults(func=_cmd_predict)

    p_bench = sub.add_parser(
        "bench", parents=[debug], help="run bench/NAME.py of the source repository",
        description="Run bench/NAME.py with the remaining arguments; no NAME lists them.",
    )  # fmt: skip
    p_bench.add_argument("--bench-dir", default=None, help="folder holding the bench scripts")
    p_bench.add_argument("name", nargs="?", metavar="NAME")
    p_bench.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS")
    p_bench.set_defaults(func=_cmd_bench)
    return parser


def main(argv=None) -> int:
    """Entry point of the ``jaxrank`` console script; returns the exit code.

    Example:
      >>> from jaxrank.cli import main
      >>> main(["--help"])  # doctest: +ELLIPSIS
      usage: jaxrank ...
      0
    """
    parser = _parser()
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    try:
        args = parser.parse_args(argv)
    except UsageError as err:
        print(f"jaxrank: error: {one_line(err)}", file=sys.stderr)
        return 2
    except SystemExit as exit_:  # --help
        return exit_.code if isinstance(exit_.code, int) else 0
    if args.command is None:  # a bare `jaxrank`: what can it do (the demo takes 15 s)
        parser.print_help()
        return 0
    _cache.enable_default_cache()  # the persistent cache for command-line users (module notes)
    debug = getattr(args, "debug", False)
    try:
        with warnings.catch_warnings():
            # any warning not collected below (the demo's) prints as one line, not Python's
            # two-line "file:line: Category: message" plus the source line; restored on exit
            warnings.showwarning = _show_warning
            if args.command == "demo":
                demo(trials=args.trials, t=args.overlap, rho=args.rho, seed=args.seed)
                return 0
            with warnings.catch_warnings(record=True) as caught:
                from jaxrank.model import ConvergenceWarning

                warnings.simplefilter("always", ConvergenceWarning)
                code = args.func(args)
            _report_warnings(caught, quiet=getattr(args, "quiet", False))
            return code
    except KeyboardInterrupt:
        print("jaxrank: interrupted", file=sys.stderr)
        return 130
    except Exception as err:
        if debug:
            raise
        if isinstance(err, OSError) and err.strerror and err.filename:
            message, code = f"{err.strerror}: {err.filename}", 2
        elif isinstance(err, ValueError | OSError | ImportError):
            message, code = str(err), 2
        else:
            message = (f"internal error ({type(err).__name__}: {err}); "
                       "rerun with --debug for the traceback")  # fmt: skip
            code = 1
        print(f"jaxrank: error: {one_line(message)}", file=sys.stderr)
        return code


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` inside :func:`main`: ``jaxrank: warning: Category: message``."""
    stream = sys.stderr if file is None else file
    try:
        stream.write(f"jaxrank: warning: {category.__name__}: {one_line(message)}\n")
    except (OSError, ValueError):  # a closed stream, as Python's own showwarning tolerates
        pass


def _report_warnings(caught, *, quiet: bool, limit: int = 3) -> None:
    """Each distinct warning as one ``jaxrank: warning:`` line (at most ``limit``)."""
    if quiet:
        return
    seen = list(dict.fromkeys(one_line(w.message) for w in caught))
    for message in seen[:limit]:
        print(f"jaxrank: warning: {message}", file=sys.stderr)
    if len(seen) > limit:
        print(f"jaxrank: warning: ... and {len(seen) - limit} more", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
