"""Seed 003 Fig. 3: the projected-map bound against the kernel-perturbation bound as |R| grows.

Tayal, Coleman & Li (seed 003), Sec. 4, Fig. 3 (setting, claim and results: RESULTS.md §7):
per |R|, bound (31) (:func:`jaxrank.bounds.projected_map_bound`) on one growing rare-first basis
against bound (46) (:func:`jaxrank.bounds.perturbation_bound`) on the Nyström matrix of
``--samples`` random bases, mean ± sd; also (37) (actual projection residuals) and (46) for the
rare-first bases. ``δ = ||K − K′||₂`` by ``--iters`` Lanczos steps: a Ritz value never exceeds
the true norm, so a Lanczos error can only make (46) look *smaller*; the JSON holds the exact
(dense) norm beside it for a few bases. KEEL ``page-blocks0`` and ``satimage`` (the Table 1 sets
KEEL ships; Coil and Mammograph are not in it), a stratified ``--m``-row subsample (``--m 0``:
every row, the paper's size, much longer); ``simulated`` (seed 000 generator, t = 0.75,
ρ = 10 %) needs no KEEL files. |R| runs from m+/8 to 35 % of the rows. The JSON records CPU
time beside wall time (the wall time on the shared machine mostly measures the load).
"""

from __future__ import annotations

import time
from pathlib import Path

import _common as C
import _data as DH
import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import bounds, datasets, kernels
from jaxrank.bases import resolve_basis

# main() switches x64 on (K − K′ is a difference of nearly equal matrices); importing this
# module leaves it as it is.

NAME = "fig3_bounds"
DATASETS = ("page-blocks0", "satimage")
QUICK = dict(data=["page-blocks0"], m=600, samples=8, iters=30)
GROUP_BYTES = 512 * 2**20  # work arrays per Lanczos batch of bases
# the columns of a row: the paper's two curves, then (37) and (46) for the rare-first bases
B31, B37, B46R = "proj31_rare_first", "proj37_rare_first", "kernel46_rare_first"
MEAN, SD = "kernel46_random_mean", "kernel46_random_std"
MD_HEAD = (
    "|R| | (31) rare first | (37) rare first | (46) random, mean ± sd | (46) rare first "
    "| (46) random / (31)"
)


