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
import latency
import numpy as np

SECOND_PROCESS_RATIO, FIRST_EVER_VS_SVC16 = 3.0, 4.0


def run(m: int, repeats: int, timeout: float) -> dict:
    import jaxrank

    out = {"m": m, "phases": {}}
    with tempfile.TemporaryDirectory(prefix="jaxrank-export-") as d:
        tmp = Path(d)
        X, y = jaxrank.datasets.make_rare_class(m, latency.RHO, latency.OVERLAP, seed=0)
        X = np.asarray(X, np.float64)
        data = {f"X{m}": (X - X.mean(0)) / X.std(0), f"y{m}": np.asarray(y)}
        np.savez(tmp / "data.npz", **data)
        spec = {"kind": "fits", "sizes": [m], "data": str(tmp / "data.npz"), "repeats": repeats}
        for export in ("on", "off"):
            cache = tmp / f"cache_{export}"
            for phase in ("empty", "warm"):
                if export == "off":
                    os.environ["JAXRANK_NO_EXPORT"] = "1"
                try:
                    res = latency._run_child(spec, cache, tmp, timeout)
                finally:
                    os.environ.pop("JAXRANK_NO_EXPORT", None)
                row = res["fits"][0]
                out["phases"][f"export_{export}_{phase}"] = {
                    "first": row["first"], "warm": row["warm"], "status": row["status"],
                    "subprocess_s": res["subprocess_s"], "import_s": res["import_s"],
                }  # fmt: skip
                print(f"export {export}, {phase} cache: first fit {row['first']['wall']:.2f} s, "
                      f"warm {row['warm']['median']:.3f} s", flush=True)  # fmt: skip
        out["svc16"] = latency._svc_baseline(data, [m], [], repeats)["svc16"][str(m)]
    p, svc = out["phases"], out["svc16"]["median"]
    for export in ("on", "off"):
        warm = p[f"export_{export}_warm"]
        out[f"second_process_ratio_export_{export}"] = (
            warm["first"]["wall"] / warm["warm"]["median"]
        )
        out[f"first_ever_vs_svc16_export_{export}"] = (
            p[f"export_{export}_empty"]["first"]["wall"] / svc
        )
    out["targets"] = {
        "second_process_ratio": (out["second_process_ratio_export_on"], SECOND_PROCESS_RATIO),
        "first_ever_vs_svc16": (out["first_ever_vs_svc16_export_on"], FIRST_EVER_VS_SVC16),
    }
    return out


def markdown(report: dict) -> str:
    r, env = report["result"], report["env"]
    p = r["phases"]
    rows = []
    for export in ("on", "off"):
        for phase in ("empty", "warm"):
            x = p[f"export_{export}_{phase}"]
            first = x["first"]
            rows.append([
                f"export {export}", f"{phase} cache", f"{first['wall']:.2f} s",
                f"{first.get('trace', 0) + first.get('lower', 0):.2f} s",
                f"{first.get('backend', 0):.2f} s", f"{x['warm']['median']:.3f} s",
            ])  # fmt: skip
    t = r["targets"]
    return "\n".join(
        [
            f"`make_rare_class(m = {r['m']:,}, ρ = 0.1, t = 0.75)`, standardised, float32, "
            "the 16-λ "
            f"`fit_rankrc`, each row a fresh process (children of `bench/latency.py`) on "
            f"{env['cpu_count']} CPUs (jax {env['jax']}); compile times from JAX's "
            "monitoring events. "
            "Export on: the fit's program runs through a `jax.export` program stored beside the "
            "compilation cache (`jaxrank._exported`); off: `JAXRANK_NO_EXPORT=1`, a cache of "
            "its own.",
            "",
            *C.md_table(
                ["export", "cache", "first fit", "trace + lower", "XLA compile / load", "warm fit"],
                rows,
                "llrrrr",
            ),
            "",
            "Second process, first fit / warm fit: "
            f"**{t['second_process_ratio'][0]:.1f}×** (target "
            f"≤ {t['second_process_ratio'][1]:g}; export off: "
            f"{r['second_process_ratio_export_off']:.1f}×). First-ever fit / 16 SVC-W fits "
            f"({r['svc16']['median']:.2f} s): **{t['first_ever_vs_svc16'][0]:.1f}×** (target ≤ "
            f"{t['first_ever_vs_svc16'][1]:g}; export off: "
            f"{r['first_ever_vs_svc16_export_off']:.1f}×).",
        ]
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--out", default=str(C.out_path("export_latency")))
    ap.add_argument("--save", action="store_true", help="also bench/results/export_latency.json")
    args = ap.parse_args(argv)
    os.environ["JAXRANK_NO_COMPILATION_CACHE"] = "1"  # this process writes no cache entries
    C.limit_blas()
    env = C.header("export_latency", f"m = {args.m}, float32, 16 λ")
    t0 = time.perf_counter()
    res = run(args.m, args.repeats, args.timeout)
    for k, (v, lim) in res["targets"].items():
        print(f"{k}: {v:.2f} (target <= {lim})")
    report = {"benchmark": "export_latency", "env": env, "result": res,
              "seconds": time.perf_counter() - t0}  # fmt: skip
    C.write_report(report, args.out, "export_latency.json" if args.save else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
