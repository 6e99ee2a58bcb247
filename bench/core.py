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
   4 consecutive λ solved batched, ``chains=4``), and the same 16 λ as 16
   separate ``jaxrank.fit`` calls ("seq"; skipped with ``--skip-seq`` and at m ≥ 10⁶). Ratios
   ``batch/seq`` and ``warm/seq`` below 1 mean the grid path wins; seq rebuilds the kernel block
   in each of its 16 calls, as a user looping over λ would.
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

All timings are medians over repeats after a warm-up call, with ``jax.block_until_ready``
(fits: the first call is the warm-up and is reported as "1st"; a fit stage whose first call
times ``--repeats`` exceeds ``--stage-budget`` seconds is repeated fewer times, at least once,
and the JSON records how many). The CPU machines are shared: expect noise of tens of percent;
compare ratios, not digits. On GPU, peak device memory (``memory_stats``) is reported too.

Usage::

    python bench/core.py                       # m = 1e4, 1e5, 1e6 (needs ~8 GB and minutes)
    python bench/core.py --sizes 10000 100000 --repeats 3
    python bench/core.py --quick               # m = 2000, 5000; < 60 s (CI smoke test: the two
                                               # sizes run side by side, --jobs 2)
    python bench/core.py --sizes 1000000 --repeats 1   # seq is skipped from 10⁶ on

Writes ``bench/out/core.json`` (or ``--out``) with the environment, every timing and ratio.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import _common as C
import jax
import jax.numpy as jnp
import numpy as np

import jaxrank
from jaxrank.fit import objective_closures
from jaxrank.kernels import kernel_block
from jaxrank.losses import smoothed_hinge

DTYPE = "float32"
D = 40
T_OVERLAP = 0.75
SEED = 0
EPS = 0.5
LAM = 2.0**-8
LAM_GRID = 2.0 ** np.arange(-20, 11, 2)
SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (2_000, 5_000)
NAIVE_MAX_PAIRS = 2e8
N_COLS = 16
_HI = jax.lax.Precision.HIGHEST


# ---------------------------------------------------------------------------- data


def rho_for(m: int) -> float:
    """ρ = 1 % below m = 10⁶, 0.1 % from 10⁶ on (issue: m+ = 100, 1000, 1000)."""
    return 0.01 if m < 1_000_000 else 0.001


