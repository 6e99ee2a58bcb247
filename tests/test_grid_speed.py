"""The batched λ-grid machinery: the block in both layouts (``DualBlock``), the staged grid
solver (``trust_ncg_grid``), finished members taking no CG step, the bucketed searchsorted.

Each is a speed device; these tests pin down that none changes a result.
"""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import kernels, pairwise
from jaxrank.solver import Status, _steihaug, trust_ncg, trust_ncg_grid

fitmod = sys.modules["jaxrank._fitting"]  # the fitting internals (jaxrank.fit re-exports them)


@pytest.fixture(scope="module")
def data():
    X, y = jaxrank.datasets.make_rare_class(600, 0.08, 0.75, seed=5)
    return (X - X.mean(0)) / X.std(0), y


# ----------------------------------------------------------------------------- DualBlock


def test_dual_block_products_equal_plain():
    rng = np.random.default_rng(0)
    K = jnp.asarray(rng.normal(size=(96, 7)))
    D = kernels.dual_block(K)
    assert D.shape == K.shape and D.dtype == K.dtype
    np.testing.assert_array_equal(D.Kt, K.T)
    g = jnp.asarray(rng.normal(size=96))
    G = jnp.asarray(rng.normal(size=(5, 96)))
    V = jnp.asarray(rng.normal(size=(7, 3)))
    idx = jnp.asarray([0, 95, 17])
    rmv = lambda g, KK: kernels.rmatvec(g, KK, 16)
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    close(rmv(g, D), g @ K)  # one vector: the two-level sum over K
    close(jax.vmap(rmv, (0, None))(G, D), G @ K)  # a grid: (Kᵀ Gᵀ)ᵀ
    close(jax.jit(jax.vmap(rmv, (0, None)))(G, D), G @ K)
    close(jax.vmap(jax.vmap(rmv, (0, None)), (0, None))(jnp.stack([G, 2 * G]), D),
          jnp.stack([G @ K, 2 * G @ K]))  # fmt: skip
    # a batch of blocks (not what fits do, but vmap must still be right)
    DD = jax.tree.map(lambda x: jnp.stack([x, 3 * x]), D)
    close(jax.vmap(rmv, (None, 0))(g, DD), jnp.stack([g @ K, 3 * g @ K]))
    close(jax.vmap(rmv, (0, 0))(G[:2], DD), jnp.stack([G[0] @ K, 3 * G[1] @ K]))
    close(kernels.matmul(D, V), K @ V)
    close(kernels.rmatmul(G, D), G @ K)
    close(kernels.take_rows(D, idx), K[idx])


def test_dual_block_float32_grid_gradient_accuracy():
    # The grid gradient through Kᵀ must stay as accurate as the two-level sum it replaces:
    # weights that cancel (positives pull, negatives push) over 2¹⁶ rows.
    rng = np.random.default_rng(1)
    m, n = 2**16, 8
    K64 = rng.uniform(0.5, 1.0, size=(m, n))
    G64 = rng.normal(size=(4, m))
    G64 -= G64.mean(axis=1, keepdims=True)
    ref = G64 @ K64
    K32, G32 = jnp.asarray(K64, jnp.float32), jnp.asarray(G64, jnp.float32)
    block = kernels.product_block(m)
    rmv = jax.jit(jax.vmap(lambda g, KK: kernels.rmatvec(g, KK, block), (0, None)))
    err_two = np.abs(np.asarray(rmv(G32, K32), np.float64) - ref).max()
    err_dual = np.abs(np.asarray(rmv(G32, kernels.dual_block(K32)), np.float64) - ref).max()
    err_plain = np.abs(np.asarray(G32 @ K32, np.float64) - ref).max()
    scale = np.abs(G64).sum(axis=1).max()
    assert err_dual <= 4 * max(err_two, 1e-7 * scale), (err_dual, err_two, err_plain)


def _spy_keep_transpose(monkeypatch) -> list[bool]:
    # fit_rows's choice of the two-layout block (built in the fit's program, or by dual_block)
    used, keep = [], fitmod.keep_transpose
    monkeypatch.setattr(  # where fit_rows looks it up
        fitmod._rows, "keep_transpose", lambda *a, **k: used.append(keep(*a, **k)) or used[-1]
    )
    return used


