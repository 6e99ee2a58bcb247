"""Core benchmark: RankRC end to end (issue "Core: RankRC end to end"; README "Numbers").

Data: ``_data.scale_data`` (``make_rare_class(m, ρ, t=0.75, d=40, seed=0)``, standardised; ρ = 1 %
below m = 10⁶, 0.1 % from 10⁶), RankRC basis (|R| = m+), Gaussian kernel with the paper's σ²,
float32, smoothed hinge ε = 0.5, tol 1e-6. Each size runs in its own subprocess: peak memory is
per size and every first call is a cold compile. Per size:

1. **fit** at λ = 2⁻⁸ (each call builds the kernel block), and memory: the peak RSS after the fit
   stages against the bytes of ``K_{·R}``; ``(peak-base)/K`` near 1 means the block is the only
   big array (base: the RSS before the first fit; at small m compilation dominates both).
2. **λ grid** 2^{-20,-18,…,10} on each of :data:`GRID_PATHS` and as 16 separate fits ("seq";
   ``--skip-seq``, and skipped from m = 10⁶), each rebuilding the block as a user looping over λ
   would; ``batch/seq`` below 1 means the grid path wins.
3. **products** on the fit's block (rows [positives; negatives]) with the objective closures:
   ``K@v``, ``g@K``, one Hv (windows of the fitted β, reused as in CG), one value+gradient;
   ``hvp/(Kv+gK)`` is the pairwise part's overhead on the two products an Hv needs (1 = free),
   ``hvp/stream`` the Hv against reading K twice at the best measured rate (``sum(K)`` or
   ``K@v``: the roofline of a memory-bound Hv); the same with 16 columns at the 16 grid
   solutions. ``copy GB/s`` (≤ 256 MiB) is for context only.
4. **naive** baseline while the m+ × m− pair matrix has ≤ 2·10⁸ entries: the objective with
   ``fp[:, None] - fn[None, :]`` differentiated by ``jax.grad`` and ``jax.jvp(jax.grad)`` (the Hv
   recomputes the forward pass: autodiff without hand-written window reuse); ``rel_diff`` is
   checked at a β perturbed off the optimum, where the gradient is not ~0.

A fit stage whose first call × ``--repeats`` exceeds ``--stage-budget`` seconds is repeated
fewer times (at least once; the JSON says how many). ``--quick`` (CI smoke test): m = 2000 and
5000 side by side (``--jobs 2``), so its timings share the cores. The README's m = 10⁶ numbers:
``python bench/core.py --sizes 1000000 --repeats 1 --skip-grid``.
"""

from __future__ import annotations

import functools
import sys
import time

import _common as C
import _data as DH
import jax
import jax.numpy as jnp
import numpy as np

import jaxrank
from jaxrank import internals
from jaxrank.kernels import kernel_block

NAME = "core"
DTYPE = "float32"
D, T_OVERLAP, SEED, EPS = 40, 0.75, 0, 0.5
LAM = 2.0**-8
LAM_GRID = 2.0 ** np.arange(-20, 11, 2)
FULL = dict(sizes=(10_000, 100_000, 1_000_000), jobs=1)
# --quick is a CI smoke test bounded by compile time (~25 s a size on 2 cores): its two sizes
# run side by side, so its timings share the cores and are not for comparison.
QUICK = dict(sizes=(2_000, 5_000), jobs=2)
NAIVE_MAX_PAIRS = 2e8
N_COLS = 16
_HI = jax.lax.Precision.HIGHEST
# The grid solvers compared: all 16 λ vmapped cold; the sequential warm path; the warm path
# in steps of 4 consecutive λ solved batched (each warm-started 4 places up the grid).
GRID_PATHS = {
    "batch": dict(path="batch"),
    "warm": dict(path="warm", chains=1),
    "warm4": dict(path="warm", chains=4),
}


def bench_grid(X, y, repeats: int, seq: bool, budget: float) -> tuple[object, dict]:
    """The 16-value λ grid on each of ``GRID_PATHS`` and (``seq``) one λ at a time."""
    out, models = {"lams": LAM_GRID.tolist()}, {}
    for name, kw in GRID_PATHS.items():
        fn = lambda kw=kw: jaxrank.fit(X, y, LAM_GRID, dtype=DTYPE, **kw)
        models[name], t = C.time_budget(fn, repeats, budget, record=True)
        out[name] = {"time": t, "info": DH.model_info(models[name])}
    if seq:
        fits = lambda: [jaxrank.fit(X, y, float(lam), dtype=DTYPE) for lam in LAM_GRID]
        fits, t = C.time_budget(fits, repeats, budget, record=True)
        infos = [DH.model_info(f) for f in fits]
        out["seq"] = {"time": t, "info": {k: [i[k] for i in infos] for k in infos[0]}}
        for name in GRID_PATHS:
            out[f"{name}/seq"] = out[name]["time"]["median"] / t["median"]
    return models["batch"], out