def make_data(m: int, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """Simulated rare-class rows (seed 000 Sec. 6.1), standardised on these training rows."""
    X, y = jaxrank.datasets.make_rare_class(m, rho, T_OVERLAP, d=D, seed=SEED)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X, y


# ---------------------------------------------------------------------------- fits


def _info(model) -> dict:
    """``model.info`` as lists (scalars for a scalar λ), status as names."""
    info = {k: np.asarray(v).tolist() for k, v in model.info._asdict().items()}
    status = np.atleast_1d(np.asarray(model.info.status))
    names = [jaxrank.Status(int(s)).name for s in status]
    info["status"] = names if np.ndim(model.info.status) else names[0]
    return info


def _timed_fit(fn, repeats: int, budget: float) -> tuple[object, dict]:
    """First call (with compile), then the median of up to ``repeats`` more; warnings recorded.

    Fewer repeats (at least one) when ``repeats`` times the first call would exceed ``budget``
    seconds: a 10⁶-row grid takes minutes a call. The count used is in the result.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out, first = C.time_first(fn)
        n = max(1, min(repeats, int(budget // max(first, 1e-9))))
        timing = C.time_median(fn, repeats=n, warmup=0)
    msgs = sorted({str(w.message) for w in caught})
    return out, {"first": first, **timing, "repeats": n, "warnings": msgs}


def bench_single(X, y, repeats: int, budget: float) -> tuple[object, dict]:
    """Stage 1: one λ, end to end."""
    model, t = _timed_fit(lambda: jaxrank.fit(X, y, LAM, dtype=DTYPE), repeats, budget)
    return model, {"lam": LAM, "time": t, "info": _info(model)}


def _seq_fits(X, y):
    return [jaxrank.fit(X, y, float(lam), dtype=DTYPE) for lam in LAM_GRID]


# The grid solvers compared: all 16 λ vmapped cold; the sequential warm path; the warm path
# in steps of 4 consecutive λ solved batched (each warm-started 4 places up the grid).
GRID_PATHS = {
    "batch": dict(path="batch"),
    "warm": dict(path="warm", chains=1),
    "warm4": dict(path="warm", chains=4),
}


def bench_grid(X, y, repeats: int, seq: bool, budget: float) -> tuple[object, dict]:
    """Stage 2: the 16-value λ grid batched, warm-started and (optionally) one λ at a time."""
    out = {"lams": LAM_GRID.tolist()}
    models = {}
    for name, kw in GRID_PATHS.items():
        fn = lambda kw=kw: jaxrank.fit(X, y, LAM_GRID, dtype=DTYPE, **kw)
        models[name], t = _timed_fit(fn, repeats, budget)
        out[name] = {"time": t, "info": _info(models[name])}
    if seq:
        fits, t = _timed_fit(lambda: _seq_fits(X, y), repeats, budget)
        infos = [_info(f) for f in fits]
        out["seq"] = {"time": t, "info": {k: [i[k] for i in infos] for k in infos[0]}}
        for name in GRID_PATHS:
            out[f"{name}/seq"] = out[name]["time"]["median"] / t["median"]
    return models["batch"], out


# ---------------------------------------------------------------------------- products


@jax.jit
def _matmul(A, B):
    return jnp.matmul(A, B, precision=_HI)


@jax.jit
def _read(K):
    return jnp.sum(K)


@jax.jit
def _copy(A):
    return A * 2


def _fun(K, Krr, lam, beta, loss, n_pos, n_neg):
    return objective_closures(K, Krr, lam, loss, n_pos, n_neg)[0](beta)


def _hvp(K, Krr, lam, w, v, loss, n_pos, n_neg):
    return objective_closures(K, Krr, lam, loss, n_pos, n_neg)[1](w, v)


_STATIC = ("n_pos", "n_neg")
_fun1 = jax.jit(_fun, static_argnames=_STATIC)
_hvp1 = jax.jit(_hvp, static_argnames=_STATIC)


@functools.partial(jax.jit, static_argnames=_STATIC)
def _funB(K, Krr, lams, betas, loss, n_pos, n_neg):
    f = lambda lam, b: _fun(K, Krr, lam, b, loss, n_pos, n_neg)
    return jax.vmap(f)(lams, betas)


@functools.partial(jax.jit, static_argnames=_STATIC)
def _hvpB(K, Krr, lams, ws, vs, loss, n_pos, n_neg):
    f = lambda lam, w, v: _hvp(K, Krr, lam, w, v, loss, n_pos, n_neg)
    return jax.vmap(f)(lams, ws, vs)


def build_block(X, y, model) -> dict:
    """The fit's kernel block: rows [positives; negatives] (padded as the fit pads), basis, K_RR."""
    pos = np.asarray(y) == 1
    order = np.concatenate([np.flatnonzero(pos), np.flatnonzero(~pos)])
    Xo = jnp.asarray(X[order], DTYPE)
    B = model.basis
    K, t_build = C.time_first(lambda: kernel_block(model.kernel, Xo, B, padded=True))
    Krr = jax.block_until_ready(model.kernel(B, B))
    loss = jax.tree.map(lambda v: jnp.asarray(v, DTYPE), smoothed_hinge(EPS))
    return dict(
        K=K, Krr=Krr, loss=loss, n_pos=int(pos.sum()), n_neg=int((~pos).sum()), build=t_build
    )


def _bandwidth(K, t_matvec: float, repeats: int) -> dict:
    """Streaming rates: sum(K) and K@v read rates, and a copy of a ≤ 256 MiB buffer."""
    kbytes = K.nbytes
    t_read = C.time_median(_read, K, repeats=repeats)["median"]
    n = min(kbytes, 256 * 2**20) // 4
    buf = jnp.ones((n,), jnp.float32)
    t_copy = C.time_median(_copy, buf, repeats=repeats)["median"]
    bw = max(kbytes / t_read, kbytes / t_matvec)
    return {
        "sum_K": t_read,
        "read_GBps_sum": kbytes / t_read / 1e9,
        "read_GBps_matvec": kbytes / t_matvec / 1e9,
        "copy_GBps": 2 * n * 4 / t_copy / 1e9,
        "stream_K_twice": 2 * kbytes / bw,
        "stream_rule": "2*bytes(K) / max(bytes(K)/t(sum K), bytes(K)/t(K@v))",
    }


def bench_products(blk: dict, model, grid_model, repeats: int) -> dict:
    """Stage 3: K@v, g@K, Hv, value+grad (1 and 16 columns) and their roofline ratios."""
    K, Krr, loss = blk["K"], blk["Krr"], blk["loss"]
    st = dict(n_pos=blk["n_pos"], n_neg=blk["n_neg"])
    nb, mp = K.shape[1], K.shape[0]
    kv, kg = jax.random.split(jax.random.key(1))
    v = jax.random.normal(kv, (nb,), K.dtype)
    g = jax.random.normal(kg, (mp,), K.dtype)
    V = jax.random.normal(kv, (N_COLS, nb), K.dtype)
    G = jax.random.normal(kg, (N_COLS, mp), K.dtype)
    lam = jnp.asarray(LAM, K.dtype)
    lams = jnp.asarray(LAM_GRID, K.dtype)
    tm = lambda f, *a: C.time_median(f, *a, repeats=repeats)["median"]

    r = {"repeats": repeats, "block_build": blk["build"]}
    r["Kv"] = tm(_matmul, K, v)
    r["gK"] = tm(_matmul, g, K)
    w = _fun1(K, Krr, lam, model.coef, loss, **st)[2]
    r["hvp"] = tm(lambda: _hvp1(K, Krr, lam, w, v, loss, **st))
    r["value_grad"] = tm(lambda: _fun1(K, Krr, lam, model.coef, loss, **st))
    r["KV"] = tm(_matmul, K, V.T)
    r["GK"] = tm(_matmul, G, K)
    # the 16 grid solutions, or (--skip-grid) 16 copies of the single-λ solution
    coefB = grid_model.coef if grid_model is not None else jnp.tile(model.coef, (N_COLS, 1))
    ws = _funB(K, Krr, lams, coefB, loss, **st)[2]
    r["hvp16"] = tm(lambda: _hvpB(K, Krr, lams, ws, V, loss, **st))
    r["value_grad16"] = tm(lambda: _funB(K, Krr, lams, coefB, loss, **st))
    r.update(_bandwidth(K, r["Kv"], repeats))
    r["hvp/(Kv+gK)"] = r["hvp"] / (r["Kv"] + r["gK"])
    r["hvp/stream"] = r["hvp"] / r["stream_K_twice"]
    r["value_grad/(Kv+gK)"] = r["value_grad"] / (r["Kv"] + r["gK"])
    r["hvp16/(KV+GK)"] = r["hvp16"] / (r["KV"] + r["GK"])
    r["hvp16/stream"] = r["hvp16"] / r["stream_K_twice"]
    r["16*hvp/hvp16"] = N_COLS * r["hvp"] / r["hvp16"]
    return r


# ---------------------------------------------------------------------------- naive


def _naive_objective(beta, K, Krr, lam, n_pos, n_neg):
    """The objective with the explicit m+ × m− pair matrix (smoothed hinge, ε = EPS)."""
    f = jnp.matmul(K, beta, precision=_HI)
    z = f[:n_pos, None] - f[None, n_pos : n_pos + n_neg]
    ell = jnp.where(z < 1 - 2 * EPS, 1 - EPS - z, jnp.where(z < 1, (1 - z) ** 2 / (4 * EPS), 0.0))
    reg = 0.5 * lam * jnp.vdot(beta, jnp.matmul(Krr, beta, precision=_HI))
    return jnp.sum(ell) / (n_pos * n_neg) + reg


@functools.partial(jax.jit, static_argnames=_STATIC)
def _naive_vg(beta, K, Krr, lam, n_pos, n_neg):
    return jax.value_and_grad(_naive_objective)(beta, K, Krr, lam, n_pos, n_neg)


@functools.partial(jax.jit, static_argnames=_STATIC)
def _naive_hvp(beta, v, K, Krr, lam, n_pos, n_neg):
    grad = lambda b: jax.grad(_naive_objective)(b, K, Krr, lam, n_pos, n_neg)
    return jax.jvp(grad, (beta,), (v,))[1]


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def bench_naive(blk: dict, model, prod: dict, repeats: int) -> dict:
    """Stage 4: explicit pair matrix + autodiff, against our value+grad and Hv."""
    pairs = blk["n_pos"] * blk["n_neg"]
    if pairs > NAIVE_MAX_PAIRS:
        return {"skipped": f"{pairs:.2e} pairs > {NAIVE_MAX_PAIRS:.0e}"}
    K, Krr, loss = blk["K"], blk["Krr"], blk["loss"]
    st = dict(n_pos=blk["n_pos"], n_neg=blk["n_neg"])
    lam = jnp.asarray(LAM, K.dtype)
    beta = model.coef
    v = jax.random.normal(jax.random.key(2), beta.shape, K.dtype)
    # Agreement is checked away from the optimum, where the gradient is not ~0.
    b1 = beta + 0.1 * jnp.linalg.norm(beta) / jnp.linalg.norm(v) * v
    F, grad, w = _fun1(K, Krr, lam, b1, loss, **st)
    hv = _hvp1(K, Krr, lam, w, v, loss, **st)
    Fn, gn = _naive_vg(b1, K, Krr, lam, **st)
    hn = _naive_hvp(b1, v, K, Krr, lam, **st)
    vg = functools.partial(_naive_vg, **st)
    hvp = functools.partial(_naive_hvp, **st)
    t_vg = C.time_median(vg, beta, K, Krr, lam, repeats=repeats)["median"]
    t_hv = C.time_median(hvp, beta, v, K, Krr, lam, repeats=repeats)["median"]
    return {
        "pairs": pairs,
        "value_grad": t_vg,
        "hvp": t_hv,
        "speedup_value_grad": t_vg / prod["value_grad"],
        "speedup_hvp": t_hv / prod["hvp"],
        "rel_diff_value": _rel(F, Fn),
        "rel_diff_grad": _rel(grad, gn),
        "rel_diff_hvp": _rel(hv, hn),
    }


# ---------------------------------------------------------------------------- one size


def _progress(m: int, t0: float, what: str) -> None:
    print(f"  m = {m}: {what} ({time.perf_counter() - t0:.1f} s)", flush=True)


def run_size(m: int, repeats: int, skip_seq: bool, budget: float, skip_grid: bool = False) -> dict:
    """Every stage for one size; memory snapshots between stages."""
    rho = rho_for(m)
    t0 = time.perf_counter()
    X, y = make_data(m, rho)
    res = {"m": m, "rho": rho, "d": D, "dtype": DTYPE, "m_pos": int((y == 1).sum())}
    res["data_seconds"] = time.perf_counter() - t0
    mem = {"rss_after_data": C.current_rss_bytes()}
    _progress(m, t0, "data")
    model, res["single"] = bench_single(X, y, repeats, budget)
    mem["peak_after_single"] = C.peak_rss_bytes()
    _progress(m, t0, "fit")
    seq = not skip_seq and m < 1_000_000
    grid_model, res["grid"] = (None, None) if skip_grid else bench_grid(X, y, repeats, seq, budget)
    mem["peak_after_grid"] = C.peak_rss_bytes()
    mem["device_peak_after_fits"] = C.device_peak_bytes()
    _progress(m, t0, "λ grid")
    blk = build_block(X, y, model)
    res["n_basis"] = int(blk["K"].shape[1])
    res["products"] = bench_products(blk, model, grid_model, max(repeats, 5))
    mem["peak_after_products"] = C.peak_rss_bytes()
    _progress(m, t0, "products")
    res["naive"] = bench_naive(blk, model, res["products"], repeats)
    mem["peak_total"] = C.peak_rss_bytes()
    mem["device_peak_total"] = C.device_peak_bytes()
    _progress(m, t0, "naive")
    mem["K_bytes"] = m * res["n_basis"] * np.dtype(DTYPE).itemsize
    mem["K_bytes_padded"] = int(blk["K"].nbytes)
    mem["peak_fit/K"] = mem["peak_after_grid"] / mem["K_bytes"]
    if mem["rss_after_data"] is not None:
        extra = mem["peak_after_grid"] - mem["rss_after_data"]
        mem["(peak_fit-baseline)/K"] = extra / mem["K_bytes"]
    res["memory"] = mem
    res["seconds"] = time.perf_counter() - t0
    return res


def _child_cmd(m: int, out: Path, args) -> list[str]:
    cmd = [sys.executable, __file__, "--child", str(m), "--child-out", str(out)]
    cmd += ["--repeats", str(args.repeats), "--stage-budget", str(args.stage_budget)]
    return (
        cmd
        + (["--skip-seq"] if args.skip_seq else [])
        + (["--skip-grid"] if args.skip_grid else [])
    )


def _child_result(m: int, out: Path, code: int) -> dict:
    if code != 0 or not out.exists():
        return {"m": m, "error": f"subprocess exited with code {code}"}
    return json.loads(out.read_text())


def run_children(sizes: list[int], args) -> list[dict]:
    """Each size in a fresh interpreter (per-size peak RSS, cold compiles), ``--jobs`` at once."""
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        pending, running = list(sizes), []
        while pending or running:
            while pending and len(running) < args.jobs:
                m = pending.pop(0)
                out = Path(tmp) / f"{m}.json"
                running.append((m, out, subprocess.Popen(_child_cmd(m, out, args))))
            m, out, proc = running.pop(0)
            results[m] = _child_result(m, out, proc.wait())
    return [results[m] for m in sizes]


# ---------------------------------------------------------------------------- printing


def _s(x) -> str:
    return C.fmt_seconds(x)


def _r(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def _print_table(title: str, header: list[str], rows: list[list[str]]) -> None:
    if not rows:
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))


