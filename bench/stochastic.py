"""Stochastic RankRC against batch RankRC: test AUC and peak memory (issue 4, item 3).

Seed 000 Sec. 7, extension 3: when the ``m × m+`` kernel block ``K_{·+}`` does not fit in memory,
keep only ``K_{++}`` and learn from minibatches of majority rows
(:func:`jaxrank.stochastic.fit_rankrc_stochastic`). Done-when of the issue: at m = 2·10⁵,
ρ = 0.5 % the stochastic fit reaches a test AUC within 1 point of batch RankRC
(:func:`jaxrank.fit_rankrc`) while never holding ``K_{·+}``.

Data: ``make_rare_class`` (seed 000 Sec. 6.1, t = 0.75, d = 5) with one draw of the centres and
separate keys for the training rows (m, ρ) and the test rows (``--test`` rows, same ρ),
standardised on the training rows. Both methods fit the same λ (default 2⁻⁸: on this
generator at m = 5·10⁴ the batch test AUC is flat within 0.1 point over λ = 2⁻¹⁰…2⁻⁸, its best
range), Gaussian kernel with the paper's σ², smoothed hinge ε = 0.5, float32. Batch:
trust-region Newton-CG, tol 1e-6. Stochastic: the defaults (whitened Adam, learning rate 1,
reduce on plateau), ``--batch-size`` majority rows per step, ``key=jax.random.key(0)``.

Each method runs in its own subprocess, so each peak RSS (``getrusage`` max RSS, and
``/proc/self/status`` VmHWM) is that method's alone. ``base`` is the RSS after imports and data,
before the first fit; ``peak − base`` is what the fit added; ``K_{·+}`` is ``m · m+ · 4`` bytes,
the block the batch fit holds and the stochastic fit must not. Times: the first call (with
compilation) and the median of ``--repeats`` further calls (shared 2-core machine: noisy).

Usage::

    python bench/stochastic.py            # m = 2e5, ρ = 0.5 %: minutes, ~2 GB for the batch fit
    python bench/stochastic.py --quick    # m = 2e4 (CI smoke test)

Writes ``bench/out/stochastic.json`` (``stochastic_quick.json`` with ``--quick``, or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import _common as C
import jax
import numpy as np

import jaxrank
from jaxrank import datasets, metrics
from jaxrank.stochastic import fit_rankrc_stochastic

DTYPE = "float32"
T_OVERLAP = 0.75
RHO = 0.005
M = 200_000
M_TEST = 50_000
QUICK_M = 20_000
QUICK_TEST = 10_000
LAM = 2.0**-8
BATCH = 1000
SEED = 0
METHODS = ("batch", "stochastic")


def make_data(m: int, m_test: int, rho: float):
    """Training and test rows from one draw of the centres, standardised on the training rows."""
    k0, k1, k2 = jax.random.split(jax.random.key(SEED), 3)
    centers = datasets.rare_class_centers(T_OVERLAP, key=k0)
    X, y = datasets.make_rare_class(m, rho, None, centers=centers, key=k1)
    Xt, yt = datasets.make_rare_class(m_test, rho, None, centers=centers, key=k2)
    mu, sd = X.mean(axis=0), X.std(axis=0)
    return (X - mu) / sd, y, (Xt - mu) / sd, yt


def _vm_hwm() -> int | None:
    """Peak RSS from ``/proc/self/status`` (VmHWM, KiB), ``None`` off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _fit(method: str, X, y, lam: float, batch_size: int, epochs: int):
    if method == "batch":
        return jaxrank.fit_rankrc(X, y, lam, dtype=DTYPE), None
    model, hist = fit_rankrc_stochastic(
        X, y, lam, batch_size=batch_size, key=jax.random.key(0), epochs=epochs, dtype=DTYPE,
        return_history=True,
    )  # fmt: skip
    return model, hist


