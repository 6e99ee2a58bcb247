"""Seed 003 Fig. 5 analogue: multi-level (ordinal) RankRC as the training set grows.

Seed 003 Sec. 5 (days in hospital, 16 levels, Heritage Health Prize data: not public) plots
test MAUC, training time and support vectors against the training fraction for multi-level
RANK-SVM (eq. 47), RANK-RC (eq. 48), RANK-RND, SVR and KNN; this is an analogue on
``jaxrank.multilevel.make_ordinal``. Results and the paper's claims: RESULTS.md §8.

* **Data**: ``make_ordinal(m, levels=4, majority_frac=0.85, d=5, sep=1.0)`` (85 % majority as in
  seed 003 Fig. 4; 4 levels keep every level populated at the smallest size). Its distribution
  does not depend on the key: ``split(key(seed), 3 + len(sizes))`` gives independent
  validation, test, methods' and per-size training keys. Standardised on the training rows.
* **Methods** (float32, seed 003's σ², ε = 0.5, tol 1e-6, the eq. 47/48 objective normalised by
  ``Σ_{r<s} m_r m_s``): ``ml-rankrc`` (``fit_multilevel``, basis = level ≠ 0), ``ml-rnd`` (a
  uniform random basis of that size), ``ml-ranksvm`` (every row), and ``rankrc-biclass``
  (``fit_rankrc`` on level > 0 vs 0, scored by MAUC: what the ordinal loss adds).
  ``fit_multilevel`` has no basis option, so the other two call its engine directly
  (:func:`fit_ml_basis`; checked against ``fit_multilevel`` in tests/test_bench_repro.py).
* **Memory / λ / timing**: ``memory_budget = --memory-gb`` (3 GiB; RankSVM's blocks: 1.2 GB at
  m = 10⁴, 4.8 GB at 2·10⁴), over it "infeasible"; one λ per method by validation MAUC at the
  smallest size, kept (seed 003 cross-validates per fraction); timing and ``--cap`` as
  ``bench/fig6.py``.

Full run: m = 2000 … 40 000 (~10 min on 2 cores); ``--quick``: m = 400, 800 (< 60 s).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's jaxrank

import _common as C
import _data as DH
import jax
import numpy as np

import jaxrank
from jaxrank import kernels, metrics
from jaxrank.fit import fit_rows
from jaxrank.internals import LevelsLayout, check_lam, check_X
from jaxrank.multilevel import check_levels, make_ordinal

NAME = "fig5_multilevel"
DTYPE = "float32"
LEVELS, MAJORITY_FRAC, D, SEP = 4, 0.85, 5, 1.0
REPEAT_BELOW_S = 60.0
GRID_PATH = dict(path="warm", chains=4)
FULL = dict(sizes=(2000, 5000, 10_000, 20_000, 40_000), m_val=5000, m_test=20_000,
            lams=2.0 ** np.arange(-20, 11, 2), cap=300.0, memory_gb=3.0)  # fmt: skip
QUICK = dict(
    sizes=(400, 800), m_val=1000, m_test=2000, lams=2.0 ** np.array([-10.0, -6.0, -2.0]),
    cap=300.0,  # not reached on an idle machine; keeps a loaded one from stopping methods
    # RankSVM's K and K_RR: 400 rows need 1.3 MB, 800 rows 5.1 MB: the second is infeasible
    memory_gb=3 / 1024,
)  # fmt: skip
METHODS = {"ml-rankrc": "RANK-RC", "ml-rnd": "RANK-RND", "ml-ranksvm": "RANK-SVM",
           "rankrc-biclass": "biclass RankRC"}  # fmt: skip

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
    (``fit_rows`` with the multi-level row layout, ``jaxrank.internals.LevelsLayout``) with any
    basis: ``np.arange(m)`` for eq. 47.
    """
    X = check_X(X)
    _, index, counts, _ = check_levels(levels, 0, n=X.shape[0])
    lams, scalar = check_lam(lam)
    order = np.argsort(index, kind="stable")
    return fit_rows(
        X, order, np.asarray(idx, np.int64), lams, scalar,
        LevelsLayout(tuple(int(c) for c in counts)),
        kernel=kernels.resolve_kernel(None, X), dtype=np.dtype(DTYPE), loss="smoothed_hinge",
        eps=0.5, tol=1e-6, max_iter=100, max_cg=25, path=opts.get("path", "batch"),
        chains=opts.get("chains", 4), precondition="auto", memory_budget=budget,
    )  # fmt: skip


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


