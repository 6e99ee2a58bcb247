"""L1-penalised RankRC: exact zeros, the subgradient optimality conditions checked with the
pair-loop gradient, and the optimum of an independent smooth reformulation (β = u − v, u, v ≥ 0)
solved by scipy's L-BFGS-B."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from oracles import pieces, rank_objective

import jaxrank
from jaxrank import io, kernels, losses
from jaxrank.l1 import L1Model, fista_l1, fit_l1, l1_max, l1_residual, soft_threshold

M, N_POS = 72, 10
# every fit in this file shares one shape (grid of 3 μ), so the solver compiles once
FRACS = np.array([0.5, 0.1, 0.01])


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(M, 3))
    X[:N_POS] += 0.8
    y = np.where(np.arange(M) < N_POS, 1, -1)
    kernel = kernels.Gaussian(sigma2=kernels.sigma2_heuristic(X))
    K = np.asarray(kernel(jnp.asarray(X), jnp.asarray(X[:N_POS])))
    return X, y, kernel, K, K[:N_POS]


def pair_grad(beta, K, Krr, pos, lam, loss):
    """∇ of the smooth part (pairwise loss + (λ/2)βᵀK_RRβ) from the explicit pair matrix."""
    lo, q, _ = (float(v) for v in loss)
    f = K @ beta
    fp, fn = f[pos], f[~pos]
    lin, quad = pieces(fp, fn, lo)
    dl = np.where(lin, -1.0, np.where(quad, -2 * q * (1 - (fp[:, None] - fn[None, :])), 0.0))
    g = K[pos].T @ dl.sum(1) - K[~pos].T @ dl.sum(0)
    return g / dl.size + lam * Krr @ beta


def lbfgsb_reference(K, Krr, pos, lam, loss, mu):
    """min over u, v ≥ 0 of loss(K(u − v)) + μ Σ(u + v) + (λ/2)(u−v)ᵀK_RR(u−v) by L-BFGS-B,
    restarted from its own result until the objective stops decreasing (one run stops early
    on "relative reduction" when λ = 0 makes the problem ill-conditioned)."""
    n = K.shape[1]
    F = lambda w: rank_objective(w[:n] - w[n:], K, Krr, pos, lam, loss) + mu * w.sum()

    def G(w):
        g = pair_grad(w[:n] - w[n:], K, Krr, pos, lam, loss)
        return np.concatenate([g, -g]) + mu

    w = np.zeros(2 * n)
    for _ in range(20):
        ref = scipy.optimize.minimize(
            F, w, jac=G, method="L-BFGS-B", bounds=[(0, None)] * (2 * n),
            options=dict(ftol=1e-16, gtol=1e-13, maxiter=20000, maxcor=50),
        )  # fmt: skip
        done = ref.fun >= F(w) - 1e-16
        w = ref.x
        if done:
            break
    return w[:n] - w[n:], F(w)


def test_soft_threshold_and_residual():
    x = jnp.asarray([-3.0, -0.5, 0.0, 0.5, 2.0])
    np.testing.assert_array_equal(soft_threshold(x, 1.0), [-2.0, 0.0, 0.0, 0.0, 1.0])
    beta = jnp.asarray([1.0, -2.0, 0.0, 0.0])
    grad = jnp.asarray([-0.3, 0.1, 0.2, -0.5])
    np.testing.assert_allclose(l1_residual(beta, grad, 0.3), [0.0, 0.2, 0.0, 0.2], atol=1e-15)


def test_fista_lasso_closed_form():
    """Separable lasso ½Σ a_r (x_r − b_r)² + μ||x||₁: x_r = soft(b_r, μ/a_r), exact zeros."""
    a = jnp.asarray([1.0, 4.0, 0.01, 2.0, 9.0])
    b = jnp.asarray([3.0, 0.2, 0.5, -1.0, -0.01])
    fun = lambda x: (0.5 * jnp.sum(a * (x - b) ** 2), a * (x - b), None)
    x, info = jax.jit(lambda x0: fista_l1(fun, x0, 0.4, L0=1.0, tol=1e-13))(jnp.zeros(5))
    assert int(info.status) == jaxrank.Status.CONVERGED
    np.testing.assert_allclose(x, soft_threshold(b, 0.4 / a), rtol=0, atol=1e-12)
    assert np.asarray(x)[[2, 4]].tolist() == [0.0, 0.0] and np.all(np.asarray(x)[[0, 1, 3]] != 0)


@pytest.mark.parametrize("loss_name", ["smoothed_hinge", "squared_hinge"])
@pytest.mark.parametrize("lam", [0.0, 1e-2])
def test_fit_matches_lbfgsb_and_optimality(problem, loss_name, lam):
    X, y, kernel, K, Krr = problem
    pos = y == 1
    loss = losses.get_loss(loss_name, 0.5)
    mu_max = l1_max(X, y, lam, loss=loss_name, kernel=kernel)
    np.testing.assert_allclose(
        mu_max, np.max(np.abs(pair_grad(np.zeros(N_POS), K, Krr, pos, lam, loss))), rtol=1e-12
    )
    mus = mu_max * FRACS
    model = fit_l1(X, y, lam, l1=mus, loss=loss_name, kernel=kernel, tol=1e-11)
    assert isinstance(model, L1Model) and model.coef.shape == (3, N_POS)
    np.testing.assert_array_equal(model.info.status, jaxrank.Status.CONVERGED)
    coef = np.asarray(model.coef)
    nnz = np.sum(coef != 0, axis=1)
    np.testing.assert_array_equal(model.info.n_nonzero, nnz)
    assert nnz[0] < nnz[2] and nnz[0] >= 1  # larger μ: more exact zeros
    assert nnz[1] < N_POS  # the middle μ is sparse, not just shrunk
    for i, mu in enumerate(mus):
        b = coef[i]
        F = rank_objective(b, K, Krr, pos, lam, loss) + mu * np.abs(b).sum()
        assert float(model.info.objective[i]) == pytest.approx(F, rel=1e-12)
        # subgradient optimality: ∇s = −μ sign β on the support, |∇s| ≤ μ off it
        g = pair_grad(b, K, Krr, pos, lam, loss)
        on = b != 0
        assert np.max(np.abs(g[on] + mu * np.sign(b[on]))) <= 1e-9
        assert np.all(np.abs(g[~on]) <= mu + 1e-9)
        ref_b, ref_F = lbfgsb_reference(K, Krr, pos, lam, loss, mu)
        assert F <= ref_F + 1e-13  # no worse than the reference
        assert F == pytest.approx(ref_F, rel=1e-9)
        if lam > 0:  # strongly convex on span K_RR: one optimum
            np.testing.assert_allclose(K @ b, K @ ref_b, rtol=0, atol=1e-6)


def test_mu_max_gives_zero_and_max_iter_warns(problem):
    X, y, kernel, _, _ = problem
    mu_max = l1_max(X, y, kernel=kernel)
    model = fit_l1(X, y, l1=mu_max * np.array([2.0, 1.0, 0.9]), kernel=kernel)
    np.testing.assert_array_equal(model.coef[:2], 0.0)
    np.testing.assert_array_equal(model.info.iterations[:2], 0)
    assert int(model.info.n_nonzero[2]) >= 1
    with pytest.warns(jaxrank.ConvergenceWarning, match="MAX_ITER"):
        short = fit_l1(X, y, l1=mu_max * FRACS, kernel=kernel, max_iter=2)
    np.testing.assert_array_equal(short.info.status[1:], jaxrank.Status.MAX_ITER)
    np.testing.assert_array_equal(short.info.iterations[1:], 2)


def test_batch_path_equals_warm_path(problem):
    X, y, kernel, _, _ = problem
    mus = l1_max(X, y, 1e-2, kernel=kernel) * FRACS[::-1]  # unsorted for the warm path
    warm = fit_l1(X, y, 1e-2, l1=mus, kernel=kernel, tol=1e-11)
    batch = fit_l1(X, y, 1e-2, l1=mus, kernel=kernel, tol=1e-11, path="batch")
    np.testing.assert_allclose(warm.info.objective, batch.info.objective, rtol=1e-12)
    np.testing.assert_allclose(warm.coef, batch.coef, rtol=0, atol=1e-8)
    np.testing.assert_array_equal(warm.l1, mus)


def test_model_select_pytree_save_load(problem, tmp_path):
    X, y, kernel, K, _ = problem
    mu_max = l1_max(X, y, kernel=kernel)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = fit_l1(X, y, 1e-3, l1=mu_max * FRACS, kernel=kernel)
    scores = np.asarray(model.decision_function(X))
    assert scores.shape == (3, M)
    np.testing.assert_allclose(scores, np.asarray(model.coef) @ K.T, atol=1e-12)
    one = model.select(1)
    assert isinstance(one, L1Model)
    assert one.coef.shape == (N_POS,) and float(one.l1) == pytest.approx(mu_max * 0.1)
    assert float(one.lam) == 1e-3 and int(one.info.status) == int(model.info.status[1])
    leaves = jax.tree.leaves(model)
    assert any(leaf is model.l1 for leaf in leaves)
    io.save(model, tmp_path / "l1.npz")
    back = io.load(tmp_path / "l1.npz")
    assert isinstance(back, L1Model)
    np.testing.assert_array_equal(back.l1, model.l1)
    np.testing.assert_array_equal(back.info.n_nonzero, model.info.n_nonzero)
    np.testing.assert_array_equal(back.decision_function(X), scores)


def test_bad_input_refused(problem):
    X, y, *_ = problem
    for l1 in (0.0, -1.0, float("nan"), [1e-2, 0.0], [[1e-2]], []):
        with pytest.raises(ValueError, match="l1"):
            fit_l1(X, y, l1=l1)
    for lam in (-1e-3, float("inf"), True, "0", [0.1]):
        with pytest.raises(ValueError, match="lam"):
            fit_l1(X, y, lam, l1=1e-2)
    with pytest.raises(ValueError, match="hinge"):
        fit_l1(X, y, l1=1e-2, loss="hinge")
    with pytest.raises(ValueError, match="eps"):
        fit_l1(X, y, l1=1e-2, eps=0.0)
    with pytest.raises(ValueError, match="max_iter"):
        fit_l1(X, y, l1=1e-2, max_iter=0)
    with pytest.raises(ValueError, match="tol"):
        fit_l1(X, y, l1=1e-2, tol=-1.0)
    with pytest.raises(ValueError, match="path"):
        fit_l1(X, y, l1=1e-2, path="cold")
    with pytest.raises(ValueError, match="init"):
        fit_l1(X, y, l1=1e-2, init=np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        fit_l1(np.where(X > 1, np.nan, X), y, l1=1e-2)
    with pytest.raises(ValueError, match="one class"):
        fit_l1(X, np.ones(M), l1=1e-2)
    with pytest.raises(ValueError, match="different lengths"):
        fit_l1(X, y[:-1], l1=1e-2)
    with pytest.raises(TypeError):
        fit_l1(X, y, 1e-2)  # l1 is required: the positional argument is the elastic λ