@pytest.mark.parametrize("path", ["batch", "warm"])
def test_fit_with_transpose_equals_without(data, monkeypatch, path):
    X, y = data
    lams = 2.0 ** np.arange(-12, 5, 4)  # 5 values: at least DUAL_MIN_COLUMNS per product
    kw = dict(tol=1e-10, path=path, chains=4)
    used = _spy_keep_transpose(monkeypatch)
    got = jaxrank.fit_rankrc(X, y, lams, **kw)
    assert any(used), "the grid fit did not keep the transposed block"
    monkeypatch.setattr(fitmod._block, "DUAL_MIN_COLUMNS", 10**6)  # where it is read
    used.clear()
    ref = jaxrank.fit_rankrc(X, y, lams, **kw)
    assert used and not any(used)
    np.testing.assert_allclose(got.info.objective, ref.info.objective, rtol=1e-10)
    np.testing.assert_allclose(got.coef, ref.coef, rtol=1e-6, atol=1e-8)


def test_keep_transpose_rules():
    K = jnp.zeros((8, 2))
    keep = fitmod.keep_transpose
    assert keep(K, 16, 1000, limit=10**6, memory_budget=None)
    assert not keep(K, fitmod.DUAL_MIN_COLUMNS - 1, 1000, limit=10**6, memory_budget=None)
    assert not keep(K, 16, 1000, limit=1999, memory_budget=None)  # max_kernel_bytes
    assert not keep(K, 16, 1000, limit=10**6, memory_budget=1999)  # memory budget


def test_fit_keeps_one_copy_when_two_exceed_max_kernel_bytes(data, monkeypatch):
    X, y = data
    used = _spy_keep_transpose(monkeypatch)
    nb = int((y == 1).sum())  # the stored block's size, as fit_rows computes it
    rows, n_chunks = kernels.chunk_rows(len(y), nb, 8, kernels.product_block(len(y)))
    block_bytes = rows * n_chunks * nb * 8
    jaxrank.fit_rankrc(X, y, 2.0 ** np.arange(-8, 1, 2), max_kernel_bytes=block_bytes)
    assert not any(used)


# ----------------------------------------------------------------------------- staged solver


def _quartic_make(A):
    def make(shift):
        fun = lambda x: (0.5 * x @ A @ x + shift * jnp.sum(x**4) - x[0],
                         A @ x + 4 * shift * x**3 - jnp.eye(A.shape[0])[0], x)  # fmt: skip
        hvp = lambda x, v: A @ v + 12 * shift * x**2 * v
        return fun, hvp, None

    return make


@pytest.mark.parametrize("stages", [None, (6, 3, 1), (6, 1), (6, 2)])
def test_staged_grid_equals_individual_solves(stages):
    A = jnp.array([[3.0, 1.0, 0.0], [1.0, 2.0, 0.5], [0.0, 0.5, 1.0]])
    make = _quartic_make(A)
    shifts = jnp.array([0.0, 0.01, 0.1, 1.0, 10.0, 1000.0])
    x0 = jnp.ones((6, 3)) * jnp.arange(1.0, 7.0)[:, None]
    xb, ib = jax.jit(lambda s, x: trust_ncg_grid(make, s, x, stages=stages, tol=1e-12))(shifts, x0)
    for k in range(6):
        fun, hvp, _ = make(shifts[k])
        x, i = trust_ncg(fun, hvp, x0[k], tol=1e-12)
        np.testing.assert_allclose(xb[k], x, atol=1e-12)
        assert int(ib.iterations[k]) == int(i.iterations)
        assert int(ib.cg_iterations[k]) == int(i.cg_iterations)
        assert int(ib.status[k]) == int(i.status) == Status.CONVERGED


@pytest.mark.parametrize("stages", [(5, 3), (6, 6), (6, 7), (6, 0), (6, 3, 3)])
def test_staged_grid_rejects_bad_stages(stages):
    make = _quartic_make(jnp.eye(2))
    with pytest.raises(ValueError, match="stages"):
        trust_ncg_grid(make, jnp.zeros(6), jnp.zeros((6, 2)), stages=stages)


