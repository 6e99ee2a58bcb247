"""Roofline of the solver's products: how close each is to streaming the kernel block once
(issue 6, item 1).

The trust-region Newton-CG fit of seed 000 eq. (11) computes per Newton step one value+gradient
(``K @ β``, the sorted windows, ``g @ K``) and per CG step one Hv (``K @ v``, the pairwise Hv on
the step's windows, ``g @ K``) on ``K = K_{·R}``, the ``(m_pad, |R|)`` block as the fit builds it
(``kernel_block(..., padded=True, multiple=product_block(m))``, rows [positives; negatives;
padding]). With |R| ≪ m each product is memory-bound: its floor is one pass over ``K``, timed as
``jnp.sum(K)`` (a copy would time the page faults of its fresh output on CPU). ``passes`` is how
often a product must read ``K``; the compute roof is the best square float32 ``A @ A`` rate
(sides 2048 and 4096). The λ grid runs batched for L = 1, 2, 4, 8, 16 on the block as a fit over
L λ stores it (:func:`fit_layout`), ``G @ K`` also on ``K`` alone (``GK_rows``, the vmapped
two-level sum) and as one ``kernels.rmatmul`` (``GK_plain``); ``slope`` is the least-squares
cost of each extra λ in the batched Hv. At ``--streamed-size`` (default the middle size) the
same products run on :func:`jaxrank.kernels.streamed_block` (the kernel recomputed chunk by
chunk in every product); ``recompute`` = streamed − stored time.

Data as ``bench/core.py``, λ = 2⁻⁸ (L values spread over 2^{-20..10} for the batch). The
products are timed at ``β = c·1/|R|`` (the Parzen score of the rare class, ``c`` scaling the
scores to unit standard deviation, so pairs fall on all three pieces of ℓ) and at
``β_l = 2^{(l/(L−1))·2−1} β`` in the batch (different windows per λ); their cost does not
depend on β beyond that. Timings: ``_common.time_budgeted`` (``--repeats``, ``--time-budget``),
one subprocess per size. Results: RESULTS.md §12.
"""

from __future__ import annotations

import sys
import time

import _common as C
import _data as DH
import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import internals, kernels
from jaxrank.fit import keep_transpose

NAME = "roofline"
DTYPE = "float32"
D, T_OVERLAP, SEED, EPS = 40, 0.75, 0, 0.5
LAM = 2.0**-8
FULL = dict(sizes=(10_000, 100_000, 1_000_000), lams=(1, 2, 4, 8, 16), time_budget=1.0)
QUICK = dict(sizes=(2_000,), lams=(1, 2), time_budget=0.05)
PASSES = {"Kv": 1, "gK": 1, "hvp": 2, "value_grad": 2}
BATCHED = {  # name: passes, markdown label (None: JSON only)
    "KV": (1, "K@V"),
    "GK": (1, "G@K as the fit runs it (L ≥ 4 on CPU: (KᵀGᵀ)ᵀ, Kᵀ stored beside K)"),
    "GK_rows": (1, "G@K on K alone (vmapped two-level)"),
    "GK_plain": (1, None),
    "hvp": (2, "Hv"),
    "value_grad": (2, "value+gradient"),
}
STREAM_RULE = (
    "stream = median t(jnp.sum(K)); per_pass = t / (passes * stream); at_roofline: per_pass <= 2; "
    "passes: K@v, g@K, K@V, G@K 1; Hv, value+grad 2; "
    "per_roof = t / max(passes * stream, passes * 2 m |R| L / GEMM rate)"
)


def build(m: int) -> dict:
    """The fit's stored block, its streamed twin, K_RR, the loss and a Parzen β."""
    X, y = DH.scale_data(m, t=T_OVERLAP, d=D, seed=SEED)
    kernel = kernels.resolve_kernel(None, X)
    Xo, n_pos, n_neg = DH.ordered_rows(X, y, DTYPE)
    B, block = Xo[:n_pos], kernels.product_block(m)
    fn = lambda: kernels.kernel_block(kernel, Xo, B, padded=True, multiple=block)
    t1 = C.time_first(fn)[1]  # result dropped at once: one block in memory at a time
    K, t2 = C.time_first(fn)  # without compilation
    Krr = jax.block_until_ready(kernel(B, B))
    f1 = kernels.matmul(K, jnp.full((n_pos,), 1.0 / n_pos, K.dtype))[: n_pos + n_neg]
    beta = jnp.full((n_pos,), 1.0 / n_pos, K.dtype) / jnp.std(f1)
    blk = dict(K=K, Xo=Xo, B=B, kernel=kernel, Krr=Krr, beta=beta, n_pos=n_pos, n_neg=n_neg)
    return blk | dict(loss=DH.hinge_loss(EPS, DTYPE), block=block, build_first=t1, build=t2)


