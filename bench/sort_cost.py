"""CPU sort cost: which exact sort should a Newton step use? (issue 6, item 5).

Every Newton step of the sorted-window objective (docs/design.md §3) sorts scores once (the λ grid
and the CG steps reuse the windows), and docs/design.md §5 found sorting, not the products, to be
the CPU bottleneck. This times the sorts of :func:`full_variants` and, from the stable permutation
``p0`` of the scores ``x0`` before a small step, the re-sorts of the nearly sorted ``x1[p0]`` of
:func:`incremental_variants`, jitted, at m = 10⁴, 10⁵, 10⁶ float32 scores, each checked element for
element against ``np.argsort(x1, kind="stable")`` (ties broken by index).

Scores (:func:`make_scores`): standard normal float32 with ties on 1 % of the entries each:
groups of 4 equal scores in both ``x0`` and ``x1`` (duplicate rows, tied at every step) and
scores rounded to multiples of 1/64 (ties that come and go with the step, as float32
collisions do). ``step`` is the standard deviation of the Gaussian step relative to the scores'
(``--steps``: an early, a middle and a late Newton step); ``disorder`` (adjacent descents in
``x1[p0]``) and ``mean_displacement`` (mean rank change) say how presorted ``x1[p0]`` is. For
context, jaxrank's own per-step sort work: :func:`jaxrank.pairwise.windows` at m+ = ρm (ρ as in
``bench/core.py``), which sorts only the positives and bisects every negative into them.
"""

from __future__ import annotations

import sys
import time

import _common as C
import _data as DH
import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import pairwise

NAME = "sort_cost"
SEED = 0
FULL = dict(sizes=(10_000, 100_000, 1_000_000), steps=(1e-2, 1e-4, 1e-6), time_budget=0.5)
QUICK = dict(sizes=(10_000,), steps=(1e-4,), time_budget=0.05)
TIE_FRACTION, TIE_GRID, EPS = 0.01, 64.0, 0.5  # EPS: the smoothed hinge of the windows


def make_scores(m: int, step: float, seed: int = SEED) -> tuple[np.ndarray, np.ndarray]:
    """``(x0, x1)``: float32 scores before and after a small Gaussian step, with ties (notes)."""
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


