"""Opt-in run-time errors for traced invalid inputs and for an unconverged implicit solve
(issue 41, "What a JAX user still misses").

By default a traced invalid value gives documented numbers (NaN: tests/test_ranking_edges.py,
tests/test_core_edges.py) and the program holds no callback, so it exports. ``throw=True`` on
:func:`jaxrank.pairwise_loss`, :func:`jaxrank.pairwise_auc` and :func:`jaxrank.core.fit_core`,
and ``ImplicitSolve(throw=True)`` for the implicit derivatives, raise when the program runs,
under ``jit``, ``vmap`` and ``grad``, float32 and float64.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank.core import ImplicitSolve, fit_core

F32_F64 = pytest.mark.parametrize("dt", [jnp.float32, jnp.float64])
# fit_core's derivatives compile for ~3 s a program: their float32 cases are in the slow run
F64_SLOW_F32 = pytest.mark.parametrize(
    "dt", [pytest.param(jnp.float32, marks=pytest.mark.slow), jnp.float64]
)
# JAX raises a callback's error as jax.errors.JaxRuntimeError (a RuntimeError) whose message
# ends with the ValueError's text
ERR = (ValueError, RuntimeError)


def _scores(dt, n=40, seed=0):
    rng = np.random.default_rng(seed)
    s = jnp.asarray(rng.normal(size=(3, n)), dt)
    y = jnp.asarray(np.arange(n) % 4 == 0)
    w = jnp.asarray(rng.random((3, n)), dt)
    return s, y, w


def _callbacks(f, *args):
    return str(jax.make_jaxpr(f)(*args)).count("pure_callback")


@F32_F64
def test_loss_throw_raises_on_traced_invalid_inputs(dt):
    s, y, w = _scores(dt)
    loss = jax.jit(lambda s, w, eps: jaxrank.pairwise_loss(s, y, weights=w, eps=eps, throw=True))
    good = loss(s, w, jnp.asarray(0.5, dt))
    np.testing.assert_array_equal(good, jaxrank.pairwise_loss(s, y, weights=w))
    with pytest.raises(ERR, match="eps must be > 0"):
        loss(s, w, jnp.asarray(-0.1, dt))
    with pytest.raises(ERR, match="weights must be >= 0"):
        loss(s, w.at[1, 4].set(-1.0), jnp.asarray(0.5, dt))
    with pytest.raises(ERR, match="weights must be >= 0"):
        loss(s, w.at[2, 0].set(jnp.nan), jnp.asarray(0.5, dt))
    with pytest.raises(ERR, match="a kept score is NaN"):
        loss(s.at[0, 3].set(jnp.nan), w, jnp.asarray(0.5, dt))
    # a masked entry is never read: its NaN score or negative weight is no error
    keep = jnp.ones(s.shape, bool).at[1, 4].set(False)
    masked = jax.jit(lambda s, w: jaxrank.pairwise_loss(s, y, weights=w, where=keep, throw=True))
    assert np.isfinite(masked(s.at[1, 4].set(jnp.nan), w.at[1, 4].set(-1.0))).all()
    # the default: the documented NaN, no error
    plain = jax.jit(lambda w: jaxrank.pairwise_loss(s, y, weights=w))
    bad = np.asarray(plain(w.at[1, 4].set(-1.0)))
    assert np.isnan(bad[1]) and np.isfinite(bad[[0, 2]]).all()


@F32_F64
def test_throw_under_vmap_and_grad(dt):
    s, y, w = _scores(dt)
    f = lambda s, w: jaxrank.pairwise_loss(s, y[None], weights=w, throw=True)[0]
    vg = jax.jit(jax.vmap(jax.value_and_grad(f)))
    value, grad = vg(s[:, None], w[:, None])
    want_v, want_g = jax.vmap(jax.value_and_grad(lambda s, w: jaxrank.pairwise_loss(
        s, y[None], weights=w)[0]))(s[:, None], w[:, None])  # fmt: skip
    np.testing.assert_array_equal(value, want_v)
    np.testing.assert_array_equal(grad, want_g)
    with pytest.raises(ERR, match="weights must be >= 0"):
        vg(s[:, None], w.at[2, 7].set(-0.5)[:, None])  # one member of the batch
    with pytest.raises(ERR, match="a kept score is NaN"):
        jax.grad(lambda s: jaxrank.pairwise_loss(s, y, throw=True).sum())(s.at[0, 0].set(jnp.nan))
    # ε vmapped: one member ≤ 0
    by_eps = jax.jit(jax.vmap(lambda e: jaxrank.pairwise_loss(s[0], y, eps=e, throw=True)))
    assert np.isfinite(by_eps(jnp.asarray([0.1, 0.5], dt))).all()
    with pytest.raises(ERR, match="eps must be > 0"):
        by_eps(jnp.asarray([0.1, 0.0], dt))


@F32_F64
def test_auc_throw(dt):
    s, y, w = _scores(dt)
    auc = jax.jit(lambda s, w: jaxrank.pairwise_auc(s, y, weights=w, throw=True))
    np.testing.assert_array_equal(auc(s, w), jaxrank.pairwise_auc(s, y, weights=w))
    with pytest.raises(ERR, match="pairwise_auc: a kept score is NaN"):
        auc(s.at[2, 1].set(jnp.nan), w)
    with pytest.raises(ERR, match="pairwise_auc: weights must be >= 0"):
        jax.vmap(auc)(s[None], w.at[0, 1].set(-2.0)[None])


def test_default_programs_hold_no_callback_and_export():
    s, y, w = _scores(jnp.float32)
    plain = lambda s: (jaxrank.pairwise_loss(s, y, weights=w), jaxrank.pairwise_auc(s, y))
    checked = lambda s: (jaxrank.pairwise_loss(s, y, weights=w, throw=True),
                         jaxrank.pairwise_auc(s, y, throw=True))  # fmt: skip
    assert _callbacks(plain, s) == 0
    assert _callbacks(checked, s) == 2
    exp = jax.export.deserialize(jax.export.export(jax.jit(plain))(s).serialize())
    for a, b in zip(exp.call(s), plain(s), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def _core_data(dt, m=120):
    X, y = jaxrank.datasets.make_rare_class(m, 0.15, 0.75, seed=0)
    X, pos = jnp.asarray(X, dt), jnp.asarray(y == 1)
    return X, pos, X[jnp.flatnonzero(pos, size=int(pos.sum()))]


@F64_SLOW_F32
def test_fit_core_throw_on_traced_lambda(dt):
    X, pos, B = _core_data(dt)
    fit = lambda lam, throw: fit_core(X, pos, lam, B, sizes=(30, 120), max_iter=5, throw=throw)
    checked = jax.jit(lambda lam: fit(lam, True))
    good = checked(jnp.asarray([0.1, 0.01], dt))
    np.testing.assert_array_equal(good.coef, jax.jit(lambda lam: fit(lam, False))(
        jnp.asarray([0.1, 0.01], dt)).coef)  # fmt: skip
    with pytest.raises(ERR, match="lam must be > 0"):
        checked(jnp.asarray([-0.1, 0.01], dt))
    with pytest.raises(ERR, match="lam must be > 0"):
        jax.jit(jax.vmap(lambda lam: fit(lam, True)))(jnp.asarray([0.01, jnp.nan], dt))
    # the default: NaN and NONFINITE (tests/test_core_edges.py), no callback in the program
    assert _callbacks(lambda lam: fit(lam, False).coef, jnp.asarray(0.1, dt)) == 0
    assert _callbacks(lambda lam: fit(lam, True).coef, jnp.asarray(0.1, dt)) == 1


def _objective(X, pos, B, implicit):
    def f(lam, s2):
        r = fit_core(X, pos, lam, B, kernel=jaxrank.Gaussian(s2), sizes=(30, 120),
                     tol=1e-10, implicit=implicit)  # fmt: skip
        return jnp.sum(r.coef**2) + r.info.objective

    return f


@F64_SLOW_F32
def test_implicit_solve_converged_and_not(dt):
    # every derivative under jit: the same programs run op by op took 6x as long to dispatch
    # (an eager jax.grad of fit_core 24 s, jitted 4 s), and the callbacks raise alike. The suite
    # is bound by compiling fit_core's derivatives (~3 s a program), so each program checks
    # what it can: reverse and forward mode in one, and float32 only where its rounding differs
    # (the converged tolerance) and one raise; the raise itself is dtype-blind.
    X, pos, B = _core_data(dt)
    lam, s2 = jnp.asarray(1e-2, dt), jnp.asarray(4.0, dt)
    tol = 1e-8 if dt == jnp.float64 else 1e-4
    grad = lambda f, **kw: jax.jit(jax.grad(f, **kw))
    jvp = lambda f, t: jax.jit(lambda a, b: jax.jvp(f, (a, b), t)[1])
    one, zero = jnp.ones((), dt), jnp.zeros((), dt)
    both = lambda f: jax.jit(lambda a, b: (jax.grad(f)(a, b), jax.jvp(f, (a, b), (one, zero))[1]))
    ref = grad(_objective(X, pos, B, None))(lam, s2)
    for implicit in [ImplicitSolve(tol, None, throw=True), ImplicitSolve(throw=True)]:
        if dt == jnp.float32 and implicit.tol is None:
            continue  # 100·eps in float32 is below what its rounding reaches
        for g in both(_objective(X, pos, B, implicit))(lam, s2):
            np.testing.assert_allclose(g, ref, rtol=1e-4 if dt == jnp.float32 else 1e-6)
    # one CG step on an ill-conditioned solve (small λ): forward, reverse, under vmap
    stuck = _objective(X, pos, B, ImplicitSolve(1e-10, 1, throw=True))
    small = jnp.asarray(1e-6, dt)
    with pytest.raises(ERR, match="implicit solve did not reach tol=1e-10 in max_iter=1"):
        grad(stuck)(small, s2)
    if dt == jnp.float32:
        return
    with pytest.raises(ERR, match="implicit solve did not reach"):
        jvp(stuck, (zero, one))(small, s2)
    with pytest.raises(ERR, match="implicit solve did not reach"):
        jax.jit(jax.vmap(jax.grad(stuck)))(jnp.asarray([1e-2, 1e-6], dt), jnp.full(2, 4.0, dt))
    # without throw the same cap gives a number (the plain tuple form still works)
    capped = lambda implicit: jax.grad(_objective(X, pos, B, implicit))
    pair = jax.jit(lambda a, b: (capped((1e-10, 1))(a, b), capped(ImplicitSolve(1e-10, 1))(a, b)))
    assert np.isfinite(pair(small, s2)).all()


@F64_SLOW_F32
def test_implicit_solve_nan_marks_the_unconverged_members(dt):
    X, pos, B = _core_data(dt)
    s2, small, zero = jnp.asarray(4.0, dt), jnp.asarray(1e-6, dt), jnp.zeros((), dt)
    f = _objective(X, pos, B, ImplicitSolve(1e-10, 1, nan=True))
    assert np.isnan(jax.jit(jax.grad(f))(small, s2))
    # member by member: a zero tangent is solved exactly (0 steps), the other stops at the cap
    tangents = jnp.asarray([0.0, 1.0], dt)
    d = jax.jit(jax.vmap(lambda t: jax.jvp(f, (small, s2), (t, zero))[1]))(tangents)
    assert float(d[0]) == 0.0 and np.isnan(d[1])
    # a converged solve: the default's derivative; the program holds no callback
    tol = 1e-8 if dt == jnp.float64 else 1e-4
    lam = jnp.asarray(1e-2, dt)
    g = jax.jit(jax.grad(_objective(X, pos, B, ImplicitSolve(tol, None, nan=True))))(lam, s2)
    ref = jax.jit(jax.grad(_objective(X, pos, B, None)))(lam, s2)
    np.testing.assert_allclose(g, ref, rtol=1e-4 if dt == jnp.float32 else 1e-6)
    assert _callbacks(jax.grad(f), small, s2) == 0


def test_implicit_is_static():
    X, pos, B = _core_data(jnp.float64)
    with pytest.raises(TypeError, match="implicit is static"):
        jax.jit(lambda t: fit_core(X, pos, 0.1, B, implicit=(t, 5)))(1e-3)
