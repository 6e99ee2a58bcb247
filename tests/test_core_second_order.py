"""Second derivatives through fit_core (issue 41 item 9): forward over reverse works (and is
unchanged); reverse over reverse and a vmapped second derivative raise an error that says what
to do, where JAX stopped with a bare ``AssertionError`` before."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank.core import fit_core
from jaxrank.kernels import Gaussian

# ten minutes of second-order compilations on 2 cores: the slow run
pytestmark = pytest.mark.slow

F32_F64 = pytest.mark.parametrize("dt", [jnp.float32, jnp.float64])
ADVICE = r"forward over reverse.*jax\.jvp\(jax\.grad\(f\)"


def _objective(dt, lam=0.01):
    X, y = jaxrank.datasets.make_rare_class(120, 0.15, 0.75, seed=0)
    X, pos = jnp.asarray(X, dt), jnp.asarray(y == 1)
    n_pos = int(pos.sum())
    B = X[jnp.flatnonzero(pos, size=n_pos)]
    fit = lambda s2: fit_core(X, pos, lam, B, kernel=Gaussian(s2), sizes=(n_pos, 120 - n_pos))
    return lambda s2: jnp.sum(fit(s2).info.objective)


@F32_F64
def test_reverse_over_reverse_says_what_to_do(dt):
    f = _objective(dt)
    s2 = jnp.asarray(2.0, dt)
    for second in (jax.grad(jax.grad(f)), jax.hessian(f), jax.jacrev(jax.grad(f))):
        with pytest.raises(NotImplementedError, match=ADVICE):
            second(s2)


@F32_F64
def test_vmap_of_forward_over_reverse_says_what_to_do(dt):
    f = _objective(dt)
    hvp = lambda s2, v: jax.jvp(jax.grad(f), (s2,), (v,))[1]
    s2 = jnp.asarray([2.0, 3.0], dt)
    with pytest.raises(NotImplementedError, match=ADVICE):
        jax.vmap(hvp)(s2, jnp.ones_like(s2))


@pytest.mark.parametrize("lam", [0.01, jnp.array([0.1, 0.01])])
def test_forward_over_reverse_matches_differences(lam):
    # the advice works: d/dσ² of the gradient equals a central difference of the gradient
    f = _objective(jnp.float64, lam)
    g = jax.grad(f)
    s2, h = 2.0, 1e-4
    second = jax.jvp(g, (s2,), (1.0,))[1]
    fd = (g(s2 + h) - g(s2 - h)) / (2 * h)
    np.testing.assert_allclose(second, fd, rtol=1e-5)