def run_method(method: str, m: int, m_test: int, lam: float, batch_size: int, epochs: int,
               repeats: int) -> dict:  # fmt: skip
    """One method end to end in this process: data, fit (timed), test AUC, memory."""
    t0 = time.perf_counter()
    X, y, Xt, yt = make_data(m, m_test, RHO)
    m_pos = int((y == 1).sum())
    res = {"method": method, "m": m, "m_pos": m_pos, "m_test": m_test, "lam": lam}
    if method == "stochastic":
        res["batch_size"] = batch_size
        res["epochs_cap"] = epochs
    mem = {"base_rss": C.current_rss_bytes(), "peak_before_fit": C.peak_rss_bytes()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        (model, hist), first = C.time_first(lambda: _fit(method, X, y, lam, batch_size, epochs))
        mem["peak_after_first_fit"] = C.peak_rss_bytes()
        runs = []
        for _ in range(repeats):
            t = time.perf_counter()
            jax.block_until_ready(_fit(method, X, y, lam, batch_size, epochs))
            runs.append(time.perf_counter() - t)
    mem["peak_after_fits"] = C.peak_rss_bytes()
    mem["vm_hwm_after_fits"] = _vm_hwm()
    res["time"] = {
        "first": first,
        "median": float(np.median(runs)) if runs else None,
        "runs": runs,
        "warnings": sorted({str(w.message) for w in caught}),
    }
    info = model.info
    res["info"] = {
        "objective": float(info.objective),
        "grad_norm": float(info.grad_norm),
        "iterations": int(info.iterations),
        "cg_iterations": int(info.cg_iterations),
        "status": jaxrank.Status(int(info.status)).name,
    }
    if hist is not None:
        n = int(hist.epochs)
        res["history"] = {
            "epochs": n,
            "objective": np.asarray(hist.objective)[:n].tolist(),
            "grad_norm": np.asarray(hist.grad_norm)[:n].tolist(),
        }
    res["train_auc"] = float(metrics.auc(y, model.decision_function(X)))
    res["test_auc"] = float(metrics.auc(yt, model.decision_function(Xt)))
    mem["peak_total"] = C.peak_rss_bytes()
    mem["K_bytes"] = m * m_pos * np.dtype(DTYPE).itemsize
    mem["Kpp_bytes"] = m_pos * m_pos * np.dtype(DTYPE).itemsize
    mem["fit_added"] = mem["peak_after_fits"] - mem["base_rss"] if mem["base_rss"] else None
    mem["fit_added/K"] = mem["fit_added"] / mem["K_bytes"] if mem["fit_added"] else None
    res["memory"] = mem
    res["coef"] = np.asarray(model.coef).tolist()
    res["seconds"] = time.perf_counter() - t0
    return res


def _child(method: str, out: Path, args) -> subprocess.Popen:
    cmd = [sys.executable, __file__, "--child", method, "--child-out", str(out),
           "--m", str(args.m), "--test", str(args.test), "--lam", str(args.lam),
           "--batch-size", str(args.batch_size), "--epochs", str(args.epochs),
           "--repeats", str(args.repeats)]  # fmt: skip
    return subprocess.Popen(cmd)


def run_children(args) -> dict[str, dict]:
    """Each method in a fresh interpreter, one after the other (clean per-method peak RSS)."""
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for method in METHODS:
            out = Path(tmp) / f"{method}.json"
            code = _child(method, out, args).wait()
            if code != 0 or not out.exists():
                results[method] = {"method": method, "error": f"subprocess exited with {code}"}
            else:
                results[method] = json.loads(out.read_text())
    return results


def compare(results: dict[str, dict]) -> dict:
    b, s = results.get("batch", {}), results.get("stochastic", {})
    if "error" in b or "error" in s or not b or not s:
        return {}
    cb, cs = np.asarray(b["coef"]), np.asarray(s["coef"])
    return {
        "test_auc_diff_points": 100 * (s["test_auc"] - b["test_auc"]),
        "within_1_point": bool(abs(s["test_auc"] - b["test_auc"]) <= 0.01),
        "objective_rel_diff": (s["info"]["objective"] - b["info"]["objective"])
        / abs(b["info"]["objective"]),
        "coef_rel_diff": float(np.linalg.norm(cs - cb) / np.linalg.norm(cb)),
        "peak_ratio_stochastic/batch": s["memory"]["peak_after_fits"]
        / b["memory"]["peak_after_fits"],
        "stochastic_fit_added/K": s["memory"]["fit_added/K"],
        "batch_fit_added/K": b["memory"]["fit_added/K"],
    }


def print_table(results: dict[str, dict], cmp: dict) -> None:
    header = ["method", "1st fit", "warm fit", "steps", "objective", "||∇F||∞", "status",
              "test AUC", "peak RSS", "peak-base", "K_{·+}"]  # fmt: skip
    rows = []
    for method in METHODS:
        r = results[method]
        if "error" in r:
            print(f"{method}: FAILED ({r['error']})")
            continue
        i, mem = r["info"], r["memory"]
        steps = (f"{i['iterations']} Newton / {i['cg_iterations']} CG" if method == "batch"
                 else f"{i['iterations']} ({r['history']['epochs']} ep.)")  # fmt: skip
        rows.append([
            method, C.fmt_seconds(r["time"]["first"]), C.fmt_seconds(r["time"]["median"]), steps,
            f"{i['objective']:.6f}", f"{i['grad_norm']:.1e}", i["status"],
            f"{100 * r['test_auc']:.2f}", C.fmt_bytes(mem["peak_after_fits"]),
            C.fmt_bytes(mem["fit_added"]), C.fmt_bytes(mem["K_bytes"]),
        ])  # fmt: skip
    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(header)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)))
    if cmp:
        print(
            f"\ntest AUC stochastic − batch: {cmp['test_auc_diff_points']:+.2f} points "
            f"({'within' if cmp['within_1_point'] else 'NOT within'} 1 point); objective "
            f"{cmp['objective_rel_diff']:+.2e} relative; coef rel. diff {cmp['coef_rel_diff']:.2e}"
        )
        print(
            f"memory: fit added {cmp['stochastic_fit_added/K']:.3f}× K_{{·+}} (stochastic) vs "
            f"{cmp['batch_fit_added/K']:.2f}× (batch); peak RSS ratio "
            f"{cmp['peak_ratio_stochastic/batch']:.2f}"
        )
    for method in METHODS:
        for msg in results[method].get("time", {}).get("warnings", []):
            print(f"warning ({method}): {msg}")


