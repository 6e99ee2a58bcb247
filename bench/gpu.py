"""Scale benchmarks on whatever ``jax.devices()`` offers: GPU readiness (issue 6, item 4).

Results: RESULTS.md §15. Per size, in its own subprocess (per-size device peaks; the parent
never initialises a backend, which on a GPU would take the children's memory): **fit**, one
λ = 2⁻⁸ end to end (first call, then the median of ``--repeats``); **grid**, the 16 λ in one
``fit(..., path="batch")``; **Hv vs streaming** on the fit's kernel block (rows [positives;
negatives; padding]): medians of ``jnp.sum(K)`` (one read: the stream), ``K @ v``, ``g @ K``, one
Hv and one value+gradient at the fitted β. Bandwidth bytes(K)/t per read (Hv reads K twice), as
a fraction of the nominal peak where :data:`NOMINAL_PEAK` knows the device (vendor datasheets;
CPUs "unknown"). Sizes: CPU m = 2000, 10⁴ (``--quick`` 2000, kept tested); a GPU m = 10⁵ …
4·10⁶, each only where the block and rows fit in ``default_memory_budget`` (80 % of the
allocator's limit; else skipped with the bytes needed). Data :func:`_common.scale_data`
(d = 40), RankRC basis, float32, ε = 0.5. ``device.memory_stats()`` after each stage where
reported (not on CPU) and the peak RSS.
"""

import subprocess
import sys
import time
from pathlib import Path

import _common as C
import _data as DH
import jax
import numpy as np

import jaxrank
from jaxrank import kernels

DTYPE, D, T_OVERLAP, SEED, EPS = "float32", 40, 0.75, 0, 0.5
LAM = 2.0**-8
LAM_GRID = 2.0 ** np.arange(-20, 11, 2)
CPU_SIZES, CPU_QUICK = (2_000, 10_000), (2_000,)
GPU_SIZES, GPU_QUICK = (100_000, 1_000_000, 2_000_000, 4_000_000), (100_000,)

# Nominal peak memory bandwidth (bytes/s) by device kind, first match wins; vendor datasheets.
# Matched case-insensitively on substrings of ``device.device_kind``.
NOMINAL_PEAK = (
    (("gh200",), None),  # HBM3 (4.0 TB/s) or HBM3e (4.9 TB/s): not told apart by the name
    (("h200",), 4.8e12),  # H200 SXM / NVL, HBM3e
    (("h100", "nvl"), 3.9e12),
    (("h100", "pcie"), 2.0e12),  # H100 PCIe 80 GB, HBM2e
    (("h100",), 3.35e12),  # H100 SXM5 80 GB, HBM3
    (("a100", "40gb"), 1.555e12),  # A100 40 GB (SXM4 and PCIe)
    (("a100", "pcie"), 1.935e12),  # A100 80 GB PCIe
    (("a100",), 2.039e12),  # A100 80 GB SXM4
)
#: products timed on the block and the reads of K each makes (for the bandwidth)
PASSES = {"stream": 1, "Kv": 1, "gK": 1, "hvp": 2, "value_grad": 2}


def nominal_peak(device_kind: str) -> float | None:
    """Nominal peak memory bandwidth (bytes/s) of a device kind, ``None`` when unknown."""
    kind = device_kind.lower()
    return next((peak for keys, peak in NOMINAL_PEAK if all(k in kind for k in keys)), None)


def plan(m: int, n_basis: int, budget: int) -> dict:
    """Bytes a size needs on the device and whether it fits ``budget``: the stored block (padded
    as the fit pads it), the rows twice (as given and reordered, both on the device while the
    block is built) and ``K_RR`` with its preconditioner factor."""
    item = np.dtype(DTYPE).itemsize
    rows, n_chunks = kernels.chunk_rows(m, n_basis, item, kernels.product_block(m))
    block = rows * n_chunks * n_basis * item
    need = block + 2 * m * D * item + 2 * n_basis * n_basis * item
    return {"K_bytes": block, "need_bytes": need, "budget_bytes": budget, "fits": need <= budget}


def default_sizes(platform: str, quick: bool) -> list[int]:
    """Small on CPU (kept tested), large on an accelerator."""
    cpu = platform == "cpu"
    return list((CPU_QUICK if quick else CPU_SIZES) if cpu else (GPU_QUICK if quick else GPU_SIZES))


def _memory(dev) -> dict | None:
    """``device.memory_stats()`` (integer fields), ``None`` where not implemented (CPU)."""
    try:
        stats = dev.memory_stats()
    except Exception:  # not implemented on every backend
        return None
    ints = {k: int(v) for k, v in (stats or {}).items() if isinstance(v, int | np.integer)}
    return ints if stats else None


