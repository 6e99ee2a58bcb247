"""Issue-2 check: the 16-λ grid solved batched vs the same λ fitted one at a time (same run).

Usage: python bench/grid_ratio.py M RHO REPEATS  (e.g. 100000 0.01 2); JSON to bench/out/.
"""

import json
import sys
import time
import warnings
from pathlib import Path

import _common as C
import numpy as np

LAMS = 2.0 ** np.arange(-20, 11, 2)
STATUS_NAMES = {0: "CONVERGED", 1: "MAX_ITER", 2: "PRECISION", 3: "NONFINITE"}  # jaxrank.Status


def main(argv=None) -> dict:
    import jax

    import jaxrank

    argv = sys.argv[1:] if argv is None else argv
    m = int(argv[0])
    rho = float(argv[1])
    X, y = jaxrank.datasets.make_rare_class(m, rho, 0.75, d=40, seed=0)
    lams = LAMS

    def batch():
        mdl = jaxrank.fit_rankrc(X, y, lams)
        jax.block_until_ready(mdl.coef)
        return mdl

    def seq():
        out = []
        for lam in lams:
            mdl = jaxrank.fit_rankrc(X, y, lam)
            jax.block_until_ready(mdl.coef)
            out.append(mdl)
        return out

    warnings.simplefilter("ignore")
    res = {"m": m, "rho": rho, "device": str(jax.devices()[0]), "jax": jax.__version__}
    res["env"] = C.env_info()
    t = time.perf_counter()
    batch()
    res["batch_first"] = time.perf_counter() - t
    t = time.perf_counter()
    jaxrank.fit_rankrc(X, y, lams[0])
    res["seq_compile_one"] = time.perf_counter() - t
    # Wall time on a shared machine depends on the load at that moment; process CPU time (all
    # threads) depends much less on it, so both are recorded, and the order alternates per repeat.
    tb, ts, cb, cs = [], [], [], []
    for r in range(int(argv[2]) if len(argv) > 2 else 1):
        for which in ("batch", "seq") if r % 2 == 0 else ("seq", "batch"):
            t, c = time.perf_counter(), time.process_time()
            if which == "batch":
                mb = batch()
                tb.append(time.perf_counter() - t)
                cb.append(time.process_time() - c)
            else:
                ms = seq()
                ts.append(time.perf_counter() - t)
                cs.append(time.process_time() - c)
    res.update(batch=tb, seq=ts, ratio=[b / s for b, s in zip(tb, ts, strict=True)])
    res.update(batch_cpu=cb, seq_cpu=cs, ratio_cpu=[b / s for b, s in zip(cb, cs, strict=True)])
    res["batch_info"] = {
        k: np.asarray(getattr(mb.info, k)).tolist()
        for k in ("iterations", "cg_iterations", "status")
    }
    res["seq_info"] = {
        k: [int(getattr(x.info, k)) for x in ms] for k in ("iterations", "cg_iterations", "status")
    }
    res["obj_rel_diff"] = float(
        np.max(
            np.abs(
                np.asarray(mb.info.objective) / np.array([float(x.info.objective) for x in ms]) - 1
            )
        )
    )
    print(json.dumps(res))
    json.dump(res, open(Path(__file__).parent / "out" / f"grid_{m}.json", "w"), indent=1)
    return res


def markdown(result: dict) -> str:
    """The result as markdown: batched grid vs separate fits per repeat, compile times and the
    solver's steps and statuses per λ."""
    r = result
    lines = [
        f"`make_rare_class(m = {r['m']:,}, ρ = {r['rho']:g}, t = 0.75, d = 40, seed = 0)`, "
        f"RankRC, float32, {len(r['batch'])} repeat(s) on {r['device']} (jax {r['jax']}). "
        "Batched = one `fit_rankrc` call over the 16-λ grid (log₂ λ = −20 … 10); separate = 16 "
        "`fit_rankrc` calls, same λ, same run. Both compiled before the timed repeats. No paper "
        "number (seed 000 fits its grid by warm starts, one λ at a time).",
        "",
        "| repeat | batched grid | 16 separate fits | batched / separate |",
        "|---:|---:|---:|---:|",
    ]
    for i, (b, s, q) in enumerate(zip(r["batch"], r["seq"], r["ratio"], strict=True)):
        lines.append(f"| {i + 1} | {b:.1f} s | {s:.1f} s | **{q:.2f}** |")
    if "ratio_cpu" in r:
        lines += [
            "",
            "Process CPU time (all threads; less sensitive to other load on the machine):",
            "",
            "| repeat | batched grid | 16 separate fits | batched / separate |",
            "|---:|---:|---:|---:|",
        ]
        for i, (b, s, q) in enumerate(
            zip(r["batch_cpu"], r["seq_cpu"], r["ratio_cpu"], strict=True)
        ):
            lines.append(f"| {i + 1} | {b:.1f} s | {s:.1f} s | **{q:.2f}** |")
    bi, si = r["batch_info"], r["seq_info"]
    names = lambda codes: ", ".join(
        f"{STATUS_NAMES.get(c, c)} × {codes.count(c)}" for c in sorted(set(codes))
    )
    lines += [
        "",
        f"First batched call (compilation included): {r['batch_first']:.1f} s; first separate "
        f"fit: {r['seq_compile_one']:.1f} s. Largest relative objective difference batched vs "
        f"separate over the grid: {r['obj_rel_diff']:.1e}.",
        "",
        "| | Newton steps (max / sum) | CG steps (max / sum) | statuses |",
        "|---|---:|---:|---|",
        f"| batched | {max(bi['iterations'])} / {sum(bi['iterations'])} "
        f"| {max(bi['cg_iterations'])} / {sum(bi['cg_iterations'])} | {names(bi['status'])} |",
        f"| separate | {max(si['iterations'])} / {sum(si['iterations'])} "
        f"| {max(si['cg_iterations'])} / {sum(si['cg_iterations'])} | {names(si['status'])} |",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
