"""The ``jaxrank`` commands other than ``fit``: ``demo`` (seed 000 Table 2 on simulated data),
``predict`` (score a data file with a model file) and ``bench`` (run ``bench/NAME.py`` of the
source repository); :mod:`jaxrank.cli` describes them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from jaxrank.cli._common import label_keys, same_file, standardizer
from jaxrank.cli._modelfile import model_from_arrays, read_model_arrays

__all__ = ["cmd_bench", "cmd_predict", "demo"]


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


def cmd_predict(args) -> int:
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
    candidates = [Path(__file__).resolve().parents[2] / "bench", Path.cwd() / "bench"]
    for path in candidates:
        if path.is_dir():
            return path
    raise FileNotFoundError(
        "no bench/ directory found (looked in "
        + ", ".join(str(c) for c in dict.fromkeys(candidates))
        + "): the benchmarks ship with the source repository, not with the installed package; "
        "run from a clone of jaxrank or pass --bench-dir DIR"
    )


def cmd_bench(args) -> int:
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
