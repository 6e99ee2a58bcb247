"""Seed 003 Fig. 5 analogue: multi-level (ordinal) RankRC as the training set grows.

Seed 003 Sec. 5 predicts days in hospital (16 ordinal levels, 85 % of rows at level 0) and
plots (a) test MAUC, (b) training time and (c) support vectors against the fraction of the
training data (5-75 %) for multi-level RANK-SVM (eq. 47, every row a basis function),
RANK-RC (eq. 48, basis = the non-majority rows), RANK-RND (a random basis of RANK-RC's size),
SVR and KNN. Its claims: RANK-SVM cannot be trained beyond 25 % (kernel matrix over the 10 GB
limit); RANK-RC is slightly better than RANK-RND and almost identical to RANK-SVM where RANK-SVM
runs; RANK-RC and RANK-RND scale well and use fewer support vectors. The Heritage Health Prize
data are not public, so this is an analogue on ``jaxrank.multilevel.make_ordinal``.

Protocol:

* **Data**: ``make_ordinal(m, levels=4, majority_frac=0.85, d=5, sep=1.0)`` (85 % majority
  as in seed 003 Fig. 4; the rarer levels ∝ 1, 1/2, 1/4). Its distribution does not depend on
  the key, so training, validation (``M_VAL`` rows) and test (``M_TEST`` rows) sets are
  independent draws: ``jax.random.split(jax.random.key(seed), 3 + len(sizes))`` gives the
  validation and test keys, the methods' key and one key per training size. Standardised on the
  training rows. The paper's hospital data have 16 levels; 4 keep every level populated at the
  smallest size.
* **Methods** (float32, Gaussian kernel with seed 003's σ² = mean squared pairwise distance,
  smoothed hinge ε = 0.5, tol 1e-6, the multi-level objective of eq. 47/48 normalised by
  ``Σ_{r<s} m_r m_s``):

  - ``ml-rankrc``: ``jaxrank.fit_multilevel`` (eq. 48, basis = rows with level ≠ 0);
  - ``ml-rnd``: the same objective over a uniform random basis of the same size (RANK-RND);
  - ``ml-ranksvm``: the same objective over every row (eq. 47, multi-level RankSVM);
  - ``rankrc-biclass``: biclass RankRC (``fit_rankrc``) on "level > 0 vs level 0", scored by
    MAUC: what the ordinal loss adds over a rare-vs-majority ranker.

  ``fit_multilevel`` has no basis option (its basis is always eq. 48's), so ``ml-rnd`` and
  ``ml-ranksvm`` call the engine it uses, ``jaxrank.fit.fit_rows`` with the multi-level layout
  ``jaxrank.multilevel._Levels`` and their own basis rows (:func:`fit_ml_basis`; with the
  non-majority rows it reproduces ``fit_multilevel``, checked in tests/test_bench_repro.py).
* **Memory**: every fit gets ``memory_budget`` = ``--memory-gb`` (default 3 GiB); a kernel block
  over it raises ``MemoryBudgetError`` and the size is recorded "infeasible" (RankSVM's m × m
  block plus K_RR: 1.2 GB at m = 10⁴, 4.8 GB at 2·10⁴).
* **λ**: one λ per method, chosen at the smallest size by validation MAUC (grid
  ``log2 λ = −20, −18, …, 10``, one warm-started grid fit), then kept for every size (seed 003
  cross-validates at each fraction).
* **Timing**: as ``bench/fig6.py``: one fit (kernel block + solve); repeated once, warm, when
  the first call took under ``--repeat-below`` seconds. A method whose fit exceeds ``--cap``
  seconds is not run at larger sizes.

Host BLAS: ``main`` pins it to one thread (threadpoolctl) unless ``OPENBLAS_NUM_THREADS`` is
set (recorded in the JSON settings; the saved runs set it through that variable): on the shared,
oversubscribed 2-core machines a threaded OpenBLAS ``eigh`` of a 1000 × 1000 matrix — the
spectral preconditioner that ``precondition="auto"`` builds on the host for |R| ≤ 2048 — took
7-15 s instead of 0.9 s single-threaded.

Usage::

    python bench/fig5_multilevel.py            # m = 2000 … 40 000 (~10 min on 2 cores)
    python bench/fig5_multilevel.py --quick    # m = 400, 800; < 60 s
    python bench/fig5_multilevel.py --save     # also bench/results/fig5_multilevel.{json,png}

Writes ``bench/out/fig5_multilevel.json`` and ``.png`` (``--quick``: ``*_quick.*``) and prints
:func:`markdown`.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's jaxrank

import _common as C
import jax
import numpy as np

import jaxrank
from jaxrank import kernels, metrics
from jaxrank._validation import check_lam, check_X
from jaxrank.fit import fit_rows
from jaxrank.multilevel import _Levels, check_levels, make_ordinal

NAME = "fig5_multilevel"
DTYPE = "float32"
SIZES = (2000, 5000, 10_000, 20_000, 40_000)
LEVELS, MAJORITY_FRAC, D, SEP = 4, 0.85, 5, 1.0
M_VAL, M_TEST = 5000, 20_000
LAM_GRID = 2.0 ** np.arange(-20, 11, 2)
CAP_S = 300.0
MEMORY_GB = 3.0
REPEAT_BELOW_S = 60.0
GRID_PATH = dict(path="warm", chains=4)

QUICK = dict(
    sizes=(400, 800),
    m_val=1000,
    m_test=2000,
    lams=2.0 ** np.array([-10.0, -6.0, -2.0]),
    cap=300.0,  # not reached on an idle machine; keeps a loaded one from stopping methods
    # RankSVM's K and K_RR: 400 rows need 1.3 MB, 800 rows 5.1 MB: the second is infeasible
    memory_gb=3 / 1024,
)

METHODS = {
    "ml-rankrc": ("RANK-RC", "multi-level, basis = level ≠ 0 rows (eq. 48)"),
    "ml-rnd": ("RANK-RND", "multi-level, uniform basis of RANK-RC's size"),
    "ml-ranksvm": ("RANK-SVM", "multi-level, every row (eq. 47)"),
    "rankrc-biclass": ("biclass RankRC", "level > 0 vs 0, basis = level ≠ 0 rows"),
}

PAPER = {
    "data": "Heritage Health Prize claims, days in hospital, 16 levels (85 % at 0 days)",
    "fractions": [0.05, 0.10, 0.25, 0.50, 0.75],
    "claims": {
        "ml-ranksvm": "RANK-SVM cannot be trained with more than 25 % of the data (kernel matrix "
        "over the 10 GB limit)",
        "mauc": "RANK-RC slightly better than RANK-RND, almost identical to RANK-SVM where it runs",
        "scaling": "RANK-RC and RANK-RND scale well and use fewer support vectors than RANK-SVM",
    },
    "note": "Fig. 5 is a plot; the paper gives no numbers for its points, only the claims.",
}


def fit_ml_basis(X, levels, lam, idx, *, budget: int | None = None, **opts):
    """The multi-level objective (seed 003 eq. 47/48) over the basis rows ``idx``.

    ``fit_multilevel`` fixes the basis to the non-majority rows (eq. 48); this is the same engine
    (``fit_rows`` with the ``_Levels`` layout) with any basis: ``np.arange(m)`` for eq. 47.
    """
    X = check_X(X)
    _, index, counts, _ = check_levels(levels, 0, n=X.shape[0])
    lams, scalar = check_lam(lam)
    order = np.argsort(index, kind="stable")
    return fit_rows(
        X, order, np.asarray(idx, np.int64), lams, scalar, _Levels(tuple(int(c) for c in counts)),
        kernel=kernels.resolve_kernel(None, X), dtype=np.dtype(DTYPE), loss="smoothed_hinge",
        eps=0.5, tol=1e-6, max_iter=100, max_cg=25, path=opts.get("path", "batch"),
        chains=opts.get("chains", 4), precondition="auto", memory_budget=budget,
    )  # fmt: skip


def memory_check(m: int, nb: int, budget: int) -> dict:
    """For a method not run at size m (time cap): would its fit pass jaxrank's memory check
    (the m × |R| block plus K_RR and the preconditioner, float32; padding aside)?"""
    try:
        kernels.check_memory(4 * (m * nb + 2 * nb * nb), budget, f"the kernel block ({m} x {nb})")
    except jaxrank.MemoryBudgetError as e:
        return {"memory_ok": False, "memory_reason": str(e)}
    return {"memory_ok": True}


def fit_method(name: str, X, lv, lam, *, key, budget: int):
    opts = dict(GRID_PATH) if np.ndim(lam) else {}
    if name == "ml-rankrc":
        return jaxrank.fit_multilevel(X, lv, lam, dtype=DTYPE, memory_budget=budget, **opts)
    if name == "ml-rnd":
        n = int(np.sum(lv != 0))
        idx = np.sort(np.asarray(jax.random.choice(key, lv.size, (n,), replace=False)))
        return fit_ml_basis(X, lv, lam, idx, budget=budget, **opts)
    if name == "ml-ranksvm":
        return fit_ml_basis(X, lv, lam, np.arange(lv.size), budget=budget, **opts)
    if name == "rankrc-biclass":
        y = np.where(lv > 0, 1, -1)
        return jaxrank.fit_rankrc(X, y, lam, dtype=DTYPE, memory_budget=budget, **opts)
    raise ValueError(name)


def standardise(Xtr, *others):
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return [(A - mu) / sd for A in (Xtr, *others)]


def pick_lambda(lams, scores) -> int:
    lams, scores = np.asarray(lams, float), np.asarray(scores, float)
    best = np.flatnonzero(scores == np.nanmax(scores))
    return int(best[np.argmax(lams[best])])


def _warnings(caught) -> list[str]:
    return sorted({f"{w.category.__name__}: {w.message}"[:300] for w in caught})


def _status(model):
    s = np.atleast_1d(np.asarray(model.info.status))
    names = [jaxrank.Status(int(v)).name for v in s]
    return names if np.ndim(model.info.status) else names[0]


def _mauc(lv, scores) -> np.ndarray:
    s = np.atleast_2d(np.asarray(scores))
    return np.asarray([float(metrics.mauc(lv, row)) for row in s])


def run(cfg: dict) -> dict:
    budget = int(cfg["memory_gb"] * 2**30)
    keys = jax.random.split(jax.random.key(cfg["seed"]), 3 + len(cfg["sizes"]))
    kval, ktest, kfit = keys[0], keys[1], keys[2]
    gen = dict(levels=LEVELS, majority_frac=MAJORITY_FRAC, d=D, sep=SEP)
    Xv, lvv = make_ordinal(cfg["m_val"], key=kval, **gen)
    Xt, lvt = make_ordinal(cfg["m_test"], key=ktest, **gen)
    # the Bayes ranking is monotone in uᵀx (module notes of make_ordinal): a ceiling for MAUC
    bayes = float(metrics.mauc(lvt, Xt.sum(axis=1)))
    train = {m: make_ordinal(m, key=keys[3 + i], **gen) for i, m in enumerate(cfg["sizes"])}
    # λ per method at the smallest size
    m0 = cfg["sizes"][0]
    Xtr, Xvs = standardise(train[m0][0], Xv)
    lams = np.asarray(cfg["lams"], float)
    sel = {"m": m0}
    for name in cfg["methods"]:
        t0 = time.perf_counter()
        key = jax.random.fold_in(kfit, list(METHODS).index(name))
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                model = fit_method(name, Xtr, train[m0][1], lams, key=key, budget=budget)
        except jaxrank.MemoryBudgetError as e:
            sel[name] = {"lam": float(np.median(lams)), "error": str(e)}
            continue
        val = _mauc(lvv, model.decision_function(Xvs))
        i = pick_lambda(lams, val)
        sel[name] = {
            "lam": float(lams[i]),
            "log2_lam": float(np.log2(lams[i])),
            "grid": lams.tolist(),
            "val_mauc": val.tolist(),
            "status": _status(model),
            "warnings": _warnings(caught),
            "select_s": time.perf_counter() - t0,
        }
        print(f"  select {name:14s} log2λ={np.log2(lams[i]):+.0f} val MAUC "
              f"{100 * val[i]:.2f} ({sel[name]['select_s']:.0f} s)", flush=True)  # fmt: skip
    stopped: dict[str, str] = {}
    results = []
    for m in cfg["sizes"]:
        X, lv = train[m]
        Xtr, Xts = standardise(X, Xt)
        entry = {"m": m, "level_counts": np.bincount(lv, minlength=LEVELS).tolist(), "methods": {}}
        for name in cfg["methods"]:
            if name in stopped:
                nb = m if name == "ml-ranksvm" else int(np.sum(lv != 0))
                entry["methods"][name] = {"skipped": True, "reason": stopped[name],
                                          **memory_check(m, nb, budget)}  # fmt: skip
                continue
            key = jax.random.fold_in(kfit, list(METHODS).index(name))
            lam = sel[name]["lam"]
            fn = lambda: fit_method(name, Xtr, lv, lam, key=key, budget=budget)  # noqa: B023
            t1 = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    model, first = C.time_first(fn)
                except jaxrank.MemoryBudgetError as e:
                    entry["methods"][name] = {"infeasible": True, "reason": str(e)}
                    print(f"  m={m:6d} {name:14s} infeasible: {str(e)[:80]}", flush=True)
                    continue
                fit_s = first
                if first < cfg["repeat_below"]:
                    model, fit_s = C.time_first(fn)
                scores = jax.block_until_ready(model.decision_function(Xts))
            res = {
                "infeasible": False,
                "lam": lam,
                "fit_s": fit_s,
                "fit_first_s": first,
                "fit_includes_compile": first >= cfg["repeat_below"],
                "test_mauc": float(metrics.mauc(lvt, scores)),
                "n_basis": int(model.n_basis),
                "status": _status(model),
                "newton_iterations": int(np.asarray(model.info.iterations)),
                "peak_rss_bytes": C.peak_rss_bytes(),
                "warnings": _warnings(caught),
            }
            if fit_s > cfg["cap"]:
                stopped[name] = f"a fit at m = {m} took {fit_s:.0f} s > cap {cfg['cap']:.0f} s"
                res["stopped"] = True
            entry["methods"][name] = res
            print(
                f"  m={m:6d} {name:14s} MAUC {100 * res['test_mauc']:.2f} |R|={res['n_basis']} "
                f"fit {C.fmt_seconds(fit_s)} ({time.perf_counter() - t1:.0f} s)",
                flush=True,
            )
        results.append(entry)
    return {"bayes_test_mauc": bayes, "selection": sel, "results": results, "stopped": stopped}


def _done(result, name):
    return [r for r in result["results"] if "test_mauc" in r["methods"].get(name, {})]


def time_slope(result: dict, name: str) -> float | None:
    done = _done(result, name)
    if len(done) < 2:
        return None
    x = np.log([r["m"] for r in done])
    t = np.log([r["methods"][name]["fit_s"] for r in done])
    return float(np.polyfit(x, t, 1)[0])


def markdown(result: dict) -> str:
    """The result as markdown: MAUC / fit time / basis size per size, the paper's claims beside."""
    s = result["settings"]
    methods = s["methods"]
    lines = [
        f"### Seed 003 Fig. 5 analogue (make_ordinal: {LEVELS} levels, {100 * MAJORITY_FRAC:.0f} % "
        f"majority, d = {D}; test {s['m_test']:,} rows, Bayes MAUC "
        f"{100 * result['bayes_test_mauc']:.2f}){' — QUICK' if s['quick'] else ''}",
        "",
        "| m | " + " | ".join(f"{METHODS[n][0]} MAUC / fit / basis" for n in methods) + " |",
        "|---:|" + "---|" * len(methods),
    ]
    for r in result["results"]:
        cells = []
        for n in methods:
            res = r["methods"].get(n, {})
            if res.get("infeasible"):
                cells.append("infeasible")
            elif res.get("skipped"):
                over = "; over the memory budget" if res.get("memory_ok") is False else ""
                cells.append(f"not run (cap){over}")
            else:
                star = "*" if res.get("fit_includes_compile") else ""
                fit = C.fmt_seconds(res["fit_s"]) + star
                cells.append(f"{100 * res['test_mauc']:.2f} / {fit} / {res['n_basis']:,}")
        lines.append(f"| {r['m']:,} | " + " | ".join(cells) + " |")
    sel = result["selection"]
    lines += [
        "",
        f"One λ per method, chosen by validation MAUC at m = {sel['m']:,}: "
        + ", ".join(f"{METHODS[n][0]} log₂λ = {np.log2(sel[n]['lam']):+.0f}" for n in methods)
        + f". fit = wall time of one fit, warm when the first call took < {s['repeat_below']:g} s"
        " (* = that first call, compilation included). Memory budget "
        f"{s['memory_gb']:g} GiB; time cap {s['cap']:g} s per fit.",
        "",
        "| claim (seed 003 Sec. 5, Fig. 5) | here |",
        "|---|---|",
    ]
    res = result["results"]
    if "ml-ranksvm" in methods:
        ok = [r["m"] for r in _done(result, "ml-ranksvm")]
        inf = [r["m"] for r in res if r["methods"]["ml-ranksvm"].get("infeasible")
               or r["methods"]["ml-ranksvm"].get("memory_ok") is False]  # fmt: skip
        why = [r["methods"]["ml-ranksvm"].get("reason", "") if r["methods"]["ml-ranksvm"].get(
            "infeasible") else r["methods"]["ml-ranksvm"].get("memory_reason", "")
            for r in res if r["m"] in inf]  # fmt: skip
        capped = result["stopped"].get("ml-ranksvm")
        here = (f"trained up to m = {max(ok):,}; " if ok else "never trained; ") + (
            f"infeasible (memory) from m = {inf[0]:,}: {why[0]}" if inf
            else "never infeasible at these sizes") + (
            f"; stopped by the time cap: {capped}" if capped else "")  # fmt: skip
        lines.append(f"| {PAPER['claims']['ml-ranksvm']} | {here} |")
    diffs = []
    for r in res:
        got = {n: r["methods"][n]["test_mauc"] for n in methods if "test_mauc" in r["methods"][n]}
        if "ml-rankrc" in got:
            parts = [f"{METHODS[n][0]} {100 * (got['ml-rankrc'] - v):+.2f}"
                     for n, v in got.items() if n != "ml-rankrc"]  # fmt: skip
            diffs.append(f"m = {r['m']:,}: " + ", ".join(parts))
    lines.append(f"| {PAPER['claims']['mauc']} | RANK-RC MAUC minus each other method (points): "
                 f"{'; '.join(diffs)} |")  # fmt: skip
    slopes = [f"{METHODS[n][0]} time ∝ m^{sl:.2f}" for n in methods
              if (sl := time_slope(result, n)) is not None]  # fmt: skip
    sizes = [f"{METHODS[n][0]} {d[-1]['methods'][n]['n_basis']:,} (m = {d[-1]['m']:,})"
             for n in methods if (d := _done(result, n))]  # fmt: skip
    lines.append(f"| {PAPER['claims']['scaling']} | log-log slopes: {', '.join(slopes) or '-'}; "
                 f"basis size at the largest m run: {', '.join(sizes)} |")  # fmt: skip
    lines += ["", f"Paper: {PAPER['data']}. {PAPER['note']}"]
    if s.get("reduced"):
        lines += ["", f"**Reduced run:** {s['reduced']}"]
    return "\n".join(lines)


