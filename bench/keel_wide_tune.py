"""How RankRCClassifierCV's defaults were chosen: basis floor, σ² factors, rule (issue 18).

``run``: on ``_keel.TUNE_SETS`` only (the rest of ``bench/keel_wide.py`` is held out), per
split (keel_wide's stratified 75/25 split, standardised on the training split), the 5-fold CV
table of :func:`jaxrank.internals.cv_search` for every basis policy of ``POLICIES`` over σ² =
heuristic × ``FACTORS`` and the paper's λ grid, the test AUC of the refit on the whole training
split for every cell, and SVC-W (``GridSearchCV``, keel_wide's grid) as the reference.
``analyse`` scores every candidate default (policies, σ² factors, rule) by the test AUC of the
cell it picks from the CV table, so all are compared on the same fits: mean test AUC over sets,
SVC-W's, the worst per-set difference, the share of sets within 0.5 points or better. Results:
the notes of :mod:`jaxrank._cv`.

Usage::

    python bench/keel_wide_tune.py run --splits 3            # the tuning sets (slow: compiles)
    python bench/keel_wide_tune.py analyse --save            # rank the candidates
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
import warnings

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import _common as C
import jax
import numpy as np
from _data import standardise, stratified_split
from _keel import SEED, SVC_C, SVC_GAMMA_FACTORS, TEST_FRAC, TIE, TUNE_SETS, load_set
from _keel import folds as _folds

import jaxrank
from jaxrank import internals, kernels, metrics

LAMS = 2.0 ** np.arange(-20, 11, 2)
FACTORS = 2.0 ** np.arange(-4, 3)
POLICIES = (("rare", 128), ("auto", 64), ("auto", 128), ("auto", 256))
OUT = C.OUT_DIR / "keel_wide_tune"
# the candidate defaults: sets of policies (by _name), of σ² factors, and every rule of _cv
CAND_POLICIES = "rare auto64 auto128 auto256 rare+auto128 rare+auto256 auto64+auto256".split()
CAND_FACTORS = ((1.0,), (0.25, 1.0, 4.0), (0.25, 0.5, 1.0, 2.0, 4.0), (0.0625, 0.25, 1.0, 4.0))


def run_set(name: str, splits: int) -> dict:
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.svm import SVC

    X, y, _ = load_set(name)
    out = {"name": name, "policies": POLICIES, "lams": LAMS, "factors": FACTORS, "splits": []}
    for split in range(splits):
        tr, te = stratified_split(y, TEST_FRAC, np.random.default_rng([SEED, split]))
        (Xtr, Xte), ytr, yte = standardise(X[tr], X[te]), y[tr], y[te]
        pos, h = ytr == 1, kernels.sigma2_heuristic(Xtr)
        k = _folds(ytr, 5)  # fewer on sets with fewer than 5 rare training rows (zoo-3: 4)
        key = jax.random.fold_in(jax.random.key(SEED), split)
        rec = {"cv": [], "test": [], "n_basis": [], "cv_seconds": []}
        for policy, floor in POLICIES:
            t0 = time.perf_counter()
            opts = dict(policies=(policy,), folds=k, key=key, min_basis=floor, dtype="float32")
            cv = internals.cv_search(Xtr, pos, lams=LAMS, sigma2s=h * FACTORS, **opts)
            rec["cv_seconds"].append(time.perf_counter() - t0)
            rec["cv"].append(cv.cv_auc[0])
            idx = internals.refit_basis(policy, Xtr, pos, key=key, min_basis=floor)
            rec["n_basis"].append(int(idx.size))
            test = []
            for s2 in h * FACTORS:
                kernel = kernels.gaussian(float(s2))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
                    model = jaxrank.fit(Xtr, pos, LAMS, basis=idx, dtype="float32", kernel=kernel)
                test.append(np.asarray(metrics.auc(yte == 1, model.decision_function(Xte))))
            rec["test"].append(test)
            secs = rec["cv_seconds"][-1]
            print(
                f"{name} split {split} {policy}/{floor}: |R| = {idx.size}, {secs:.1f} s", flush=True
            )
        grid = {"C": list(SVC_C), "gamma": [g / Xtr.shape[1] for g in SVC_GAMMA_FACTORS]}
        folds = StratifiedKFold(k, shuffle=True, random_state=split)
        t0 = time.perf_counter()
        gs = GridSearchCV(SVC(class_weight="balanced"), grid, scoring="roc_auc", cv=folds)
        gs.fit(Xtr, ytr)
        rec["svc_seconds"] = time.perf_counter() - t0
        rec["svc"] = float(roc_auc_score(yte, gs.decision_function(Xte)))
        out["splits"].append(rec)
    return out


def _name(policy, floor):
    return "rare" if policy == "rare" else f"auto{floor}"


def score(data: list[dict], pols, facs, rule) -> tuple[float, float, np.ndarray]:
    """Mean test AUC of the cells ``rule`` picks (policies ``pols``, σ² factors ``facs``), SVC-W's
    mean, and the per-set differences (points)."""
    per_set = []
    for d in data:
        names = [_name(*p) for p in d["policies"]]
        pi = [names.index(p) for p in pols]
        fi = [int(np.argmin(np.abs(np.asarray(d["factors"]) - f))) for f in facs]
        lams = np.asarray(d["lams"])
        ours, svc = [], []
        for r in d["splits"]:
            cv = np.asarray(r["cv"])[np.ix_(pi, fi, range(5), range(lams.size))]
            test = np.asarray(r["test"])[np.ix_(pi, fi, range(lams.size))]
            mean, se = cv.mean(2), cv.std(2, ddof=1) / np.sqrt(cv.shape[2])
            b, s, j = internals.choose_cell(mean, se, lams, np.asarray(facs), rule)
            ours.append(test[b, s, j])
            svc.append(r["svc"])
        per_set.append((np.mean(ours), np.mean(svc)))
    a = 100 * np.asarray(per_set)
    return float(a[:, 0].mean()), float(a[:, 1].mean()), a[:, 0] - a[:, 1]


def analyse(save: bool) -> None:
    data = [json.loads(f.read_text()) for f in sorted(OUT.glob("*.json"))]
    print(f"{len(data)} sets: {', '.join(d['name'] for d in data)}")
    rows = []
    pols = [tuple(p.split("+")) for p in CAND_POLICIES]
    for p, f, rule in itertools.product(
        pols, [*CAND_FACTORS, tuple(FACTORS.tolist())], internals.CV_RULES
    ):
        mean, svc, diff = score(data, p, f, rule)
        row = dict(policies=p, factors=f, rule=rule, auc=mean, svc_auc=svc, worst=float(diff.min()))
        rows.append(row | {"win_or_tie": float(np.mean(diff >= -TIE)), "diff": diff})
    rows.sort(key=lambda r: -r["auc"])
    for r in rows:
        print(
            f"{r['auc']:6.2f} (SVC-W {r['svc_auc']:.2f}) worst {r['worst']:+5.1f} "
            f"w/t {r['win_or_tie']:.2f}  {'+'.join(r['policies']):16s} "
            f"{r['factors']!s:34s} {r['rule']:7s}" + " ".join(f"{x:+.1f}" for x in r["diff"])
        )
    secs = lambda i: float(np.mean([r["cv_seconds"][i] for d in data for r in d["splits"]]))
    cv_s = {_name(*p): secs(i) for i, p in enumerate(POLICIES)}
    print("mean CV seconds per split (7 σ², 16 λ, 5 folds):", cv_s)
    if save:
        res = {"benchmark": "keel_wide_tune", "env": C.env_info()}
        res |= {"sets": [d["name"] for d in data], "cv_seconds": cv_s, "candidates": rows}
        C.write_json(C.RESULTS_DIR / "keel_wide_tune.json", res)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("run", "analyse"))
    p.add_argument("--sets", nargs="+", default=list(TUNE_SETS))
    p.add_argument("--splits", type=int, default=3)
    p.add_argument("--save", action="store_true")
    args = p.parse_args(argv)
    C.limit_blas()
    if args.what == "run":
        for name in args.sets:
            C.write_json(OUT / f"{name}.json", run_set(name, args.splits))
    else:
        analyse(args.save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