def select(cfg: dict, Xtr, Xv, lv, lvv, kfit, budget: int) -> dict:
    """One λ per method by validation MAUC at the smallest size (ties to the larger λ)."""
    lams = np.asarray(cfg["lams"], float)
    sel = {"m": cfg["sizes"][0]}
    for name in cfg["methods"]:
        t0 = time.perf_counter()
        key = jax.random.fold_in(kfit, list(METHODS).index(name))
        try:
            with C.caught_warnings() as caught:
                model = fit_method(name, Xtr, lv, lams, key=key, budget=budget)
        except jaxrank.MemoryBudgetError as e:
            sel[name] = {"lam": float(np.median(lams)), "error": str(e)}
            continue
        scores = np.atleast_2d(np.asarray(model.decision_function(Xv)))
        val = np.asarray([float(metrics.mauc(lvv, row)) for row in scores])
        i = DH.pick_best(lams, val)
        sel[name] = {"lam": float(lams[i]), "log2_lam": float(np.log2(lams[i])),
                     "grid": lams.tolist(), "val_mauc": val.tolist(),
                     "status": DH.status_names(model), "warnings": C.warning_list(caught),
                     "select_s": time.perf_counter() - t0}  # fmt: skip
        print(f"  select {name:14s} log2λ={np.log2(lams[i]):+.0f} val MAUC "
              f"{100 * val[i]:.2f} ({sel[name]['select_s']:.0f} s)", flush=True)  # fmt: skip
    return sel


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
    X0, lv0 = train[cfg["sizes"][0]]
    sel = select(cfg, *DH.standardise(X0, Xv), lv0, lvv, kfit, budget)

    def entry(m):
        X, lv = train[m]
        e = {"m": m, "level_counts": np.bincount(lv, minlength=LEVELS).tolist(), "methods": {}}
        return e, (*DH.standardise(X, Xt), lv)

    def fit(ctx, name):
        Xtr, Xts, lv = ctx
        key, lam = jax.random.fold_in(kfit, list(METHODS).index(name)), sel[name]["lam"]
        with C.caught_warnings() as caught:
            try:
                fn = lambda: fit_method(name, Xtr, lv, lam, key=key, budget=budget)
                model, timing = C.time_warm(fn, cfg["repeat_below"])
            except jaxrank.MemoryBudgetError as e:
                return {"infeasible": True, "reason": str(e)}
            scores = jax.block_until_ready(model.decision_function(Xts))
        res = {"infeasible": False, "lam": lam, **timing}
        res.update(test_mauc=float(metrics.mauc(lvt, scores)), n_basis=int(model.n_basis))
        res.update(status=DH.status_names(model), newton_iterations=int(model.info.iterations))
        return {**res, "peak_rss_bytes": C.peak_rss_bytes(), "warnings": C.warning_list(caught)}

    def skipped(e, name):
        nb = e["m"] if name == "ml-ranksvm" else e["m"] - e["level_counts"][0]
        return DH.memory_check(e["m"], nb, budget)

    sweep = dict(cap=cfg["cap"], metric="test_mauc", skipped=skipped)
    results, stopped = C.capped_sweep(cfg["sizes"], cfg["methods"], entry, fit, **sweep)
    return {"bayes_test_mauc": bayes, "selection": sel, "results": results, "stopped": stopped}


def _cell(res: dict) -> str:
    if res.get("infeasible"):
        return "infeasible"
    over = "; over the memory budget" if res.get("memory_ok") is False else ""
    return f"not run (cap){over}" if res.get("skipped") else C.sweep_cell(res, "test_mauc")


def _claim_ranksvm(result: dict) -> str:
    ok = [r["m"] for r in C.sweep_done(result, "ml-ranksvm", "test_mauc")]
    bad = [(r["m"], v.get("reason", "") if v.get("infeasible") else v.get("memory_reason", ""))
           for r in result["results"] if (v := r["methods"]["ml-ranksvm"]).get("infeasible")
           or v.get("memory_ok") is False]  # fmt: skip
    capped = result["stopped"].get("ml-ranksvm")
    return (f"trained up to m = {max(ok):,}; " if ok else "never trained; ") + (
        f"infeasible (memory) from m = {bad[0][0]:,}: {bad[0][1]}" if bad
        else "never infeasible at these sizes") + (
        f"; stopped by the time cap: {capped}" if capped else "")  # fmt: skip


