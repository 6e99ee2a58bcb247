"""``jaxrank.internals``: the internals the benchmarks measure, under public names (issue 42).

Its switches restore what they changed, its hook sees the stored programs a fit calls, and the
objective compiled alone gives the numbers of the objective's own closures.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import _exported, _fitting, internals
from jaxrank._fitting import _polish
from jaxrank.losses import smoothed_hinge
from jaxrank.objective import objective_closures


def test_polish_after_sets_and_restores():
    default = _polish.POLISH_AFTER  # where fit_rows reads it
    assert internals.POLISH_AFTER == default == _fitting.POLISH_AFTER
    with internals.polish_after(10**9) as saved:
        assert saved == default and _polish.POLISH_AFTER == 10**9
    assert _polish.POLISH_AFTER == default
    with pytest.raises(RuntimeError), internals.polish_after(3):
        raise RuntimeError
    assert _polish.POLISH_AFTER == default


def test_exported_calls_hook_sees_the_fit_and_restores():
    X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
    seen, call = [], _exported.call

    def hook(real, name, fn, args, static):
        seen.append(name)
        return real(name, fn, args, static)

    with internals.exported_calls(hook):
        hooked = jaxrank.fit_rankrc(X, y, 1e-2)
    assert _exported.call is call and seen
    plain = jaxrank.fit_rankrc(X, y, 1e-2)
    np.testing.assert_array_equal(np.asarray(hooked.coef), np.asarray(plain.coef))


def test_objective_compiled_alone_matches_the_closures():
    rng = np.random.default_rng(0)
    n_pos, n_neg, nb = 7, 23, 7
    K = jnp.asarray(rng.normal(size=(n_pos + n_neg, nb)))
    B = rng.normal(size=(nb, nb))
    Krr, lam = jnp.asarray(B @ B.T + nb * np.eye(nb)), jnp.asarray(0.1)
    beta, v = jnp.asarray(rng.normal(size=nb)), jnp.asarray(rng.normal(size=nb))
    loss = smoothed_hinge(0.5)
    fun, hvp = objective_closures(K, Krr, lam, loss, n_pos, n_neg)
    F, g, lin = fun(beta)
    F2, g2, lin2 = internals.objective_value(K, Krr, lam, beta, loss, n_pos, n_neg)
    np.testing.assert_allclose(F2, F, rtol=1e-12)
    np.testing.assert_allclose(g2, g, rtol=1e-12, atol=1e-14)
    hv = internals.objective_hvp(K, Krr, lam, lin2, v, loss, n_pos, n_neg)
    np.testing.assert_allclose(hv, hvp(lin, v), rtol=1e-12, atol=1e-14)
    lams, betas = jnp.asarray([0.1, 1.0]), jnp.stack([beta, 2 * beta])
    Fb = internals.objective_value_batched(K, Krr, lams, betas, loss, n_pos, n_neg)[0]
    want = [objective_closures(K, Krr, lm, loss, n_pos, n_neg)[0](b)[0] for lm, b in
            zip(lams, betas, strict=True)]  # fmt: skip
    np.testing.assert_allclose(Fb, want, rtol=1e-12)


def test_names_point_at_the_internals():
    from jaxrank import _buckets, _cache, _cv

    assert internals.bucket is _buckets.bucket and internals.bucket(1000) >= 1000
    assert internals.enable_default_cache is _cache.enable_default_cache
    assert internals.cv_search is _cv.cv_search and internals.choose_cell is _cv.choose
    assert internals.CV_RULES == _cv.RULES
    assert set(internals.__all__) <= set(dir(internals))