_gemm = jax.jit(lambda A: A @ A)
_matmul = jax.jit(kernels.matmul)
_rmatmul = jax.jit(kernels.rmatmul)
_rmatvec = jax.jit(kernels.rmatvec, static_argnames="block")
_rmatvecB = jax.jit(jax.vmap(kernels.rmatvec, (0, None, None)), static_argnums=2)


def gemm_rate(tm, sizes=(2048, 4096)) -> dict:
    """The machine's float32 matrix-multiply rate: the best median over square products of
    ``sizes`` (the compute roof of the products)."""
    rates = {}
    for n in sizes:
        A = jax.random.normal(jax.random.key(3), (n, n), DTYPE)
        rates[str(n)] = 2 * n**3 / tm(lambda A=A: _gemm(A))
        del A
    what = f"A @ A, A float32 square of side {sizes}"
    return {"what": what, "flops_per_s": max(rates.values()), "by_size": rates}


def fit_layout(K, L: int):
    """The block as a fit over L λ stores it: with ``Kᵀ`` beside it where
    :func:`jaxrank.fit.keep_transpose` keeps one (batched grids on CPU), else as given."""
    if isinstance(K, jax.Array) and keep_transpose(K, L, K.nbytes, 2**62, None):
        return kernels.dual_block(K)
    return K


def batched_products(K, blk: dict, L: int, tm) -> dict:
    """The same for a grid of L λ: ``K@V``, ``G@K`` (vmapped rmatvec), vmapped Hv and v+g,
    each on the block as the fit stores it for L λ (:func:`fit_layout`); ``GK_rows``: the
    vmapped two-level ``G@K`` on the row-major block alone, ``GK_plain``: one ``rmatmul``."""
    Kf = fit_layout(K, L)
    st = dict(n_pos=blk["n_pos"], n_neg=blk["n_neg"], block=blk["block"])
    Krr, loss = blk["Krr"], blk["loss"]
    kv, kg = jax.random.split(jax.random.key(2))
    V = jax.random.normal(kv, (L, K.shape[1]), K.dtype)
    G = jax.random.normal(kg, (L, K.shape[0]), K.dtype)
    lams = jnp.asarray(2.0 ** np.linspace(-20, 10, L), K.dtype)  # the bench grid's range
    scale = jnp.asarray(2.0 ** (np.linspace(-1.0, 1.0, L) if L > 1 else np.zeros(1)), K.dtype)
    betas = scale[:, None] * blk["beta"][None, :]
    lins = internals.objective_value_batched(Kf, Krr, lams, betas, loss, **st)[2]
    VT = V.T
    return {
        "KV": tm(lambda: _matmul(Kf, VT)),
        "GK": tm(lambda: _rmatvecB(G, Kf, blk["block"])),
        "GK_rows": tm(lambda: _rmatvecB(G, K, blk["block"])),
        "GK_plain": tm(lambda: _rmatmul(G, K)),
        "hvp": tm(lambda: internals.objective_hvp_batched(Kf, Krr, lams, lins, V, loss, **st)),
        "value_grad": tm(
            lambda: internals.objective_value_batched(Kf, Krr, lams, betas, loss, **st)
        ),
    }


def _ratios(times: dict, passes: dict, stream: float, flops: float, rate: float) -> dict:
    # ``flops`` per pass over K (2·m·|R|·columns); ``roof`` is the classical roofline, the
    # larger of the passes' stream time and the products' arithmetic at the GEMM rate.
    out = {}
    for k, t in times.items():
        compute, per_pass = passes[k] * flops / rate, t / (passes[k] * stream)
        out[k] = {"time": t, "ratio": t / stream, "per_pass": per_pass}
        out[k] |= {"at_roofline": bool(per_pass <= 2.0), "compute": compute}
        out[k]["per_roof"] = t / max(passes[k] * stream, compute)
    return out