def _status(info) -> str:
    s = info["status"]
    if isinstance(s, str):
        return s
    return ",".join(f"{n}×{s.count(n)}" for n in sorted(set(s)))


def _iters(info) -> str:
    it = np.atleast_1d(info["iterations"])
    return f"{int(it.max())}/{int(it.sum())}"


def print_fit(results: list[dict]) -> None:
    rows = []
    for r in results:
        s, mem = r["single"], r["memory"]
        rows.append(
            [
                str(r["m"]), str(r["m_pos"]), _s(s["time"]["first"]), _s(s["time"]["median"]),
                str(s["info"]["iterations"]), str(s["info"]["cg_iterations"]),
                s["info"]["status"], C.fmt_bytes(mem["K_bytes"]),
                C.fmt_bytes(mem["rss_after_data"]), C.fmt_bytes(mem["peak_after_grid"]),
                _r(mem["peak_fit/K"]), _r(mem.get("(peak_fit-baseline)/K")),
            ]
        )  # fmt: skip
    header = ["m", "m+", "fit 1st", "fit med", "Newton", "CG", "status", "K bytes",
              "RSS base", "peak RSS", "peak/K", "(peak-base)/K"]  # fmt: skip
    _print_table("(1) fit at λ = 2^-8 (first call with compile; median of repeats)", header, rows)


