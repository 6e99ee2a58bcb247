"""CPU sort cost: which exact sort should a Newton step use? (issue 6, item 5).

Every Newton step of the sorted-window objective (DESIGN §3) sorts scores once; the λ grid and
the CG steps reuse the windows. DESIGN §5 found sorting, not the products, to be the CPU
bottleneck. This bench times, at m = 10⁴, 10⁵, 10⁶ float32 scores (``--quick``: 10⁴):

- ``argsort``: ``jnp.argsort`` (stable);
- ``sort_values``: ``jnp.sort`` — values only, no permutation (the cost floor of an XLA sort;
  checked against the reference's sorted values, not a candidate for "fastest exact");
- ``lax_payload``: ``lax.sort((x, iota), num_keys=1)`` (XLA's default, *not* stable), and
  ``lax_payload_stable`` (``is_stable=True``) and ``lax_two_keys`` (``num_keys=2``: ties broken
  by the index, exact whatever the algorithm);
- ``host_argsort``: ``jax.pure_callback`` to ``np.argsort(kind="stable")``;
- ``host_key64``: ``jax.pure_callback`` sorting unique uint64 keys (order-preserving bits of
  the float in the high word, the index in the low word) with numpy's default (SIMD where
  available) unstable sort — unique keys make any sort exact;
- incremental re-sorting: the scores ``x1 = x0 + step`` after a small step from ``x0`` whose
  stable permutation ``p0`` is known; the nearly sorted ``x1[p0]`` is re-sorted and composed
  with ``p0``: ``incr_lax_two_keys`` (``lax.sort((x1[p0], p0), num_keys=2)``, exact),
  ``incr_lax_stable`` (``num_keys=1`` stable: ties come out in ``p0``'s order, so exact only
  when ``p0`` orders every tie of ``x1`` by index), ``incr_host_argsort``
  (``p0[np.argsort(x1[p0], kind="stable")]``, same caveat; numpy's stable sort is a timsort,
  which runs in near-linear time on presorted runs), ``incr_host_key64`` (the uint64 keys of
  ``(x1[p0], p0)`` by the stable timsort: exact and run-adaptive).

Every variant runs jitted on ``x1`` (``p0`` an argument for the incremental ones) and is checked
against ``np.argsort(x1, kind="stable")`` — element for element, ties broken by index. The
scores are standard normal float32 with ties (:func:`make_scores`: groups of duplicates that
stay tied, and 1 % rounded to multiples of 1/64 whose ties come and go with the step; at large
m float32 collisions add more). ``step`` is the
standard deviation of the Gaussian perturbation relative to that of the scores (``--steps``,
default 1e-2, 1e-4, 1e-6: an early, a middle and a late Newton step); ``disorder`` (fraction of
adjacent descents in ``x1[p0]``) and ``mean_displacement`` (mean rank change from ``x0`` to
``x1``) say how presorted the incremental input is. The full sorts are timed on the scores after
the first step (their cost does not depend on it).

For context, jaxrank's actual per-step sort work: :func:`jaxrank.pairwise.windows` at m+ = ρm
positives (ρ = 1 % below m = 10⁶, 0.1 % from 10⁶ on, as in ``bench/core.py``) and m− = m − m+
negatives. It sorts only the positives and bisects every negative into them.

Timings: medians of at least ``--repeats`` blocked calls after a warm-up call (compile), more
(up to 50) while they fit in ``--time-budget`` seconds per variant. The machine
is shared by other jobs: compare the variants within one run (ratios), not absolute times.

Usage::

    python bench/sort_cost.py                 # m = 1e4, 1e5, 1e6 (about a minute)
    python bench/sort_cost.py --quick         # m = 1e4, one step (CI smoke test)
    python bench/sort_cost.py --sizes 100000 --steps 1e-3

Writes ``bench/out/sort_cost.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import _common as C
import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import pairwise
from jaxrank.losses import smoothed_hinge

SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (10_000,)
QUICK_STEPS = (1e-4,)
SEED = 0
STEPS = (1e-2, 1e-4, 1e-6)
TIE_FRACTION = 0.01
TIE_GRID = 64.0
EPS = 0.5


def rho_for(m: int) -> float:
    """ρ = 1 % below m = 10⁶, 0.1 % from 10⁶ on (as ``bench/core.py``)."""
    return 0.01 if m < 1_000_000 else 0.001


# ---------------------------------------------------------------------------- data


def make_scores(m: int, step: float, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """``(x0, x1)``: float32 scores before and after a small Gaussian step, with ties.

    Two kinds of ties, on 1 % of the entries each: groups of 4 equal scores in both ``x0`` and
    ``x1`` (duplicate rows: tied at every step), and scores rounded to multiples of 1/64 (ties
    that appear and disappear with the step, as float32 collisions do at large m).
    """
    rng = np.random.default_rng(seed)
    x0 = rng.standard_normal(m).astype(np.float32)
    x1 = (x0 + step * rng.standard_normal(m)).astype(np.float32)
    n = max(4, int(TIE_FRACTION * m))
    idx = rng.choice(m, size=2 * n, replace=False)
    dup, rounded = idx[:n], idx[n:]
    for x in (x0, x1):
        x[dup] = x[dup[(np.arange(n) // 4) * 4]]
        x[rounded] = np.round(x[rounded] * TIE_GRID) / TIE_GRID
    return x0, x1


# ---------------------------------------------------------------------------- host sorts


def _key64(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Unique uint64 keys ordered as ``(x, idx)``: the float's order-preserving bits, then idx.

    Negative floats have all bits flipped, non-negative ones only the sign bit, so unsigned
    integer order is float order; ``x + 0`` turns −0 into +0 first (they compare equal).
    """
    bits = (np.asarray(x, np.float32) + np.float32(0)).view(np.uint32)
    flip = np.where(bits >> 31, np.uint32(0xFFFFFFFF), np.uint32(0x80000000))
    return ((bits ^ flip).astype(np.uint64) << np.uint64(32)) | idx.astype(np.uint64)


