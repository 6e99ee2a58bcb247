"""Core benchmark: RankRC end to end (issue "Core: RankRC end to end").

Data: ``make_rare_class(m, ρ, t=0.75, d=40, seed=0)`` standardised on its (training) rows;
ρ = 1 % below m = 10⁶ and 0.1 % from m = 10⁶ (m+ = 100, 1000, 1000 for m = 10⁴, 10⁵, 10⁶);
RankRC basis (``basis="rare"``, |R| = m+), Gaussian kernel with the paper's σ², float32,
smoothed hinge ε = 0.5, tol 1e-6. Each size runs in its own subprocess, so peak memory is per
size and every first call is a cold compile.

What is measured, per size:

1. **fit** at λ = 2⁻⁸: wall time of ``jaxrank.fit`` (the first call, with compilation, and the
   median of ``--repeats`` further calls; each call builds the kernel block), Newton and CG
   iterations, status. **Memory**: the process's peak RSS (``getrusage``) after the fit stages,
   next to the bytes of the kernel block ``K_{·R}`` (m × |R|). ``base`` is the RSS before the
   first fit (Python, JAX, the data); ``(peak-base)/K`` near 1 means the block is the only big
   array (at small m, compilation dominates both and the ratios mean nothing).
2. **λ grid** 2^{-20,-18,…,10} (16 values): ``path="batch"`` (vmapped solver, one matrix-matrix
   product per CG step), ``path="warm"`` (large → small λ, warm starts; ``warm4``: in steps of
   4 consecutive λ solved batched, ``chains=4``), and the same 16 λ as 16 separate
   ``jaxrank.fit`` calls ("seq"; skipped with ``--skip-seq`` and at m ≥ 10⁶). Ratios ``batch/seq``
   and ``warm/seq`` below 1 mean the grid path wins; seq rebuilds the kernel block in each of its
   16 calls, as a user looping over λ would.
3. **Products** on the actual kernel block (rows [positives; negatives], as the fit orders
   them) with the objective closures of :func:`jaxrank.fit.objective_closures`: ``K@v``, ``g@K``,
   one Hessian-vector product (windows from the fitted β, reused as in CG) and one value+gradient
   (which also sorts). ``hvp/(Kv+gK)`` is the overhead of the pairwise part on top of the two
   products an Hv needs (1.0 = free); ``hvp/stream`` compares the Hv with reading K twice at the
   best measured streaming rate, ``bandwidth = max(bytes(K)/t(sum(K)), bytes(K)/t(K@v))`` (the
   roofline of a memory-bound Hv). The same with 16 columns — the λ grid as matrix-matrix
   products: ``K@V``, ``G@K``, the vmapped Hv and value+gradient at the 16 grid solutions.
   ``copy GB/s`` (read + write of a ≤ 256 MiB buffer) is reported for context only.
4. **Naive** baseline where the m+ × m− pair matrix has ≤ 2·10⁸ entries: the same objective
   written with ``fp[:, None] - fn[None, :]``, differentiated by ``jax.grad`` (value+gradient)
   and ``jax.jvp(jax.grad)`` (Hv; it recomputes the forward pass, which is what autodiff gives
   without hand-written window reuse). ``speed-up`` = naive time / ours; ``rel.diff`` (max-abs
   difference over max-abs value, at a β perturbed off the optimum so that the gradient is not
   ~0) checks that both compute the same numbers.

Timing as ``_common`` (fits: the first call, with compile, is reported as "1st"; a fit stage
whose first call times ``--repeats`` exceeds ``--stage-budget`` seconds is repeated fewer times,
at least once, and the JSON records how many). Expect noise of tens of percent on the shared
CPU machines: compare ratios, not digits. On GPU, peak device memory is reported too.

Usage::

    python bench/core.py                       # m = 1e4, 1e5, 1e6 (needs ~8 GB and minutes)
    python bench/core.py --sizes 10000 100000 --repeats 3
    python bench/core.py --quick               # m = 2000, 5000; < 60 s (CI smoke test: the two
                                               # sizes run side by side, --jobs 2)
    python bench/core.py --sizes 1000000 --repeats 1   # seq is skipped from 10⁶ on

Writes ``bench/out/core.json`` (or ``--out``) with the environment, every timing and ratio.
"""

from __future__ import annotations

import functools
import sys
import time

import _common as C
import jax
import jax.numpy as jnp
import numpy as np