def print_grid(results: list[dict]) -> None:
    rows = []
    for r in results:
        g = r["grid"]
        seq = g.get("seq")
        rows.append(
            [
                str(r["m"]), _s(g["batch"]["time"]["first"]), _s(g["batch"]["time"]["median"]),
                _s(g["warm"]["time"]["median"]), _s(g["warm4"]["time"]["median"]),
                _s(seq["time"]["median"]) if seq else "-", _r(g.get("batch/seq")),
                _r(g.get("warm/seq")), _r(g.get("warm4/seq")), _iters(g["batch"]["info"]),
                _iters(g["warm"]["info"]), _iters(g["warm4"]["info"]),
                _iters(seq["info"]) if seq else "-", _status(g["batch"]["info"]),
            ]
        )  # fmt: skip
    header = ["m", "batch 1st", "batch", "warm", "warm4", "seq", "batch/seq", "warm/seq",
              "warm4/seq", "Newton max/sum: batch", "warm", "warm4", "seq",
              "batch status"]  # fmt: skip
    _print_table("(2) 16-value λ grid 2^-20..2^10 (medians; seq = 16 fit calls)", header, rows)


def print_products(results: list[dict]) -> None:
    rows = []
    for r in results:
        p = r["products"]
        rows.append(
            [
                str(r["m"]), str(r["n_basis"]), _s(p["Kv"]), _s(p["gK"]), _s(p["hvp"]),
                _s(p["value_grad"]), _r(p["hvp/(Kv+gK)"]), _r(p["hvp/stream"]), _s(p["KV"]),
                _s(p["GK"]), _s(p["hvp16"]), _s(p["value_grad16"]), _r(p["hvp16/(KV+GK)"]),
                _r(p["hvp16/stream"]), f"{p['read_GBps_sum']:.1f}/{p['read_GBps_matvec']:.1f}",
            ]
        )  # fmt: skip
    header = ["m", "|R|", "K@v", "g@K", "Hv", "val+grad", "Hv/(Kv+gK)", "Hv/stream", "K@V16",
              "G16@K", "Hv16", "val+grad16", "Hv16/(KV+GK)", "Hv16/stream",
              "GB/s sum/K@v"]  # fmt: skip
    _print_table("(3) products on the kernel block (medians)", header, rows)


