"""``jaxrank.fit`` dispatches the greedy basis, the L1 penalty and the p-norm push."""

import jax
import numpy as np
import pytest

import jaxrank


@pytest.fixture(scope="module")
def data():
    return jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)


def test_greedy_basis_is_fit_greedy(data):
    X, y = data
    got = jaxrank.fit(X, y, 1e-2, basis="greedy", n_basis=8, key=jax.random.key(0))
    ref = jaxrank.fit_greedy(X, y, 1e-2, n_basis=8, key=jax.random.key(0))
    np.testing.assert_array_equal(got.basis_index, ref.basis_index)
    np.testing.assert_array_equal(got.coef, ref.coef)


def test_l1_penalty_is_fit_l1(data):
    X, y = data
    got = jaxrank.fit(X, y, 1e-3, penalty="l1")
    ref = jaxrank.fit_l1(X, y, 0.0, l1=1e-3)
    np.testing.assert_array_equal(got.coef, ref.coef)
    assert np.any(np.asarray(got.coef) == 0)


def test_push_is_fit_push(data):
    X, y = data
    got = jaxrank.fit(X, y, 1e-2, p=2.0)
    ref = jaxrank.fit_push(X, y, 1e-2, p=2.0)
    np.testing.assert_array_equal(got.coef, ref.coef)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(penalty="l3"), "penalty"),
        (dict(basis="greedy", penalty="l1", key=jax.random.key(0)), "greedy"),
        (dict(penalty="l1", p=2.0), "push"),
        (dict(basis="greedy", init=np.zeros(3), key=jax.random.key(0)), "init"),
    ],
)
def test_dispatch_refusals(data, kwargs, match):
    X, y = data
    with pytest.raises(ValueError, match=match):
        jaxrank.fit(X, y, 1e-2, **kwargs)


@pytest.mark.parametrize("strategy", ["rare_first", "kmeans++"])
def test_landmark_strategies_through_fit(data, strategy):
    X, y = data
    model = jaxrank.fit(X, y, 1e-2, basis=strategy, n_basis=12, key=jax.random.key(0))
    idx = jaxrank.bases.resolve_basis(
        strategy, np.asarray(y) == 1, key=jax.random.key(0), n_basis=12, X=X
    )
    np.testing.assert_array_equal(model.basis_index, idx)
