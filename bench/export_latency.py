"""A fit in a new process with the stored ``jax.export`` programs on and off (issue 29, item 4).

The 16-λ ``fit_rankrc`` at m = 1000 (``make_rare_class(m, 0.1, 0.75)``, standardised, float32)
in fresh processes, each phase a child of :mod:`latency` (same data, timing and compile-event
accounting): with exported programs (the default, :mod:`jaxrank._exported`) an empty cache
(the first-ever fit) then the warm cache (a second process); the same two with
``JAXRANK_NO_EXPORT=1`` in a cache of their own. Ratios: the second process's first fit against
its own warm fit (target ≤ 3), the first-ever fit against 16 SVC-W fits (target ≤ 4), as in
issue 29. Writes ``bench/out/export_latency.json`` (``--save``: also ``bench/results/``).
"""

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import _common as C
import numpy as np

SECOND_PROCESS_RATIO, FIRST_EVER_VS_SVC16 = 3.0, 4.0
# the fits run as bench/latency.py's children (``latency.py --child SPEC``, a fresh process each),
# on latency's data: λ = 2^k over the paper's grid, make_rare_class(m, ρ = 0.1, t = 0.75)
LATENCY = Path(__file__).resolve().parent / "latency.py"
EXPONENTS = tuple(range(-20, 11, 2))
RHO, OVERLAP = 0.1, 0.75
# the GridSearchCV baseline beside RankRCClassifierCV (issue 29: 7 C × 3 γ, cv = 5); γ as
# multiples of 1/d (scikit-learn's "scale" on standardised rows)
GRID_C = tuple(10.0**k for k in range(-3, 4))
GRID_GAMMA_FACTORS = (0.25, 1.0, 4.0)


def _svc16(X, y, repeats: int) -> dict:
    """16 ``SVC(C=2**k, class_weight='balanced')`` fits (k = -20 ... 10, as
    ``bench/latency.py``'s baseline): wall and CPU seconds of each of ``repeats`` runs."""
    from sklearn.svm import SVC

    Cs = [2.0**k for k in EXPONENTS]
    walls, cpus = [], []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        for c in Cs:
            SVC(C=c, class_weight="balanced").fit(X, y)
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return {"runs": walls, "cpu_runs": cpus}


def _gridsearch(X, y) -> dict:
    """``GridSearchCV(SVC(class_weight='balanced'), 7 C × 3 γ, cv=5, scoring='roc_auc')``."""
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    grid = {"C": list(GRID_C), "gamma": [g / X.shape[1] for g in GRID_GAMMA_FACTORS]}
    gs = GridSearchCV(SVC(class_weight="balanced"), grid, cv=5, scoring="roc_auc")
    c0, t0 = time.process_time(), time.perf_counter()
    gs.fit(X, y)
    return {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}


def _standardised(m: int) -> dict:
    import jaxrank

    X, y = jaxrank.datasets.make_rare_class(m, RHO, OVERLAP, seed=0)
    X = np.asarray(X, np.float64)
    return {f"X{m}": (X - X.mean(0)) / X.std(0), f"y{m}": np.asarray(y)}


