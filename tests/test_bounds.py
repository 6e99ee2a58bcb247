"""Seed 003 bounds: closed forms against numpy, and the bounds hold for fitted RankRC/RankSVM."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracles import rank_objective
from scipy.optimize import minimize

import jaxrank
from jaxrank import bounds, datasets, kernels
from jaxrank.bases import resolve_basis
from jaxrank.losses import smoothed_hinge
from jaxrank.solver import Status

# Data, λ grid and fit options as in test_nystrom.py: a session running both compiles each
# (m, |R|, L) solver once.
LAMS = np.array([2.0**-4, 1.0, 4.0])
M = 240


@pytest.fixture(scope="module")
def data():
    X, y = datasets.make_rare_class(M, 0.1, 0.75, seed=1)  # 24 rare rows
    mu, sd = X.mean(0), X.std(0)
    Xt, _ = datasets.make_rare_class(60, 0.1, 0.75, seed=2)
    X, Xt = (X - mu) / sd, (Xt - mu) / sd
    k = kernels.gaussian(kernels.sigma2_heuristic(X))
    K = np.asarray(k(jnp.asarray(X), jnp.asarray(X)))
    return X, y, Xt, K


def np_nystrom(K, idx):
    C = K[:, idx]
    return C @ np.linalg.pinv(K[np.ix_(idx, idx)], rcond=1e-13, hermitian=True) @ C.T


# ------------------------------------------------------------------------------------------
# closed forms
# ------------------------------------------------------------------------------------------


def test_projected_map_bound_closed_form(data):
    _, y, _, _ = data
    rng = np.random.default_rng(0)
    for kappa in (1.0, 2.5):
        for size in (1, 24, 60, M):
            idx = rng.choice(M, size, replace=False)
            # eq. (31) by an explicit loop over the rows
            mp, mn = np.sum(y == 1), np.sum(y != 1)
            s = sum((i not in set(idx)) / (mp if y[i] == 1 else mn) for i in range(M))
            want = 2 * kappa / LAMS * np.sqrt(s)
            got = bounds.projected_map_bound(y, idx, LAMS, kappa=kappa)
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)
            assert bounds.projected_map_bound(y, idx, 0.5, kappa=kappa) == pytest.approx(
                4 * kappa * np.sqrt(s), rel=1e-14
            )
    assert bounds.projected_map_bound(y, "rare", 1.0) == pytest.approx(2.0, rel=1e-15)
    assert bounds.projected_map_bound(y, "all", 1.0) == 0.0
    # with labels {0, 1} or booleans the same
    assert bounds.projected_map_bound(y == 1, "rare", 3.0) == pytest.approx(2 / 3, rel=1e-15)


def test_rare_first_minimises_projected_bound(data):
    # Cor. 4's remark: for a fixed |R| the bound is smallest with the rare rows first
    _, y, _, _ = data
    pos = y == 1
    for size in (10, 24, 50, 100):
        rf = resolve_basis("rare_first", pos, key=jax.random.key(0), n_basis=size)
        best = bounds.projected_map_bound(y, rf, 1.0)
        for s in range(5):
            rnd = resolve_basis("random", pos, key=jax.random.key(s), n_basis=size)
            assert best <= bounds.projected_map_bound(y, rnd, 1.0) + 1e-15


def test_projection_residuals_and_residual_bound(data):
    X, y, _, K = data
    idx = resolve_basis("rare_first", y == 1, key=jax.random.key(1), n_basis=40)
    r = bounds.projection_residuals(X, X[idx])
    want2 = np.diag(K - np_nystrom(K, idx))
    np.testing.assert_allclose(r**2, np.maximum(want2, 0), rtol=0, atol=1e-10)
    assert np.all(r[idx] < 1e-6) and np.all(r <= 1.0)
    pos = y == 1
    s = r[pos].mean() + r[~pos].mean()
    np.testing.assert_allclose(
        bounds.projected_residual_bound(r, y, LAMS, kappa=1.0), 2 / LAMS * np.sqrt(s), rtol=1e-14
    )
    # with the worst-case residuals (38) it is eq. (31); with the actual ones it is smaller
    worst = np.where(np.isin(np.arange(M), idx), 0.0, 1.0)
    for kappa in (1.0, 4.0):
        np.testing.assert_allclose(
            bounds.projected_residual_bound(np.sqrt(kappa) * worst, y, LAMS, kappa=kappa),
            bounds.projected_map_bound(y, idx, LAMS, kappa=kappa),
            rtol=1e-14,
        )
    assert np.all(
        bounds.projected_residual_bound(r, y, LAMS) < bounds.projected_map_bound(y, idx, LAMS)
    )


def test_nystrom_kernel_and_perturbation_bound_closed_form(data):
    _, y, _, K = data
    idx = np.flatnonzero(y == 1)
    Kp = np.asarray(bounds.nystrom_kernel(K, idx))
    np.testing.assert_allclose(Kp, np_nystrom(K, idx), rtol=0, atol=1e-10)
    delta = np.linalg.norm(K - np_nystrom(K, idx), 2)
    for kappa in (1.0, 3.0):
        want = (
            2 * np.sqrt(2) * kappa**0.75 / LAMS * np.sqrt(delta)
            * (1 + (delta / (4 * kappa)) ** 0.25)
        )  # fmt: skip
        got = bounds.kernel_perturbation_bound(K, Kp, LAMS, kappa=kappa)
        np.testing.assert_allclose(got, want, rtol=1e-10)
        np.testing.assert_allclose(
            bounds.perturbation_bound(delta, LAMS, kappa=kappa), want, rtol=1e-14
        )
    # δ = 0 gives 0; broadcasting of a vector of norms against a scalar λ
    assert bounds.perturbation_bound(0.0, 1.0) == 0.0
    out = bounds.perturbation_bound(np.array([1.0, 4.0]), 2.0)
    np.testing.assert_allclose(
        out, np.sqrt(2) * np.sqrt([1, 4]) * (1 + np.array([0.25, 1]) ** 0.25)
    )


def test_perturbation_norm_exact_and_lanczos(data):
    K = data[3]
    rng = np.random.default_rng(2)
    idx = np.stack([rng.choice(M, 30, replace=False) for _ in range(4)])
    want = np.array([np.linalg.eigvalsh(K - np_nystrom(K, i))[-1] for i in idx])
    exact = bounds.nystrom_perturbation_norm(K, idx)
    assert isinstance(exact, np.ndarray) and exact.shape == (4,)
    np.testing.assert_allclose(exact, want, rtol=1e-10)
    # Lanczos: a Ritz value, never above the norm; 40 steps resolve the top of this spectrum
    lz = bounds.nystrom_perturbation_norm(K, idx, iters=40, key=jax.random.key(0))
    np.testing.assert_allclose(lz, want, rtol=1e-10)
    assert np.all(lz <= want * (1 + 1e-12))
    # a rank-3 residual (|R| = m − 3): the Krylov space breaks down after 3 of 5 steps
    full = np.setdiff1d(np.arange(M), [5, 50, 100])
    w = np.linalg.eigvalsh(K - np_nystrom(K, full))[-1]
    got = bounds.nystrom_perturbation_norm(K, full, iters=5, key=jax.random.key(1))
    one = bounds.nystrom_perturbation_norm(K, full)  # one basis: a float
    # δ ≈ 2e-5 here, a difference of two ~1e2 matrices through an ill-conditioned K_RR^†:
    # both sides carry ~1e-10 absolute rounding
    assert isinstance(one, float) and w > 1e-6
    assert got == pytest.approx(w, abs=1e-9) and one == pytest.approx(w, abs=1e-9)


# ------------------------------------------------------------------------------------------
# the bounds hold for fitted rankers (the real check)
# ------------------------------------------------------------------------------------------


def _fit(X, y, basis):
    model = jaxrank.fit(X, y, LAMS, basis=basis, dtype=np.float64, tol=1e-10, max_iter=200)
    assert np.all(np.asarray(model.info.status) == Status.CONVERGED)
    return model


@pytest.fixture(scope="module")
def ranksvm(data):
    X, y, _, _ = data
    return _fit(X, y, "all")


@pytest.fixture(scope="module")
def rankrc(data):
    X, y, _, _ = data
    return _fit(X, y, np.flatnonzero(y == 1))


# rare_first (|R| = 40) compiles another solver: in the slow set (shared with test_nystrom.py)
@pytest.mark.parametrize("name", ["rare", pytest.param("rare_first", marks=pytest.mark.slow)])
def test_bounds_hold_for_fitted_rankers(data, ranksvm, rankrc, name):
    X, y, Xt, K = data
    if name == "rare":
        idx, sub = np.flatnonzero(y == 1), rankrc
    else:
        idx = resolve_basis("rare_first", y == 1, key=jax.random.key(7), n_basis=40)
        sub = _fit(X, y, idx)
    rows = np.concatenate([X, Xt])  # training rows and fresh rows: the bounds hold ∀x
    diff = np.max(np.abs(sub.decision_function(rows) - ranksvm.decision_function(rows)), axis=1)
    b31 = bounds.projected_map_bound(y, idx, LAMS)
    b37 = bounds.projected_residual_bound(bounds.projection_residuals(X, X[idx]), y, LAMS)
    b46 = bounds.kernel_perturbation_bound(K, bounds.nystrom_kernel(K, idx), LAMS)
    assert np.all(diff > 1e-4)  # the two rankers differ: the comparison is not vacuous
    assert np.all(diff <= b37) and np.all(b37 <= b31)
    assert np.all(diff <= b31) and np.all(diff <= b46)
    # the bounds are 1/λ laws; the difference shrinks at least as fast here
    np.testing.assert_allclose(b31 * LAMS, b31[1], rtol=1e-14)


def test_proposition5_subset_ranker_is_ranksvm_with_nystrom_kernel(data, rankrc):
    # Prop. 5: RankSVM (β ∈ R^m) with K′ = K_{·R} K_RR^† K_{R·} has the R-subset ranker's
    # scores on the training rows. Solved by scipy on the explicit pair-loop objective.
    X, y, _, K = data
    pos = y == 1
    idx = np.flatnonzero(pos)
    Kp = np.asarray(bounds.nystrom_kernel(K, idx))
    np.testing.assert_allclose(bounds.nystrom_kernel(K, np.arange(M)), K, atol=1e-10)
    lam = LAMS[1]
    lo, q, c = (float(v) for v in smoothed_hinge(0.5))
    # F(β) = mean over pairs of ℓ(a_ijᵀβ) + (λ/2) βᵀK′β with a_ij = K′_i − K′_j (rows of A)
    A = (Kp[pos][:, None, :] - Kp[~pos][None, :, :]).reshape(-1, M)

    def parts(b):
        z = A @ b
        lin, quad = z < lo, (z >= lo) & (z < 1)
        val = np.where(lin, c - z, np.where(quad, q * (1 - z) ** 2, 0.0)).mean()
        dl = np.where(lin, -1.0, np.where(quad, -2 * q * (1 - z), 0.0))
        grad = A.T @ dl / A.shape[0] + lam * Kp @ b
        hess = (A[quad].T * (2 * q / A.shape[0])) @ A[quad] + lam * Kp
        return val + 0.5 * lam * b @ Kp @ b, grad, hess

    res = minimize(
        lambda b: parts(b)[0], np.zeros(M), jac=lambda b: parts(b)[1],
        hess=lambda b: parts(b)[2], method="trust-exact", options=dict(gtol=1e-11, maxiter=500),
    )  # fmt: skip
    assert np.max(np.abs(parts(res.x)[1])) < 1e-9
    oracle = rank_objective(res.x, Kp, Kp, pos, lam, smoothed_hinge(0.5))  # the pair loop
    assert parts(res.x)[0] == pytest.approx(oracle, rel=1e-12)
    model = rankrc.select(1)
    np.testing.assert_allclose(Kp @ res.x, model.decision_function(X), rtol=0, atol=1e-6)
    assert res.fun == pytest.approx(float(model.info.objective), rel=1e-9)


def test_paper_claim_projected_bound_is_tighter_for_small_bases(data):
    # Fig. 3: for |R| ≪ m the projected-map bound (rare first) is far below the kernel bound
    _, y, _, K = data
    for size in (10, 24, 40):
        rf = resolve_basis("rare_first", y == 1, key=jax.random.key(0), n_basis=size)
        rnd = np.stack(
            [resolve_basis("random", y == 1, key=jax.random.key(s), n_basis=size) for s in range(5)]
        )
        delta = bounds.nystrom_perturbation_norm(K, rnd)
        kernel_b = bounds.perturbation_bound(delta, 1.0)
        assert bounds.projected_map_bound(y, rf, 1.0) < kernel_b.min()


# ------------------------------------------------------------------------------------------
# validation
# ------------------------------------------------------------------------------------------


def test_clear_errors(data):
    _, y, _, K = data
    idx = np.flatnonzero(y == 1)
    with pytest.raises(ValueError, match="lam must be finite and > 0"):
        bounds.projected_map_bound(y, idx, 0.0)
    with pytest.raises(ValueError, match="kappa"):
        bounds.projected_map_bound(y, idx, 1.0, kappa=-1.0)
    with pytest.raises(ValueError, match="must not repeat"):
        bounds.projected_map_bound(y, [1, 1], 1.0)
    with pytest.raises(ValueError, match="one class"):
        bounds.projected_map_bound(np.ones(M), idx, 1.0)
    with pytest.raises(ValueError, match=r"exceeds √κ"):
        bounds.projected_residual_bound(np.full(M, 1.5), y, 1.0)
    with pytest.raises(ValueError, match="shape"):
        bounds.projected_residual_bound(np.zeros(10), y, 1.0)
    with pytest.raises(ValueError, match=">= 0"):
        bounds.perturbation_bound(-1.0, 1.0)
    with pytest.raises(ValueError, match="square"):
        bounds.nystrom_kernel(K[:5], idx)
    with pytest.raises(ValueError, match="1-D"):
        bounds.nystrom_kernel(K, idx[None])
    with pytest.raises(ValueError, match="must bound k"):
        bounds.kernel_perturbation_bound(2 * K, K, 1.0)
    with pytest.raises(ValueError, match="differ in shape"):
        bounds.kernel_perturbation_bound(K, K[:5, :5], 1.0)
    with pytest.raises(ValueError, match="needs key"):
        bounds.nystrom_perturbation_norm(K, idx, iters=5)
    with pytest.raises(ValueError, match="iters"):
        bounds.nystrom_perturbation_norm(K, idx, iters=0, key=jax.random.key(0))
    with pytest.raises(ValueError, match="lie in"):
        bounds.nystrom_perturbation_norm(K, [0, 300])
    with pytest.raises(jaxrank.MemoryBudgetError):
        bounds.nystrom_perturbation_norm(K, idx, memory_budget=1000)