def test_fit_grid_staged_equals_one_stage(data, monkeypatch):
    X, y = data
    lams = 2.0 ** np.arange(-20, 11, 2)
    ref = jaxrank.fit_rankrc(X, y, lams, tol=1e-10)
    assert fitmod.grid_stages(16, 600 * 50 * 8) is None  # small: one stage
    assert fitmod.grid_stages(16, fitmod.STAGED_MIN_BYTES) == (16, 4)
    assert fitmod.grid_stages(40, fitmod.STAGED_MIN_BYTES) == (40, 10, 2)
    assert fitmod.grid_stages(4, fitmod.STAGED_MIN_BYTES) is None
    monkeypatch.setattr(fitmod._block, "STAGED_MIN_BYTES", 0)  # where fit_rows reads it
    got = jaxrank.fit_rankrc(X, y, lams, tol=1e-10)
    np.testing.assert_allclose(got.info.objective, ref.info.objective, rtol=1e-10)
    np.testing.assert_allclose(got.coef, ref.coef, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(got.info.status, ref.info.status)


def test_finished_member_takes_no_cg_step():
    A = jnp.array([[3.0, 1.0], [1.0, 2.0]])
    g = jnp.array([1.0, -2.0])
    z, _, zmz, j = _steihaug(lambda v: A @ v, lambda r: r, g, jnp.inf, 25, jnp.asarray(False))
    assert int(j) == 0 and not np.any(np.asarray(z)) and float(zmz) == 0
    z, _, _, j = _steihaug(lambda v: A @ v, lambda r: r, g, jnp.inf, 25, jnp.asarray(True))
    assert int(j) > 0 and float(g @ z) < 0  # a (truncated) Newton step: a descent direction


# ----------------------------------------------------------------------------- searchsorted


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bucketed_searchsorted_is_exact(seed, dtype):
    rng = np.random.default_rng(seed)
    B, n, mq = 3, int(rng.integers(1, 80)), 300
    spread = [0.0, 1e-9, 1.0, 1e6][seed % 4]
    s = np.sort(np.round(rng.normal(size=(B, n)) * spread, seed % 3), axis=-1).astype(dtype)
    s[0] = s[0, 0]  # a row of ties only
    q = np.concatenate(
        [np.round(rng.normal(size=(B, mq)) * max(spread, 1), 1).astype(dtype), s,
         s[:, :1] - 1, s[:, -1:] + 1, np.full((B, 2), [-np.inf, np.inf], dtype)], axis=1,
    )  # fmt: skip
    got = np.asarray(pairwise._searchsorted_rows(jnp.asarray(s), jnp.asarray(q)))
    ref = np.stack([np.searchsorted(s[b], q[b], side="left") for b in range(B)])
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("crowded", [False, True])
def test_bucketed_searchsorted_both_branches(dtype, crowded):
    # Spread values leave every cell with at most _SCAN values (the direct comparisons alone);
    # a run of more than _SCAN ties in one row sends the batch through the bisection branch.
    rng = np.random.default_rng(7)
    B, n = 4, 500
    s = np.sort(rng.uniform(-3, 3, size=(B, n)), axis=-1).astype(dtype)
    if crowded:
        s[1, 100 : 100 + 3 * pairwise._SCAN] = s[1, 100]
    cells = np.floor((s - s[:, :1]) * (pairwise._CELLS * n / (s[:, -1:] - s[:, :1])))
    max_cell = max(np.unique(r, return_counts=True)[1].max() for r in cells)
    assert (max_cell > pairwise._SCAN) == crowded
    q = np.concatenate([rng.normal(size=(B, 2000)) * 2, s, np.nextafter(s, np.inf)], 1)
    q = q.astype(dtype)
    got = np.asarray(pairwise._searchsorted_rows(jnp.asarray(s), jnp.asarray(q)))
    ref = np.stack([np.searchsorted(s[b], q[b], side="left") for b in range(B)])
    np.testing.assert_array_equal(got, ref)