def _np_argsort_stable(x):
    # callbacks receive jax Arrays: np.argsort would dispatch to their .argsort method (XLA)
    return np.argsort(np.asarray(x), axis=-1, kind="stable").astype(np.int32)


def _np_key64_sort(x):
    x = np.asarray(x)
    idx = np.arange(x.shape[-1], dtype=np.uint32)
    keys = np.sort(_key64(x, np.broadcast_to(idx, x.shape)), axis=-1)
    return (keys & np.uint64(0xFFFFFFFF)).astype(np.int32)


def _np_key64_timsort(y, p0):
    keys = np.sort(_key64(np.asarray(y), np.asarray(p0).view(np.uint32)), axis=-1, kind="stable")
    return (keys & np.uint64(0xFFFFFFFF)).astype(np.int32)


def _perm_shape(x):
    return jax.ShapeDtypeStruct(x.shape, jnp.int32)


def _callback(fn, x, *args):
    return jax.pure_callback(fn, _perm_shape(x), x, *args, vmap_method="broadcast_all")


# ---------------------------------------------------------------------------- variants


def _iota(x):
    return jax.lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)


def full_variants() -> dict:
    """Sorts of the current scores ``x`` alone: name -> jitted ``x -> perm`` (or values)."""
    return {
        "argsort": jax.jit(lambda x: jnp.argsort(x, stable=True).astype(jnp.int32)),
        "sort_values": jax.jit(jnp.sort),
        "lax_payload": jax.jit(lambda x: jax.lax.sort((x, _iota(x)), num_keys=1)[1]),
        "lax_payload_stable": jax.jit(
            lambda x: jax.lax.sort((x, _iota(x)), num_keys=1, is_stable=True)[1]
        ),
        "lax_two_keys": jax.jit(lambda x: jax.lax.sort((x, _iota(x)), num_keys=2)[1]),
        "host_argsort": jax.jit(lambda x: _callback(_np_argsort_stable, x)),
        "host_key64": jax.jit(lambda x: _callback(_np_key64_sort, x)),
    }


def _incr_lax(num_keys: int):
    def f(x1, p0):
        y = x1[p0]
        return jax.lax.sort((y, p0), num_keys=num_keys, is_stable=True)[1]

    return jax.jit(f)


def _incr_host_argsort(x1, p0):
    return p0[_callback(_np_argsort_stable, x1[p0])]


def _incr_host_key64(x1, p0):
    return _callback(_np_key64_timsort, x1[p0], p0)


def incremental_variants() -> dict:
    """Re-sorts from the previous permutation: name -> jitted ``(x1, p0) -> perm``."""
    return {
        "incr_lax_two_keys": _incr_lax(2),
        "incr_lax_stable": _incr_lax(1),
        "incr_host_argsort": jax.jit(_incr_host_argsort),
        "incr_host_key64": jax.jit(_incr_host_key64),
    }


