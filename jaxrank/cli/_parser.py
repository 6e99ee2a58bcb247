"""The ``jaxrank`` argument parser: the commands ``demo``, ``fit``, ``predict`` and ``bench``, their
options and help texts, and the handler each command runs."""

from __future__ import annotations

import argparse

from jaxrank.cli._commands import cmd_bench, cmd_predict
from jaxrank.cli._common import Parser, delimiter_char, positive_float, positive_int, seed_int
from jaxrank.cli._distributed import cmd_fit_distributed, wants_distributed
from jaxrank.cli._fit import cmd_fit

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The ``jaxrank`` argument parser: every command, its options and its handler (``func``)."""
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
    p_pred.set_defaults(func=cmd_predict)

    p_bench = sub.add_parser(
        "bench", parents=[debug], help="run bench/NAME.py of the source repository",
        description="Run bench/NAME.py with the remaining arguments; no NAME lists them.",
    )  # fmt: skip
    p_bench.add_argument("--bench-dir", default=None, help="folder holding the bench scripts")
    p_bench.add_argument("name", nargs="?", metavar="NAME")
    p_bench.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS")
    p_bench.set_defaults(func=cmd_bench)
    return parser
