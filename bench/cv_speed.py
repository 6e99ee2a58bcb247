"""``RankRCClassifierCV().fit`` against SVC-W with a 7 C × 3 γ ``GridSearchCV(cv=5)`` (issue 29).

Rows: ``make_rare_class(m, 0.1, 0.75)`` (standardised) at m = 300, 1000 and 3000, and the KEEL
sets ecoli2 (336 rows) and yeast4 (1484). Every measurement is a fresh Python process that
imports, loads the rows and times ``fit`` alone (import and data loading excluded):

- ``rankrc-cv`` (empty cache): the estimator's defaults in a process whose compilation cache
  directory (``$XDG_CACHE_HOME``) is new and empty: tracing, lowering and compiling included;
- ``rankrc-cv`` (warm cache): further processes on that directory (the executables and the
  stored ``jax.export`` programs of the first), median of ``--repeats``;
- both for each search engine (``RankRCClassifierCV(search_engine=)``: ``"fits"``, one
  :func:`jaxrank.fit` per fold and σ² on threads; ``"core"``, batched calls of the pure core,
  :mod:`jaxrank._cv_core`);
- ``svc-w``: ``GridSearchCV(SVC(class_weight="balanced"), C = 10^-3 … 10^3 (7), γ =
  {1/4, 1, 4}/d (3), cv=5, scoring="roc_auc", n_jobs=1)``, median of ``--repeats`` processes.

Writes ``bench/out/cv_speed.json`` (``--save``: also ``bench/results/``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C
import numpy as np

SIZES = (300, 1000, 3000)
KEEL = ("ecoli2", "yeast4")
SVC_C = tuple(10.0 ** np.arange(-3, 4))  # 7 values, 10^-3 … 10^3
SVC_GAMMA_FACTORS = (0.25, 1.0, 4.0)  # × 1/d
ENGINES = ("fits", "core")


def _data(name: str):
    import jaxrank

    if name.startswith("m="):
        X, y = jaxrank.datasets.make_rare_class(int(name[2:]), 0.1, 0.75, seed=0)
    else:
        X, y = jaxrank.datasets.load_keel(name)
    X = (X - X.mean(0)) / X.std(0)
    return np.asarray(X, np.float64), np.where(y == 1, 1, -1)


def child(method: str, name: str, engine: str) -> dict:
    X, y = _data(name)
    if method == "svc-w":
        from sklearn.model_selection import GridSearchCV
        from sklearn.svm import SVC

        grid = {"C": list(SVC_C), "gamma": [g / X.shape[1] for g in SVC_GAMMA_FACTORS]}
        t0 = time.perf_counter()
        GridSearchCV(SVC(class_weight="balanced"), grid, scoring="roc_auc", cv=5,
                     n_jobs=1).fit(X, y)  # fmt: skip
        return {"seconds": time.perf_counter() - t0}
    from jaxrank.sklearn import RankRCClassifierCV

    t0 = time.perf_counter()
    est = RankRCClassifierCV(random_state=0, search_engine=engine).fit(X, y)
    return {"seconds": time.perf_counter() - t0, "best_params": est.best_params_,
            "best_score": est.best_score_}  # fmt: skip


def _spawn(method: str, name: str, engine: str, cache: str | None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH", "")]
    )
    if cache is not None:
        env["XDG_CACHE_HOME"] = cache
    cmd = [sys.executable, __file__, "--child", method, name, engine]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(names, repeats: int) -> list[dict]:
    rows = []
    for name in names:
        row = {"data": name}
        X, y = _data(name)
        row["m"], row["d"], row["m_pos"] = int(X.shape[0]), int(X.shape[1]), int((y == 1).sum())
        svc = [_spawn("svc-w", name, "-", None)["seconds"] for _ in range(repeats)]
        row["svc_w"] = {"median": float(np.median(svc)), "runs": svc}
        for engine in ENGINES:
            with tempfile.TemporaryDirectory() as cache:
                first = _spawn("rankrc-cv", name, engine, cache)
                warm = [_spawn("rankrc-cv", name, engine, cache) for _ in range(repeats)]
            secs = [w["seconds"] for w in warm]
            row[engine] = {
                "empty_cache_s": first["seconds"],
                "warm_cache": {"median": float(np.median(secs)), "runs": secs},
                "best_params": warm[0]["best_params"], "best_score": warm[0]["best_score"],
                "warm_ratio_vs_svc_w": float(np.median(secs) / row["svc_w"]["median"]),
                "empty_ratio_vs_svc_w": float(first["seconds"] / row["svc_w"]["median"]),
            }  # fmt: skip
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def markdown(report: dict) -> str:
    env, rows = report["env"], report["result"]["rows"]
    head = ["data (m, m+)", "SVC-W 7×3 GridSearchCV"]
    for e in ENGINES:
        head += [f"RankRCClassifierCV [{e}] warm cache", "empty cache"]
    body = []
    for r in rows:
        cells = [f"{r['data']} ({r['m']:,}, {r['m_pos']})", f"{r['svc_w']['median']:.2f} s"]
        for e in ENGINES:
            x = r[e]
            cells += [f"{x['warm_cache']['median']:.2f} s ({x['warm_ratio_vs_svc_w']:.2f}×)",
                      f"{x['empty_cache_s']:.1f} s ({x['empty_ratio_vs_svc_w']:.1f}×)"]  # fmt: skip
        body.append(cells)
    same = all(r["fits"]["best_params"] == r["core"]["best_params"] for r in rows)
    return "\n".join(
        [
            f"Each time is `fit` alone in a fresh process, on {env['cpu_count']} CPUs "
            f"(jax {env['jax']}), median of {report['result']['repeats']} processes (the empty "
            "cache: one). RankRCClassifierCV with its defaults (4 σ² × 16 λ × 5 folds, the auto "
            "basis, the narrow extension where it fires, the refit); SVC-W = "
            "`GridSearchCV(SVC(class_weight='balanced'), 7 C × 3 γ, cv=5, scoring='roc_auc')`. "
            "In brackets: the ratio to SVC-W. `[fits]`: the search as one `jaxrank.fit` per fold "
            "and σ² on 3 threads; `[core]`: batched calls of the pure core over (fold, σ²) "
            "members (`jaxrank._cv_core`).",
            "",
            *C.md_table(head, body, "l" + "r" * (len(head) - 1)),
            "",
            "Both engines picked the same parameters on every set."
            if same
            else "The engines' picks differ on some sets (float32 fits stopped at the search "
            "tolerance 1e-4: a held-out pair can flip).",
        ]
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--child", nargs=3, metavar=("METHOD", "DATA", "ENGINE"), help=argparse.SUPPRESS
    )
    ap.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    ap.add_argument("--keel", nargs="*", default=list(KEEL))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(C.out_path("cv_speed")))
    ap.add_argument("--save", action="store_true", help="also write bench/results/cv_speed.json")
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    env = C.header("cv_speed", "fresh processes per measurement")
    t0 = time.perf_counter()
    names = [f"m={m}" for m in args.sizes] + list(args.keel)
    rows = run(names, args.repeats)
    report = {"benchmark": "cv_speed", "env": env,
              "result": {"rows": rows, "repeats": args.repeats},
              "seconds": time.perf_counter() - t0}  # fmt: skip
    C.write_report(report, args.out, "cv_speed.json" if args.save else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