_matmul = jax.jit(lambda A, B: jnp.matmul(A, B, precision=_HI))
_read = jax.jit(jnp.sum)
_copy = jax.jit(lambda A: A * 2)


def build_block(X, y, model) -> dict:
    """The fit's kernel block: rows [positives; negatives] (padded as the fit pads), basis, K_RR."""
    (Xo, n_pos, n_neg), B = DH.ordered_rows(X, y, DTYPE), model.basis
    K, t_build = C.time_first(lambda: kernel_block(model.kernel, Xo, B, padded=True))
    Krr = jax.block_until_ready(model.kernel(B, B))
    blk = dict(K=K, Krr=Krr, n_pos=n_pos, n_neg=n_neg, build=t_build)
    return blk | {"loss": DH.hinge_loss(EPS, DTYPE)}


def bench_products(blk: dict, model, grid_model, repeats: int) -> dict:
    """K@v, g@K, Hv, value+grad (1 and 16 columns) and their roofline ratios."""
    K, Krr, loss = blk["K"], blk["Krr"], blk["loss"]
    st = dict(n_pos=blk["n_pos"], n_neg=blk["n_neg"])
    kv, kg = jax.random.split(jax.random.key(1))
    v, V = (jax.random.normal(kv, s, K.dtype) for s in [(K.shape[1],), (N_COLS, K.shape[1])])
    g, G = (jax.random.normal(kg, s, K.dtype) for s in [(K.shape[0],), (N_COLS, K.shape[0])])
    lam, lams = jnp.asarray(LAM, K.dtype), jnp.asarray(LAM_GRID, K.dtype)
    tm = lambda f, *a: C.time_median(f, *a, repeats=repeats)["median"]
    w = internals.objective_value(K, Krr, lam, model.coef, loss, **st)[2]
    # the 16 grid solutions, or (--skip-grid) 16 copies of the single-λ solution
    coefB = grid_model.coef if grid_model is not None else jnp.tile(model.coef, (N_COLS, 1))
    ws = internals.objective_value_batched(K, Krr, lams, coefB, loss, **st)[2]
    r = {
        "repeats": repeats,
        "block_build": blk["build"],
        "Kv": tm(_matmul, K, v),
        "gK": tm(_matmul, g, K),
        "hvp": tm(lambda: internals.objective_hvp(K, Krr, lam, w, v, loss, **st)),
        "value_grad": tm(lambda: internals.objective_value(K, Krr, lam, model.coef, loss, **st)),
        "KV": tm(_matmul, K, V.T),
        "GK": tm(_matmul, G, K),
        "hvp16": tm(lambda: internals.objective_hvp_batched(K, Krr, lams, ws, V, loss, **st)),
        "value_grad16": tm(
            lambda: internals.objective_value_batched(K, Krr, lams, coefB, loss, **st)
        ),
    }
    # streaming rates: sum(K) and K@v read rates, and a copy of a ≤ 256 MiB buffer
    kb, n = K.nbytes, min(K.nbytes, 256 * 2**20) // 4
    r["sum_K"] = t_read = tm(_read, K)
    r["read_GBps_sum"], r["read_GBps_matvec"] = kb / t_read / 1e9, kb / r["Kv"] / 1e9
    r["copy_GBps"] = 2 * n * 4 / tm(_copy, jnp.ones((n,), jnp.float32)) / 1e9
    r["stream_K_twice"] = 2 * kb / max(kb / t_read, kb / r["Kv"])
    r["stream_rule"] = "2*bytes(K) / max(bytes(K)/t(sum K), bytes(K)/t(K@v))"
    r["hvp/(Kv+gK)"] = r["hvp"] / (r["Kv"] + r["gK"])
    r["hvp/stream"] = r["hvp"] / r["stream_K_twice"]
    r["value_grad/(Kv+gK)"] = r["value_grad"] / (r["Kv"] + r["gK"])
    r["hvp16/(KV+GK)"] = r["hvp16"] / (r["KV"] + r["GK"])
    r["hvp16/stream"] = r["hvp16"] / r["stream_K_twice"]
    r["16*hvp/hvp16"] = N_COLS * r["hvp"] / r["hvp16"]
    return r


def _naive_objective(beta, K, Krr, lam, n_pos, n_neg):
    """The objective with the explicit m+ × m− pair matrix (smoothed hinge, ε = EPS)."""
    f = jnp.matmul(K, beta, precision=_HI)
    z = f[:n_pos, None] - f[None, n_pos : n_pos + n_neg]
    ell = jnp.where(z < 1 - 2 * EPS, 1 - EPS - z, jnp.where(z < 1, (1 - z) ** 2 / (4 * EPS), 0.0))
    reg = 0.5 * lam * jnp.vdot(beta, jnp.matmul(Krr, beta, precision=_HI))
    return jnp.sum(ell) / (n_pos * n_neg) + reg


