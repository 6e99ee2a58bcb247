"""Roofline of the solver's products: how close each is to streaming the kernel block once
(issue 6, item 1).

The fit (seed 000 eq. 11 with the smoothed hinge of eq. 13)

    F(β) = 1/(m+ m−) Σ ℓ(f_i − f_j) + (λ/2) βᵀ K_RR β,    f = K β,

is solved by trust-region Newton-CG; ``K = K_{·R}`` is the ``(m_pad, |R|)`` kernel block
(``kernel_block(..., padded=True, multiple=product_block(m))``, rows [positives; negatives;
padding]). Per Newton step it computes one value+gradient (``K @ β``, the sorted windows,
``g @ K``), and per CG step one Hessian-vector product (``K @ v``, the pairwise Hv on the
step's windows, ``g @ K``). Each product reads all of ``K`` (|R| ≪ m: memory-bound), so its
floor is the time of one pass over ``K``:

- **stream** = median time of ``jnp.sum(K)`` (one read of every byte of the block, nothing
  written); ``bandwidth`` = bytes(K) / stream. (A copy is not used: on CPU it is dominated by
  page faults of the freshly allocated output, not by the read.) The ``K @ v`` read rate is
  reported next to it.
- for each product: its median time, ``ratio`` = time / stream, and ``per_pass`` = time /
  (passes · stream) where ``passes`` is how many times the product must read ``K``: 1 for
  ``K @ v`` and ``g @ K``, 2 for Hv and value+gradient. A product is **at roofline** when
  ``per_pass ≤ 2`` (within 2× of streaming the block as often as it must).
- **compute roof**: ``gemm`` = the best median rate of a square float32 ``A @ A`` (side 2048
  and 4096), the machine's matrix-multiply rate; ``compute`` = the products' arithmetic
  (``passes · 2 · m · |R| · L``) at that rate, and ``per_roof`` = time / max(passes · stream,
  compute), the classical roofline. Where ``per_roof`` equals ``per_pass`` the arithmetic fits
  under the memory roof and bandwidth, not arithmetic, is the floor.
- the λ grid batched as the vmapped solver runs it, for L = 1, 2, 4, 8, 16, on the block as
  the fit stores it for L λ (from L = 4 on CPU with ``Kᵀ`` beside ``K``,
  :class:`jaxrank.kernels.DualBlock`): ``K @ V`` (``V``: |R| × L), ``G @ K`` (``jax.vmap`` of
  :func:`jaxrank.kernels.rmatvec` as the vmapped gradient runs it: ``(Kᵀ Gᵀ)ᵀ`` with ``Kᵀ``
  stored, else the two-level sum), for comparison ``G@K`` on ``K`` alone (``GK_rows``, the
  vmapped two-level sum) and ``G@K plain`` (one ``kernels.rmatmul``, the one-level sum), the
  batched Hv and value+gradient (``jax.vmap`` of the :func:`jaxrank.fit.objective_closures`
  pair over λ, windows per λ). ``slope`` is the
  least-squares slope of the batched-Hv time against L — the measured cost of each extra λ —
  also relative to one stream and to the single Hv.
- the same single and L = max products on the **streamed** block
  (:func:`jaxrank.kernels.streamed_block`: every product recomputes the kernel chunk by chunk)
  at one size (``--streamed-size``, default the middle size); ``recompute`` = streamed −
  stored time, next to the time to build the stored block once (one full kernel evaluation).

Data as ``bench/core.py``: ``make_rare_class(m, ρ, t=0.75, d=40, seed=0)`` standardised, ρ = 1 %
below m = 10⁶ and 0.1 % from 10⁶ (|R| = m+ = 100, 1000, 1000 at m = 10⁴, 10⁵, 10⁶), RankRC basis
(the positives), Gaussian kernel with the paper's σ², float32, smoothed hinge ε = 0.5, λ = 2⁻⁸
(λ_l = 2^{-20..10} for the grid). The products are timed at ``β = c·1/|R|`` (the Parzen score of
the rare class, ``c`` scaling the scores to unit standard deviation, so pairs fall on all three
pieces of ℓ), and at ``β_l = 2^{(l/(L−1))·2−1} β`` for the batch (different windows per λ). The
cost of a product does not depend on β beyond that.

Timings: medians of at least ``--repeats`` blocked calls after a warm-up (compile), more (up
to 50) while they fit in ``--time-budget`` seconds. The machines are shared and noisy: ratios
within one run are what to compare. Each size runs in its own subprocess (memory released).

Usage::

    python bench/roofline.py                      # m = 1e4, 1e5, 1e6 (~5 GB at 1e6; minutes)
    python bench/roofline.py --sizes 100000 --lams 1 4 16
    python bench/roofline.py --quick              # m = 2000, L = 1, 2 (CI smoke test)

Writes ``bench/out/roofline.json`` (or ``--out``): environment, settings, every timing and ratio.
"""

