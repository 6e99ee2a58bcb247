"""Value + gradient of the all-pairs ranking loss: jaxrank.pairwise_loss against rax and a naive
O(n²) loss (issue 28, item 5).

For n = 10³ … 10⁶ scores with 5 % and 0.5 % positives (float32, labels as traced data), each
loss is timed as ``jax.jit(jax.value_and_grad(loss))`` — what one training step of a network
pays for its loss:

- ``jaxrank``: :func:`jaxrank.pairwise_loss` (smoothed hinge, ε = 0.5, mean over pairs);
- ``jaxrank_masked``: the same with ``where=`` masking the last 10 % of the entries (a padded
  batch): the masked call must cost about what the unmasked one does;
- ``jaxrank_hinge``: ``loss="hinge"``, the loss rax computes, to check the values agree;
- ``rax``: ``rax.pairwise_hinge_loss`` (mean over the pairs with a higher label first), which
  forms the n × n pair matrix;
- ``naive``: the n × n pair matrix of the smoothed hinge, masked by the labels, in plain JAX.

The O(n²) losses run up to ``--pair-limit`` n (10⁴ by default: 10⁸ pairs, ~0.4 GB per float32
pair matrix; at 10⁵ it would be 40 GB each, which rax was measured to need ~90 GB for). Medians
over repeats after a compile call (cold times reported separately); speed-ups are ratios of
medians measured in the same run.
"""

from __future__ import annotations

import sys
import time

import _common as C
import jax
import jax.numpy as jnp
import numpy as np

import jaxrank

NAME = "losses"
FULL = dict(sizes=(1_000, 10_000, 100_000, 1_000_000), rhos=(0.05, 0.005))
QUICK = dict(sizes=(1_000, 10_000), rhos=(0.05,))
EPS = 0.5


def naive_loss(s, y):
    pos = y > 0
    z = s[:, None] - s[None, :]
    lo = 1 - 2 * EPS
    ell = jnp.where(z < lo, 1 - EPS - z, jnp.where(z < 1, (1 - z) ** 2 / (4 * EPS), 0))
    pair = pos[:, None] & ~pos[None, :]
    return jnp.sum(jnp.where(pair, ell, 0)) / jnp.sum(pair)


def losses(rax):
    out = {
        "jaxrank": lambda s, y, w: jaxrank.pairwise_loss(s, y, eps=EPS),
        "jaxrank_masked": lambda s, y, w: jaxrank.pairwise_loss(s, y, eps=EPS, where=w),
        "jaxrank_hinge": lambda s, y, w: jaxrank.pairwise_loss(s, y, loss="hinge"),
        "naive": lambda s, y, w: naive_loss(s, y),
    }
    if rax is not None:
        out["rax"] = lambda s, y, w: rax.pairwise_hinge_loss(s, y)
    return out


def run_case(n: int, rho: float, args, rax) -> dict:
    rng = np.random.default_rng(n)
    s = jnp.asarray(rng.normal(size=n), jnp.float32)
    y = jnp.asarray(rng.random(n) < rho, jnp.float32)
    w = jnp.arange(n) < int(0.9 * n)
    row = {"n": n, "rho": rho, "n_pos": int(jnp.sum(y))}
    for name, f in losses(rax).items():
        if name in ("naive", "rax") and n > args.pair_limit:
            row[name] = {"skipped": f"n > {args.pair_limit}: {n * n * 4 / 2**30:.0f} GiB a matrix"}
            continue
        vg = jax.jit(jax.value_and_grad(f))
        t0 = time.perf_counter()
        v, g = jax.block_until_ready(vg(s, y, w))
        cold = time.perf_counter() - t0
        t = C.time_budgeted(vg, s, y, w, repeats=args.repeats, budget=args.budget)
        row[name] = {"cold_s": cold, "median_s": t["median"], "runs": len(t["runs"]),
                     "value": float(v), "grad_norm": float(jnp.linalg.norm(g))}  # fmt: skip
    base = row["jaxrank"]["median_s"]
    for name in ("rax", "naive", "jaxrank_masked"):
        if "median_s" in row.get(name, {}):
            row[name]["ratio_to_jaxrank"] = row[name]["median_s"] / base
    if "value" in row.get("rax", {}):
        row["hinge_value_diff_vs_rax"] = abs(row["rax"]["value"] - row["jaxrank_hinge"]["value"])
    if "value" in row.get("naive", {}):
        row["value_diff_vs_naive"] = abs(row["naive"]["value"] - row["jaxrank"]["value"])
    return row


def markdown(result) -> str:
    rows = result["results"]
    lines = C.md_table(
        ["n", "ρ", "jaxrank", "masked / unmasked", "rax", "rax / jaxrank", "naive / jaxrank"],
        [
            [
                f"{r['n']:.0e}",
                f"{r['rho']:g}",
                C.fmt_seconds(r["jaxrank"]["median_s"]),
                f"{r['jaxrank_masked']['ratio_to_jaxrank']:.2f}",
                C.fmt_seconds(r["rax"]["median_s"]) if "median_s" in r.get("rax", {}) else "—",
                f"{r['rax']['ratio_to_jaxrank']:.0f}×" if "median_s" in r.get("rax", {}) else "—",
                f"{r['naive']['ratio_to_jaxrank']:.0f}×" if "median_s" in r["naive"] else "—",
            ]
            for r in rows
        ],
    )
    ok = [r for r in rows if "hinge_value_diff_vs_rax" in r]
    if ok:
        worst = max(r["hinge_value_diff_vs_rax"] for r in ok)
        lines += ["", f"jaxrank's hinge equals rax's pairwise hinge to {worst:.1e} (float32)."]
    lines += ["", "Times: median of value + gradient after a compile call (`jax.jit`, float32, "
              "labels as data); ratios of medians measured in the same run. rax and the naive "
              "loss form the n × n pair matrix and are not run past n = 10⁴ (the matrix alone "
              "would be 37 GiB at 10⁵)."]  # fmt: skip
    return "\n".join(lines)


def main(argv=None) -> int:
    quick = "n = 10³, 10⁴ at 5 % only (seconds)"
    p = C.parser(NAME, __doc__, quick, sizes="n values", repeats=5)
    p.add_argument("--rhos", type=float, nargs="+", default=None, help="positive fractions")
    p.add_argument("--pair-limit", type=int, default=10_000, help="largest n of the O(n²) losses")
    p.add_argument("--budget", type=float, default=2.0, help="seconds of repeats per timing")
    args = C.mode_defaults(p.parse_args(argv), QUICK, FULL)
    try:
        import rax
    except ImportError:  # optional: the comparison needs it (pip install rax)
        rax = None
    C.limit_blas()
    env = C.header(NAME, "value + gradient of all-pairs ranking losses")
    t0 = time.perf_counter()
    rows = []
    for n in args.sizes:
        for rho in args.rhos:
            rows.append(run_case(n, rho, args, rax))
            r = rows[-1]
            print(f"n={n:.0e} rho={rho:g}: jaxrank {C.fmt_seconds(r['jaxrank']['median_s'])}, "
                  f"masked x{r['jaxrank_masked']['ratio_to_jaxrank']:.2f}", flush=True)  # fmt: skip
    settings = dict(sizes=list(args.sizes), rhos=list(args.rhos), eps=EPS, dtype="float32")
    settings.update(pair_limit=args.pair_limit, rax=None if rax is None else rax.__version__)
    result = {"benchmark": NAME, "env": env, "settings": settings, "results": rows,
              "seconds": time.perf_counter() - t0}  # fmt: skip
    print("\n" + markdown(result))
    print(f"wrote {C.write_json(args.out, result)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