def run(m: int, repeats: int, timeout: float, cv_m: int) -> dict:
    out = {"m": m, "cv_m": cv_m, "phases": {}}
    with tempfile.TemporaryDirectory(prefix="jaxrank-export-") as d:
        tmp = Path(d)
        data = _standardised(m)
        if cv_m:
            data.update(_standardised(cv_m))
        np.savez(tmp / "data.npz", **data)
        X, y = data[f"X{m}"], data[f"y{m}"]
        # the baseline before and after the children: load from other processes on a shared
        # machine changes within minutes, and the first-ever fit runs between the two
        svc = [_svc16(X, y, repeats)]
        spec = {"kind": "fits", "sizes": [m], "data": str(tmp / "data.npz"), "repeats": repeats}
        for export in ("on", "off"):
            cache = tmp / f"cache_{export}"
            for phase in ("empty", "warm"):
                if export == "off":
                    os.environ["JAXRANK_NO_EXPORT"] = "1"
                try:
                    res = C.run_spec_child(LATENCY, spec, cache, tmp, timeout)
                finally:
                    os.environ.pop("JAXRANK_NO_EXPORT", None)
                row = res["fits"][0]
                out["phases"][f"export_{export}_{phase}"] = {
                    "first": row["first"], "warm": row["warm"], "status": row["status"],
                    "subprocess_s": res["subprocess_s"], "import_s": res["import_s"],
                }  # fmt: skip
                print(f"export {export}, {phase} cache: first fit {row['first']['wall']:.2f} s "
                      f"({row['first']['cpu']:.2f} s CPU), warm {row['warm']['median']:.3f} s",
                      flush=True)  # fmt: skip
        svc.append(_svc16(X, y, repeats))
        walls = [w for s in svc for w in s["runs"]]
        cpus = [c for s in svc for c in s["cpu_runs"]]
        out["svc16"] = {"median": float(np.median(walls)), "runs": walls,
                        "cpu_median": float(np.median(cpus)), "cpu_runs": cpus}  # fmt: skip
        if cv_m:
            # RankRCClassifierCV's default search in a fresh process: empty cache, then warm
            cv_spec = {"kind": "cv", "sizes": [cv_m], "data": str(tmp / "data.npz"), "repeats": 1}
            out["cv"] = {}
            for phase in ("empty", "warm"):
                res = C.run_spec_child(LATENCY, cv_spec, tmp / "cache_cv", tmp, timeout)
                row = res["cv"][0]
                out["cv"][phase] = {"first": row["first"], "warm": row["warm"],
                                    "subprocess_s": res["subprocess_s"]}  # fmt: skip
                print(f"RankRCClassifierCV m = {cv_m}, {phase} cache: first fit "
                      f"{row['first']['wall']:.2f} s, warm {row['warm']['median']:.2f} s",
                      flush=True)  # fmt: skip
            out["cv"]["gridsearch"] = _gridsearch(data[f"X{cv_m}"], data[f"y{cv_m}"])
    p, svc = out["phases"], out["svc16"]
    for export in ("on", "off"):
        warm, empty = p[f"export_{export}_warm"], p[f"export_{export}_empty"]
        out[f"second_process_ratio_export_{export}"] = (
            warm["first"]["wall"] / warm["warm"]["median"]
        )
        out[f"first_ever_vs_svc16_export_{export}"] = empty["first"]["wall"] / svc["median"]
        # the same ratios in CPU seconds (all threads of the process), less exposed to load
        out[f"second_process_cpu_ratio_export_{export}"] = (
            warm["first"]["cpu"] / warm["warm"]["cpu_median"]
        )
        out[f"first_ever_vs_svc16_cpu_export_{export}"] = empty["first"]["cpu"] / svc["cpu_median"]
    out["targets"] = {
        "second_process_ratio": (out["second_process_ratio_export_on"], SECOND_PROCESS_RATIO),
        "first_ever_vs_svc16": (out["first_ever_vs_svc16_export_on"], FIRST_EVER_VS_SVC16),
    }
    return out


def _cpu(x: dict) -> str:
    return "-" if x.get("cpu") is None else f"{x['cpu']:.2f} s"


