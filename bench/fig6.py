"""Seed 000 Fig. 6 analogue: RankRC on a large, very skewed problem as the training set grows.

Seed 000 (Tayal et al., TKDE 2015) Sec. 6.3 trains on 5-75 % of the de-duplicated KDD-99 data
(not shipped with jaxrank): this is an analogue on simulated data of its shape. Results and the
paper's claims: RESULTS.md §4; the settings in the JSON. Protocol details:

* **Data**: seed 000 generator, t = 0.75, d = 40 (KDD-99: 43 features), centres from ``--seed``;
  ``split(key(seed), 5)`` gives centres, a training pool of ``max(sizes)`` rows at ρ = 0.1 %
  (KDD-99: 0.098 %), validation and test draws and the methods' key. Training sets are
  **nested** like the paper's fractions (:func:`nested_rows`), each with exactly ρ = 0.1 %.
  Validation and test have ρ = 1 % (AUC does not depend on the ratio; a few hundred rare test
  rows; KDD's test set has 4 %). Each training set is standardised on its own rows.
* **Methods**: RANK-RC, RANK-RND (|R| = m+ uniform rows), RANK-SVM (float32, the paper's σ²,
  ε = 0.5, tol 1e-6) and SVM-W, libsvm ``SVC(class_weight="balanced")`` with the same kernel.
  jaxrank fits get ``memory_budget = --memory-gb`` (6 GiB: a shared machine); a block over it
  is "infeasible" (``MemoryBudgetError``, raised before any allocation).
* **λ / C**: one per method by validation AUC, kept for every size: RANK-RC/RND at
  ``--select-m`` rows (10⁵, m+ = 100: at m+ = 10 the validation AUC is flat in λ and ties went
  to the largest λ), SVM-W at the smallest size over C ∈ {0.1, 1, 10, 100}; RANK-SVM takes
  RANK-RC's λ (its own search would cost ~16 m × m fits). The paper re-validated per fraction.
* **Timing**: ``fit_s`` as ``_common.time_warm`` with ``--repeat-below``; SVC in a spawned
  subprocess, killed past ``--cap`` s; a method over the cap is not run at larger sizes. The
  saved run predates the one-thread host BLAS of ``_common.limit_blas``.

Full run: ~20 min, ~10 GB peak; ``--quick``: ρ = 2 %, d = 10, m = 1000, 2000 (< 60 s).
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's jaxrank

import _common as C
import _data as DH
import jax
import numpy as np

import jaxrank
from jaxrank import datasets, metrics

NAME = "fig6"
DTYPE = "float32"
T_OVERLAP = 0.75
RHO_EVAL = 0.01
CAP_S, MEMORY_GB, REPEAT_BELOW_S, SELECT_M = 300.0, 6.0, 60.0, 100_000
GRID_PATH = dict(path="warm", chains=4)
FULL = dict(sizes=(10_000, 30_000, 100_000, 300_000, 1_000_000), rho=0.001, d=40, m_val=20_000,
            m_test=50_000, lams=2.0 ** np.arange(-20, 11, 2), svc_cs=(0.1, 1.0, 10.0, 100.0),
            cap=CAP_S, memory_gb=MEMORY_GB)  # fmt: skip
QUICK = dict(
    sizes=(1000, 2000), rho=0.02, d=10, m_val=2000, m_test=4000,
    lams=2.0 ** np.array([-10.0, -6.0, -2.0]), svc_cs=(1.0,),
    cap=300.0,  # not reached on an idle machine; it keeps a loaded one from stopping methods
    # RANK-SVM's blocks (K and K_RR): 1000 rows need 12 MB, 2000 rows 48 MB: the second is
    # "infeasible" under 32 MiB
    memory_gb=1 / 32,
)  # fmt: skip

METHODS = {"rank-rc": "RANK-RC", "rank-rnd": "RANK-RND", "rank-svm": "RANK-SVM", "svm-w": "SVM-W"}
JAX_METHODS = ("rank-rc", "rank-rnd", "rank-svm")
RANKERS = {"rank-rc": jaxrank.fit_rankrc, "rank-rnd": jaxrank.fit, "rank-svm": jaxrank.fit_ranksvm}

PAPER = {
    "data": "KDD Cup 1999, de-duplicated: 1 074 975 training rows, 77 286 test rows, 43 features",
    "rho": 0.00098,
    "fractions": [0.05, 0.10, 0.25, 0.50, 0.75],
    "sizes": [53_749, 107_498, 268_744, 537_488, 806_231],
    "claims": {
        "rank-svm": "could not be trained even at 5 % (53 749 rows): kernel matrix > 10 GB",
        "svm-w": "trained up to 50 % of the data; beyond it did not converge after 72 hours",
        "auc": "RANK-RC, RANK-RND and SVM-W better than SVM/SVM-RUS; RANK-RC performs the best",
        "scaling": "RANK-RC and RANK-RND scale well (time); far fewer support vectors than SVM-W",
    },
    "note": "Fig. 6 is a plot; the paper gives no numbers for its points, only the claims.",
}


def nested_rows(y: np.ndarray, m: int, rho: float) -> np.ndarray:
    """Rows of the size-m training set: the first ``round(ρ m)`` rare and first majority rows
    of the (shuffled) pool, sorted; nested in m."""
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y != 1)
    n_pos = min(max(round(rho * m), 1), pos.size)
    if m - n_pos > neg.size:
        raise ValueError(f"the pool has too few majority rows for m = {m}.")
    return np.sort(np.concatenate([pos[:n_pos], neg[: m - n_pos]]))


def make_data(seed: int, sizes, rho: float, d: int, m_val: int, m_test: int) -> dict:
    kc, kpool, kval, ktest, kfit = jax.random.split(jax.random.key(seed), 5)
    centers = datasets.rare_class_centers(T_OVERLAP, d=d, key=kc)
    Xp, yp = datasets.make_rare_class(max(sizes), rho, None, centers=centers, key=kpool)
    Xv, yv = datasets.make_rare_class(m_val, RHO_EVAL, None, centers=centers, key=kval)
    Xt, yt = datasets.make_rare_class(m_test, RHO_EVAL, None, centers=centers, key=ktest)
    bayes = float(metrics.auc(yt, datasets.bayes_scores(Xt, centers)))
    return dict(pool=(Xp, yp), val=(Xv, yv), test=(Xt, yt), bayes=bayes, key=kfit)


def fit_jax(name: str, X, y, lam, *, key, budget: int):
    """One jaxrank fit (scalar λ or a grid)."""
    opts = dict(dtype=DTYPE, memory_budget=budget, **(GRID_PATH if np.ndim(lam) else {}))
    if name == "rank-rnd":
        opts.update(basis="random", key=key)
    return RANKERS[name](X, y, lam, **opts)


def _svc_job(q, X, y, evals, C_, gamma):
    """Spawned child: fit SVC, report the fit time, then the decision values on ``evals``."""
    from sklearn.svm import SVC

    t0 = time.perf_counter()
    model = SVC(C=C_, kernel="rbf", gamma=gamma, class_weight="balanced", cache_size=1000)
    model.fit(X, y)
    q.put({"fit_s": time.perf_counter() - t0, "n_sv": int(model.support_.size)})
    t0 = time.perf_counter()
    scores = [model.decision_function(E) for E in evals]
    q.put({"scores": scores, "predict_s": time.perf_counter() - t0})


def fit_svc(X, y, evals, C_: float, gamma: float, cap: float) -> dict:
    """SVC in a spawned process; killed when the fit exceeds ``cap`` seconds."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_svc_job, args=(q, X, y, evals, C_, gamma), daemon=True)
    t0 = time.perf_counter()
    p.start()
    try:
        # the child's start-up (imports) is not part of the fit: allow a minute for it
        head = q.get(timeout=cap + 60.0)
    except queue.Empty:
        head = None
    if head is None or head["fit_s"] > cap:
        p.kill()
        p.join()
        spent = time.perf_counter() - t0 if head is None else head["fit_s"]
        return {"stopped": True, "elapsed_s": spent, **(head or {})}
    tail = q.get(timeout=3600)
    p.join()
    return {"stopped": False, **head, **tail}


