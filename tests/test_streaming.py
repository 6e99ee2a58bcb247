"""Streamed kernel blocks (``max_kernel_bytes``): the same fit without storing ``K_{·R}``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import kernels


@pytest.fixture
def small_chunks(monkeypatch):
    # many chunks even at test sizes, so the chunk loops are exercised
    monkeypatch.setattr(kernels, "_CHUNK_BYTES", 8 * 1024)


@pytest.fixture(scope="module")
def data():
    return jaxrank.datasets.make_rare_class(700, 0.08, 0.75, seed=3)


def test_streamed_products_equal_stored(small_chunks):
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.normal(size=(333, 4)))
    B = X[:37]
    kern = kernels.resolve_kernel(None, np.asarray(X))
    K = kernels.kernel_block(kern, X, B, padded=True, multiple=16)
    S = kernels.streamed_block(kern, X, B, multiple=16)
    assert S.shape == K.shape and S.X.shape[0] > 1
    v = jnp.asarray(rng.normal(size=37))
    V = jnp.asarray(rng.normal(size=(37, 3)))
    g = jnp.asarray(rng.normal(size=K.shape[0]))
    G = jnp.asarray(rng.normal(size=(2, K.shape[0])))
    idx = jnp.asarray([0, 5, 332, 100])
    np.testing.assert_allclose(kernels.matmul(S, v), K @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(kernels.matmul(S, V), K @ V, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(kernels.rmatvec(g, S, 16), g @ K, rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(kernels.rmatmul(G, S), G @ K, rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(kernels.take_rows(S, idx), K[idx], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("precondition", ["auto", "cholesky"])
@pytest.mark.parametrize("path", ["batch", "warm"])
def test_streamed_fit_equals_stored(data, small_chunks, precondition, path):
    X, y = data
    lams = np.array([1e-1, 1e-3])
    kw = dict(tol=1e-9, precondition=precondition, path=path)
    ref = jaxrank.fit_rankrc(X, y, lams, **kw)
    got = jaxrank.fit_rankrc(X, y, lams, max_kernel_bytes=0, **kw)
    np.testing.assert_allclose(got.info.objective, ref.info.objective, rtol=1e-10)
    np.testing.assert_allclose(got.coef, ref.coef, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(
        got.decision_function(X), ref.decision_function(X), rtol=1e-7, atol=1e-9
    )


def test_streamed_multilevel_equals_stored(small_chunks):
    X, lv = jaxrank.multilevel.make_ordinal(400, key=jax.random.key(1))
    ref = jaxrank.fit_multilevel(X, lv, 1e-2, tol=1e-9)
    got = jaxrank.fit_multilevel(X, lv, 1e-2, tol=1e-9, max_kernel_bytes=0)
    np.testing.assert_allclose(got.info.objective, ref.info.objective, rtol=1e-10)
    np.testing.assert_allclose(got.coef, ref.coef, rtol=1e-6, atol=1e-8)


def test_streaming_refusals(data):
    X, y = data
    with pytest.raises(ValueError, match="jacobi"):
        jaxrank.fit_rankrc(X, y, 1e-2, max_kernel_bytes=0, precondition="jacobi")
    with pytest.raises(ValueError, match="max_kernel_bytes"):
        jaxrank.fit_rankrc(X, y, 1e-2, max_kernel_bytes=-1)
    with pytest.raises(ValueError, match="max_kernel_bytes"):
        jaxrank.fit_rankrc(X, y, 1e-2, max_kernel_bytes=1.5)
    with pytest.raises(jaxrank.MemoryBudgetError, match="streamed"):
        jaxrank.fit_rankrc(X, y, 1e-2, max_kernel_bytes=0, memory_budget=1000)


def test_block_over_budget_streams_instead_of_failing(data, small_chunks):
    X, y = data
    # the stored block (700 x 56 float64, padded to 8 KiB chunks: 0.6 MB) exceeds the budget, its
    # streamed footprint does not: the fit streams by default
    budget = 400_000
    model = jaxrank.fit_rankrc(X, y, 1e-2, memory_budget=budget, tol=1e-9)
    ref = jaxrank.fit_rankrc(X, y, 1e-2, tol=1e-9)
    np.testing.assert_allclose(model.info.objective, ref.info.objective, rtol=1e-10)
