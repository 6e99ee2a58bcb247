"""Fitted models are pytrees whose scoring is a pure JAX function (jit, vmap, grad), and they
travel through JAX's own serialisation tools (flax.serialization, orbax)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank


@pytest.fixture(scope="module")
def data():
    X, y = jaxrank.datasets.make_rare_class(160, 0.15, 0.75, d=4, seed=3)
    return np.asarray(X, np.float64), np.asarray(y)


@pytest.fixture(scope="module")
def models(data):
    X, y = data
    return {
        "rankrc": jaxrank.fit_rankrc(X, y, 2.0**-6),
        "grid": jaxrank.fit_rankrc(X, y, 2.0 ** -np.arange(3.0, 6.0)),
        "random": jaxrank.fit(X, y, 2.0**-6, basis="random", key=jax.random.key(0)),
        "push": jaxrank.fit_push(X, y, 2.0**-6),
        "l1": jaxrank.fit_l1(X, y, 2.0**-8, l1=1e-3),
        "mibc": jaxrank.fit_mibc(X, y, nu=0.5),
        "dopmid": jaxrank.fit_dopmid(X, y, 1.0),
    }


NAMES = ["rankrc", "grid", "random", "push", "l1", "mibc", "dopmid"]


@pytest.mark.parametrize("name", NAMES)
def test_jit_and_vmap_of_scoring_equal_decision_function(models, data, name):
    model, X = models[name], data[0]
    ref = np.asarray(model.decision_function(X))
    got = jax.jit(lambda m, X: m.decision_function(X))(model, jnp.asarray(X))
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    # vmap over row blocks (one call per block of 40 rows)
    blocks = jnp.asarray(X).reshape(4, 40, X.shape[1])
    vm = jax.vmap(model.decision_function)(blocks)
    np.testing.assert_allclose(np.moveaxis(np.asarray(vm), 0, -2).reshape(ref.shape), ref,
                               rtol=1e-12, atol=1e-12)  # fmt: skip
    # numpy input to a traced model
    np.testing.assert_allclose(jax.jit(lambda m: m.decision_function(X))(model), ref, atol=1e-12)


@pytest.mark.parametrize("name", ["rankrc", "push", "mibc"])
def test_grad_with_respect_to_x_matches_finite_differences(models, data, name):
    model, X = models[name], jnp.asarray(data[0][:7])
    f = lambda X: jnp.sum(model.decision_function(X) ** 2)
    g = jax.grad(f)(X)
    E = jnp.zeros_like(X).at[3, 1].set(1.0)
    h = 1e-6
    fd = (f(X + h * E) - f(X - h * E)) / (2 * h)
    assert float(g[3, 1]) == pytest.approx(float(fd), rel=1e-6, abs=1e-9)


def test_grad_with_respect_to_model_leaves(models, data):
    model, X = models["rankrc"], jnp.asarray(data[0])
    g = jax.grad(lambda m: jnp.sum(m.decision_function(X)), allow_int=True)(model)
    # f is linear in coef: the gradient is the column sums of the kernel block
    K = model.kernel(X, model.basis)
    np.testing.assert_allclose(g.coef, jnp.sum(K, axis=0), rtol=1e-10)


def test_jax_input_is_checked(models, data):
    model = models["rankrc"]
    X = jnp.asarray(data[0])
    with pytest.raises(ValueError, match="NaN or infinite"):
        model.decision_function(X.at[0, 0].set(jnp.nan))
    with pytest.raises(ValueError, match="features"):
        model.decision_function(X[:, :2])
    with pytest.raises(ValueError, match="features"):
        jax.jit(model.decision_function)(X[:, :2])
    with pytest.raises(ValueError, match="2-D"):
        model.decision_function(X[0])


@pytest.mark.parametrize("name", NAMES)
def test_flax_serialization_round_trip(models, data, name):
    ser = pytest.importorskip("flax.serialization")
    model = models[name]
    # a model made after flax is imported registers its type (jaxrank never imports flax)
    model = jax.tree.map(lambda v: v, model)
    back = ser.from_bytes(model, ser.to_bytes(model))
    assert type(back) is type(model)
    for a, b in zip(jax.tree.leaves(model), jax.tree.leaves(back), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(back.decision_function(data[0]), model.decision_function(data[0]))


def test_orbax_round_trip(models, data, tmp_path):
    ocp = pytest.importorskip("orbax.checkpoint")
    model = models["grid"]
    ck = ocp.StandardCheckpointer()
    ck.save(tmp_path / "model", model)
    ck.wait_until_finished()
    back = ck.restore(tmp_path / "model", model)
    assert type(back) is type(model)
    np.testing.assert_array_equal(back.decision_function(data[0]), model.decision_function(data[0]))
