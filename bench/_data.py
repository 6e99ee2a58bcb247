"""Data and model helpers of the bench scripts: standardisation and stratified splits, the
simulated data of the scale benches, rows in a fit's order, validation picks, means with
standard errors, a model's statuses and memory check, the smoothed hinge in a dtype, the
paper's KNN grid, and the hot path's products on a kernel block (``bench/roofline.py``,
``bench/gpu.py``). The run harness is ``bench/_common.py``; the KEEL data ``bench/_keel.py``.
"""

from __future__ import annotations

import functools
import math

import _common as C
import jax
import jax.numpy as jnp
import numpy as np

# jaxrank is imported where it is used: bench/latency.py times ``import jaxrank`` after this


def standardise(Xtr: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """Centre and scale by the training rows' mean and standard deviation (constant columns: 1)."""
    mu, sd = Xtr.mean(axis=0), Xtr.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return [(A - mu) / sd for A in (Xtr, *others)]


def stratified_split(y, frac: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``(kept, held)``: ``round(frac · n_c)`` rows of each class c held out (at least one,
    and at least one kept), drawn uniformly without replacement; both sorted."""
    y = np.asarray(y)
    held = []
    for c in np.unique(y):
        rows = np.flatnonzero(y == c)
        if rows.size < 2:
            raise ValueError(f"class {c} has {rows.size} row(s): cannot split it.")
        n = min(max(round(frac * rows.size), 1), rows.size - 1)
        held.append(rng.permutation(rows)[:n])
    held = np.sort(np.concatenate(held))
    return np.setdiff1d(np.arange(y.size), held), held


def rho_for(m: int) -> float:
    """ρ of the scale benches' simulated data: 1 % below m = 10⁶, 0.1 % from 10⁶ on (m+ = 100,
    1000, 1000 at m = 10⁴, 10⁵, 10⁶)."""
    return 0.01 if m < 1_000_000 else 0.001


def scale_data(m: int, *, t: float = 0.75, d: int = 40, seed: int = 0):
    """``make_rare_class(m, rho_for(m), t, d=d, seed=seed)`` (seed 000 Sec. 6.1), standardised on
    its rows: the data of the core, roofline and gpu benches."""
    import jaxrank

    X, y = jaxrank.datasets.make_rare_class(m, rho_for(m), t, d=d, seed=seed)
    return standardise(X)[0], y


def ordered_rows(X, y, dtype):
    """``(X_o, n_pos, n_neg)``: the rows as a fit orders them, [positives; negatives]."""
    pos = np.asarray(y) == 1
    order = np.concatenate([np.flatnonzero(pos), np.flatnonzero(~pos)])
    return jax.numpy.asarray(X[order], dtype), int(pos.sum()), int((~pos).sum())


def pick_best(params, scores) -> int:
    """Index of the largest validation score; ties go to the larger parameter (λ, C or k)."""
    params, scores = np.asarray(params, np.float64), np.asarray(scores, np.float64)
    best = np.flatnonzero(scores == np.nanmax(scores))
    return int(best[np.argmax(params[best])])


def mean_se(values) -> tuple[float, float]:
    """Mean and standard error (sample standard deviation / √n; NaN for one value)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return float("nan"), float("nan")
    se = float(np.std(v, ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan")
    return float(np.mean(v)), se


def status_names(model) -> str | list[str]:
    """A jaxrank model's solver status by name (a list for a λ grid)."""
    import jaxrank

    names = [jaxrank.Status(int(s)).name for s in np.atleast_1d(np.asarray(model.info.status))]
    return names if np.ndim(model.info.status) else names[0]


def model_info(model) -> dict:
    """``model.info`` as lists (scalars for a scalar λ), the status by name."""
    info = {k: np.asarray(v).tolist() for k, v in model.info._asdict().items()}
    return {**info, "status": status_names(model)}


def block_bytes(m: int, nb: int) -> int:
    """Bytes jaxrank's memory check counts for an m × |R| float32 fit (padding aside): the
    kernel block plus K_RR and the preconditioner."""
    return 4 * (m * nb + 2 * nb * nb)


def memory_check(m: int, nb: int, budget: int) -> dict:
    """For a fit not run (time cap): ``memory_ok`` (and why not) under jaxrank's memory check."""
    import jaxrank

    try:
        jaxrank.kernels.check_memory(block_bytes(m, nb), budget, f"the kernel block ({m} x {nb})")
    except jaxrank.MemoryBudgetError as e:
        return {"memory_ok": False, "memory_reason": str(e)}
    return {"memory_ok": True}


def hinge_loss(eps: float = 0.5, dtype="float32"):
    """jaxrank's smoothed hinge (seed 000 eq. 13) with its coefficients in ``dtype``."""
    from jaxrank.losses import smoothed_hinge

    return jax.tree.map(lambda v: jax.numpy.asarray(v, dtype), smoothed_hinge(eps))


def auc_f64(y, scores) -> np.ndarray:
    """:func:`jaxrank.metrics.auc` as float64 (one value, or one per row of a score grid)."""
    from jaxrank import metrics

    return np.asarray(metrics.auc(y, scores), dtype=np.float64)


def knn_k_grid(m: int) -> np.ndarray:
    """The paper's KNN grid ``k = 1, 2, …, ⌊min(100, √m)⌋`` (seed 000 Sec. 6)."""
    return np.arange(1, max(1, math.floor(min(100.0, math.sqrt(m)))) + 1)


# ------------------------------------------------------------------------ the hot path's products

stream_sum = jax.jit(jnp.sum)


@functools.cache
def _products():
    from jaxrank import kernels

    return jax.jit(kernels.matmul), jax.jit(kernels.rmatvec, static_argnames="block")


def product_timer(repeats: int, budget: float):
    """``fn -> median seconds`` by :func:`_common.time_budgeted`, the probe call one of the
    runs."""
    return lambda fn: C.time_budgeted(fn, repeats=repeats, budget=budget, keep_probe=True)["median"]


def single_products(K, blk: dict, tm, lam: float) -> dict:
    """``K@v``, ``g@K``, Hv and value+gradient for one λ on block ``K`` (stored or streamed), the
    objective as :mod:`jaxrank.internals` compiles it; ``blk`` holds ``Krr``, ``loss``, ``beta``,
    ``n_pos``, ``n_neg`` and ``block``."""
    from jaxrank import internals

    matmul, rmatvec = _products()
    st = dict(n_pos=blk["n_pos"], n_neg=blk["n_neg"], block=blk["block"])
    Krr, loss, beta = blk["Krr"], blk["loss"], blk["beta"]
    kv, kg = jax.random.split(jax.random.key(1))
    v = jax.random.normal(kv, beta.shape, K.dtype)
    g = jax.random.normal(kg, (K.shape[0],), K.dtype)
    lam = jnp.asarray(lam, K.dtype)
    lin = internals.objective_value(K, Krr, lam, beta, loss, **st)[2]
    return {
        "Kv": tm(lambda: matmul(K, v)),
        "gK": tm(lambda: rmatvec(g, K, blk["block"])),
        "hvp": tm(lambda: internals.objective_hvp(K, Krr, lam, lin, v, loss, **st)),
        "value_grad": tm(lambda: internals.objective_value(K, Krr, lam, beta, loss, **st)),
    }