@jax.jit
def _windows(fp, fn):
    loss = jax.tree.map(lambda v: jnp.asarray(v, fp.dtype), smoothed_hinge(EPS))
    return pairwise.windows(fp, fn, loss)


# ---------------------------------------------------------------------------- one size


def _time(fn, *args, repeats: int, budget: float) -> dict:
    """Median of at least ``repeats`` blocked calls, more (≤ 50) while they fit in ``budget`` s:
    fast calls on a loaded machine need many repeats for a stable median."""
    _, t = C.time_first(fn, *args)  # compile
    _, t = C.time_first(fn, *args)
    n = int(min(50, max(repeats, budget // max(t, 1e-9))))
    return C.time_median(fn, *args, repeats=n, warmup=0)


def _check(name: str, out, x1: np.ndarray, ref: np.ndarray) -> dict:
    """Exactness against the stable reference permutation (values only for ``sort_values``)."""
    out = np.asarray(out)
    if name == "sort_values":
        return {"exact": None, "values_equal": bool(np.array_equal(out, x1[ref]))}
    wrong = int(np.sum(out != ref))
    # a wrong permutation may still sort the values (ties in another order)
    sorts = bool(np.array_equal(x1[out], x1[ref]))
    return {"exact": wrong == 0, "mismatches": wrong, "sorts_values": sorts}


def _summary(times: dict, checks: dict, base: float) -> dict:
    med = {k: t["median"] for k, t in times.items()}
    exact = [k for k, c in checks.items() if c.get("exact")]
    best = min(exact, key=med.__getitem__) if exact else None
    return {
        "times": times,
        "median": med,
        "checks": checks,
        "exact_variants": exact,
        "fastest_exact": best,
        "relative_to_argsort": {k: v / base for k, v in med.items()},
    }


def run_size(m: int, repeats: int, steps: list[float], budget: float) -> dict:
    """Full sorts of the scores after ``steps[0]``, incremental re-sorts after each step, and
    ``pairwise.windows``; every permutation checked against numpy's stable argsort."""
    x0, x1 = make_scores(m, steps[0])
    ref0 = np.argsort(x0, kind="stable").astype(np.int32)
    ref = np.argsort(x1, kind="stable").astype(np.int32)
    jx1, jp0 = jnp.asarray(x1), jnp.asarray(ref0)
    times, checks = {}, {}
    for name, fn in full_variants().items():
        checks[name] = _check(name, fn(jx1), x1, ref)
        times[name] = _time(fn, jx1, repeats=repeats, budget=budget)
    # jaxrank's own per-step sort: the first m+ scores are the positives (the fit's row order)
    n_pos = max(1, round(rho_for(m) * m))
    fp, fn_ = jnp.asarray(x1[:n_pos]), jnp.asarray(x1[n_pos:])
    t_windows = _time(_windows, fp, fn_, repeats=repeats, budget=budget)
    base = times["argsort"]["median"]
    res = {"m": m, "tied_values": int(m - np.unique(x1).size)}
    res["full"] = _summary(times, checks, base)
    res["windows"] = {
        "m_pos": n_pos,
        "m_neg": m - n_pos,
        "time": t_windows,
        "relative_to_argsort": t_windows["median"] / base,
    }

    res["incremental"] = []
    for step in steps:
        x0, x1 = make_scores(m, step)  # same x0 and tie set for every step (same seed)
        ref = np.argsort(x1, kind="stable").astype(np.int32)
        jx1 = jnp.asarray(x1)
        times, checks = {}, {}
        for name, fn in incremental_variants().items():
            checks[name] = _check(name, fn(jx1, jp0), x1, ref)
            times[name] = _time(fn, jx1, jp0, repeats=repeats, budget=budget)
        inc = {"step": step, "disorder": float(np.mean(np.diff(x1[ref0]) < 0))}
        # mean |rank change| from x0 to x1: how far the presorted input is from sorted
        rank0 = np.empty(m, np.int64)
        rank0[ref0] = np.arange(m)
        inc["mean_displacement"] = float(np.mean(np.abs(rank0[ref] - np.arange(m))))
        inc.update(_summary(times, checks, base))
        res["incremental"].append(inc)

    full = res["full"]
    cands = [(full["median"][full["fastest_exact"]], full["fastest_exact"], None)]
    for inc in res["incremental"]:
        if inc["fastest_exact"] is not None:
            cands.append((inc["median"][inc["fastest_exact"]], inc["fastest_exact"], inc["step"]))
    t, name, step = min(cands, key=lambda c: c[0])
    res["fastest_exact"] = {"name": name, "step": step, "median": t, "speedup_vs_argsort": base / t}
    res["fastest_exact_full"] = {
        "name": full["fastest_exact"],
        "median": full["median"][full["fastest_exact"]],
        "speedup_vs_argsort": base / full["median"][full["fastest_exact"]],
    }
    return res


# ---------------------------------------------------------------------------- printing


def _cell(summary: dict, name: str) -> str:
    mark = "!" if summary["checks"][name].get("exact") is False else " "
    t = C.fmt_seconds(summary["median"][name])
    return f"{t} ({summary['relative_to_argsort'][name]:.2f}){mark}"


def print_results(results: list[dict]) -> None:
    print("\nmedian times (x jnp.argsort at the same m; '!' = not the stable permutation)")
    rows = [["variant"] + [f"m = {r['m']:.0e}" for r in results]]
    for name in results[0]["full"]["median"]:
        rows.append([name] + [_cell(r["full"], name) for r in results])
    rows.append(
        ["pairwise_windows"]
        + [
            f"{C.fmt_seconds(r['windows']['time']['median'])} "
            f"({r['windows']['relative_to_argsort']:.2f}) m+={r['windows']['m_pos']}"
            for r in results
        ]
    )
    for i, inc0 in enumerate(results[0]["incremental"]):
        for name in inc0["median"]:
            rows.append(
                [f"{name} (step {inc0['step']:g})"]
                + [_cell(r["incremental"][i], name) for r in results]
            )
    widths = [max(len(row[j]) for row in rows) for j in range(len(rows[0]))]
    for row in rows:
        cells = (c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))
        print(row[0].ljust(widths[0]) + "  " + "  ".join(cells))
    for r in results:
        f, fe = r["fastest_exact_full"], r["fastest_exact"]
        inc = ", ".join(
            f"step {i['step']:g}: disorder {i['disorder']:.3f}, displacement "
            f"{i['mean_displacement']:.1f}"
            for i in r["incremental"]
        )
        print(
            f"m = {r['m']}: fastest exact full sort {f['name']} ({f['speedup_vs_argsort']:.1f}x "
            f"argsort); overall {fe['name']}"
            + (f" at step {fe['step']:g}" if fe["step"] is not None else "")
            + f" ({fe['speedup_vs_argsort']:.1f}x); {r['tied_values']} tied values; {inc}"
        )


# ---------------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=None, help="m values (1e4-1e6)")
    p.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES} (CI)")
    p.add_argument("--repeats", type=int, default=5, help="timed repeats (median)")
    p.add_argument("--steps", type=float, nargs="+", default=None, help="relative score steps")
    p.add_argument(
        "--time-budget",
        type=float,
        default=None,
        help="seconds per variant: more repeats (<= 50) while they fit (default 0.5; quick 0.05)",
    )
    p.add_argument("--out", type=Path, default=C.OUT_DIR / "sort_cost.json", help="JSON output")
    args = p.parse_args(argv)
    if args.sizes is None:
        args.sizes = list(QUICK_SIZES if args.quick else SIZES)
    if args.steps is None:
        args.steps = list(QUICK_STEPS if args.quick else STEPS)
    if args.time_budget is None:
        args.time_budget = 0.05 if args.quick else 0.5
    if min(args.sizes) < 2:
        p.error("sizes must be >= 2")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    env = C.env_info()
    print(
        f"jaxrank sort cost: {env['platform']} ({env['device_kind']}), jax {env['jax']}, "
        f"numpy {env['numpy']}, {env['cpu_count']} CPUs, float32, sizes {args.sizes}",
        flush=True,
    )
    t0 = time.perf_counter()
    results = []
    for m in args.sizes:
        results.append(run_size(m, args.repeats, args.steps, args.time_budget))
        print(f"  m = {m}: done ({time.perf_counter() - t0:.1f} s)", flush=True)
    print_results(results)
    report = {
        "benchmark": "sort_cost",
        "env": env,
        "settings": {
            "sizes": args.sizes,
            "repeats": args.repeats,
            "steps": args.steps,
            "time_budget": args.time_budget,
            "seed": SEED,
            "dtype": "float32",
            "tie_fraction": TIE_FRACTION,
            "tie_grid": TIE_GRID,
            "reference": "np.argsort(x1, kind='stable')",
            "quick": args.quick,
        },
        "results": results,
        "seconds": time.perf_counter() - t0,
    }
    path = C.write_json(args.out, report)
    print(f"\nwrote {path} ({report['seconds']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