def print_naive(results: list[dict]) -> None:
    rows = []
    for r in results:
        n, p = r["naive"], r["products"]
        if "skipped" in n:
            rows.append([str(r["m"])] + ["-"] * 6 + [n["skipped"]])
            continue
        rows.append(
            [
                str(r["m"]), f"{n['pairs']:.2g}", _s(n["value_grad"]), _s(p["value_grad"]),
                f"{n['speedup_value_grad']:.1f}x", _s(n["hvp"]), _s(p["hvp"]),
                f"{n['speedup_hvp']:.1f}x  (rel.diff F {n['rel_diff_value']:.1e}, "
                f"grad {n['rel_diff_grad']:.1e}, Hv {n['rel_diff_hvp']:.1e})",
            ]
        )  # fmt: skip
    header = ["m", "pairs", "naive v+g", "ours v+g", "speed-up", "naive Hv", "ours Hv",
              "speed-up"]  # fmt: skip
    _print_table("(4) naive pair matrix + autodiff vs sorted windows (medians)", header, rows)


def print_all(results: list[dict]) -> None:
    ok = [r for r in results if "error" not in r]
    for r in results:
        if "error" in r:
            print(f"\nm = {r['m']}: FAILED ({r['error']})")
    if not ok:
        return
    print_fit(ok)
    print_grid([r for r in ok if r.get("grid")])
    print_products(ok)
    print_naive(ok)
    for r in ok:
        for stage, t in [("fit", r["single"]["time"])] + [
            (f"grid/{k}", r["grid"][k]["time"])
            for k in (*GRID_PATHS, "seq")
            if k in (r["grid"] or {})
        ]:
            for msg in t["warnings"]:
                print(f"\nwarning (m = {r['m']}, {stage}): {msg}")