def load(name: str, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Standardised rows and ±1 labels; a stratified subsample of ``m`` rows when
    ``0 < m < len``."""
    if name == "simulated":
        X, y = datasets.make_rare_class(m or 2000, 0.1, 0.75, seed=seed)
    else:
        X, y = datasets.load_keel(name)
        if 0 < m < X.shape[0]:
            rng = np.random.default_rng(seed)
            pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y != 1)
            n_pos = max(1, round(m * pos.size / y.size))
            pick = [
                rng.choice(pos, n_pos, replace=False),
                rng.choice(neg, m - n_pos, replace=False),
            ]
            keep = np.sort(np.concatenate(pick))
            X, y = X[keep], y[keep]
    return DH.standardise(X)[0], np.where(y == 1, 1, -1)


def size_grid(m: int, m_pos: int, quick: bool = False) -> list[int]:
    """|R| values: fractions of m+ (rare rows only), m+, then 20 % and 35 % of the rows (50 %
    with ``quick``). Each |R| costs ``--samples`` O(|R|³) eigendecompositions of K_RR (~3 s of
    CPU each at |R| = 1000 on the project's machine)."""
    rare = (1 / 4, 1) if quick else (1 / 8, 1 / 4, 1 / 2, 1)
    rest = (0.2, 0.5) if quick else (0.2, 0.35)
    sizes = [m_pos * f for f in rare] + [m * f for f in rest]
    return sorted({int(min(max(round(s), 1), m)) for s in sizes})


def lanczos_norms(K, idx: np.ndarray, iters: int, key) -> np.ndarray:
    """``‖K − K′‖₂`` per basis (row of ``idx``) in equal batches of at most ``GROUP_BYTES`` of
    work arrays (the last one padded): one compilation per |R|."""
    S, n = idx.shape
    per = 8 * (n * n + (2 * iters + 5) * K.shape[0])
    n_groups = -(-S // max(1, min(S, GROUP_BYTES // per)))
    g = -(-S // n_groups)
    padded = np.concatenate([idx, np.repeat(idx[-1:], n_groups * g - S, axis=0)])
    keys = jax.random.split(key, n_groups)
    parts = [
        bounds.nystrom_perturbation_norm(K, padded[i * g : (i + 1) * g], iters=iters, key=k)
        for i, k in enumerate(keys)
    ]
    return np.concatenate(parts)[:S]


def random_bases(pos: np.ndarray, n: int, S: int, key) -> np.ndarray:
    """``S`` uniformly random bases of ``n`` rows (the s-th is the same for every ``S``)."""
    keys = [jax.random.fold_in(key, n * 1000 + s) for s in range(S)]
    return np.stack([resolve_basis("random", pos, key=k, n_basis=n) for k in keys])


def run_dataset(name: str, args) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    X, y = load(name, args.m, args.seed)
    pos, lam = y == 1, args.lam
    m, d, m_pos = X.shape[0], X.shape[1], int(pos.sum())
    kernel = kernels.gaussian(kernels.sigma2_heuristic(X))
    K = kernel(jnp.asarray(X), jnp.asarray(X))
    kappa = 1.0  # Gaussian: k(x, x) = 1
    key_rf, key_rnd, key_lz = jax.random.split(jax.random.key(args.seed), 3)
    rows = []
    for n in size_grid(m, m_pos, args.quick):
        t = time.perf_counter()
        rf = resolve_basis("rare_first", pos, key=key_rf, n_basis=n)
        resid = bounds.projection_residuals(X, X[rf], kernel)
        # the rare-first basis rides along with the random ones: one batch, one compilation
        rnd = random_bases(pos, n, args.samples, key_rnd)
        key = jax.random.fold_in(key_lz, n)
        norms = lanczos_norms(K, np.concatenate([rnd, rf[None]]), args.iters, key)
        deltas, d_rf = norms[:-1], float(norms[-1])
        b46 = np.asarray(bounds.perturbation_bound(deltas, lam, kappa=kappa))
        rows.append(
            {
                "n_basis": n,
                B31: bounds.projected_map_bound(y, rf, lam, kappa=kappa),
                B37: bounds.projected_residual_bound(resid, y, lam, kappa=kappa),
                B46R: bounds.perturbation_bound(d_rf, lam, kappa=kappa),
                "delta_rare_first": d_rf,
                MEAN: float(b46.mean()),
                SD: float(b46.std(ddof=1)) if b46.size > 1 else 0.0,
                "kernel46_random": b46,
                "delta_random": deltas,
                "seconds": time.perf_counter() - t,
            }
        )
        print(f"  {name}: |R| = {n:5d} done in {C.fmt_seconds(rows[-1]['seconds'])}", flush=True)
    # Lanczos against the exact norm (dense eigendecomposition) for two random bases at the
    # smallest and (not with --quick) the largest |R|
    check = []
    for row in (rows[0],) if args.quick else (rows[0], rows[-1]):
        n = row["n_basis"]
        rnd = random_bases(pos, n, min(2, args.samples), key_rnd)
        exact = bounds.nystrom_perturbation_norm(K, rnd)
        lz = np.asarray(row["delta_random"][: len(exact)])
        check.append(dict(n_basis=n, exact=exact, lanczos=lz, rel_diff=np.abs(lz - exact) / exact))
    info = dict(data=name, m=m, m_pos=m_pos, d=d, rho=m_pos / m, sigma2=kernel.sigma2, kappa=kappa)
    # CPU time of this process (all threads): on a shared machine the wall time mostly
    # measures the other tenants
    secs = dict(seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0)
    return {**info, "rows": rows, "lanczos_check": check, **secs}


def plot(results: list[dict], lam: float, path: Path) -> Path:
    fig, axes = C.pyplot().subplots(1, len(results), figsize=(6 * len(results), 4.8), squeeze=False)
    for ax, res in zip(axes[0], results, strict=True):
        n = np.array([r["n_basis"] for r in res["rows"]])
        col = {k: np.array([r[k] for r in res["rows"]]) for k in (B31, B37, B46R, MEAN, SD)}
        kp = "kernel perturbation (46)"
        ax.errorbar(n, col[MEAN], yerr=col[SD], fmt="o-", capsize=3, label=f"{kp}, random R")
        ax.plot(n, col[B46R], "o:", color="C0", alpha=0.6, label=f"{kp}, rare first")
        ax.plot(n, col[B31], "s-", color="C3", label="projected map (31), rare first")
        ax.plot(n, col[B37], "s--", color="C3", alpha=0.6, label="projected map, residuals (37)")
        # the paper's marker: a blue star on the x-axis at |R| = m+
        star = dict(color="blue", ms=14, clip_on=False, transform=ax.get_xaxis_transform())
        ax.plot([res["m_pos"]], [0], "*", **star)
        ax.set_ylabel(f"bound on |RankSVM − R-subset ranker| (λ = {lam:g}, κ = 1)")
        title = f"{res['data']} (m = {res['m']}, m+ = {res['m_pos']})"
        C.style_axes(ax, title, "|R|", xlog=True, ylog=True, xticks=n.tolist())
    axes[0][0].legend(fontsize=8)
    return C.save_figure(fig, path, dpi=120)


def markdown(result: dict) -> str:
    """Per data set the bounds against |R| (the paper's two curves, (31) rare first and (46)
    random mean ± sd, plus (37) and (46) rare first) and the paper's claim."""
    st = result["settings"]
    lines = [
        f"Seed 003 Fig. 3 setting: Gaussian kernel with the paper's σ² (κ = 1), λ = {st['lam']:g}, "
        f"stratified subsample of m = {st['m'] or 'all'} rows, {st['samples']} random bases per "
        f"|R| (paper: 40), ‖K − K′‖₂ by {st['iters']} Lanczos steps, float64"
        f"{C.quick_tag(st)}. Paper's claim (Sec. 4, no numbers): the "
        "projected-map bound (31) can be significantly lower than the kernel-perturbation "
        "bound (46), particularly when |R| ≪ m. * = m+ (the paper's blue star).",
    ]
    for res in result["results"]:
        check = res.get("lanczos_check") or []
        worst = max((max(c["rel_diff"]) for c in check), default=float("nan"))
        n_check = sum(len(c["exact"]) for c in check)
        data = (
            f"**{res['data']}**: m = {res['m']}, m+ = {res['m_pos']} (ρ = {100 * res['rho']:.1f} %)"
        )
        data += f", d = {res['d']}, σ² = {res['sigma2']:.3g}"
        rows = []
        for r in res["rows"]:
            b31, b37, mean, b46r = (f"{r[k]:.3g}" for k in (B31, B37, MEAN, B46R))
            n = f"{r['n_basis']}" + (" *" if r["n_basis"] == res["m_pos"] else "")
            rows.append([n, b31, b37, f"{mean} ± {r[SD]:.2g}", b46r, f"{r[MEAN] / r[B31]:.2f}"])
        lower = sum(r[B31] < r[MEAN] for r in res["rows"])
        lines += ["", data, "", *C.md_table(MD_HEAD, rows, "rrrrrr"), ""]
        lines.append(
            f"(31) below the mean of (46) at {lower} of {len(res['rows'])} sizes; Lanczos vs "
            f"exact ‖K − K′‖₂ on {n_check} bases: max rel. diff {worst:.1e}."
        )
    # "|R|" would split a markdown table cell
    return "\n".join(lines).replace("|R|", "\\|R\\|")


def main(argv=None) -> int:
    p = C.parser(NAME, __doc__, f"smoke test: {QUICK}", seed=0)
    names = "KEEL names (page-blocks0, satimage) or 'simulated'"
    p.add_argument("--data", nargs="+", default=list(DATASETS), help=names)
    p.add_argument("--m", type=int, default=1500, help="stratified subsample size (0: all rows)")
    p.add_argument("--samples", type=int, default=40, help="random bases per |R| (paper: 40)")
    p.add_argument("--iters", type=int, default=50, help="Lanczos steps per norm")
    p.add_argument("--lam", type=float, default=1.0, help="λ (paper: 1)")
    args = p.parse_args(argv)
    if args.quick:
        vars(args).update(QUICK)
    jax.config.update("jax_enable_x64", True)
    t0, c0 = time.perf_counter(), time.process_time()
    results = [run_dataset(name, args) for name in args.data]
    settings = {k: vars(args)[k] for k in ("data", "m", "samples", "iters", "lam", "seed", "quick")}
    report = {
        "bench": NAME,
        "paper": "seed 003, Fig. 3 (Thm 3 eq. 31 vs Thm 7 eq. 46)",
        "env": C.env_info(),
        "settings": {**settings, "kernel": "gaussian", "dtype": "float64"},
        "results": results,
        "total_seconds": time.perf_counter() - t0,
        "total_cpu_seconds": time.process_time() - c0,
    }
    print("\n" + markdown(report))
    saved = [C.RESULTS_DIR / C.out_path(NAME, args.quick).name] if args.save else []
    for out in [args.out, *saved]:  # --save: also to bench/results/
        path = C.write_json(out, report)
        png = plot(results, args.lam, out.with_suffix(".png"))
        print(f"\nwrote {path} and {png} ({C.fmt_seconds(report['total_seconds'])})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