def markdown(report: dict) -> str:
    r, env = report["result"], report["env"]
    p = r["phases"]
    rows = []
    for export in ("on", "off"):
        for phase in ("empty", "warm"):
            x = p[f"export_{export}_{phase}"]
            first = x["first"]
            rows.append([
                f"export {export}", f"{phase} cache", f"{first['wall']:.2f} s", _cpu(first),
                f"{first.get('trace', 0) + first.get('lower', 0):.2f} s",
                f"{first.get('backend', 0):.2f} s",
                f"{first.get('programs', '-')} ({first.get('loaded', '-')})",
                f"{x['warm']['median']:.3f} s",
            ])  # fmt: skip
    t, svc = r["targets"], r["svc16"]
    cpu = (
        f" In CPU seconds (all threads of the process; other processes' load inflates them far "
        f"less): second process {r['second_process_cpu_ratio_export_on']:.1f}×, first-ever "
        f"{r['first_ever_vs_svc16_cpu_export_on']:.1f}× (16 SVC-W fits: "
        f"{svc['cpu_median']:.2f} s CPU)."
        if "second_process_cpu_ratio_export_on" in r
        else ""
    )
    lines = [
        f"`make_rare_class(m = {r['m']:,}, ρ = 0.1, t = 0.75)`, standardised, float32, "
        "the 16-λ "
        f"`fit_rankrc`, each row a fresh process (children of `bench/latency.py`) on "
        f"{env['cpu_count']} CPUs"
        + (f" and {env['device_kind']}" if env.get("platform", "cpu") != "cpu" else "")
        + f" (jax {env['jax']}); compile times from JAX's "
        "monitoring events. *first fit* = the process's first fit after `import jaxrank` and "
        "JAX's backend start (both excluded, as in §16), *warm fit* = the median of the "
        "repeats after it in the same process. "
        "Export on: the fit's program runs through a `jax.export` program stored beside the "
        "compilation cache (`jaxrank._exported`); off: `JAXRANK_NO_EXPORT=1`, a cache of "
        "its own.",
        "",
        *C.md_table(
            [
                "export",
                "cache",
                "first fit",
                "CPU",
                "trace + lower",
                "XLA compile / load",
                "programs (loaded)",
                "warm fit",
            ],
            rows,
            "llrrrrrr",
        ),
        "",
        "Second process, first fit / warm fit: "
        f"**{t['second_process_ratio'][0]:.1f}×** (target "
        f"≤ {t['second_process_ratio'][1]:g}; export off: "
        f"{r['second_process_ratio_export_off']:.1f}×). First-ever fit / 16 SVC-W fits "
        f"({svc['median']:.2f} s, median of the runs before and after the fits): "
        f"**{t['first_ever_vs_svc16'][0]:.1f}×** (target ≤ "
        f"{t['first_ever_vs_svc16'][1]:g}; export off: "
        f"{r['first_ever_vs_svc16_export_off']:.1f}×).{cpu}",
    ]
    if r.get("cv"):
        cv, g = r["cv"], r["cv"]["gridsearch"]
        lines += [
            "",
            f"`RankRCClassifierCV(random_state=0).fit` (its default search) at m = "
            f"{r['cv_m']:,} (same data model), a fresh process per cache state, beside "
            f"`GridSearchCV(SVC(class_weight='balanced'), 7 C × 3 γ, cv=5)` "
            f"(C = 10^−3 … 10^3, γ = (1/4, 1, 4)/d): empty cache "
            f"{cv['empty']['first']['wall']:.2f} s "
            f"(warm in that process {cv['empty']['warm']['median']:.2f} s), warm cache "
            f"{cv['warm']['first']['wall']:.2f} s; GridSearchCV {g['wall']:.2f} s.",
        ]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--cv-m", type=int, default=300,
                    help="rows of the RankRCClassifierCV phase (0: skip it)")  # fmt: skip
    ap.add_argument("--out", default=str(C.out_path("export_latency")))
    ap.add_argument("--save", action="store_true", help="also bench/results/export_latency.json")
    args = ap.parse_args(argv)
    os.environ["JAXRANK_NO_COMPILATION_CACHE"] = "1"  # this process writes no cache entries
    C.limit_blas()
    env = C.header("export_latency", f"m = {args.m}, float32, 16 λ")
    t0 = time.perf_counter()
    res = run(args.m, args.repeats, args.timeout, args.cv_m)
    for k, (v, lim) in res["targets"].items():
        print(f"{k}: {v:.2f} (target <= {lim})")
    report = {"benchmark": "export_latency", "env": env, "result": res,
              "seconds": time.perf_counter() - t0}  # fmt: skip
    C.write_report(report, args.out, "export_latency.json" if args.save else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
