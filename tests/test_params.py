"""A fitted model's trainable float parameters split from its integers and fit records for
optax and jax.grad, with no allow_int=True (issue 41, "What a JAX user still misses")."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank

optax = pytest.importorskip("optax")


@pytest.fixture(scope="module")
def data():
    X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, d=4, seed=1)
    return jnp.asarray(X, jnp.float64), jnp.asarray(y)


@pytest.fixture(scope="module")
def model(data):
    return jaxrank.fit_rankrc(np.asarray(data[0]), np.asarray(data[1]), 2.0**-4)


def _paths(tree):
    return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(tree)]


def test_whole_model_gradient_needs_allow_int(model, data):
    # why the partition exists: integer leaves (basis_index, info.iterations, status)
    X = data[0]
    with pytest.raises(TypeError, match="allow_int"):
        jax.grad(lambda m: jnp.sum(m.decision_function(X)))(model)


def test_partition_holds_the_float_parameters_and_combine_restores(model, data):
    X = data[0]
    params, static = jaxrank.partition(model)
    assert _paths(params) == [".basis", ".coef", ".kernel.sigma2"]
    assert all(jnp.issubdtype(jnp.result_type(v), jnp.floating) for v in jax.tree.leaves(params))
    assert ".basis_index" in _paths(static) and ".info.status" in _paths(static)
    assert set(_paths(params)).isdisjoint(_paths(static))
    back = jaxrank.combine(params, static)
    assert type(back) is type(model)
    assert jax.tree.structure(back) == jax.tree.structure(model)
    np.testing.assert_array_equal(back.decision_function(X), model.decision_function(X))
    coef_only, rest = jaxrank.partition(model, fields=("coef",))
    assert _paths(coef_only) == [".coef"]
    np.testing.assert_array_equal(jaxrank.combine(coef_only, rest).coef, model.coef)
    with pytest.raises(ValueError, match="fields must name fields of RankModel"):
        jaxrank.partition(model, fields=("weights",))
    with pytest.raises(ValueError, match="fields must name"):
        jaxrank.partition(model, fields="coef")  # a string, not a sequence of names


def test_gradient_without_allow_int_matches_the_kernel_columns(model, data):
    X = data[0]
    params, static = jaxrank.partition(model)
    g = jax.jit(jax.grad(lambda p: jnp.sum(jaxrank.combine(p, static).decision_function(X))))(
        params
    )
    # the scores are linear in coef: the gradient is the column sums of the kernel block
    np.testing.assert_allclose(g.coef, jnp.sum(model.kernel(X, model.basis), axis=0), rtol=1e-10)
    assert _paths(g) == _paths(params)


@pytest.mark.parametrize("fields", [("coef", "basis", "kernel"), ("coef",)])
def test_optax_steps_lower_the_pairwise_loss(model, data, fields):
    X, y = data
    params, static = jaxrank.partition(model, fields=fields)
    loss = lambda p: jaxrank.pairwise_loss(jaxrank.combine(p, static).decision_function(X), y)
    opt = optax.adam(1e-2)
    state = opt.init(params)

    @jax.jit
    def step(params, state):
        value, grad = jax.value_and_grad(loss)(params)
        updates, state = opt.update(grad, state, params)
        return optax.apply_updates(params, updates), state, value

    values = []
    with jax.numpy_dtype_promotion("standard"):  # optax's adam: float ** int32 step count
        for _ in range(20):
            params, state, value = step(params, state)
            values.append(float(value))
    assert values[-1] < 0.97 * values[0]  # the smoothed pairwise loss went down
    trained = jaxrank.combine(params, static)
    assert type(trained) is type(model) and trained.coef.dtype == model.coef.dtype
    scores = trained.decision_function(np.asarray(X))  # the host path scores it too
    assert scores.shape == (X.shape[0],) and np.isfinite(scores).all()
    np.testing.assert_array_equal(trained.basis_index, model.basis_index)
    if fields == ("coef",):
        np.testing.assert_array_equal(trained.basis, model.basis)


def test_trained_model_saves_loads_and_exports(model, data, tmp_path):
    X = data[0]
    params, static = jaxrank.partition(model)
    params = jax.tree.map(lambda v: v * 1.01, params)
    trained = jaxrank.combine(params, static)
    trained.save(tmp_path / "m.npz")
    back = jaxrank.load(tmp_path / "m.npz")
    np.testing.assert_allclose(
        back.decision_function(X), trained.decision_function(X), rtol=1e-10, atol=1e-12
    )
    pytest.importorskip("flatbuffers")
    score = jax.jit(lambda m, X: m.decision_function(X))
    exp = jax.export.deserialize(jax.export.export(score)(trained, X).serialize())
    np.testing.assert_allclose(
        exp.call(trained, X), trained.decision_function(X), rtol=1e-10, atol=1e-12
    )


def test_grid_and_l1_models_partition(data):
    X, y = np.asarray(data[0]), np.asarray(data[1])
    for model in (jaxrank.fit_rankrc(X, y, np.array([0.5, 0.1])), jaxrank.fit_l1(X, y, l1=1e-2)):
        params, static = jaxrank.partition(model)
        assert _paths(params) == [".basis", ".coef", ".kernel.sigma2"]
        back = jaxrank.combine(params, static)
        assert type(back) is type(model)
        np.testing.assert_array_equal(back.decision_function(X), model.decision_function(X))