def run_size(m: int, repeats: int, budget_s: float) -> dict:
    """Plan, fit, grid and Hv-vs-stream for one size, with memory after each stage."""
    t0, dev, rho = time.perf_counter(), jax.devices()[0], DH.rho_for(m)
    X, y = DH.scale_data(m, t=T_OVERLAP, d=D, seed=SEED)
    X, n_pos = X.astype(DTYPE), int((np.asarray(y) == 1).sum())
    res = {"m": m, "rho": rho, "m_pos": n_pos, "d": D, "dtype": DTYPE}
    res["plan"] = p = plan(m, n_pos, kernels.default_memory_budget(dev))
    res["memory"] = {"start": _memory(dev)}
    if not p["fits"]:
        need, budget = C.fmt_bytes(p["need_bytes"]), C.fmt_bytes(p["budget_bytes"])
        return {**res, "skipped": f"needs {need} > memory budget {budget}"}
    done = lambda stage: print(f"  m = {m}: {stage} ({time.perf_counter() - t0:.1f} s)", flush=True)
    fit = lambda lam: jaxrank.fit(X, y, lam, dtype=DTYPE)
    model, t = C.time_budget(lambda: fit(LAM), repeats, budget_s, record=True)
    res["fit"] = {"lam": LAM, "time": t, "info": DH.model_info(model)}
    res["memory"]["after_fit"] = _memory(dev)
    done("fit")
    grid, t = C.time_budget(lambda: fit(LAM_GRID), repeats, budget_s, record=True)
    info = DH.model_info(grid)
    del grid
    res["grid"] = {"lams": LAM_GRID.tolist(), "path": "batch", "time": t, "info": info}
    res["grid"]["grid/fit"] = t["median"] / res["fit"]["time"]["median"]
    res["grid"]["newton_max"] = int(np.max(info["iterations"]))
    res["memory"]["after_grid"] = _memory(dev)
    done("grid")

    block, (Xo, _, n_neg) = kernels.product_block(m), DH.ordered_rows(X, y, DTYPE)
    K = kernels.kernel_block(model.kernel, Xo, model.basis, padded=True, multiple=block)
    del Xo
    blk = dict(Krr=model.kernel(model.basis, model.basis), beta=model.coef, block=block)
    blk.update(loss=DH.hinge_loss(EPS, DTYPE), n_pos=n_pos, n_neg=n_neg)
    tm = DH.product_timer(max(repeats, 5), 1.0)
    stream = tm(lambda: DH.stream_sum(K))
    prod = DH.single_products(K, blk, tm, LAM)
    times, nbytes, peak = {"stream": stream, **prod}, int(K.nbytes), nominal_peak(dev.device_kind)
    bw = {k: n * nbytes / times[k] for k, n in PASSES.items()}
    res["products"] = pr = {"K_bytes": nbytes, "stream": stream, "stream_what": "jnp.sum(K)"}
    pr.update(prod)
    pr.update({"hvp/stream": prod["hvp"] / stream, "hvp/(2*stream)": prod["hvp"] / (2 * stream)})
    pr["hvp/(Kv+gK)"] = prod["hvp"] / (prod["Kv"] + prod["gK"])
    pr["bandwidth_GBps"] = {k: v / 1e9 for k, v in bw.items()}
    pr["nominal_peak_GBps"] = "unknown" if peak is None else peak / 1e9
    pr["peak_fraction"] = "unknown" if peak is None else {k: v / peak for k, v in bw.items()}
    res["memory"].update(after_products=_memory(dev), peak_rss_bytes=C.peak_rss_bytes())
    res["seconds"] = time.perf_counter() - t0
    done("products")
    return res


def child_main(m: int, out: Path, repeats: int, budget_s: float) -> int:
    dev = jax.devices()[0]
    device = {"platform": dev.platform, "device_kind": dev.device_kind}
    device.update(memory_stats=_memory(dev), memory_budget_bytes=kernels.default_memory_budget(dev))
    peak = nominal_peak(dev.device_kind)
    device["nominal_peak_GBps"] = "unknown" if peak is None else peak / 1e9
    res = {"env": C.env_info(), "device": device}
    try:
        res["result"] = run_size(m, repeats, budget_s)
    except Exception as e:  # e.g. out of device memory: report it with the sizes that ran
        res["result"] = {"m": m, "error": f"{type(e).__name__}: {e}"}
    C.write_json(out, res)
    return 0


HEADER = (
    "m | m+ | K | fit 1st | fit | Newton/CG | grid 1st | grid | grid/fit | stream | Hv | "
    "Hv/2stream | GB/s stream | GB/s Hv | peak frac Hv"
).split(" | ")