def plot(result: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    markers = {"ml-rankrc": "o", "ml-rnd": "s", "ml-ranksvm": "^", "rankrc-biclass": "v"}
    labelled = False
    sizes = [r["m"] for r in result["results"]]
    for name in result["settings"]["methods"]:
        done = _done(result, name)
        if not done:
            continue
        m = [r["m"] for r in done]
        kw = dict(marker=markers[name], label=METHODS[name][0])
        axes[0].plot(m, [100 * r["methods"][name]["test_mauc"] for r in done], **kw)
        axes[1].plot(m, [r["methods"][name]["fit_s"] for r in done], **kw)
        axes[2].plot(m, [r["methods"][name]["n_basis"] for r in done], **kw)
        first = [r for r in done if r["methods"][name].get("fit_includes_compile")]
        axes[1].scatter([r["m"] for r in first], [r["methods"][name]["fit_s"] for r in first],
                        s=90, facecolors="none", edgecolors="black", zorder=3,
                        label="first call (with compile)" if not labelled else None)  # fmt: skip
        labelled = labelled or bool(first)
    axes[0].axhline(100 * result["bayes_test_mauc"], color="grey", ls=":", label="Bayes")
    titles = ("(a) test MAUC (%)", "(b) training time (s)", "(c) basis size |R|")
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(sizes, [f"{m:,}" for m in sizes])
        ax.set_xlabel("training rows m")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    axes[1].set_yscale("log")
    axes[2].set_yscale("log")
    axes[0].legend(fontsize=8)
    if labelled:
        axes[1].legend(fontsize=8)
    fig.suptitle("Seed 003 Fig. 5 analogue: multi-level ranking on make_ordinal"
                 + (" (quick)" if result["settings"]["quick"] else ""))  # fmt: skip
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes (< 60 s)")
    p.add_argument("--sizes", type=int, nargs="+", default=None)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cap", type=float, default=None)
    p.add_argument("--memory-gb", type=float, default=None)
    p.add_argument("--repeat-below", type=float, default=REPEAT_BELOW_S)
    p.add_argument("--reduced", default=None, help="why this run is smaller than the full one")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--save", action="store_true", help="also write bench/results/<name>.*")
    args = p.parse_args(argv)
    q = args.quick
    cfg = {
        "quick": q,
        "sizes": sorted(args.sizes or (QUICK["sizes"] if q else SIZES)),
        "m_val": QUICK["m_val"] if q else M_VAL,
        "m_test": QUICK["m_test"] if q else M_TEST,
        "lams": np.asarray(QUICK["lams"] if q else LAM_GRID).tolist(),
        "cap": args.cap or (QUICK["cap"] if q else CAP_S),
        "memory_gb": args.memory_gb or (QUICK["memory_gb"] if q else MEMORY_GB),
        "repeat_below": args.repeat_below,
        "methods": list(args.methods),
        "seed": args.seed,
        "reduced": args.reduced,
        "generator": dict(levels=LEVELS, majority_frac=MAJORITY_FRAC, d=D, sep=SEP),
    }
    if args.out is None:
        args.out = C.OUT_DIR / (f"{NAME}_quick.json" if q else f"{NAME}.json")
    return args, cfg


def main(argv=None) -> int:
    args, cfg = parse_args(argv)
    blas = C.limit_blas()
    env = C.env_info()
    print(f"jaxrank {NAME}: {env['platform']}, {env['cpu_count']} CPUs; sizes {cfg['sizes']}",
          flush=True)  # fmt: skip
    t0 = time.perf_counter()
    out = run(cfg)
    result = {
        "benchmark": NAME,
        "env": env,
        "settings": {
            **cfg,
            "dtype": DTYPE,
            "openblas_num_threads": blas,
            "kernel": "gaussian, σ² = mean squared pairwise distance of the training rows",
            "eps": 0.5,
            "tol": 1e-6,
            "grid_path": GRID_PATH,
            "lambda_selection": "one λ per method by validation MAUC at the smallest size",
        },
        "paper": PAPER,
        **out,
        "seconds": time.perf_counter() - t0,
    }
    C.finish(result, args.out, name=NAME, quick=args.quick, save=args.save, markdown=markdown,
             plot=plot)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