# ---------------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=None, help="m values (default 1e4-1e6)")
    p.add_argument("--quick", action="store_true", help=f"tiny sizes {QUICK_SIZES} (CI)")
    p.add_argument("--out", type=Path, default=C.OUT_DIR / "core.json", help="JSON output")
    p.add_argument("--repeats", type=int, default=3, help="timed repeats (median)")
    p.add_argument(
        "--stage-budget",
        type=float,
        default=300.0,
        help="seconds: fewer fit repeats (>= 1) when repeats x first call exceeds this",
    )
    p.add_argument("--skip-seq", action="store_true", help="skip the 16 one-λ fits")
    p.add_argument("--skip-grid", action="store_true", help="skip the λ-grid stage")
    p.add_argument("--in-process", action="store_true", help="no subprocess per size")
    p.add_argument(
        "--jobs", type=int, default=None, help="sizes run at once (default 1; --quick: 2)"
    )
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.sizes is None:
        args.sizes = list(QUICK_SIZES if args.quick else SIZES)
    if args.jobs is None:
        # --quick is a CI smoke test bounded by compile time (~25 s a size on 2 cores): its two
        # sizes run side by side, so its timings share the cores and are not for comparison.
        args.jobs = 2 if args.quick else 1
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child is not None:
        res = run_size(args.child, args.repeats, args.skip_seq, args.stage_budget, args.skip_grid)
        C.write_json(args.child_out, res)
        print(f"m = {args.child}: done in {res['seconds']:.1f} s", flush=True)
        return 0
    env = C.env_info()
    print(f"jaxrank core bench: {env['platform']} ({env['device_kind']}), jax {env['jax']}, "
          f"{env['cpu_count']} CPUs, {DTYPE}, d = {D}, sizes {args.sizes}", flush=True)  # fmt: skip
    t0 = time.perf_counter()
    if args.in_process:
        results = [
            run_size(m, args.repeats, args.skip_seq, args.stage_budget, args.skip_grid)
            for m in args.sizes
        ]
    else:
        results = run_children(args.sizes, args)
    print_all(results)
    report = {
        "benchmark": "core",
        "env": env,
        "settings": {
            "sizes": args.sizes,
            "rho": {str(m): rho_for(m) for m in args.sizes},
            "d": D,
            "t": T_OVERLAP,
            "seed": SEED,
            "dtype": DTYPE,
            "eps": EPS,
            "lam": LAM,
            "lam_grid": LAM_GRID.tolist(),
            "repeats": args.repeats,
            "stage_budget": args.stage_budget,
            "skip_seq": args.skip_seq,
            "quick": args.quick,
            "naive_max_pairs": NAIVE_MAX_PAIRS,
            "subprocess_per_size": not args.in_process,
            "jobs": 1 if args.in_process else args.jobs,
        },
        "results": results,
        "seconds": time.perf_counter() - t0,
    }
    path = C.write_json(args.out, report)
    print(f"\nwrote {path} ({report['seconds']:.0f} s)")
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
