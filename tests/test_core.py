"""The pure core (``jaxrank.core.fit_core``): equal to ``fit``, masks as absent rows, batched
over σ² × folds × λ, no recompilation for new values, implicit derivatives, clear errors where
``fit`` meets a tracer, and ``shard_map`` over 4 CPU devices (in a subprocess)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import core, kernels
from jaxrank.kernels import Gaussian, sigma2_heuristic

SCRIPT = Path(__file__).parent / "_scripts" / "core_shard_map.py"
M, RHO = 200, 0.1


@pytest.fixture(scope="module")
def data():
    X, y = jaxrank.datasets.make_rare_class(M, RHO, 0.75, seed=0)
    return np.asarray(X, np.float64), np.asarray(y == 1)


def _sizes(pos):
    return int(pos.sum()), int((~pos).sum())


def test_core_equals_fit(data):
    X, pos = data
    lams = 2.0 ** np.arange(-8, 4, 2)
    model = jaxrank.fit_rankrc(X, pos, lams, tol=1e-10)
    sizes = _sizes(pos)
    run = jax.jit(lambda X, pos, B: core.fit_core(X, pos, lams, B, tol=1e-10, sizes=sizes))
    out = run(X, pos, X[pos])
    np.testing.assert_allclose(out.coef, model.coef, atol=1e-9, rtol=0)
    np.testing.assert_allclose(out.info.objective, model.info.objective, rtol=1e-12)
    assert np.all(np.asarray(out.info.status) == 0)
    np.testing.assert_allclose(float(out.kernel.sigma2), model.kernel.sigma2, rtol=1e-12)


def test_masked_rows_are_absent(data):
    """A masked row enters no pair and no count (m+ m− counts the kept rows): the fit equals the
    fit on the kept rows alone, whatever the masked rows hold."""
    X, pos = data
    keep = np.random.default_rng(0).random(M) < 0.7
    kept_pos = pos & keep
    nb = int(kept_pos.sum())
    B = np.concatenate([X[kept_pos], X[pos & ~keep]])  # real basis rows first, padding after
    s2 = sigma2_heuristic(X[keep])
    run = jax.jit(
        lambda X, mask: core.fit_core(
            X, pos, 1e-2, B, mask=mask, n_basis=nb, kernel=Gaussian(s2), tol=1e-10,
            sizes=_sizes(pos),
        )
    )  # fmt: skip
    out = run(X, keep)
    ref = jaxrank.fit(X[keep], pos[keep], 1e-2, basis=np.flatnonzero(pos[keep]), tol=1e-10)
    np.testing.assert_allclose(out.coef[:nb], ref.coef, atol=1e-10, rtol=0)
    assert np.all(np.asarray(out.coef[nb:]) == 0)
    np.testing.assert_allclose(out.info.objective, ref.info.objective, rtol=1e-12)
    # the masked rows' values do not matter, bit for bit
    X2 = np.where(keep[:, None], X, 1e3 * np.random.default_rng(1).normal(size=X.shape))
    np.testing.assert_array_equal(run(X2, keep).coef, out.coef)


def test_empty_class_or_small_sizes_is_nonfinite(data):
    X, pos = data
    out = core.fit_core(X, pos, 1e-2, X[pos], mask=~pos, sizes=_sizes(pos))  # no positive kept
    assert int(out.info.status) == 3 and np.all(np.isnan(out.coef))
    out = core.fit_core(X, pos, 1e-2, X[pos], sizes=(8, M))  # more positives than reserved
    assert int(out.info.status) == 3


def test_no_recompile_for_new_values(data):
    X, pos = data
    B = X[pos]
    fit = jax.jit(
        lambda s2, lam, eps, mask: (
            core.fit_core(
                X, pos, lam, B, mask=mask, kernel=Gaussian(s2), eps=eps, sizes=_sizes(pos)
            ).coef
        )
    )
    keep = np.ones(M, bool)
    fit(2.0, 1e-2, 0.5, keep).block_until_ready()
    keep[::5] = False
    fit(5.0, 1e-3, 0.3, keep).block_until_ready()
    assert fit._cache_size() == 1


def test_vmap_over_sigma2_folds_lambda_equals_separate_fits(data):
    X, pos = data
    s2 = jnp.asarray([1.0, 4.0])
    fold = jaxrank.select.stratified_folds(pos, 2, key=jax.random.key(0))
    folds = jnp.asarray(fold[None, :] != np.arange(2)[:, None])  # training rows of each fold
    lams = jnp.asarray([1e-3, 1e-1])
    one = lambda s, keep, lam: core.fit_core(
        X, pos, lam, X[pos], mask=keep, kernel=Gaussian(s), tol=1e-11, sizes=_sizes(pos)
    )  # fmt: skip
    grid = jax.jit(
        jax.vmap(
            lambda s: jax.vmap(lambda keep: jax.vmap(lambda lam: one(s, keep, lam))(lams))(folds)
        )
    )(s2)
    assert grid.coef.shape == (2, 2, 2, int(pos.sum()))
    single = jax.jit(one)
    for i in range(2):
        for f in range(2):
            for j in range(2):
                ref = single(s2[i], folds[f], lams[j])
                np.testing.assert_allclose(grid.coef[i, f, j], ref.coef, atol=1e-8, rtol=0)


def test_tracer_in_fit_names_the_argument_and_the_core(data):
    X, pos = data
    y = pos.astype(int)
    cases = {
        "X": lambda: jax.jit(lambda X: jaxrank.fit_rankrc(X, y, 1e-2).coef)(X),
        "lam": lambda: jax.grad(lambda lam: jaxrank.fit_rankrc(X, y, lam).info.objective)(1e-2),
        "eps": lambda: jax.vmap(lambda e: jaxrank.fit_rankrc(X, y, 1e-2, eps=e).coef)(
            jnp.asarray([0.3, 0.5])
        ),
        "kernel": lambda: jax.vmap(
            lambda s: jaxrank.fit_rankrc(X, y, 1e-2, kernel=Gaussian(s)).coef
        )(jnp.asarray([1.0, 2.0])),
        # the factory too (it converted σ² with float(): a ConcretizationTypeError)
        "kernel ": lambda: jax.vmap(
            lambda s: jaxrank.fit_rankrc(X, y, 1e-2, kernel=kernels.gaussian(s)).coef
        )(jnp.asarray([1.0, 2.0])),
        # options that size or seed the fit (a probe found raw TracerArrayConversionError and
        # ConcretizationTypeError naming nothing)
        "basis": lambda: jax.jit(lambda b: jaxrank.fit(X, y, 1e-2, basis=b).coef)(jnp.arange(5)),
        "key": lambda: jax.jit(
            lambda k: jaxrank.fit(X, y, 1e-2, basis="random", n_basis=5, key=k).coef
        )(jax.random.key(0)),
        "max_iter": lambda: jax.jit(lambda n: jaxrank.fit_rankrc(X, y, 1e-2, max_iter=n).coef)(5),
        "memory_budget": lambda: jax.jit(
            lambda b: jaxrank.fit_rankrc(X, y, 1e-2, memory_budget=b).coef
        )(10**9),
    }
    for name, run in cases.items():
        with pytest.raises(
            TypeError, match=rf"argument '{name.strip()}' is a traced.*jaxrank\.core"
        ):
            run()


def test_kernel_factories_take_traced_parameters():
    # σ², γ and c₀ swept or differentiated through the factories, as through the classes
    U, V = jnp.zeros((1, 2)), jnp.ones((1, 2))
    sweep = jax.vmap(lambda s: kernels.gaussian(s)(U, V)[0, 0])(jnp.asarray([1.0, 2.0]))
    np.testing.assert_allclose(sweep, np.exp([-2.0, -1.0]), rtol=1e-12)
    d = jax.grad(lambda s: kernels.gaussian(s)(U, V)[0, 0])(2.0)  # d/dσ² exp(−2/σ²)
    np.testing.assert_allclose(d, 2 / 4 * np.exp(-1.0), rtol=1e-12)
    poly = lambda g, c: kernels.polynomial(2, g, c)(V, V)[0, 0]
    np.testing.assert_allclose(jax.jit(poly)(0.5, 1.0), 4.0)
    np.testing.assert_allclose(jax.grad(poly, argnums=(0, 1))(0.5, 1.0), (8.0, 4.0))
    assert type(kernels.gaussian(2).sigma2) is float  # concrete values: plain floats, as stored


# ---- implicit differentiation -------------------------------------------------------------


def _quantity(dt, tol, max_iter=100):
    """β*, the optimal objective and a validation loss of the fitted scores, in one number."""

    def q(lam, s2, eps, X, pos, idx):
        r = core.fit_core(
            X, pos, lam, X[idx], kernel=Gaussian(s2), eps=eps, tol=tol, max_iter=max_iter,
            sizes=(idx.size, pos.size - idx.size),
        )  # fmt: skip
        val = jnp.mean(jnp.tanh(core.decision_function(r, X[:50])))
        return val + r.info.objective + 1e-3 * jnp.sum(r.coef**2)

    return q


@pytest.fixture(scope="module")
def fd_reference(data):
    """Central finite differences of the converged float64 solution (λ, σ², ε, X[5, 2])."""
    X, pos = data
    idx = np.flatnonzero(pos)
    q = jax.jit(lambda *a: _quantity(jnp.float64, 1e-13)(*a, pos, idx))
    a = [0.01, 3.0, 0.4, jnp.asarray(X)]
    out = []
    for i in range(3):
        h = 1e-4 * a[i]
        hi, lo = list(a), list(a)
        hi[i], lo[i] = a[i] + h, a[i] - h
        out.append(float((q(*hi) - q(*lo)) / (2 * h)))
    h = 1e-4
    out.append(
        float((q(*a[:3], a[3].at[5, 2].add(h)) - q(*a[:3], a[3].at[5, 2].add(-h))) / (2 * h))
    )
    return np.asarray(out)


@pytest.mark.parametrize(
    ("dtype", "tol", "rtol"), [("float64", 1e-12, 1e-6), ("float32", 1e-6, 1e-3)]
)
@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_implicit_derivative_matches_finite_differences(data, fd_reference, dtype, tol, rtol, mode):
    X, pos = data
    idx = np.flatnonzero(pos)
    dt = jnp.dtype(dtype)
    q = _quantity(dt, tol)
    args = (jnp.asarray(0.01, dt), jnp.asarray(3.0, dt), jnp.asarray(0.4, dt), jnp.asarray(X, dt))
    if mode == "grad":
        g = jax.jit(jax.grad(lambda *a: q(*a, pos, idx), argnums=(0, 1, 2, 3)))(*args)
        got = [float(g[0]), float(g[1]), float(g[2]), float(g[3][5, 2])]
    else:
        f = jax.jit(lambda *a: q(*a, pos, idx))
        got = []
        for i in range(4):
            t = [jnp.zeros_like(v) for v in args]
            t[i] = jnp.ones_like(args[i]) if i < 3 else t[i].at[5, 2].set(1)
            got.append(float(jax.jvp(f, args, tuple(t))[1]))
    np.testing.assert_allclose(got, fd_reference, rtol=rtol)


@pytest.fixture(scope="module")
def single_fit_grads(data):
    """The σ², ε and X[5, 2] derivatives of single-λ fits at λ = 0.01 and 0.1 (one jitted
    program for both λ and both modes below: run op by op, each took ~10 s to dispatch)."""
    X, pos = data
    idx = np.flatnonzero(pos)
    q = _quantity(jnp.float64, 1e-13)
    g = jax.jit(jax.grad(lambda lam, *a: q(lam, *a, pos, idx), argnums=(1, 2, 3)))
    args = (jnp.asarray(3.0), jnp.asarray(0.4), jnp.asarray(X))
    single = [g(jnp.asarray(lam), *args) for lam in (0.01, 0.1)]
    return np.asarray([[float(g[0]), float(g[1]), float(g[2][5, 2])] for g in single])


@pytest.mark.parametrize("mode", ["grad", "jvp"])
def test_implicit_derivative_of_a_lambda_grid_equals_single_fits(data, single_fit_grads, mode):
    """λ as a grid (the core's own batch axis): each member's σ², ε and X derivatives equal
    those of its single-λ fit (found by a probe: an ε tangent reached the windows' custom_vmap
    and the grid's derivatives came out 10²-10⁴ times too large)."""
    X, pos = data
    idx = np.flatnonzero(pos)
    grid = jnp.asarray([0.01, 0.1])

    def per_member(lams, s2, eps, Xa):
        r = core.fit_core(Xa, pos, lams, Xa[idx], kernel=Gaussian(s2), eps=eps, tol=1e-13,
                          sizes=(idx.size, pos.size - idx.size))  # fmt: skip
        val = jnp.mean(jnp.tanh(core.decision_function(r, Xa[:50])), axis=-1)
        return val + r.info.objective + 1e-3 * jnp.sum(r.coef**2, axis=-1)

    args = (jnp.asarray(3.0), jnp.asarray(0.4), jnp.asarray(X))
    want = single_fit_grads
    if mode == "grad":
        J = jax.jit(jax.jacrev(lambda *a: per_member(grid, *a), argnums=(0, 1, 2)))(*args)
        got = np.stack([J[0], J[1], J[2][:, 5, 2]], axis=1)
    else:
        f = jax.jit(lambda *a: per_member(grid, *a))
        cols = []
        for i in range(3):
            t = [jnp.zeros_like(v) for v in args]
            t[i] = jnp.ones_like(args[i]) if i < 2 else t[i].at[5, 2].set(1)
            cols.append(np.asarray(jax.jvp(f, args, tuple(t))[1]))
        got = np.stack(cols, axis=1)
    np.testing.assert_allclose(got, want, rtol=1e-7)


def test_jvp_is_implicit_not_the_truncated_loop(data, monkeypatch):
    """Three Newton steps, not converged: the loop's own derivative is the derivative of that
    truncated iterate (it equals finite differences of the truncated map); ``jax.jvp`` of the
    core gives the implicit-function derivative at the returned point instead."""
    X, pos = data
    idx = np.flatnonzero(pos)

    def beta(s2):
        return core.fit_core(
            X, pos, 1e-3, X[idx], kernel=Gaussian(s2), tol=1e-12, max_iter=3,
            sizes=_sizes(pos),
        ).coef  # fmt: skip

    s2, h = 3.0, 1e-6
    implicit = jax.jvp(beta, (s2,), (1.0,))[1]
    fd_truncated = (beta(s2 + h) - beta(s2 - h)) / (2 * h)
    monkeypatch.setattr(core, "_solution", core._solution.fun)  # the loop, differentiated
    loop = jax.jvp(beta, (s2,), (1.0,))[1]
    scale = float(jnp.max(jnp.abs(loop)))
    assert float(jnp.max(jnp.abs(loop - fd_truncated))) < 1e-5 * scale
    assert float(jnp.max(jnp.abs(implicit - loop))) > 1e-2 * scale


@pytest.mark.slow  # a subprocess with 4 CPU devices: kept out of the default run's budget
def test_shard_map_on_four_devices():
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(Path(__file__).parent.parent))
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=1800
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout)
    assert r["devices"] == 4
    # a batch of 2 per device against 8 on one: batched products sum in another order
    assert r["max_diff"] < 1e-8 * r["scale"]
