"""fit_core at the edges of its arguments (issue 41 items 7, 10): invalid options and shapes are
refused with errors that name them, a traced invalid λ gives NaN, never a number."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank.core import fit_core


def _data(dt):
    X, y = jaxrank.datasets.make_rare_class(120, 0.15, 0.75, seed=0)
    X, pos = jnp.asarray(X, dt), jnp.asarray(y == 1)
    return X, pos, X[jnp.flatnonzero(pos, size=int(pos.sum()))]


@pytest.mark.parametrize("dt", [jnp.float32, jnp.float64])
def test_invalid_options_and_shapes_are_named(dt):
    X, pos, B = _data(dt)
    bad = [
        (dict(precondition="bogus"), ValueError, "precondition must be one of"),  # ran before
        (dict(loss="logistic"), ValueError, "loss must be one of"),
        (dict(lam=-0.1), ValueError, "lam must be > 0"),  # objective -9.8e59 before
        (dict(lam=jnp.full((2, 2), 0.1, dt)), ValueError, "scalar or a 1-D grid"),  # flattened
        (dict(B=B[:, :2]), ValueError, "basis must be"),  # broadcasting errors before
        (dict(pos=pos[:7]), ValueError, "pos must be"),
        (dict(mask=jnp.ones(3, bool)), ValueError, "mask must be"),
        (dict(sizes=(0, 5)), ValueError, "sizes must be"),
    ]
    for kw, err, match in bad:
        args = dict(X=X, pos=pos, lam=jnp.asarray(0.01, dt), B=B) | kw
        with pytest.raises(err, match=match):
            fit_core(args.pop("X"), args.pop("pos"), args.pop("lam"), args.pop("B"), **args)
    # traced static arguments: a TypeError that says what to do (ConcretizationTypeError before)
    with pytest.raises(TypeError, match="max_iter is static"):
        jax.jit(lambda it: fit_core(X, pos, 0.01, B, max_iter=it))(5)
    with pytest.raises(TypeError, match="sizes is static"):
        jax.jit(lambda p: fit_core(X, pos, 0.01, B, sizes=(p, 100)))(20)


@pytest.mark.parametrize("dt", [jnp.float32, jnp.float64])
def test_traced_invalid_lambda_is_nan_and_nonfinite(dt):
    X, pos, B = _data(dt)
    fit = jax.jit(lambda lam: fit_core(X, pos, lam, B, sizes=(30, 120), max_iter=5))
    r = fit(jnp.asarray([-0.1, 0.01], dt))
    assert np.isnan(np.asarray(r.coef[0])).all() and int(r.info.status[0]) == 3
    assert np.isfinite(np.asarray(r.coef[1])).all()


def test_integer_rows_take_the_default_float():
    # x64 is on in the tests: integer X gives float64 coefficients (float32 before)
    X, pos, B = _data(jnp.float64)
    r = fit_core(jnp.round(X * 10).astype(jnp.int32), pos, 0.01, jnp.round(B * 10), max_iter=5)
    assert r.coef.dtype == jnp.float64
