"""Multi-device scaling of a data-parallel fit (issue "Scale", item 3).

For n = 1, 2, 4, … devices, fits RankRC on the same data with ``X`` sharded by rows over an
n-device mesh (``jax.device_put(X, NamedSharding(mesh, P("rows", None)))``) and reports the fit
time (median of repeats, compile excluded), the speed-up against one device and the objective's
relative difference from the 1-device fit.

On a CPU the devices are made with ``--xla_force_host_platform_device_count`` (each size runs in
its own subprocess): they share the machine's cores, so this measures the overhead of the
sharded program (gathers of the scores for the sort, the reduction of ``g @ K``), not a speed-up.
On a multi-GPU host the same script uses the real devices (``--real``).

Usage::

    python bench/multidevice.py --quick           # CI size
    python bench/multidevice.py --m 100000 --devices 1 2 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np


def child(args) -> dict:
    import jax
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import jaxrank

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import env_info

    n = args.child
    devices = jax.devices()[:n]
    assert len(devices) == n, f"asked for {n} devices, have {jax.devices()}"
    X, y = jaxrank.datasets.make_rare_class(args.m, args.rho, 0.75, d=args.d, seed=0)
    lams = 2.0 ** np.arange(-20, 11, 2) if args.grid else np.asarray(2.0**-8)
    if n > 1:
        mesh = jax.sharding.Mesh(np.asarray(devices), ("rows",))
        Xin = jax.device_put(X, NamedSharding(mesh, P("rows", None)))
    else:
        Xin = X

    def run():
        model = jaxrank.fit_rankrc(Xin, y, lams)
        jax.block_until_ready(model.coef)
        return model

    t0 = time.perf_counter()
    model = run()
    first = time.perf_counter() - t0
    times = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        model = run()
        times.append(time.perf_counter() - t0)
    return {
        "devices": n,
        "first": first,
        "times": times,
        "median": float(np.median(times)),
        "objective": np.atleast_1d(np.asarray(model.info.objective)).tolist(),
        "iterations": np.atleast_1d(np.asarray(model.info.iterations)).tolist(),
        "env": env_info(),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=20000)
    ap.add_argument("--rho", type=float, default=0.01)
    ap.add_argument("--d", type=int, default=40)
    ap.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--grid", action="store_true", help="the 16-value λ grid, not one λ")
    ap.add_argument("--real", action="store_true", help="use the real devices (GPU hosts)")
    ap.add_argument("--quick", action="store_true", help="m = 2000, 1 repeat")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.m, args.repeats, args.devices = 2000, 1, [1, 2]
    if args.child is not None:
        json.dump(child(args), sys.stdout)
        return 0

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import OUT_DIR, write_json

    rows = []
    for n in args.devices:
        env = dict(os.environ)
        if not args.real:
            env["JAX_PLATFORMS"] = "cpu"
            env["XLA_FLAGS"] = (
                env.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={n}"
            ).strip()
        cmd = [sys.executable, __file__, "--child", str(n), "--m", str(args.m), "--rho",
               str(args.rho), "--d", str(args.d), "--repeats", str(args.repeats)]  # fmt: skip
        cmd += ["--grid"] if args.grid else []
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
            return proc.returncode
        rows.append(json.loads(proc.stdout))
        print(f"  {n} device(s): {rows[-1]['median']:.2f} s", file=sys.stderr)
    base = rows[0]
    for r in rows:
        r["speedup"] = base["median"] / r["median"]
        r["objective_rel_diff"] = float(
            np.max(np.abs(np.asarray(r["objective"]) / np.asarray(base["objective"]) - 1))
        )
    result = {
        "bench": "multidevice",
        "m": args.m,
        "rho": args.rho,
        "d": args.d,
        "grid": args.grid,
        "forced_host_devices": not args.real,
        "env": base["env"],
        "rows": rows,
    }
    out = args.out or OUT_DIR / ("multidevice_quick.json" if args.quick else "multidevice.json")
    write_json(out, result)
    what = "16-λ grid" if args.grid else "λ = 2^-8"
    print(f"\nmulti-device fit, m = {args.m}, rho = {args.rho}, d = {args.d}, {what}")
    print("| devices | fit (median s) | speed-up | objective rel. diff vs 1 device |")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['devices']} | {r['median']:.2f} | {r['speedup']:.2f} | "
              f"{r['objective_rel_diff']:.1e} |")  # fmt: skip
    print(f"JSON: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
