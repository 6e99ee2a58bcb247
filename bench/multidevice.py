"""Multi-device scaling of a data-parallel fit (issue "Scale", item 3).

For n = 1, 2, 4, … devices (one subprocess each), fits RankRC on the same data with ``X``
sharded by rows over an n-device mesh and reports the fit time (median of repeats, compile
excluded), the speed-up against one device and the objective's relative difference from the
1-device fit. On a CPU the devices come from ``--xla_force_host_platform_device_count``: they
share the machine's cores, so this measures the overhead of the sharded program (gathers of the
scores for the sort, the reduction of ``g @ K``), not a speed-up. ``--real``: the real devices of
a multi-GPU host.
"""

import argparse
import json
import os
import subprocess
import sys

import _common as C
import jax
import numpy as np

import jaxrank


def child(args) -> dict:
    n, devices = args.child, jax.devices()[: args.child]
    assert len(devices) == n, f"asked for {n} devices, have {jax.devices()}"
    X, y = jaxrank.datasets.make_rare_class(args.m, args.rho, 0.75, d=args.d, seed=0)
    lams = 2.0 ** np.arange(-20, 11, 2) if args.grid else np.asarray(2.0**-8)
    if n > 1:
        mesh = jax.sharding.Mesh(np.asarray(devices), ("rows",))
        rows = jax.sharding.PartitionSpec("rows", None)
        X = jax.device_put(X, jax.sharding.NamedSharding(mesh, rows))
    fit = lambda: jaxrank.fit_rankrc(X, y, lams)
    model, first = C.time_first(fit)
    t = C.time_median(fit, repeats=args.repeats, warmup=0)
    info = {k: np.atleast_1d(getattr(model.info, k)).tolist() for k in ("objective", "iterations")}
    out = {"devices": n, "first": first, "times": t["runs"], "median": t["median"], **info}
    return {**out, "env": C.env_info()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag, default in (("--m", 20000), ("--rho", 0.01), ("--d", 40), ("--repeats", 3)):
        ap.add_argument(flag, type=type(default), default=default)
    ap.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--grid", action="store_true", help="the 16-value λ grid, not one λ")
    ap.add_argument("--real", action="store_true", help="use the real devices (GPU hosts)")
    ap.add_argument("--quick", action="store_true", help="m = 2000, 1 repeat")
    ap.add_argument("--out", default=None)
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.m, args.repeats, args.devices = 2000, 1, [1, 2]
    if args.child is not None:
        json.dump(child(args), sys.stdout)
        return 0
    rows = []
    for n in args.devices:
        flags = os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={n}"
        forced = {} if args.real else {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags.strip()}
        cmd = [sys.executable, __file__, "--child", str(n), *(["--grid"] if args.grid else [])]
        cmd += [f"--{k}={getattr(args, k)}" for k in ("m", "rho", "d", "repeats")]
        proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **forced})
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
            return proc.returncode
        rows.append(r := json.loads(proc.stdout))
        r["speedup"] = rows[0]["median"] / r["median"]
        rel = abs(np.divide(r["objective"], rows[0]["objective"]) - 1).max()
        r["objective_rel_diff"] = float(rel)
    result = {"bench": "multidevice", **{k: vars(args)[k] for k in ("m", "rho", "d", "grid")}}
    result.update(forced_host_devices=not args.real, env=rows[0]["env"], rows=rows)
    out = C.write_json(args.out or C.out_path("multidevice", args.quick), result)
    what = "16-λ grid" if args.grid else "λ = 2^-8"
    print(f"multi-device fit, m = {args.m}, rho = {args.rho}, d = {args.d}, {what}")
    fmt = {"devices": "", "median": ".2f", "speedup": ".2f", "objective_rel_diff": ".1e"}
    head = "devices | fit (median s) | speed-up | objective rel. diff vs 1 device"
    table = C.md_table(head, [[format(r[k], f) for k, f in fmt.items()] for r in rows])
    print(*table, f"JSON: {out}", sep="\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