from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common as C
import jax
import jax.numpy as jnp
import numpy as np

import jaxrank
from jaxrank import kernels
from jaxrank.fit import keep_transpose, objective_closures
from jaxrank.losses import smoothed_hinge

DTYPE = "float32"
D = 40
T_OVERLAP = 0.75
SEED = 0
EPS = 0.5
LAM = 2.0**-8
SIZES = (10_000, 100_000, 1_000_000)
QUICK_SIZES = (2_000,)
LS = (1, 2, 4, 8, 16)
QUICK_LS = (1, 2)
PASSES = {"Kv": 1, "gK": 1, "hvp": 2, "value_grad": 2}


# ---------------------------------------------------------------------------- data


def rho_for(m: int) -> float:
    """ρ = 1 % below m = 10⁶, 0.1 % from 10⁶ on (as ``bench/core.py``)."""
    return 0.01 if m < 1_000_000 else 0.001


def make_data(m: int, rho: float) -> tuple[np.ndarray, np.ndarray]:
    """Simulated rare-class rows (seed 000 Sec. 6.1), standardised (as ``bench/core.py``)."""
    X, y = jaxrank.datasets.make_rare_class(m, rho, T_OVERLAP, d=D, seed=SEED)
    return (X - X.mean(axis=0)) / X.std(axis=0), y


def lam_grid(L: int) -> np.ndarray:
    """L values spread over 2^-20..2^10 (the bench grid's range)."""
    return 2.0 ** np.linspace(-20, 10, L)


def build(m: int) -> dict:
    """The fit's stored block, its streamed twin, K_RR, the loss and a Parzen β."""
    X, y = make_data(m, rho_for(m))
    pos = np.asarray(y) == 1
    order = np.concatenate([np.flatnonzero(pos), np.flatnonzero(~pos)])
    kernel = kernels.resolve_kernel(None, X)
    Xo = jnp.asarray(X[order], DTYPE)
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    B = Xo[:n_pos]
    block = kernels.product_block(m)
    fn = lambda: kernels.kernel_block(kernel, Xo, B, padded=True, multiple=block)
    t_build = C.time_first(fn)[1]  # result dropped at once: one block in memory at a time
    K, t_build2 = C.time_first(fn)  # without compilation
    Krr = jax.block_until_ready(kernel(B, B))
    loss = jax.tree.map(lambda v: jnp.asarray(v, DTYPE), smoothed_hinge(EPS))
    f1 = kernels.matmul(K, jnp.full((n_pos,), 1.0 / n_pos, K.dtype))[: n_pos + n_neg]
    beta = jnp.full((n_pos,), 1.0 / n_pos, K.dtype) / jnp.std(f1)
    return dict(
        K=K, Xo=Xo, B=B, kernel=kernel, Krr=Krr, loss=loss, beta=beta, n_pos=n_pos,
        n_neg=n_neg, block=block, build_first=t_build, build=t_build2,
    )  # fmt: skip


# ---------------------------------------------------------------------------- products

_ST = ("n_pos", "n_neg", "block")


def _closures(K, Krr, lam, loss, n_pos, n_neg, block):
    return objective_closures(K, Krr, lam, loss, n_pos, n_neg, block)


@jax.jit
def _stream(K):
    return jnp.sum(K)


@jax.jit
def _gemm(A):
    return A @ A


def gemm_rate(tm, sizes=(2048, 4096)) -> dict:
    """The machine's float32 matrix-multiply rate: the best median over square products of
    ``sizes`` (the compute roof of the products)."""
    rates = {}
    for n in sizes:
        A = jax.random.normal(jax.random.key(3), (n, n), DTYPE)
        rates[str(n)] = 2 * n**3 / tm(lambda A=A: _gemm(A))
        del A
    return {"what": f"A @ A, A float32 square of side {sizes}", "flops_per_s": max(rates.values()),
            "by_size": rates}  # fmt: skip