import jaxrank
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
REL_DIFFS = {"F": "value", "grad": "grad", "Hv": "hvp"}  # the naive check's rel.diff columns
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
        out[name] = {"time": t, "info": C.model_info(models[name])}
    if seq:
        fits = lambda: [jaxrank.fit(X, y, float(lam), dtype=DTYPE) for lam in LAM_GRID]
        fits, t = C.time_budget(fits, repeats, budget, record=True)
        infos = [C.model_info(f) for f in fits]
        out["seq"] = {"time": t, "info": {k: [i[k] for i in infos] for k in infos[0]}}
        for name in GRID_PATHS:
            out[f"{name}/seq"] = out[name]["time"]["median"] / t["median"]
    return models["batch"], out


_matmul = jax.jit(lambda A, B: jnp.matmul(A, B, precision=_HI))
_read = jax.jit(jnp.sum)
_copy = jax.jit(lambda A: A * 2)


def build_block(X, y, model) -> dict:
    """The fit's kernel block: rows [positives; negatives] (padded as the fit pads), basis, K_RR."""
    (Xo, n_pos, n_neg), B = C.ordered_rows(X, y, DTYPE), model.basis
    K, t_build = C.time_first(lambda: kernel_block(model.kernel, Xo, B, padded=True))
    Krr = jax.block_until_ready(model.kernel(B, B))
    return dict(
        K=K, Krr=Krr, loss=C.hinge_loss(EPS, DTYPE), n_pos=n_pos, n_neg=n_neg, build=t_build
    )