def markdown(result: dict) -> str:
    """The result as markdown: MAUC / fit time / basis size per size, the paper's claims beside."""
    s, sel = result["settings"], result["selection"]
    methods = s["methods"]
    lines = [
        f"### Seed 003 Fig. 5 analogue (make_ordinal: {LEVELS} levels, {100 * MAJORITY_FRAC:.0f} % "
        f"majority, d = {D}; test {s['m_test']:,} rows, Bayes MAUC "
        f"{100 * result['bayes_test_mauc']:.2f}){C.quick_tag(s)}",
        "",
        *C.md_table(["m", *(f"{METHODS[n]} MAUC / fit / basis" for n in methods)],
                    [[f"{r['m']:,}", *(_cell(r["methods"].get(n, {})) for n in methods)]
                     for r in result["results"]], "r"),
        "",
        f"One λ per method, chosen by validation MAUC at m = {sel['m']:,}: "
        + ", ".join(f"{METHODS[n]} log₂λ = {np.log2(sel[n]['lam']):+.0f}" for n in methods)
        + f". fit = wall time of one fit, warm when the first call took < {s['repeat_below']:g} s"
        " (* = that first call, compilation included). Memory budget "
        f"{s['memory_gb']:g} GiB; time cap {s['cap']:g} s per fit.",
        "",
    ]  # fmt: skip
    pc = PAPER["claims"]
    claims = [(pc["ml-ranksvm"], _claim_ranksvm(result))] if "ml-ranksvm" in methods else []
    diffs = []
    for r in result["results"]:
        got = {n: r["methods"][n]["test_mauc"] for n in methods if "test_mauc" in r["methods"][n]}
        if "ml-rankrc" in got:
            parts = [f"{METHODS[n]} {100 * (got['ml-rankrc'] - v):+.2f}"
                     for n, v in got.items() if n != "ml-rankrc"]  # fmt: skip
            diffs.append(f"m = {r['m']:,}: " + ", ".join(parts))
    claims.append(
        (pc["mauc"], f"RANK-RC MAUC minus each other method (points): {'; '.join(diffs)}")
    )
    slopes, sizes = C.sweep_scaling(result, METHODS, "test_mauc")
    claims.append((pc["scaling"], f"log-log slopes: {slopes}; basis size at the largest m run: "
                                  f"{sizes}"))  # fmt: skip
    lines += [*C.md_table(["claim (seed 003 Sec. 5, Fig. 5)", "here"], claims), "",
              f"Paper: {PAPER['data']}. {PAPER['note']}"]  # fmt: skip
    return C.md_text(lines, s)


def plot(result: dict, path: Path) -> Path:
    return C.plot_vs_size(
        result, path, metric="test_mauc", labels=METHODS, ceiling=result["bayes_test_mauc"],
        markers={"ml-rankrc": "o", "ml-rnd": "s", "ml-ranksvm": "^", "rankrc-biclass": "v"},
        titles=("(a) test MAUC (%)", "(b) training time (s)", "(c) basis size |R|"),
        title="Seed 003 Fig. 5 analogue: multi-level ranking on make_ordinal", xticks=True,
    )  # fmt: skip


def parse_args(argv=None):
    p = C.parser(NAME, __doc__, "tiny sizes (< 60 s)", seed=0, reduced=True)
    p.add_argument("--sizes", type=int, nargs="+", default=None)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    p.add_argument("--cap", type=float, default=None)
    p.add_argument("--memory-gb", type=float, default=None)
    p.add_argument("--repeat-below", type=float, default=REPEAT_BELOW_S)
    args = p.parse_args(argv)
    P = QUICK if args.quick else FULL
    cfg = {
        "quick": args.quick, "sizes": sorted(args.sizes or P["sizes"]), "m_val": P["m_val"],
        "m_test": P["m_test"], "lams": np.asarray(P["lams"]).tolist(), "cap": args.cap or P["cap"],
        "memory_gb": args.memory_gb or P["memory_gb"], "repeat_below": args.repeat_below,
        "methods": list(args.methods), "seed": args.seed, "reduced": args.reduced,
        "generator": dict(levels=LEVELS, majority_frac=MAJORITY_FRAC, d=D, sep=SEP),
    }  # fmt: skip
    return args, cfg


def main(argv=None) -> int:
    args, cfg = parse_args(argv)
    settings = {
        **cfg, "dtype": DTYPE,
        "kernel": "gaussian, σ² = mean squared pairwise distance of the training rows",
        "eps": 0.5, "tol": 1e-6, "grid_path": GRID_PATH,
        "lambda_selection": "one λ per method by validation MAUC at the smallest size",
    }  # fmt: skip
    return C.main(NAME, args, settings, lambda: {"paper": PAPER, **run(cfg)}, markdown=markdown,
                  plot=plot, detail=f"sizes {cfg['sizes']}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