def table_rows(results: list[dict]) -> list[list[str]]:
    """One row of :data:`HEADER` per size (a skipped or failed size says why in its last cell)."""
    rows, s = [], C.fmt_seconds
    for r in results:
        if "error" in r or "skipped" in r:
            rows.append([str(r["m"]), *["-"] * (len(HEADER) - 2), r.get("error", r.get("skipped"))])
            continue
        f, g, p = r["fit"], r["grid"], r["products"]
        fi, frac, bw = f["info"], p["peak_fraction"], p["bandwidth_GBps"]
        row = [str(r["m"]), str(r["m_pos"]), C.fmt_bytes(p["K_bytes"]), s(f["time"]["first"])]
        row += [s(f["time"]["median"]), f"{fi['iterations']}/{fi['cg_iterations']} {fi['status']}"]
        row += [s(g["time"]["first"]), s(g["time"]["median"]), f"{g['grid/fit']:.2f}"]
        row += [s(p["stream"]), s(p["hvp"]), f"{p['hvp/(2*stream)']:.2f}", f"{bw['stream']:.1f}"]
        rows.append([*row, f"{bw['hvp']:.1f}", frac if frac == "unknown" else f"{frac['hvp']:.2f}"])
    return rows


def _device_line(device: dict) -> str:
    peak = device["nominal_peak_GBps"]
    return (
        f"device {device['device_kind']} ({device['platform']}), memory budget "
        f"{C.fmt_bytes(device['memory_budget_bytes'])}, nominal peak "
        f"{peak if peak == 'unknown' else f'{peak:.0f} GB/s'}"
    )


def print_all(results: list[dict], device: dict | None) -> None:
    C.print_table(_device_line(device) if device else None, HEADER, table_rows(results))
    for r in results:
        for stage in ("fit", "grid"):
            for msg in r.get(stage, {}).get("time", {}).get("warnings", []):
                print(f"warning (m = {r['m']}, {stage}): {msg}")


def markdown(result: dict) -> str:
    """The RESULTS.md section of a saved run: device line, the table, first-call notes."""
    env, lines = result.get("env") or {}, []
    if commit := env.get("git_commit"):
        lines += [f"Measured at commit `{commit[:7]}` on {env.get('time', '?')}.", ""]
    if result.get("device"):
        s = result["settings"]
        dev = f"{_device_line(result['device'])}; jax {env.get('jax', '?')}, {s['dtype']}"
        lines += [f"{dev}, ρ per size {s['rho']}.", ""]
    rows = [row + ["-"] * (len(HEADER) - len(row)) for row in table_rows(result["results"])]
    lines += [
        *C.md_table(HEADER, rows),
        "",
        "`fit 1st` / `grid 1st`: the first call in a fresh process (XLA compilation included, "
        "empty persistent cache); `fit` / `grid`: median of the repeats after it. `Hv/2stream`: "
        "one Hessian-vector product against two reads of the kernel block (`jnp.sum(K)`).",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    quick, sizes = "the smallest size of the platform (CI)", "m values (default: per platform)"
    p = C.parser("gpu", __doc__, quick, sizes=sizes, repeats=3)
    budget = "seconds: fewer fit repeats (>= 1) when repeats x first call exceeds this"
    p.add_argument("--stage-budget", type=float, default=120.0, help=budget)
    C.add_child_args(p, in_process=False)
    args = p.parse_args(argv)
    if args.child is not None:
        return child_main(args.child, args.child_out, args.repeats, args.stage_budget)
    t0 = time.perf_counter()
    # platform and device of a fresh interpreter: this process initialises no backend
    code = "import jax; d = jax.devices()[0]; print(d.platform); print(d.device_kind)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    platform, kind = out.stdout.strip().splitlines()[-2:]
    sizes = args.sizes or default_sizes(platform, args.quick)
    print(f"jaxrank gpu bench: {platform} ({kind}), sizes {sizes}", flush=True)
    flags = ["--repeats", str(args.repeats), "--stage-budget", str(args.stage_budget)]
    children = C.run_children(__file__, sizes, flags)
    results = [c.get("result", c) for c in children]
    env = next((c["env"] for c in children if "env" in c), None)
    device = next((c["device"] for c in children if "device" in c), None)
    print_all(results, device)
    peaks = [[list(k), None if v is None else v / 1e9] for k, v in NOMINAL_PEAK]
    settings = dict(sizes=sizes, rho={str(m): DH.rho_for(m) for m in sizes}, d=D, t=T_OVERLAP)
    settings.update(seed=SEED, dtype=DTYPE, eps=EPS, lam=LAM, lam_grid=LAM_GRID.tolist())
    settings.update(repeats=args.repeats, stage_budget=args.stage_budget, quick=args.quick)
    report = {"benchmark": "gpu", "env": env, "device": device}
    report.update(settings={**settings, "nominal_peak_table_GBps": peaks}, results=results)
    report["seconds"] = time.perf_counter() - t0
    C.write_report(report, args.out)
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