def run_size(m: int, ls: list[int], streamed: bool, repeats: int, budget: float) -> dict:
    t0 = time.perf_counter()
    done = lambda what: print(f"  m = {m}: {what} ({time.perf_counter() - t0:.1f} s)", flush=True)
    blk = build(m)
    K, tm = blk["K"], DH.product_timer(repeats, budget)
    res = {"m": m, "rho": DH.rho_for(m), "m_pos": blk["n_pos"], "n_basis": int(K.shape[1])}
    res |= {"m_pad": int(K.shape[0]), "block": blk["block"], "K_bytes": int(K.nbytes)}
    res |= {"build_first": blk["build_first"], "build": blk["build"]}
    done("block built")
    stream = tm(lambda: DH.stream_sum(K))
    res["stream"] = {"what": "jnp.sum(K)", "time": stream, "GBps": K.nbytes / stream / 1e9}
    res["gemm"] = gemm_rate(tm)
    rate = res["gemm"]["flops_per_s"]
    flops = 2.0 * K.shape[0] * K.shape[1]  # one product with one column
    single = DH.single_products(K, blk, tm, LAM)
    res["stream"]["Kv_GBps"] = K.nbytes / single["Kv"] / 1e9
    res["single"] = _ratios(single, PASSES, stream, flops, rate)
    res["single"]["hvp/(Kv+gK)"] = single["hvp"] / (single["Kv"] + single["gK"])
    done("single products")
    res["batched"] = {}
    for L in ls:
        b = batched_products(K, blk, L, tm)
        res["batched"][str(L)] = _ratios(
            b, {k: v[0] for k, v in BATCHED.items()}, stream, L * flops, rate
        )
        done(f"L = {L}")
    t_h = np.asarray([res["batched"][str(L)]["hvp"]["time"] for L in ls])
    if len(ls) >= 2:
        slope, intercept = np.polyfit(np.asarray(ls, float), t_h, 1)
        h = {"slope": float(slope), "intercept": float(intercept)}
        h |= {"slope/stream": float(slope / stream), "slope/hvp1": float(slope / single["hvp"])}
        per_l = {str(L): float(t / (L * single["hvp"])) for L, t in zip(ls, t_h, strict=True)}
        res["hvp_per_lambda"] = h | {"hvpL/(L*hvp1)": per_l}
    if streamed:
        res["streamed"] = bench_streamed(blk, max(ls), tm, single, res["batched"][str(max(ls))])
        done("streamed block")
    res["device_peak_bytes"] = C.device_peak_bytes()
    res["peak_rss_bytes"] = C.peak_rss_bytes()
    res["seconds"] = time.perf_counter() - t0
    return res


def bench_streamed(blk: dict, L: int, tm, stored: dict, stored_b: dict) -> dict:
    """Single and L-column products on the streamed block: the cost of recomputing K per use."""
    S = kernels.streamed_block(blk["kernel"], blk["Xo"], blk["B"], multiple=blk["block"])
    if S.shape != blk["K"].shape:  # same chunking as the stored block, or the test is moot
        raise RuntimeError(f"streamed block {S.shape} != stored {blk['K'].shape}")
    out = {"L": L, "build": blk["build"], "single": {}, "batched": {}}
    stored_b = {k: v["time"] for k, v in stored_b.items()}
    parts = {"single": (DH.single_products(S, blk, tm, LAM), stored)}
    parts["batched"] = (batched_products(S, blk, L, tm), stored_b)
    for part, (times, stored_times) in parts.items():
        for name, t in times.items():
            s = stored_times[name]
            out[part][name] = {"time": t, "stored": s, "streamed/stored": t / s}
            out[part][name] |= {"recompute": t - s, "recompute/build": (t - s) / blk["build"]}
    return out


_s = C.fmt_seconds


def _cell(r: dict) -> str:
    mark = "" if r["at_roofline"] else " ✗"
    return f"{_s(r['time'])} ({r['per_pass']:.2f}{mark}/{r['per_roof']:.2f})"


def _one_row(r: dict) -> list[str]:
    s, st = r["single"], r["stream"]
    row = [f"{r['m']:,}", str(r["n_basis"]), C.fmt_bytes(r["K_bytes"]), _s(st["time"])]
    row += [f"{st['GBps']:.1f}", *(_cell(s[k]) for k in PASSES), f"{s['hvp/(Kv+gK)']:.2f}"]
    return [*row, f"{r['gemm']['flops_per_s'] / 1e9:.0f}"]


def _slope_row(r: dict) -> list[str]:
    h = r["hvp_per_lambda"]
    row = [f"{r['m']:,}", _s(h["intercept"]), _s(h["slope"]), f"{h['slope/stream']:.3f}"]
    per_l = ", ".join(f"{v:.2f}" for v in h["hvpL/(L*hvp1)"].values())
    return [*row, f"{h['slope/hvp1']:.3f}", per_l]


def _streamed_rows(st: dict) -> list[list[str]]:
    rows = []
    for part in ("single", "batched"):
        for name, v in st[part].items():
            row = [name + ("" if part == "single" else f" (L = {st['L']})"), _s(v["stored"])]
            row += [_s(v["time"]), f"{v['streamed/stored']:.1f}", f"{v['recompute/build']:.2f}"]
            rows.append(row)
    return rows