def select(cfg: dict, data: dict, budget: int) -> dict:
    """λ per ranking method on the training set of ``cfg["select_m"]`` rows and C for SVC on
    the smallest one, by validation AUC on the validation draw (ties to the larger value)."""
    m0, m_sel = cfg["sizes"][0], cfg["select_m"]
    out = {"m": m0, "m_lambda": m_sel}
    lams, (Xp, yp), (Xv0, yv) = np.asarray(cfg["lams"], float), data["pool"], data["val"]
    for name in cfg["methods"]:
        t0 = time.perf_counter()
        rows = nested_rows(yp, m0 if name in ("svm-w", "rank-svm") else m_sel, cfg["rho"])
        (Xtr, Xv), ytr = DH.standardise(Xp[rows], Xv0), yp[rows]
        if name == "svm-w":
            sigma2 = jaxrank.kernels.sigma2_heuristic(Xtr)
            runs = [fit_svc(Xtr, ytr, [Xv], c, 1.0 / sigma2, cfg["cap"]) for c in cfg["svc_cs"]]
            aucs = [float("nan") if r["stopped"] else float(metrics.auc(yv, r["scores"][0]))
                    for r in runs]  # fmt: skip
            i = DH.pick_best(cfg["svc_cs"], np.nan_to_num(aucs, nan=-1.0))
            out[name] = {"C": float(cfg["svc_cs"][i]), "grid": list(cfg["svc_cs"]), "val_auc": aucs}
        elif name == "rank-svm" and "rank-rc" in out:
            # RankSVM's λ search would cost ~16 RankSVM fits at the smallest size (the kernel
            # block is m x m): it takes RankRC's λ (same objective, same loss; seed 000 Table 2
            # finds similar λ for both)
            out[name] = {"lam": out["rank-rc"]["lam"], "from": "rank-rc"}
        else:
            key = jax.random.fold_in(data["key"], list(METHODS).index(name))
            try:
                with C.caught_warnings() as caught:
                    model = fit_jax(name, Xtr, ytr, lams, key=key, budget=budget)
            except jaxrank.MemoryBudgetError as e:
                out[name] = {"lam": float(np.median(lams)), "error": str(e)}
                continue
            aucs = np.asarray(metrics.auc(yv, model.decision_function(Xv)), float)
            i = DH.pick_best(lams, aucs)
            out[name] = {"lam": float(lams[i]), "log2_lam": float(np.log2(lams[i])),
                         "grid": lams.tolist(), "val_auc": aucs.tolist(),
                         "status": DH.status_names(model),
                         "warnings": C.warning_list(caught)}  # fmt: skip
        out[name]["select_s"] = time.perf_counter() - t0
        shown = {k: v for k, v in out[name].items() if k in ("lam", "C", "select_s")}
        print(f"  select {name:9s} {shown}", flush=True)
    return out