@jax.jit
def _matmul(K, V):
    return kernels.matmul(K, V)


@functools.partial(jax.jit, static_argnames="block")
def _rmatvec(g, K, block):
    return kernels.rmatvec(g, K, block)


@functools.partial(jax.jit, static_argnames="block")
def _rmatvecB(G, K, block):
    return jax.vmap(lambda g: kernels.rmatvec(g, K, block))(G)


@jax.jit
def _rmatmul(G, K):
    return kernels.rmatmul(G, K)


@functools.partial(jax.jit, static_argnames=_ST)
def _fun(K, Krr, lam, beta, loss, n_pos, n_neg, block):
    return _closures(K, Krr, lam, loss, n_pos, n_neg, block)[0](beta)


@functools.partial(jax.jit, static_argnames=_ST)
def _hvp(K, Krr, lam, lin, v, loss, n_pos, n_neg, block):
    return _closures(K, Krr, lam, loss, n_pos, n_neg, block)[1](lin, v)


@functools.partial(jax.jit, static_argnames=_ST)
def _funB(K, Krr, lams, betas, loss, n_pos, n_neg, block):
    f = lambda lam, b: _closures(K, Krr, lam, loss, n_pos, n_neg, block)[0](b)
    return jax.vmap(f)(lams, betas)


@functools.partial(jax.jit, static_argnames=_ST)
def _hvpB(K, Krr, lams, lins, vs, loss, n_pos, n_neg, block):
    f = lambda lam, lin, v: _closures(K, Krr, lam, loss, n_pos, n_neg, block)[1](lin, v)
    return jax.vmap(f)(lams, lins, vs)