def markdown(result: dict) -> str:
    """The result as markdown: the one-λ products against one stream of the block, the batched
    Hv / G@K over L λ, the cost per extra λ and the streamed-block overhead."""
    st = result["settings"]
    ok = [r for r in result["results"] if "error" not in r]
    ls = st["lams_L"]
    lines = [
        f"`make_rare_class(m, ρ, t={st['t']}, d={st['d']})`, RankRC basis, {st['dtype']}, "
        f"λ = {st['lam']:.4g}{C.quick_tag(st)}. Cells: median time "
        "(time / (passes × stream)); ✗ = not at roofline (> 2); after the slash, time / max("
        "passes × stream, FLOPs / GEMM rate), the classical roofline with the compute roof "
        "(GEMM rate: the best square float32 `A @ A`). stream = median of `jnp.sum(K)`, "
        "one read of the block. No paper numbers: seed 000 (eq. 18-20) states the O(m m+) cost "
        "per product that these times check; the target is Hv / (K@v + g@K) ≤ 2.5 (one "
        "Hessian-vector product at most 2.5 plain products).",
        "",
    ]
    header = "m | \\|R\\| | K | stream | GB/s | K@v | g@K | Hv | value+grad | Hv / (K@v + g@K)"
    lines += C.md_table(header + " | GEMM GFLOP/s", [], "r" * 11)
    for r in result["results"]:
        failed = f"| {r['m']:,} | failed: {r.get('error')} |" + " |" * 9
        lines += [failed] if "error" in r else C.md_table([], [_one_row(r)])[2:]
    for name, (_, label) in BATCHED.items():
        if label:
            rows = [[f"{r['m']:,}", *(_cell(r["batched"][str(L)][name]) for L in ls)] for r in ok]
            table = C.md_table(["m", *(f"L = {L}" for L in ls)], rows, "r" * (len(ls) + 1))
            lines += ["", f"Batched {label} over L λ:", "", *table]
    if rows := [_slope_row(r) for r in ok if r.get("hvp_per_lambda")]:
        header = "m | intercept | per extra λ | / stream | / Hv(1) | Hv(L) / (L · Hv(1))"
        lines += ["", "Batched Hv time = intercept + slope · L (least squares):", ""]
        lines += C.md_table(header, rows, "rrrrr")
    header = "product | stored | streamed | streamed / stored | recompute / build"
    for r in ok:
        if sb := r.get("streamed"):
            what = "the kernel recomputed in every product; building the stored block once takes"
            lines += ["", f"Streamed block at m = {r['m']:,} ({what} {_s(sb['build'])}):", ""]
            lines += C.md_table(header, _streamed_rows(sb), "lrrrr")
    return "\n".join(lines)


def parse_args(argv=None):
    quick = f"sizes {QUICK['sizes']}, L {QUICK['lams']} (CI)"
    p = C.parser(NAME, __doc__, quick, sizes="m values (1e4-1e6)", repeats=5)
    p.add_argument("--lams", type=int, nargs="+", default=None, help=f"L values ({FULL['lams']})")
    p.add_argument("--streamed-size", type=int, default=None, help="default middle size; 0: none")
    p.add_argument("--time-budget", type=float, default=None, help="s a product (1; quick 0.05)")
    C.add_child_args(p)
    args = C.mode_defaults(p.parse_args(argv), QUICK, FULL)
    if args.streamed_size is None:
        args.streamed_size = sorted(args.sizes)[len(args.sizes) // 2]
    if min(args.lams) < 1:
        p.error("--lams must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    run = lambda m: run_size(m, args.lams, m == args.streamed_size, args.repeats, args.time_budget)
    if args.child is not None:
        C.write_json(args.child_out, run(args.child))
        return 0
    fixed = dict(d=D, t=T_OVERLAP, seed=SEED, dtype=DTYPE, eps=EPS, lam=LAM, lams_L=args.lams)
    settings = {"sizes": args.sizes, "rho": {str(m): DH.rho_for(m) for m in args.sizes}, **fixed}
    settings |= {k: getattr(args, k) for k in ("streamed_size", "repeats", "time_budget")}
    settings |= {"stream_rule": STREAM_RULE, "quick": args.quick}
    settings["subprocess_per_size"] = not args.in_process
    flags = ["--repeats", str(args.repeats), "--time-budget", str(args.time_budget)]
    flags += ["--lams", *map(str, args.lams), "--streamed-size", str(args.streamed_size)]
    detail = f"{DTYPE}, d = {D}, sizes {args.sizes}, L {args.lams}"
    show = lambda results: print("\n" + markdown({"settings": settings, "results": results}))
    return C.sizes_main(NAME, __file__, args, run, flags, settings, show, detail)


if __name__ == "__main__":
    sys.exit(main())