def run_jax(name, Xtr, ytr, Xte, yte, lam, *, key, budget, repeat_below) -> dict:
    fn = lambda: fit_jax(name, Xtr, ytr, lam, key=key, budget=budget)
    with C.caught_warnings() as caught:
        try:
            model, timing = C.time_warm(fn, repeat_below)
        except jaxrank.MemoryBudgetError as e:
            return {"infeasible": True, "reason": str(e)}
        scores = jax.block_until_ready(model.decision_function(Xte))
    nb, info = int(model.n_basis), model.info
    return {**timing, "infeasible": False, "test_auc": float(metrics.auc(yte, scores)),
            "n_basis": nb, "status": DH.status_names(model),
            "newton_iterations": int(np.asarray(info.iterations)),
            "cg_iterations": int(np.asarray(info.cg_iterations)),
            "K_bytes": nb * int(ytr.size) * np.dtype(DTYPE).itemsize,
            "peak_rss_bytes": C.peak_rss_bytes(), "warnings": C.warning_list(caught)}  # fmt: skip


def run(cfg: dict) -> dict:
    budget = int(cfg["memory_gb"] * 2**30)
    t0 = time.perf_counter()
    data = make_data(cfg["seed"], cfg["sizes"], cfg["rho"], cfg["d"], cfg["m_val"], cfg["m_test"])
    print(f"data: pool {max(cfg['sizes'])} rows, test Bayes AUC {100 * data['bayes']:.2f} "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    sel = select(cfg, data, budget)
    (Xp, yp), (Xt, yte) = data["pool"], data["test"]

    def entry(m):
        rows = nested_rows(yp, m, cfg["rho"])
        (Xtr, Xte), ytr = DH.standardise(Xp[rows], Xt), yp[rows]
        sigma2 = jaxrank.kernels.sigma2_heuristic(Xtr)
        e = {"m": m, "m_pos": int(np.sum(ytr == 1)), "sigma2": float(sigma2), "methods": {}}
        return e, (Xtr, ytr, Xte, sigma2)

    def fit(ctx, name):
        Xtr, ytr, Xte, sigma2 = ctx
        if name == "svm-w":
            r = fit_svc(Xtr, ytr, [Xte], sel[name]["C"], 1.0 / sigma2, cfg["cap"])
            if r["stopped"]:
                return {"stopped": True, "elapsed_s": r["elapsed_s"], "cap_s": cfg["cap"]}
            return {"stopped": False, "fit_s": r["fit_s"], "predict_s": r["predict_s"],
                    "test_auc": float(metrics.auc(yte, r["scores"][0])), "n_basis": r["n_sv"],
                    "C": sel[name]["C"]}  # fmt: skip
        key = jax.random.fold_in(data["key"], list(METHODS).index(name))
        res = run_jax(name, Xtr, ytr, Xte, yte, sel[name]["lam"], key=key, budget=budget,
                      repeat_below=cfg["repeat_below"])  # fmt: skip
        return {**res, "lam": sel[name]["lam"]}

    def skipped(e, name):  # would it have fitted in memory? (jaxrank's check)
        if name not in JAX_METHODS:
            return {}
        return DH.memory_check(e["m"], e["m"] if name == "rank-svm" else e["m_pos"], budget)

    sweep = dict(cap=cfg["cap"], metric="test_auc", skipped=skipped)
    results, stopped = C.capped_sweep(cfg["sizes"], cfg["methods"], entry, fit, **sweep)
    return {"bayes_test_auc": data["bayes"], "selection": sel, "results": results,
            "stopped": stopped}  # fmt: skip


def _over_budget(result: dict, r: dict, name: str) -> bool:
    res = r["methods"].get(name, {})
    if "memory_ok" in res:
        return not res["memory_ok"]
    budget = result["settings"]["memory_gb"] * 2**30
    nb = r["m"] if name == "rank-svm" else r["m_pos"]
    return name in JAX_METHODS and DH.block_bytes(r["m"], nb) > budget


def _cell(res: dict | None, over: bool = False) -> str:
    if res is None:
        return "- / - / -"
    if res.get("infeasible"):
        return "infeasible / - / -"
    if res.get("skipped"):
        return "not run (cap)" + ("; over the memory budget" if over else "") + " / - / -"
    if "test_auc" not in res:
        return f"stopped > {res.get('cap_s', 0):.0f} s / - / -"
    return C.sweep_cell(res, "test_auc")


def _claim_rank_svm(result: dict) -> str:
    s, res = result["settings"], result["results"]
    inf = [r for r in res if r["methods"]["rank-svm"].get("infeasible")]
    ok = C.sweep_done(result, "rank-svm", "test_auc")
    over = [r for r in res if r["methods"]["rank-svm"].get("skipped")
            and _over_budget(result, r, "rank-svm")]  # fmt: skip
    return (
        f"trained up to m = {ok[-1]['m']:,} "
        f"({C.fmt_seconds(ok[-1]['methods']['rank-svm']['fit_s'])}); " if ok
        else "never trained; "
    ) + (
        f"infeasible from m = {inf[0]['m']:,}: {inf[0]['methods']['rank-svm']['reason']}"
        if inf else
        f"not run from m = {over[0]['m']:,} (time cap), where its blocks need "
        f"{DH.block_bytes(over[0]['m'], over[0]['m']) / 2**30:.1f} GiB, over "
        f"the {s['memory_gb']:g} GiB budget: infeasible" if over
        else "never infeasible at these sizes"
    )  # fmt: skip


def markdown(result: dict) -> str:
    """The result as markdown: a table per size and the paper's claims beside ours."""
    s, res, sel = result["settings"], result["results"], result["selection"]
    methods = s["methods"]
    lines = [
        f"### Seed 000 Fig. 6 analogue (simulated, ρ = {100 * s['rho']:g} %, d = {s['d']}, "
        f"t = {s['t']}; test {s['m_test']:,} rows, Bayes AUC "
        f"{100 * result['bayes_test_auc']:.2f}){C.quick_tag(s)}",
        "",
        *C.md_table(["m", "m+", *(f"{METHODS[n]} AUC / fit / size" for n in methods)],
                    [[f"{r['m']:,}", f"{r['m_pos']:,}",
                      *(_cell(r["methods"].get(n), _over_budget(result, r, n)) for n in methods)]
                     for r in res], "rr"),
    ]  # fmt: skip
    chosen = ", ".join(f"{METHODS[n]} C = {sel[n]['C']:g}" if n == "svm-w"
                       else f"{METHODS[n]} log₂λ = {np.log2(sel[n]['lam']):+.0f}"
                       for n in methods if n in sel)  # fmt: skip
    lines += [
        "",
        f"One λ / C per method, chosen by validation AUC (RANK-RC/RND at m = "
        f"{sel.get('m_lambda', sel['m']):,}, SVM-W at m = {sel['m']:,}; RANK-SVM takes RANK-RC's "
        f"λ) and kept: {chosen}. Size = |R| (ranking models) or support vectors (SVM-W). fit = "
        f"wall time of one fit (warm when the first call took < {s['repeat_below']:g} s; * = that "
        f"first call, compilation included). Memory budget {s['memory_gb']:g} GiB; time cap "
        f"{s['cap']:g} s per fit.",
        "",
    ]
    claims = []
    if "rank-svm" in methods:
        claims.append((f"RANK-SVM {PAPER['claims']['rank-svm']}", _claim_rank_svm(result)))
    if "svm-w" in methods:
        ok = [r["m"] for r in C.sweep_done(result, "svm-w", "test_auc")]
        st = result["stopped"].get("svm-w")
        claims.append((f"SVM-W {PAPER['claims']['svm-w']}",
                       (f"trained up to m = {max(ok):,}" if ok else "never finished")
                       + (f"; stopped: {st}" if st else "; never hit the cap")))  # fmt: skip
    best = []
    for r in res:
        if aucs := {n: v["test_auc"] for n, v in r["methods"].items() if "test_auc" in v}:
            top = max(aucs, key=aucs.get)
            best.append(f"m = {r['m']:,}: {METHODS[top]} ({100 * aucs[top]:.2f})")
    claims.append((PAPER["claims"]["auc"], f"best test AUC per size: {'; '.join(best)}"))
    slopes, sizes = C.sweep_scaling(result, METHODS, "test_auc")
    claims.append((PAPER["claims"]["scaling"],
                   f"log-log slopes: {slopes}; size at the largest m run: {sizes}"))  # fmt: skip
    lines += C.md_table(["claim (seed 000 Sec. 6.3, KDD-99)", "here"], claims)
    lines += ["", f"Paper: {PAPER['data']}; ρ = {100 * PAPER['rho']:.3f} %; training sizes "
              f"{', '.join(f'{m:,}' for m in PAPER['sizes'])}. {PAPER['note']}"]  # fmt: skip
    return C.md_text(lines, s)


def plot(result: dict, path: Path) -> Path:
    s = result["settings"]
    return C.plot_vs_size(
        result, path, metric="test_auc", labels=METHODS, ceiling=result["bayes_test_auc"],
        markers={"rank-rc": "o", "rank-rnd": "s", "rank-svm": "^", "svm-w": "D"},
        titles=("(a) test AUC (%)", "(b) training time (s)", "(c) basis size / SVs"),
        title=f"Seed 000 Fig. 6 analogue: simulated ρ = {100 * s['rho']:g} %, d = {s['d']}",
    )  # fmt: skip


def parse_args(argv=None):
    p = C.parser(NAME, __doc__, "tiny sizes (< 60 s)", seed=0, reduced=True)
    p.add_argument("--sizes", type=int, nargs="+", default=None)
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    p.add_argument("--cap", type=float, default=None, help=f"seconds per fit (default {CAP_S:g})")
    p.add_argument("--memory-gb", type=float, default=None, help=f"default {MEMORY_GB:g}")
    p.add_argument("--repeat-below", type=float, default=REPEAT_BELOW_S)
    p.add_argument("--select-m", type=int, default=None, help=f"λ-selection rows ({SELECT_M:,})")
    args = p.parse_args(argv)
    P = QUICK if args.quick else FULL
    sizes = sorted(args.sizes or P["sizes"])
    cfg = {
        "quick": args.quick, "sizes": sizes, "rho": P["rho"], "d": P["d"], "t": T_OVERLAP,
        "m_val": P["m_val"], "m_test": P["m_test"], "lams": np.asarray(P["lams"]).tolist(),
        "svc_cs": list(P["svc_cs"]), "cap": args.cap or P["cap"],
        "memory_gb": args.memory_gb or P["memory_gb"], "repeat_below": args.repeat_below,
        "select_m": min(args.select_m or (sizes[0] if args.quick else SELECT_M), max(sizes)),
        "methods": list(args.methods), "seed": args.seed, "reduced": args.reduced,
    }  # fmt: skip
    return args, cfg


def main(argv=None) -> int:
    args, cfg = parse_args(argv)
    settings = {
        **cfg, "dtype": DTYPE, "rho_eval": RHO_EVAL,
        "kernel": "gaussian, σ² = mean squared pairwise distance of the training rows; "
                  "SVC gamma = 1/σ²",
        "eps": 0.5, "tol": 1e-6, "grid_path": GRID_PATH,
        "lambda_selection": "one λ (C) per method by validation AUC: RANK-RC/RND at "
                            "select_m rows, SVM-W at the smallest size; RANK-SVM takes RANK-RC's λ",
        "training_sets": "nested: first round(ρm) rare + first m − round(ρm) majority rows "
                         "of one shuffled pool",
    }  # fmt: skip
    return C.main(NAME, args, settings, lambda: {"paper": PAPER, **run(cfg)}, markdown=markdown,
                  plot=plot, detail=f"sizes {cfg['sizes']}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