def _timer(repeats: int, budget: float):
    """``fn -> median seconds``: a compile call, then at least ``repeats`` timed calls, more
    (≤ 50 in all) while they fit in ``budget`` seconds (the first timed call sets the count)."""

    def tm(fn) -> float:
        C.time_first(fn)
        t = C.time_first(fn)[1]
        n = int(min(50, max(repeats, budget // max(t, 1e-9))))
        runs = [t] + C.time_median(fn, repeats=n - 1, warmup=0)["runs"] if n > 1 else [t]
        return float(np.median(runs))

    return tm


def single_products(K, blk: dict, tm) -> dict:
    """``K@v``, ``g@K``, Hv and value+gradient for one λ on block ``K`` (stored or streamed)."""
    st = dict(n_pos=blk["n_pos"], n_neg=blk["n_neg"], block=blk["block"])
    Krr, loss, beta = blk["Krr"], blk["loss"], blk["beta"]
    kv, kg = jax.random.split(jax.random.key(1))
    v = jax.random.normal(kv, beta.shape, K.dtype)
    g = jax.random.normal(kg, (K.shape[0],), K.dtype)
    lam = jnp.asarray(LAM, K.dtype)
    lin = _fun(K, Krr, lam, beta, loss, **st)[2]
    return {
        "Kv": tm(lambda: _matmul(K, v)),
        "gK": tm(lambda: _rmatvec(g, K, blk["block"])),
        "hvp": tm(lambda: _hvp(K, Krr, lam, lin, v, loss, **st)),
        "value_grad": tm(lambda: _fun(K, Krr, lam, beta, loss, **st)),
    }


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
    lams = jnp.asarray(lam_grid(L), K.dtype)
    scale = jnp.asarray(2.0 ** (np.linspace(-1.0, 1.0, L) if L > 1 else np.zeros(1)), K.dtype)
    betas = scale[:, None] * blk["beta"][None, :]
    lins = _funB(Kf, Krr, lams, betas, loss, **st)[2]
    VT = V.T
    out = {
        "KV": tm(lambda: _matmul(Kf, VT)),
        "GK": tm(lambda: _rmatvecB(G, Kf, blk["block"])),
        "GK_rows": tm(lambda: _rmatvecB(G, K, blk["block"])),
        "GK_plain": tm(lambda: _rmatmul(G, K)),
        "hvp": tm(lambda: _hvpB(Kf, Krr, lams, lins, V, loss, **st)),
        "value_grad": tm(lambda: _funB(Kf, Krr, lams, betas, loss, **st)),
    }
    return out


GK_LABEL = "G@K as the fit runs it (L ≥ 4 on CPU: (KᵀGᵀ)ᵀ, Kᵀ stored beside K)"
BATCH_PASSES = {"KV": 1, "GK": 1, "GK_rows": 1, "GK_plain": 1, "hvp": 2, "value_grad": 2}


def _ratios(times: dict, passes: dict, stream: float, flops: float, rate: float) -> dict:
    # ``flops`` per pass over K (2·m·|R|·columns); ``roof`` is the classical roofline, the
    # larger of the passes' stream time and the products' arithmetic at the GEMM rate.
    out = {}
    for k, t in times.items():
        compute = passes[k] * flops / rate
        roof = max(passes[k] * stream, compute)
        out[k] = {
            "time": t,
            "ratio": t / stream,
            "per_pass": t / (passes[k] * stream),
            "at_roofline": bool(t / (passes[k] * stream) <= 2.0),
            "compute": compute,
            "per_roof": t / roof,
        }
    return out


def run_size(m: int, ls: list[int], streamed: bool, repeats: int, budget: float) -> dict:
    t0 = time.perf_counter()
    blk = build(m)
    K = blk["K"]
    tm = _timer(repeats, budget)
    res = {
        "m": m, "rho": rho_for(m), "m_pos": blk["n_pos"], "n_basis": int(K.shape[1]),
        "m_pad": int(K.shape[0]), "block": blk["block"], "K_bytes": int(K.nbytes),
        "build_first": blk["build_first"], "build": blk["build"],
    }  # fmt: skip
    print(f"  m = {m}: block built ({time.perf_counter() - t0:.1f} s)", flush=True)
    stream = tm(lambda: _stream(K))
    res["stream"] = {"what": "jnp.sum(K)", "time": stream, "GBps": K.nbytes / stream / 1e9}
    res["gemm"] = gemm_rate(tm)
    rate = res["gemm"]["flops_per_s"]
    flops = 2.0 * K.shape[0] * K.shape[1]  # one product with one column
    single = single_products(K, blk, tm)
    res["stream"]["Kv_GBps"] = K.nbytes / single["Kv"] / 1e9
    res["single"] = _ratios(single, PASSES, stream, flops, rate)
    res["single"]["hvp/(Kv+gK)"] = single["hvp"] / (single["Kv"] + single["gK"])
    print(f"  m = {m}: single products ({time.perf_counter() - t0:.1f} s)", flush=True)

    res["batched"] = {}
    for L in ls:
        b = batched_products(K, blk, L, tm)
        res["batched"][str(L)] = _ratios(b, BATCH_PASSES, stream, L * flops, rate)
        print(f"  m = {m}: L = {L} ({time.perf_counter() - t0:.1f} s)", flush=True)
    Ls = np.asarray(ls, float)
    t_h = np.asarray([res["batched"][str(L)]["hvp"]["time"] for L in ls])
    if len(ls) >= 2:
        slope, intercept = np.polyfit(Ls, t_h, 1)
        res["hvp_per_lambda"] = {
            "slope": float(slope),
            "intercept": float(intercept),
            "slope/stream": float(slope / stream),
            "slope/hvp1": float(slope / single["hvp"]),
            "hvpL/(L*hvp1)": {
                str(L): float(t / (L * single["hvp"])) for L, t in zip(ls, t_h, strict=True)
            },
        }

    if streamed:
        res["streamed"] = bench_streamed(blk, max(ls), tm, single, res["batched"][str(max(ls))])
        print(f"  m = {m}: streamed block ({time.perf_counter() - t0:.1f} s)", flush=True)
    res["device_peak_bytes"] = C.device_peak_bytes()
    res["peak_rss_bytes"] = C.peak_rss_bytes()
    res["seconds"] = time.perf_counter() - t0
    return res


def bench_streamed(blk: dict, L: int, tm, stored: dict, stored_b: dict) -> dict:
    """Single and L-column products on the streamed block: the cost of recomputing K per use."""
    S = kernels.streamed_block(blk["kernel"], blk["Xo"], blk["B"], multiple=blk["block"])
    if S.shape != blk["K"].shape:  # same chunking as the stored block, or the test is moot
        raise RuntimeError(f"streamed block {S.shape} != stored {blk['K'].shape}")
    single = single_products(S, blk, tm)
    batched = batched_products(S, blk, L, tm)
    out = {"L": L, "build": blk["build"], "single": {}, "batched": {}}
    for name, t in single.items():
        out["single"][name] = {
            "time": t,
            "stored": stored[name],
            "streamed/stored": t / stored[name],
            "recompute": t - stored[name],
            "recompute/build": (t - stored[name]) / blk["build"],
        }
    for name, t in batched.items():
        s = stored_b[name]["time"]
        out["batched"][name] = {
            "time": t,
            "stored": s,
            "streamed/stored": t / s,
            "recompute": t - s,
            "recompute/build": (t - s) / blk["build"],
        }
    return out


# ---------------------------------------------------------------------------- subprocesses


def _child_cmd(m: int, out: Path, args) -> list[str]:
    cmd = [sys.executable, __file__, "--child", str(m), "--child-out", str(out)]
    cmd += ["--repeats", str(args.repeats), "--time-budget", str(args.time_budget)]
    cmd += ["--lams", *map(str, args.lams), "--streamed-size", str(args.streamed_size)]
    return cmd


def run_children(args) -> list[dict]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for m in args.sizes:
            out = Path(tmp) / f"{m}.json"
            code = subprocess.run(_child_cmd(m, out, args)).returncode
            if code != 0 or not out.exists():
                results.append({"m": m, "error": f"subprocess exited with code {code}"})
            else:
                results.append(json.loads(out.read_text()))
    return results


# ---------------------------------------------------------------------------- printing


def _s(x) -> str:
    return C.fmt_seconds(x)


def _roof(r: dict) -> str:
    # results written before the compute roof was measured have no per_roof
    return f"/{r['per_roof']:.2f}" if "per_roof" in r else ""


def _cell(r: dict) -> str:
    return f"{_s(r['time'])} {r['per_pass']:.2f}{'' if r['at_roofline'] else '*'}{_roof(r)}"


def _table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))


def print_all(results: list[dict], ls: list[int]) -> None:
    for r in results:
        if "error" in r:
            print(f"\nm = {r['m']}: FAILED ({r['error']})")
    ok = [r for r in results if "error" not in r]
    if not ok:
        return
    rows = []
    for r in ok:
        s = r["single"]
        rows.append(
            [
                str(r["m"]), str(r["n_basis"]), C.fmt_bytes(r["K_bytes"]),
                _s(r["stream"]["time"]), f"{r['stream']['GBps']:.1f}",
                f"{r['stream']['Kv_GBps']:.1f}", _cell(s["Kv"]), _cell(s["gK"]),
                _cell(s["hvp"]), _cell(s["value_grad"]), f"{s['hvp/(Kv+gK)']:.2f}",
                f"{r['gemm']['flops_per_s'] / 1e9:.0f}" if "gemm" in r else "-",
            ]
        )  # fmt: skip
    header = ["m", "|R|", "K", "stream", "GB/s", "K@v GB/s", "K@v", "g@K", "Hv",
              "val+grad", "Hv/(Kv+gK)", "GEMM GFLOP/s"]  # fmt: skip
    _table(
        "one λ: median time, time / (passes x stream) (* = not at roofline, > 2), "
        "/ time / max(passes x stream, FLOPs / GEMM rate)",
        header,
        rows,
    )
    labels = (
        ("KV", "K@V"),
        ("GK", GK_LABEL),
        ("GK_rows", "G@K on K alone (vmapped two-level rmatvec)"),
        ("GK_plain", "G@K plain (rmatmul)"),
        ("hvp", "Hv"),
        ("value_grad", "val+grad"),
    )
    for name, label in labels:
        rows = [
            [str(r["m"])] + [_cell(r["batched"][str(L)][name]) for L in ls] for r in ok
        ]  # fmt: skip
        _table(f"batched {label} over L λ (same columns)", ["m"] + [f"L={L}" for L in ls], rows)
    rows = []
    for r in ok:
        h = r.get("hvp_per_lambda")
        if h:
            rows.append(
                [
                    str(r["m"]), _s(h["intercept"]), _s(h["slope"]), f"{h['slope/stream']:.3f}",
                    f"{h['slope/hvp1']:.3f}",
                    " ".join(f"{v:.2f}" for v in h["hvpL/(L*hvp1)"].values()),
                ]
            )  # fmt: skip
    if rows:
        header = ["m", "intercept", "per extra λ", "/stream", "/Hv(1)", "Hv(L)/(L Hv(1))"]
        _table("batched Hv time = intercept + slope·L (least squares)", header, rows)
    for r in ok:
        st = r.get("streamed")
        if not st:
            continue
        rows = []
        for part in ("single", "batched"):
            for name, v in st[part].items():
                label = name if part == "single" else f"{name} (L={st['L']})"
                rows.append(
                    [
                        label, _s(v["stored"]), _s(v["time"]), f"{v['streamed/stored']:.1f}",
                        _s(v["recompute"]), f"{v['recompute/build']:.2f}",
                    ]
                )  # fmt: skip
        header = ["product", "stored", "streamed", "ratio", "recompute", "recompute/build"]
        _table(
            f"streamed block at m = {r['m']} (kernel rebuilt per product; build once "
            f"{_s(st['build'])})",
            header,
            rows,
        )


def _md_cell(r: dict) -> str:
    return f"{_s(r['time'])} ({r['per_pass']:.2f}{'' if r['at_roofline'] else ' ✗'}{_roof(r)})"


def markdown(result: dict) -> str:
    """The result as markdown: the one-λ products against one stream of the block, the batched
    Hv / G@K over L λ, the cost per extra λ and the streamed-block overhead."""
    st = result["settings"]
    ok = [r for r in result["results"] if "error" not in r]
    ls = [str(L) for L in st["lams_L"]]
    lines = [
        f"`make_rare_class(m, ρ, t={st['t']}, d={st['d']})`, RankRC basis, {st['dtype']}, "
        f"λ = {st['lam']:.4g}{' — QUICK' if st.get('quick') else ''}. Cells: median time "
        "(time / (passes × stream)); ✗ = not at roofline (> 2); after the slash, time / max("
        "passes × stream, FLOPs / GEMM rate), the classical roofline with the compute roof "
        "(GEMM rate: the best square float32 `A @ A`). stream = median of `jnp.sum(K)`, "
        "one read of the block. No paper numbers: seed 000 (eq. 18-20) states the O(m m+) cost "
        "per product that these times check; the README target is Hv / (K@v + g@K) ≤ 2.5.",
        "",
        "| m | \\|R\\| | K | stream | GB/s | K@v | g@K | Hv | value+grad | Hv / (K@v + g@K) "
        "| GEMM GFLOP/s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["results"]:
        if "error" in r:
            lines.append(f"| {r['m']:,} | failed: {r['error']} |" + " |" * 9)
            continue
        s1 = r["single"]
        gemm = f"{r['gemm']['flops_per_s'] / 1e9:.0f}" if "gemm" in r else "-"
        lines.append(
            f"| {r['m']:,} | {r['n_basis']} | {C.fmt_bytes(r['K_bytes'])} "
            f"| {_s(r['stream']['time'])} | {r['stream']['GBps']:.1f} | {_md_cell(s1['Kv'])} "
            f"| {_md_cell(s1['gK'])} | {_md_cell(s1['hvp'])} | {_md_cell(s1['value_grad'])} "
            f"| {s1['hvp/(Kv+gK)']:.2f} | {gemm} |"
        )
    for name, label in (
        ("KV", "K@V"), ("GK", GK_LABEL), ("GK_rows", "G@K on K alone (vmapped two-level)"),
        ("hvp", "Hv"), ("value_grad", "value+gradient"),
    ):  # fmt: skip
        if not all(name in r["batched"][L] for r in ok for L in ls if L in r["batched"]):
            continue  # results written before the row existed
        lines += [
            "",
            f"Batched {label} over L λ:",
            "",
            "| m | " + " | ".join(f"L = {L}" for L in ls) + " |",
            "|---:|" + "---:|" * len(ls),
        ]
        for r in ok:
            cells = [_md_cell(r["batched"][L][name]) if L in r["batched"] else "-" for L in ls]
            lines.append(f"| {r['m']:,} | " + " | ".join(cells) + " |")
    slopes = [r for r in ok if r.get("hvp_per_lambda")]
    if slopes:
        lines += [
            "",
            "Batched Hv time = intercept + slope · L (least squares):",
            "",
            "| m | intercept | per extra λ | / stream | / Hv(1) | Hv(L) / (L · Hv(1)) |",
            "|---:|---:|---:|---:|---:|---|",
        ]
        for r in slopes:
            h = r["hvp_per_lambda"]
            lines.append(
                f"| {r['m']:,} | {_s(h['intercept'])} | {_s(h['slope'])} "
                f"| {h['slope/stream']:.3f} | {h['slope/hvp1']:.3f} | "
                + ", ".join(f"{v:.2f}" for v in h["hvpL/(L*hvp1)"].values())
                + " |"
            )
    for r in ok:
        sb = r.get("streamed")
        if not sb:
            continue
        lines += [
            "",
            f"Streamed block at m = {r['m']:,} (the kernel recomputed in every product; building "
            f"the stored block once takes {_s(sb['build'])}):",
            "",
            "| product | stored | streamed | streamed / stored | recompute / build |",
            "|---|---:|---:|---:|---:|",
        ]
        for part in ("single", "batched"):
            for name, v in sb[part].items():
                label = name if part == "single" else f"{name} (L = {sb['L']})"
                lines.append(
                    f"| {label} | {_s(v['stored'])} | {_s(v['time'])} "
                    f"| {v['streamed/stored']:.1f} | {v['recompute/build']:.2f} |"
                )
    return "\n".join(lines)


# ---------------------------------------------------------------------------- main


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=None, help="m values (1e4-1e6)")
    p.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}, L {QUICK_LS} (CI)")
    p.add_argument("--lams", type=int, nargs="+", default=None, help=f"L values (default {LS})")
    p.add_argument(
        "--streamed-size",
        type=int,
        default=None,
        help="m at which the streamed block is timed (default: the middle size; 0: none)",
    )
    p.add_argument("--repeats", type=int, default=5, help="timed repeats at least (median)")
    p.add_argument(
        "--time-budget",
        type=float,
        default=None,
        help="seconds per product: more repeats (<= 50) while they fit (default 1; quick 0.05)",
    )
    p.add_argument("--out", type=Path, default=C.OUT_DIR / "roofline.json", help="JSON output")
    p.add_argument("--in-process", action="store_true", help="no subprocess per size")
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.sizes is None:
        args.sizes = list(QUICK_SIZES if args.quick else SIZES)
    if args.lams is None:
        args.lams = list(QUICK_LS if args.quick else LS)
    if args.time_budget is None:
        args.time_budget = 0.05 if args.quick else 1.0
    if args.streamed_size is None:
        args.streamed_size = sorted(args.sizes)[len(args.sizes) // 2]
    if min(args.lams) < 1:
        p.error("--lams must be >= 1")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child is not None:
        m = args.child
        res = run_size(m, args.lams, m == args.streamed_size, args.repeats, args.time_budget)
        C.write_json(args.child_out, res)
        return 0
    env = C.env_info()
    print(
        f"jaxrank roofline: {env['platform']} ({env['device_kind']}), jax {env['jax']}, "
        f"{env['cpu_count']} CPUs, {DTYPE}, d = {D}, sizes {args.sizes}, L {args.lams}",
        flush=True,
    )
    t0 = time.perf_counter()
    if args.in_process:
        results = [
            run_size(m, args.lams, m == args.streamed_size, args.repeats, args.time_budget)
            for m in args.sizes
        ]
    else:
        results = run_children(args)
    print_all(results, args.lams)
    report = {
        "benchmark": "roofline",
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
            "lams_L": args.lams,
            "streamed_size": args.streamed_size,
            "repeats": args.repeats,
            "time_budget": args.time_budget,
            "stream_rule": "stream = median t(jnp.sum(K)); per_pass = t / (passes * stream); "
            "at_roofline: per_pass <= 2; passes: K@v, g@K, K@V, G@K 1; Hv, value+grad 2; "
            "per_roof = t / max(passes * stream, passes * 2 m |R| L / GEMM rate)",
            "quick": args.quick,
            "subprocess_per_size": not args.in_process,
        },
        "results": results,
        "seconds": time.perf_counter() - t0,
    }
    path = C.write_json(args.out, report)
    print(f"\nwrote {path} ({report['seconds']:.0f} s)")
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