@functools.partial(jax.jit, static_argnames=("n_pos", "n_neg"))
def _naive_vg(beta, K, Krr, lam, n_pos, n_neg):
    return jax.value_and_grad(_naive_objective)(beta, K, Krr, lam, n_pos, n_neg)


@functools.partial(jax.jit, static_argnames=("n_pos", "n_neg"))
def _naive_hvp(beta, v, K, Krr, lam, n_pos, n_neg):
    grad = lambda b: jax.grad(_naive_objective)(b, K, Krr, lam, n_pos, n_neg)
    return jax.jvp(grad, (beta,), (v,))[1]


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def bench_naive(blk: dict, model, prod: dict, repeats: int) -> dict:
    """Explicit pair matrix + autodiff, against our value+grad and Hv."""
    pairs = blk["n_pos"] * blk["n_neg"]
    if pairs > NAIVE_MAX_PAIRS:
        return {"skipped": f"{pairs:.2e} pairs > {NAIVE_MAX_PAIRS:.0e}"}
    K, Krr, loss = blk["K"], blk["Krr"], blk["loss"]
    st = dict(n_pos=blk["n_pos"], n_neg=blk["n_neg"])
    lam, beta = jnp.asarray(LAM, K.dtype), model.coef
    v = jax.random.normal(jax.random.key(2), beta.shape, K.dtype)
    # Agreement is checked away from the optimum, where the gradient is not ~0.
    b1 = beta + 0.1 * jnp.linalg.norm(beta) / jnp.linalg.norm(v) * v
    F, grad, w = internals.objective_value(K, Krr, lam, b1, loss, **st)
    hv = internals.objective_hvp(K, Krr, lam, w, v, loss, **st)
    Fn, gn = _naive_vg(b1, K, Krr, lam, **st)
    hn = _naive_hvp(b1, v, K, Krr, lam, **st)
    vg, hvp = functools.partial(_naive_vg, **st), functools.partial(_naive_hvp, **st)
    out = {
        "pairs": pairs,
        "value_grad": C.time_median(vg, beta, K, Krr, lam, repeats=repeats)["median"],
        "hvp": C.time_median(hvp, beta, v, K, Krr, lam, repeats=repeats)["median"],
    }
    out |= {f"speedup_{k}": out[k] / prod[k] for k in ("value_grad", "hvp")}
    pairs_of = {"value": (F, Fn), "grad": (grad, gn), "hvp": (hv, hn)}
    return out | {f"rel_diff_{k}": _rel(*ab) for k, ab in pairs_of.items()}


def run_size(m: int, repeats: int, skip_seq: bool, budget: float, skip_grid: bool = False) -> dict:
    """Every stage for one size; memory snapshots between stages."""
    t0 = time.perf_counter()
    done = lambda what: print(f"  m = {m}: {what} ({time.perf_counter() - t0:.1f} s)", flush=True)
    X, y = DH.scale_data(m, t=T_OVERLAP, d=D, seed=SEED)
    res = {"m": m, "rho": DH.rho_for(m), "d": D, "dtype": DTYPE, "m_pos": int((y == 1).sum())}
    res["data_seconds"] = time.perf_counter() - t0
    mem = {"rss_after_data": C.current_rss_bytes()}
    done("data")
    fit = lambda: jaxrank.fit(X, y, LAM, dtype=DTYPE)
    model, t = C.time_budget(fit, repeats, budget, record=True)
    res["single"] = {"lam": LAM, "time": t, "info": DH.model_info(model)}
    mem["peak_after_single"] = C.peak_rss_bytes()
    done("fit")
    seq = not skip_seq and m < 1_000_000
    grid_model, res["grid"] = (None, None) if skip_grid else bench_grid(X, y, repeats, seq, budget)
    mem["peak_after_grid"] = C.peak_rss_bytes()
    mem["device_peak_after_fits"] = C.device_peak_bytes()
    done("λ grid")
    blk = build_block(X, y, model)
    res["n_basis"] = int(blk["K"].shape[1])
    res["products"] = bench_products(blk, model, grid_model, max(repeats, 5))
    mem["peak_after_products"] = C.peak_rss_bytes()
    done("products")
    res["naive"] = bench_naive(blk, model, res["products"], repeats)
    mem["peak_total"] = C.peak_rss_bytes()
    mem["device_peak_total"] = C.device_peak_bytes()
    done("naive")
    mem["K_bytes"] = m * res["n_basis"] * np.dtype(DTYPE).itemsize
    mem["K_bytes_padded"] = int(blk["K"].nbytes)
    mem["peak_fit/K"] = mem["peak_after_grid"] / mem["K_bytes"]
    if mem["rss_after_data"] is not None:
        extra = mem["peak_after_grid"] - mem["rss_after_data"]
        mem["(peak_fit-baseline)/K"] = extra / mem["K_bytes"]
    res["memory"] = mem
    res["seconds"] = time.perf_counter() - t0
    return res


