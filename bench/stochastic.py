"""Stochastic RankRC against batch RankRC: test AUC and peak memory (issue 4, item 3).

Seed 000 Sec. 7, extension 3: keep only ``K_{++}`` and learn from minibatches of majority rows
(:func:`jaxrank.stochastic.fit_rankrc_stochastic`). Done-when: at m = 2·10⁵, ρ = 0.5 % its test
AUC is within 1 point of batch :func:`jaxrank.fit_rankrc` without ever holding ``K_{·+}``.
Protocol and results: RESULTS.md §11. Not said there: test rows are a separate draw from the
same centres (same ρ), standardised on the training rows; λ = 2⁻⁸ because at m = 5·10⁴ the
batch test AUC is flat within 0.1 point over 2⁻¹⁰…2⁻⁸ (its best range); the stochastic fit
runs its defaults (whitened Adam, learning rate 1, reduce on plateau) with
``key=jax.random.key(0)``. Each method runs in its own subprocess so each peak RSS
(``getrusage``, and VmHWM) is its own; ``base`` is the RSS after imports and data.
``--quick``: m = 2·10⁴ (CI).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import _common as C
import _data as DH
import jax
import numpy as np

import jaxrank
from jaxrank import datasets, metrics
from jaxrank.stochastic import fit_rankrc_stochastic

NAME = "stochastic"
DTYPE = "float32"
T_OVERLAP = 0.75
RHO = 0.005
LAM = 2.0**-8
BATCH = 1000
SEED = 0
FULL = dict(m=200_000, test=50_000)
QUICK = dict(m=20_000, test=10_000)
METHODS = ("batch", "stochastic")
CHILD_FLAGS = ("m", "test", "lam", "batch_size", "epochs", "repeats")
MD_HEAD = (
    "method | first fit | warm fit | steps | objective | status | test AUC | peak RSS | fit added "
    "| K_{·+}"
)


def make_data(m: int, m_test: int, rho: float):
    k0, k1, k2 = jax.random.split(jax.random.key(SEED), 3)
    centers = datasets.rare_class_centers(T_OVERLAP, key=k0)
    X, y = datasets.make_rare_class(m, rho, None, centers=centers, key=k1)
    Xt, yt = datasets.make_rare_class(m_test, rho, None, centers=centers, key=k2)
    X, Xt = DH.standardise(X, Xt)
    return X, y, Xt, yt


def _vm_hwm() -> int | None:
    try:
        with open("/proc/self/status") as f:
            hwm = [line.split()[1] for line in f if line.startswith("VmHWM:")]
    except OSError:
        return None
    return int(hwm[0]) * 1024 if hwm else None


def run_method(method, m, m_test, lam, batch_size, epochs, repeats) -> dict:
    t0 = time.perf_counter()
    X, y, Xt, yt = make_data(m, m_test, RHO)
    m_pos = int((y == 1).sum())
    res = {"method": method, "m": m, "m_pos": m_pos, "m_test": m_test, "lam": lam}
    if method == "batch":
        fit = lambda: (jaxrank.fit_rankrc(X, y, lam, dtype=DTYPE), None)
    else:
        res.update(batch_size=batch_size, epochs_cap=epochs)
        opts = dict(batch_size=batch_size, epochs=epochs, dtype=DTYPE, return_history=True)
        fit = lambda: fit_rankrc_stochastic(X, y, lam, key=jax.random.key(0), **opts)
    mem = {"base_rss": C.current_rss_bytes(), "peak_before_fit": C.peak_rss_bytes()}
    with C.caught_warnings() as caught:
        (model, hist), first = C.time_first(fit)
        mem["peak_after_first_fit"] = C.peak_rss_bytes()
        runs = [C.time_first(fit)[1] for _ in range(repeats)]
    mem.update(peak_after_fits=C.peak_rss_bytes(), vm_hwm_after_fits=_vm_hwm())
    median = float(np.median(runs)) if runs else None
    warns = sorted({str(w.message) for w in caught})
    res["time"] = {"first": first, "median": median, "runs": runs, "warnings": warns}
    info = {k: float(getattr(model.info, k)) for k in ("objective", "grad_norm")}
    info.update({k: int(getattr(model.info, k)) for k in ("iterations", "cg_iterations")})
    res["info"] = {**info, "status": DH.status_names(model)}
    if hist is not None:
        n = int(hist.epochs)
        curves = {k: np.asarray(getattr(hist, k))[:n].tolist() for k in ("objective", "grad_norm")}
        res["history"] = {"epochs": n, **curves}
    res["train_auc"] = float(metrics.auc(y, model.decision_function(X)))
    res["test_auc"] = float(metrics.auc(yt, model.decision_function(Xt)))
    mem["peak_total"] = C.peak_rss_bytes()
    item = np.dtype(DTYPE).itemsize
    mem.update(K_bytes=m * m_pos * item, Kpp_bytes=m_pos * m_pos * item)
    mem["fit_added"] = mem["peak_after_fits"] - mem["base_rss"] if mem["base_rss"] else None
    mem["fit_added/K"] = mem["fit_added"] / mem["K_bytes"] if mem["fit_added"] else None
    res["memory"] = mem
    res["coef"] = np.asarray(model.coef).tolist()
    res["seconds"] = time.perf_counter() - t0
    return res


def compare(results: dict[str, dict]) -> dict:
    b, s = results.get("batch", {}), results.get("stochastic", {})
    if "error" in b or "error" in s or not b or not s:
        return {}
    cb, cs = np.asarray(b["coef"]), np.asarray(s["coef"])
    diff, obj = s["test_auc"] - b["test_auc"], b["info"]["objective"]
    peak = s["memory"]["peak_after_fits"] / b["memory"]["peak_after_fits"]
    return {
        "test_auc_diff_points": 100 * diff,
        "within_1_point": bool(abs(diff) <= 0.01),
        "objective_rel_diff": (s["info"]["objective"] - obj) / abs(obj),
        "coef_rel_diff": float(np.linalg.norm(cs - cb) / np.linalg.norm(cb)),
        "peak_ratio_stochastic/batch": peak,
        "stochastic_fit_added/K": s["memory"]["fit_added/K"],
        "batch_fit_added/K": b["memory"]["fit_added/K"],
    }


def _cells(method: str, r: dict) -> list[str]:
    i, mem = r["info"], r["memory"]
    if method == "batch":
        steps = f"{i['iterations']} Newton / {i['cg_iterations']} CG"
    else:
        steps = f"{i['iterations']} ({r['history']['epochs']} epochs)"
    times = [C.fmt_seconds(r["time"][k]) for k in ("first", "median")]
    fit = [f"{i['objective']:.6f}", i["status"], f"{100 * r['test_auc']:.2f}"]
    added = f"{C.fmt_bytes(mem['fit_added'])} ({mem['fit_added/K']:.2f}× K)"
    return [method, *times, steps, *fit, C.fmt_bytes(mem["peak_after_fits"]), added,
            C.fmt_bytes(mem["K_bytes"])]  # fmt: skip


def markdown(result: dict) -> str:
    st = result["settings"]
    lines = [
        f"`make_rare_class` (seed 000 Sec. 6.1, t = {st['t']}, d = {st['d']}), m = {st['m']:,}, "
        f"ρ = {100 * st['rho']:g} %, test {st['m_test']:,} rows, λ = {st['lam']:.4g}, "
        f"{st['dtype']}; stochastic: minibatches of {st['batch_size']} majority rows "
        f"(seed 000 Sec. 7, extension 3: the paper gives no numbers); each method in its own "
        f"process{C.quick_tag(st)}. Warm fit: median of {st['repeats']} call(s) after the first.",
        "",
        *C.md_table(MD_HEAD, [], "lrrlrlrrrr"),
    ]
    for method in METHODS:
        r = result["results"].get(method)
        if r is not None and "error" in r:
            lines.append(f"| {method} | failed: {r['error'][:120]} |" + " |" * 8)
        elif r is not None:
            lines.append("| " + " | ".join(_cells(method, r)) + " |")
    if c := result.get("comparison") or {}:
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
    p = C.parser(NAME, __doc__, f"m = {QUICK['m']} (CI smoke test)")
    p.add_argument("--m", type=int, default=None, help=f"training rows (default {FULL['m']})")
    p.add_argument("--test", type=int, default=None, help=f"test rows (default {FULL['test']})")
    p.add_argument("--lam", type=float, default=LAM, help="λ (default 2^-8)")
    p.add_argument("--batch-size", type=int, default=BATCH, help="majority rows per step")
    p.add_argument("--epochs", type=int, default=100, help="epoch cap of the stochastic fit")
    p.add_argument("--repeats", type=int, default=1, help="warm fits timed")
    p.add_argument("--child", choices=METHODS, default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)
    return C.mode_defaults(p.parse_args(argv), QUICK, FULL)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.child is not None:
        res = run_method(args.child, *(getattr(args, k) for k in CHILD_FLAGS))
        C.write_json(args.child_out, res)
        print(f"{args.child}: done in {res['seconds']:.1f} s", flush=True)
        return 0
    detail = f"{DTYPE}, m = {args.m}, ρ = {RHO}, λ = {args.lam:.4g}, batch {args.batch_size}"
    env = C.header(NAME, detail)
    t0 = time.perf_counter()
    flags = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in CHILD_FLAGS]
    runs = C.run_children(__file__, METHODS, flags, key="method")  # one fresh process each
    results = dict(zip(METHODS, runs, strict=True))
    settings = dict(m=args.m, m_test=args.test, rho=RHO, t=T_OVERLAP, d=5, seed=SEED, dtype=DTYPE)
    settings |= dict(lam=args.lam, batch_size=args.batch_size, epochs_cap=args.epochs)
    settings |= dict(repeats=args.repeats, quick=args.quick, subprocess_per_method=True)
    report = {"benchmark": NAME, "env": env, "settings": settings, "results": results}
    report |= {"comparison": compare(results), "seconds": time.perf_counter() - t0}
    print("\n" + markdown(report))
    saved = [C.RESULTS_DIR / C.out_path(NAME, args.quick).name] if args.save else []
    for out in [args.out, *saved]:  # --save: also to bench/results/
        print(f"\nwrote {C.write_json(out, report)} ({report['seconds']:.0f} s)")
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
