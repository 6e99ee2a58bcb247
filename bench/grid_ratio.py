"""Issue-2 check: the 16-λ grid solved batched vs the same λ fitted one at a time (same run).

Usage: python bench/grid_ratio.py M RHO REPEATS  (e.g. 100000 0.01 2); JSON to bench/out/.
Results: RESULTS.md §13.
"""

import sys
import time
import warnings

import _common as C
import jax
import numpy as np

import jaxrank

LAMS = 2.0 ** np.arange(-20, 11, 2)
INFO = ("iterations", "cg_iterations", "status")
HEAD = "repeat | batched grid | 16 separate fits | batched / separate"
CPU_NOTE = "Process CPU time (all threads; less sensitive to other load on the machine):"


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    m, rho, repeats = int(argv[0]), float(argv[1]), int(argv[2]) if len(argv) > 2 else 1
    X, y = jaxrank.datasets.make_rare_class(m, rho, 0.75, d=40, seed=0)
    fit = lambda lam: jax.block_until_ready(jaxrank.fit_rankrc(X, y, lam))
    fits = {"batch": lambda: fit(LAMS), "seq": lambda: [fit(lam) for lam in LAMS]}
    warnings.simplefilter("ignore")
    res = {"m": m, "rho": rho, "device": str(jax.devices()[0]), "jax": jax.__version__}
    res.update(env=C.env_info(), batch_first=C.time_first(fits["batch"])[1])
    res["seq_compile_one"] = C.time_first(fit, LAMS[0])[1]
    # Wall time on a shared machine depends on the load at that moment; process CPU time (all
    # threads) depends much less on it, so both are recorded, and the order alternates per repeat.
    res.update({k: [] for k in ("batch", "seq", "ratio", "batch_cpu", "seq_cpu", "ratio_cpu")})
    models = {}
    for r in range(repeats):
        for which in ("batch", "seq") if r % 2 == 0 else ("seq", "batch"):
            t, c = time.perf_counter(), time.process_time()
            models[which] = fits[which]()
            res[which].append(time.perf_counter() - t)
            res[which + "_cpu"].append(time.process_time() - c)
    for x in ("", "_cpu"):
        res["ratio" + x] = [b / s for b, s in zip(res["batch" + x], res["seq" + x], strict=True)]
    bi, si = models["batch"].info, [model.info for model in models["seq"]]
    res["batch_info"] = {k: np.asarray(getattr(bi, k)).tolist() for k in INFO}
    res["seq_info"] = {k: [int(getattr(i, k)) for i in si] for k in INFO}
    rel = np.asarray(bi.objective) / np.array([float(i.objective) for i in si]) - 1
    res["obj_rel_diff"] = float(np.max(np.abs(rel)))
    print(markdown(res), f"\nwrote {C.write_json(C.OUT_DIR / f'grid_{m}.json', res)}", sep="\n")
    return res


def markdown(r: dict) -> str:
    lines = [
        f"`make_rare_class(m = {r['m']:,}, ρ = {r['rho']:g}, t = 0.75, d = 40, seed = 0)`, "
        f"RankRC, float32, {len(r['batch'])} repeat(s) on {r['device']} (jax {r['jax']}). "
        "Batched = one `fit_rankrc` call over the 16-λ grid (log₂ λ = −20 … 10); separate = 16 "
        "`fit_rankrc` calls, same λ, same run. Both compiled before the timed repeats. No paper "
        "number (seed 000 fits its grid by warm starts, one λ at a time).",
    ]
    for x in ("", "_cpu") if "ratio_cpu" in r else ("",):  # wall time, then CPU time
        runs = enumerate(zip(*(r[k + x] for k in ("batch", "seq", "ratio")), strict=True))
        rows = [[i + 1, f"{b:.1f} s", f"{s:.1f} s", f"**{q:.2f}**"] for i, (b, s, q) in runs]
        lines += [*(["", CPU_NOTE] if x else []), "", *C.md_table(HEAD, rows, "rrrr")]
    lines += [
        "",
        f"First batched call (compilation included): {r['batch_first']:.1f} s; first separate "
        f"fit: {r['seq_compile_one']:.1f} s. Largest relative objective difference batched vs "
        f"separate over the grid: {r['obj_rel_diff']:.1e}.",
        "",
        "| | Newton steps (max / sum) | CG steps (max / sum) | statuses |",
        "|---|---:|---:|---|",
    ]
    for who, info in (("batched", r["batch_info"]), ("separate", r["seq_info"])):
        codes = info["status"]
        st = ", ".join(f"{jaxrank.Status(c).name} × {codes.count(c)}" for c in sorted(set(codes)))
        steps = " | ".join(f"{max(info[k])} / {sum(info[k])}" for k in INFO[:2])
        lines.append(f"| {who} | {steps} | {st} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