def _key64(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Unique uint64 keys ordered as ``(x, idx)``: the float's order-preserving bits, then idx."""
    # negative floats have all bits flipped, non-negative ones only the sign bit, so unsigned
    # integer order is float order; x + 0 turns −0 into +0 first (they compare equal)
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


def _callback(fn, x, *args):
    shape = jax.ShapeDtypeStruct(x.shape, jnp.int32)
    return jax.pure_callback(fn, shape, x, *args, vmap_method="broadcast_all")


def full_variants() -> dict:
    """Sorts of the current scores ``x`` alone: name -> jitted ``x -> perm`` (or values)."""
    iota = lambda x: jax.lax.broadcasted_iota(jnp.int32, x.shape, x.ndim - 1)
    lax = lambda keys, **kw: jax.jit(lambda x: jax.lax.sort((x, iota(x)), num_keys=keys, **kw)[1])
    return {
        "argsort": jax.jit(lambda x: jnp.argsort(x, stable=True).astype(jnp.int32)),
        # values only: the cost floor of an XLA sort, checked against the sorted values
        "sort_values": jax.jit(jnp.sort),
        "lax_payload": lax(1),  # XLA's default, not stable
        "lax_payload_stable": lax(1, is_stable=True),
        "lax_two_keys": lax(2),  # ties broken by the index: exact whatever the algorithm
        "host_argsort": jax.jit(lambda x: _callback(_np_argsort_stable, x)),
        # unique uint64 keys (float bits, then index) by numpy's default (SIMD where available)
        # unstable sort: unique keys make any sort exact
        "host_key64": jax.jit(lambda x: _callback(_np_key64_sort, x)),
    }


def incremental_variants() -> dict:
    """Re-sorts from the previous permutation: name -> jitted ``(x1, p0) -> perm``."""
    lax = lambda k: jax.jit(lambda y, p0: jax.lax.sort((y[p0], p0), num_keys=k, is_stable=True)[1])
    # num_keys=1 stable and the host argsort: ties come out in p0's order, so exact only when
    # p0 orders every tie of x1 by index; numpy's stable sort is a timsort, near-linear on
    # presorted runs (incr_host_key64: exact and run-adaptive)
    return {
        "incr_lax_two_keys": lax(2),
        "incr_lax_stable": lax(1),
        "incr_host_argsort": jax.jit(lambda x1, p0: p0[_callback(_np_argsort_stable, x1[p0])]),
        "incr_host_key64": jax.jit(lambda x1, p0: _callback(_np_key64_timsort, x1[p0], p0)),
    }


def _check(name: str, out, x1: np.ndarray, ref: np.ndarray) -> dict:
    """Exactness against the stable reference permutation (values only for ``sort_values``)."""
    out = np.asarray(out)
    if name == "sort_values":
        return {"exact": None, "values_equal": bool(np.array_equal(out, x1[ref]))}
    wrong = int(np.sum(out != ref))
    # a wrong permutation may still sort the values (ties in another order)
    sorts = bool(np.array_equal(x1[out], x1[ref]))
    return {"exact": wrong == 0, "mismatches": wrong, "sorts_values": sorts}


def _variants(variants: dict, args: tuple, x1, ref, base, timing: dict) -> dict:
    """Each variant checked and timed on ``args``, against ``base`` (default: its argsort)."""
    checks, times = {}, {}
    for name, fn in variants.items():
        checks[name] = _check(name, fn(*args), x1, ref)
        times[name] = C.time_budgeted(fn, *args, **timing)
    med = {k: t["median"] for k, t in times.items()}
    base = base or med["argsort"]
    exact = [k for k, c in checks.items() if c.get("exact")]
    out = {"times": times, "median": med, "checks": checks, "exact_variants": exact}
    out["fastest_exact"] = min(exact, key=med.__getitem__) if exact else None
    return out | {"relative_to_argsort": {k: v / base for k, v in med.items()}}


def run_size(m: int, repeats: int, steps: list[float], budget: float, t0: float) -> dict:
    timing = dict(repeats=repeats, budget=budget)
    x0, x1 = make_scores(m, steps[0])
    ref0, ref = (np.argsort(x, kind="stable").astype(np.int32) for x in (x0, x1))
    full = _variants(full_variants(), (jnp.asarray(x1),), x1, ref, None, timing)
    base = full["median"]["argsort"]
    # jaxrank's own per-step sort: the first m+ scores are the positives (the fit's row order)
    n_pos = max(1, round(DH.rho_for(m) * m))
    windows = jax.jit(lambda fp, fn: pairwise.windows(fp, fn, DH.hinge_loss(EPS, fp.dtype)))
    t = C.time_budgeted(windows, jnp.asarray(x1[:n_pos]), jnp.asarray(x1[n_pos:]), **timing)
    res = {"m": m, "tied_values": int(m - np.unique(x1).size), "full": full}
    res["windows"] = {"m_pos": n_pos, "m_neg": m - n_pos, "time": t}
    res["windows"]["relative_to_argsort"] = t["median"] / base
    rank0 = np.argsort(ref0)  # the rank of each score in x0
    res["incremental"] = incs = []
    for step in steps:
        x1 = make_scores(m, step)[1]  # same x0 and tie set for every step (same seed)
        ref = np.argsort(x1, kind="stable").astype(np.int32)
        inc = {"step": step, "disorder": float(np.mean(np.diff(x1[ref0]) < 0))}
        # mean |rank change| from x0 to x1: how far the presorted input is from sorted
        inc["mean_displacement"] = float(np.mean(np.abs(rank0[ref] - np.arange(m))))
        args = (jnp.asarray(x1), jnp.asarray(ref0))
        inc |= _variants(incremental_variants(), args, x1, ref, base, timing)
        incs.append(inc)
    best = full["fastest_exact"]
    cands = [(full["median"][best], best, None)]
    cands += [(i["median"][n], n, i["step"]) for i in incs if (n := i["fastest_exact"])]
    t, name, step = min(cands, key=lambda c: c[0])
    res["fastest_exact"] = {"name": name, "step": step, "median": t, "speedup_vs_argsort": base / t}
    t = full["median"][best]
    res["fastest_exact_full"] = {"name": best, "median": t, "speedup_vs_argsort": base / t}
    print(f"  m = {m}: done ({time.perf_counter() - t0:.1f} s)", flush=True)
    return res


def _cell(s: dict, name: str) -> str:
    mark = "!" if s["checks"][name].get("exact") is False else " "
    return f"{C.fmt_seconds(s['median'][name])} ({s['relative_to_argsort'][name]:.2f}){mark}"


def print_results(results: list[dict]) -> None:
    wins = [r["windows"] for r in results]
    cells = lambda summaries, n: [_cell(s, n) for s in summaries]
    rows = [[n, *cells([r["full"] for r in results], n)] for n in results[0]["full"]["median"]]
    win = lambda w: f"{C.fmt_seconds(w['time']['median'])} ({w['relative_to_argsort']:.2f})"
    rows.append(["pairwise_windows", *(f"{win(w)} m+={w['m_pos']}" for w in wins)])
    for i, inc in enumerate(results[0]["incremental"]):
        incs = [r["incremental"][i] for r in results]
        rows += [[f"{n} (step {inc['step']:g})", *cells(incs, n)] for n in inc["median"]]
    title = "median times (x jnp.argsort at the same m; '!' = not the stable permutation)"
    C.print_table(title, ["variant"] + [f"m = {r['m']:.0e}" for r in results], rows, left=1)
    for r in results:
        f, fe = r["fastest_exact_full"], r["fastest_exact"]
        at = f" at step {fe['step']:g}" if fe["step"] is not None else ""
        print(
            f"m = {r['m']}: fastest exact full sort {f['name']} ({f['speedup_vs_argsort']:.1f}x "
            f"argsort); overall {fe['name']}{at} ({fe['speedup_vs_argsort']:.1f}x); "
            f"{r['tied_values']} tied values (disorder, displacement per step: JSON)"
        )


def parse_args(argv=None):
    quick = f"sizes {QUICK['sizes']} (CI)"
    p = C.parser(NAME, __doc__, quick, sizes="m values (1e4-1e6)", repeats=5)
    p.add_argument("--steps", type=float, nargs="+", default=None, help="relative score steps")
    p.add_argument("--time-budget", type=float, default=None, help="s a variant (0.5; quick 0.05)")
    args = C.mode_defaults(p.parse_args(argv), QUICK, FULL)
    if min(args.sizes) < 2:
        p.error("sizes must be >= 2")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    run = lambda m: run_size(m, args.repeats, args.steps, args.time_budget, t0)
    settings = {k: getattr(args, k) for k in ("sizes", "repeats", "steps", "time_budget")}
    settings |= dict(seed=SEED, dtype="float32", tie_fraction=TIE_FRACTION, tie_grid=TIE_GRID)
    settings |= {"reference": "np.argsort(x1, kind='stable')", "quick": args.quick}
    detail = f"numpy {np.__version__}, float32, sizes {args.sizes}"
    return C.sizes_main(NAME, None, args, run, [], settings, print_results, detail)


if __name__ == "__main__":
    sys.exit(main())