def _summary_row(r: dict) -> list[str]:
    t, info, mem = r["single"]["time"], r["single"]["info"], r["memory"]
    g, p, n = r["grid"] or {}, r["products"], r["naive"]
    ratios = [mem["peak_fit/K"], mem.get("(peak_fit-baseline)/K")]
    ratios += [g.get(f"{k}/seq") for k in GRID_PATHS]
    ratios += [p[k] for k in ("hvp/(Kv+gK)", "hvp/stream", "hvp16/(KV+GK)", "hvp16/stream")]
    ratios += [n.get(f"speedup_{k}") for k in ("value_grad", "hvp")]
    row = [r["m"], r["m_pos"], C.fmt_seconds(t["first"]), C.fmt_seconds(t["median"])]
    row += [f"{info['iterations']}/{info['cg_iterations']}", info["status"]]
    row.append(C.fmt_bytes(mem["K_bytes"]))
    return [str(c) for c in row] + ["-" if x is None else f"{x:.2f}" for x in ratios]


SUMMARY = (
    "m  m+  fit 1st  fit  Newton/CG  status  K bytes  peak/K  (peak-base)/K  batch/seq  warm/seq  "
    "warm4/seq  Hv/(Kv+gK)  Hv/stream  Hv16/(KV+GK)  Hv16/stream  naive/ours v+g  naive/ours Hv"
).split("  ")


def print_all(results: list[dict]) -> None:
    for r in results:
        if "error" in r:
            print(f"\nm = {r['m']}: FAILED ({r['error']})")
    ok = [r for r in results if "error" not in r]
    title = "fit at λ = 2^-8 (1st call with compile, median), memory, ratios of medians (JSON: all)"
    C.print_table(title, SUMMARY, [_summary_row(r) for r in ok])
    for r in ok:
        grid = [(f"grid/{k}", v) for k, v in (r["grid"] or {}).items() if k in (*GRID_PATHS, "seq")]
        for stage, part in [("fit", r["single"]), *grid]:
            for msg in part["time"]["warnings"]:
                print(f"\nwarning (m = {r['m']}, {stage}): {msg}")


def parse_args(argv=None):
    quick, sizes = f"tiny sizes {QUICK['sizes']} (CI)", "m values (default 1e4-1e6)"
    p = C.parser(NAME, __doc__, quick, sizes=sizes, repeats=3)
    p.add_argument("--stage-budget", type=float, default=300.0, help="seconds (module notes)")
    p.add_argument("--skip-seq", action="store_true", help="skip the 16 one-λ fits")
    p.add_argument("--skip-grid", action="store_true", help="skip the λ-grid stage")
    p.add_argument("--jobs", type=int, default=None, help="sizes at once (1; --quick: 2)")
    C.add_child_args(p)
    return C.mode_defaults(p.parse_args(argv), QUICK, FULL)


def main(argv=None) -> int:
    args = parse_args(argv)
    run = lambda m: run_size(m, args.repeats, args.skip_seq, args.stage_budget, args.skip_grid)
    if args.child is not None:
        res = run(args.child)
        C.write_json(args.child_out, res)
        print(f"m = {args.child}: done in {res['seconds']:.1f} s", flush=True)
        return 0
    fixed = dict(d=D, t=T_OVERLAP, seed=SEED, dtype=DTYPE, eps=EPS, lam=LAM, lam_grid=LAM_GRID)
    settings = {"sizes": args.sizes, "rho": {str(m): DH.rho_for(m) for m in args.sizes}, **fixed}
    settings |= {k: getattr(args, k) for k in ("repeats", "stage_budget", "skip_seq", "quick")}
    settings |= {"naive_max_pairs": NAIVE_MAX_PAIRS, "subprocess_per_size": not args.in_process}
    settings["jobs"] = 1 if args.in_process else args.jobs
    flags = ["--repeats", str(args.repeats), "--stage-budget", str(args.stage_budget)]
    flags += ["--skip-seq"] * args.skip_seq + ["--skip-grid"] * args.skip_grid
    detail = f"{DTYPE}, d = {D}, sizes {args.sizes}"
    return C.sizes_main(NAME, __file__, args, run, flags, settings, print_all, detail, args.jobs)


if __name__ == "__main__":
    sys.exit(main())