def markdown(result: dict) -> str:
    """The result as markdown: batch and stochastic RankRC side by side (times, steps, test
    AUC, peak memory against the ``K_{·+}`` block) and the issue's done-when."""
    st = result["settings"]
    lines = [
        f"`make_rare_class` (seed 000 Sec. 6.1, t = {st['t']}, d = {st['d']}), m = {st['m']:,}, "
        f"ρ = {100 * st['rho']:g} %, test {st['m_test']:,} rows, λ = {st['lam']:.4g}, "
        f"{st['dtype']}; stochastic: minibatches of {st['batch_size']} majority rows "
        f"(seed 000 Sec. 7, extension 3: the paper gives no numbers); each method in its own "
        f"process{' — QUICK' if st.get('quick') else ''}. Warm fit: median of {st['repeats']} "
        "call(s) after the first.",
        "",
        "| method | first fit | warm fit | steps | objective | status | test AUC | peak RSS "
        "| fit added | K_{·+} |",
        "|---|---:|---:|---|---:|---|---:|---:|---:|---:|",
    ]
    for method in METHODS:
        r = result["results"].get(method)
        if r is None:
            continue
        if "error" in r:
            lines.append(f"| {method} | failed: {r['error'][:120]} |" + " |" * 8)
            continue
        i, mem = r["info"], r["memory"]
        steps = (
            f"{i['iterations']} Newton / {i['cg_iterations']} CG"
            if method == "batch"
            else f"{i['iterations']} ({r['history']['epochs']} epochs)"
        )
        lines.append(
            f"| {method} | {C.fmt_seconds(r['time']['first'])} "
            f"| {C.fmt_seconds(r['time']['median'])} | {steps} | {i['objective']:.6f} "
            f"| {i['status']} | {100 * r['test_auc']:.2f} | {C.fmt_bytes(mem['peak_after_fits'])} "
            f"| {C.fmt_bytes(mem['fit_added'])} ({mem['fit_added/K']:.2f}× K) "
            f"| {C.fmt_bytes(mem['K_bytes'])} |"
        )
    c = result.get("comparison") or {}
    if c:
        lines += [
            "",
            f"Test AUC stochastic − batch: **{c['test_auc_diff_points']:+.2f} points** (done-when: "
            f"within 1 point → {'met' if c['within_1_point'] else 'NOT met'}); objective "
            f"{c['objective_rel_diff']:+.2e} relative; peak RSS stochastic / batch "
            f"{c['peak_ratio_stochastic/batch']:.2f}; the stochastic fit added "
            f"{c['stochastic_fit_added/K']:.2f}× the K_{{·+}} bytes (batch "
            f"{c['batch_fit_added/K']:.2f}×).",
        ]
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help=f"m = {QUICK_M} (CI smoke test)")
    p.add_argument("--m", type=int, default=None, help=f"training rows (default {M})")
    p.add_argument("--test", type=int, default=None, help=f"test rows (default {M_TEST})")
    p.add_argument("--lam", type=float, default=LAM, help="λ (default 2^-8)")
    p.add_argument("--batch-size", type=int, default=BATCH, help="majority rows per step")
    p.add_argument("--epochs", type=int, default=100, help="epoch cap of the stochastic fit")
    p.add_argument("--repeats", type=int, default=None, help="warm fits timed (default 1)")
    p.add_argument("--out", type=Path, default=None, help="JSON output")
    p.add_argument("--child", choices=METHODS, default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.m = args.m or (QUICK_M if args.quick else M)
    args.test = args.test or (QUICK_TEST if args.quick else M_TEST)
    args.repeats = 1 if args.repeats is None else args.repeats
    if args.out is None:
        args.out = C.OUT_DIR / ("stochastic_quick.json" if args.quick else "stochastic.json")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child is not None:
        res = run_method(args.child, args.m, args.test, args.lam, args.batch_size, args.epochs,
                         args.repeats)  # fmt: skip
        C.write_json(args.child_out, res)
        print(f"{args.child}: done in {res['seconds']:.1f} s", flush=True)
        return 0
    env = C.env_info()
    print(f"jaxrank stochastic bench: {env['platform']} ({env['device_kind']}), jax {env['jax']}, "
          f"{env['cpu_count']} CPUs, {DTYPE}, m = {args.m}, ρ = {RHO}, λ = {args.lam:.4g}, "
          f"batch {args.batch_size}", flush=True)  # fmt: skip
    t0 = time.perf_counter()
    results = run_children(args)
    cmp = compare(results)
    print()
    print_table(results, cmp)
    report = {
        "benchmark": "stochastic",
        "env": env,
        "settings": dict(
            m=args.m,
            m_test=args.test,
            rho=RHO,
            t=T_OVERLAP,
            d=5,
            seed=SEED,
            dtype=DTYPE,
            lam=args.lam,
            batch_size=args.batch_size,
            epochs_cap=args.epochs,
            repeats=args.repeats,
            quick=args.quick,
            subprocess_per_method=True,
        ),
        "results": results,
        "comparison": cmp,
        "seconds": time.perf_counter() - t0,
    }
    path = C.write_json(args.out, report)
    print(f"\nwrote {path} ({report['seconds']:.0f} s)")
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