def bench_products(blk: dict, model, grid_model, repeats: int) -> dict:
    """K@v, g@K, Hv, value+grad (1 and 16 columns) and their roofline ratios."""
    K, Krr, loss = blk["K"], blk["Krr"], blk["loss"]
    st = dict(n_pos=blk["n_pos"], n_neg=blk["n_neg"])
    kv, kg = jax.random.split(jax.random.key(1))
    v, V = (jax.random.normal(kv, s, K.dtype) for s in [(K.shape[1],), (N_COLS, K.shape[1])])
    g, G = (jax.random.normal(kg, s, K.dtype) for s in [(K.shape[0],), (N_COLS, K.shape[0])])
    lam, lams = jnp.asarray(LAM, K.dtype), jnp.asarray(LAM_GRID, K.dtype)
    tm = lambda f, *a: C.time_median(f, *a, repeats=repeats)["median"]
    w = C.objective_value(K, Krr, lam, model.coef, loss, **st)[2]
    # the 16 grid solutions, or (--skip-grid) 16 copies of the single-λ solution
    coefB = grid_model.coef if grid_model is not None else jnp.tile(model.coef, (N_COLS, 1))
    ws = C.objective_value_batched(K, Krr, lams, coefB, loss, **st)[2]
    r = {
        "repeats": repeats,
        "block_build": blk["build"],
        "Kv": tm(_matmul, K, v),
        "gK": tm(_matmul, g, K),
        "hvp": tm(lambda: C.objective_hvp(K, Krr, lam, w, v, loss, **st)),
        "value_grad": tm(lambda: C.objective_value(K, Krr, lam, model.coef, loss, **st)),
        "KV": tm(_matmul, K, V.T),
        "GK": tm(_matmul, G, K),
        "hvp16": tm(lambda: C.objective_hvp_batched(K, Krr, lams, ws, V, loss, **st)),
        "value_grad16": tm(lambda: C.objective_value_batched(K, Krr, lams, coefB, loss, **st)),
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
    F, grad, w = C.objective_value(K, Krr, lam, b1, loss, **st)
    hv = C.objective_hvp(K, Krr, lam, w, v, loss, **st)
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
    X, y = C.scale_data(m, t=T_OVERLAP, d=D, seed=SEED)
    res = {"m": m, "rho": C.rho_for(m), "d": D, "dtype": DTYPE, "m_pos": int((y == 1).sum())}
    res["data_seconds"] = time.perf_counter() - t0
    mem = {"rss_after_data": C.current_rss_bytes()}
    done("data")
    fit = lambda: jaxrank.fit(X, y, LAM, dtype=DTYPE)
    model, t = C.time_budget(fit, repeats, budget, record=True)
    res["single"] = {"lam": LAM, "time": t, "info": C.model_info(model)}
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


_s = C.fmt_seconds
_r = lambda x: "-" if x is None else f"{x:.2f}"


def _status(info) -> str:
    s = info["status"]
    return s if isinstance(s, str) else ",".join(f"{n}×{s.count(n)}" for n in sorted(set(s)))


def _iters(info) -> str:
    it = np.atleast_1d(info["iterations"])
    return f"{int(it.max())}/{int(it.sum())}"


def _fit_row(r: dict) -> list[str]:
    t, info, mem = r["single"]["time"], r["single"]["info"], r["memory"]
    row = [str(r["m"]), str(r["m_pos"]), _s(t["first"]), _s(t["median"])]
    row += [str(info["iterations"]), str(info["cg_iterations"]), info["status"]]
    row += [C.fmt_bytes(mem[k]) for k in ("K_bytes", "rss_after_data", "peak_after_grid")]
    return [*row, _r(mem["peak_fit/K"]), _r(mem.get("(peak_fit-baseline)/K"))]


def _grid_row(r: dict) -> list[str] | None:
    if not (g := r.get("grid")):
        return None
    runs = [g.get(k) for k in (*GRID_PATHS, "seq")]
    row = [str(r["m"]), _s(g["batch"]["time"]["first"])]
    row += [_s(x["time"]["median"]) if x else "-" for x in runs]
    row += [_r(g.get(f"{k}/seq")) for k in GRID_PATHS]
    row += [_iters(x["info"]) if x else "-" for x in runs]
    return [*row, _status(g["batch"]["info"])]


def _products_row(r: dict) -> list[str]:
    p = r["products"]
    row = [str(r["m"]), str(r["n_basis"])] + [_s(p[k]) for k in ("Kv", "gK", "hvp", "value_grad")]
    row += [_r(p[k]) for k in ("hvp/(Kv+gK)", "hvp/stream")]
    row += [_s(p[k]) for k in ("KV", "GK", "hvp16", "value_grad16")]
    row += [_r(p[k]) for k in ("hvp16/(KV+GK)", "hvp16/stream")]
    return [*row, f"{p['read_GBps_sum']:.1f}/{p['read_GBps_matvec']:.1f}"]


def _naive_row(r: dict) -> list[str]:
    n, p = r["naive"], r["products"]
    if "skipped" in n:
        return [str(r["m"])] + ["-"] * 6 + [n["skipped"]]
    rel = ", ".join(f"{k} {n[f'rel_diff_{v}']:.1e}" for k, v in REL_DIFFS.items())
    row = [str(r["m"]), f"{n['pairs']:.2g}", _s(n["value_grad"]), _s(p["value_grad"])]
    row += [f"{n['speedup_value_grad']:.1f}x", _s(n["hvp"]), _s(p["hvp"])]
    return [*row, f"{n['speedup_hvp']:.1f}x  (rel.diff {rel})"]


# row: (title, header with the columns two spaces apart)
TABLES = {
    _fit_row: (
        "(1) fit at λ = 2^-8 (first call with compile; median of repeats)",
        "m  m+  fit 1st  fit med  Newton  CG  status  K bytes  RSS base  peak RSS  peak/K  "
        "(peak-base)/K",
    ),
    _grid_row: (
        "(2) 16-value λ grid 2^-20..2^10 (medians; seq = 16 fit calls)",
        "m  batch 1st  batch  warm  warm4  seq  batch/seq  warm/seq  warm4/seq  "
        "Newton max/sum: batch  warm  warm4  seq  batch status",
    ),
    _products_row: (
        "(3) products on the kernel block (medians)",
        "m  |R|  K@v  g@K  Hv  val+grad  Hv/(Kv+gK)  Hv/stream  K@V16  G16@K  Hv16  val+grad16  "
        "Hv16/(KV+GK)  Hv16/stream  GB/s sum/K@v",
    ),
    _naive_row: (
        "(4) naive pair matrix + autodiff vs sorted windows (medians)",
        "m  pairs  naive v+g  ours v+g  speed-up  naive Hv  ours Hv  speed-up",
    ),
}


def print_all(results: list[dict]) -> None:
    for r in results:
        if "error" in r:
            print(f"\nm = {r['m']}: FAILED ({r['error']})")
    ok = [r for r in results if "error" not in r]
    for row, (title, header) in TABLES.items() if ok else ():
        C.print_table(title, header.split("  "), [x for r in ok if (x := row(r))])
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
    settings = {"sizes": args.sizes, "rho": {str(m): C.rho_for(m) for m in args.sizes}, **fixed}
    settings |= {k: getattr(args, k) for k in ("repeats", "stage_budget", "skip_seq", "quick")}
    settings |= {"naive_max_pairs": NAIVE_MAX_PAIRS, "subprocess_per_size": not args.in_process}
    settings["jobs"] = 1 if args.in_process else args.jobs
    flags = ["--repeats", str(args.repeats), "--stage-budget", str(args.stage_budget)]
    flags += ["--skip-seq"] * args.skip_seq + ["--skip-grid"] * args.skip_grid
    detail = f"{DTYPE}, d = {D}, sizes {args.sizes}"
    return C.sizes_main(NAME, __file__, args, run, flags, settings, print_all, detail, args.jobs)


if __name__ == "__main__":
    sys.exit(main())
