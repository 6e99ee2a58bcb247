"""Nyström features (seed 003 Prop. 5 / eq. 42) and the landmark strategies of jaxrank.bases."""

import dataclasses
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracles import rank_grad_hess, rank_objective
from scipy.optimize import minimize

import jaxrank
from jaxrank import datasets, kernels
from jaxrank.bases import kmeanspp, resolve_basis
from jaxrank.losses import smoothed_hinge
from jaxrank.nystrom import NystromMap, nystrom_features, nystrom_map
from jaxrank.solver import Status

# Data, λ grid and fit options as in test_bounds.py: a session running both compiles each
# (m, |R|, L) solver once.
LAMS = np.array([2.0**-4, 1.0, 4.0])


@pytest.fixture(scope="module")
def data():
    X, y = datasets.make_rare_class(240, 0.1, 0.75, seed=1)  # 24 rare rows
    mu, sd = X.mean(0), X.std(0)
    Xt, _ = datasets.make_rare_class(60, 0.1, 0.75, seed=2)
    return (X - mu) / sd, y, (Xt - mu) / sd


def linear_ranker(Z, pos, lam, eps=0.5):
    """min_w 1/(m+ m−) ΣΣ ℓ_ε(z_iᵀw − z_jᵀw) + (λ/2)||w||² by scipy's exact trust region on
    the explicit pair-loop objective, gradient and Hessian (tests/oracles.py): the linear ranker
    on Z, independent of jaxrank's solver and sorted windows."""
    loss = smoothed_hinge(eps)
    eye = np.eye(Z.shape[1])
    res = minimize(
        lambda w: rank_objective(w, Z, eye, pos, lam, loss),
        np.zeros(Z.shape[1]),
        jac=lambda w: rank_grad_hess(w, Z, eye, pos, lam, loss)[0],
        hess=lambda w: rank_grad_hess(w, Z, eye, pos, lam, loss)[1],
        method="trust-exact",
        options=dict(gtol=1e-12, maxiter=500),
    )
    # Near the optimum (≈ 0.5) float64 no longer resolves a decrease and trust-exact may stop
    # early (status 2): polish with exact Newton steps — on a piecewise quadratic they land on
    # the minimiser once the pieces are right — and judge by the gradient (λ-strong convexity:
    # ||w − w*|| ≤ ||g||/λ).
    w = res.x
    for _ in range(5):
        grad, hess = rank_grad_hess(w, Z, eye, pos, lam, loss)
        if np.max(np.abs(grad)) < 1e-13:
            break
        w = w - np.linalg.solve(hess, grad)
    grad = rank_grad_hess(w, Z, eye, pos, lam, loss)[0]
    assert np.max(np.abs(grad)) < 1e-11, res.message
    return w, float(rank_objective(w, Z, eye, pos, lam, loss))


def bases(y):
    pos = y == 1
    key = jax.random.key(7)
    return {
        "rare": np.flatnonzero(pos),
        "random": resolve_basis("random", pos, key=key),  # |R| = m+: RankRC's compiled solver
        "rare_first": resolve_basis("rare_first", pos, key=key, n_basis=40),
    }


# rare_first (|R| = 40 > m+) compiles a second solver: in the slow set (test_bounds.py's slow
# rare_first case shares it)
@pytest.mark.parametrize(
    "name", ["rare", "random", pytest.param("rare_first", marks=pytest.mark.slow)]
)
def test_linear_ranker_on_features_equals_subset_fit(data, name):
    X, y, Xt = data
    pos = y == 1
    idx = bases(y)[name]
    model = jaxrank.fit(X, y, LAMS, basis=idx, dtype=np.float64, tol=1e-10, max_iter=200)
    assert np.all(np.asarray(model.info.status) == Status.CONVERGED)
    fmap = nystrom_map(X[idx], X=X)
    Z = np.asarray(nystrom_features(X, X[idx]))
    np.testing.assert_array_equal(Z, np.asarray(fmap.transform(X)))
    assert fmap.kernel == model.kernel  # same σ² heuristic, on the training rows
    Zt = np.asarray(fmap.transform(Xt))
    solved = [linear_ranker(Z, pos, lam) for lam in LAMS]
    W = np.stack([w for w, _ in solved])
    # the same problem: same optimum value, same decision values on training and new rows
    np.testing.assert_allclose([f for _, f in solved], model.info.objective, rtol=1e-10)
    np.testing.assert_allclose(W @ Z.T, model.decision_function(X), rtol=0, atol=1e-6)
    np.testing.assert_allclose(W @ Zt.T, model.decision_function(Xt), rtol=0, atol=1e-6)
    # and the change of variables of eq. (42) maps one solution onto the other
    np.testing.assert_allclose(fmap.weights(model.coef), W, rtol=0, atol=1e-6)
    back = dataclasses.replace(model, coef=fmap.coef(W))
    np.testing.assert_allclose(back.decision_function(Xt), W @ Zt.T, rtol=0, atol=1e-10)


def test_features_reproduce_nystrom_kernel(data):
    X, y, _ = data
    idx = bases(y)["random"]
    k = kernels.gaussian(kernels.sigma2_heuristic(X))
    fmap = nystrom_map(X[idx], k)
    # oracle: K_{·R} K_RR^{-1} K_{R·} with numpy's pinv, and Z_R Z_Rᵀ = K_RR
    Xj, B = jnp.asarray(X), jnp.asarray(X[idx])
    C, Krr = np.asarray(k(Xj, B)), np.asarray(k(B, B))
    Z = np.asarray(fmap.transform(X))
    np.testing.assert_allclose(Z @ Z.T, C @ np.linalg.pinv(Krr) @ C.T, rtol=0, atol=1e-10)
    np.testing.assert_allclose(Z[idx] @ Z[idx].T, Krr, rtol=0, atol=1e-10)
    # the kept spectrum is numpy's (descending), and proj is U Λ^{-1/2}
    ev = np.linalg.eigvalsh(Krr)[::-1]
    assert fmap.n_components == 24
    np.testing.assert_allclose(fmap.eigvals, ev, rtol=1e-10, atol=1e-13)
    P = np.asarray(fmap.proj)
    np.testing.assert_allclose(P.T @ Krr @ P, np.eye(24), rtol=0, atol=1e-8)


def test_cutoff_drops_repeated_and_small_directions():
    rng = np.random.default_rng(0)
    B = rng.normal(size=(6, 3))
    k = kernels.gaussian(4.0)
    Bd = np.concatenate([B, B[:2]])  # two exact repeats: K_RR has rank 6 of 8
    fmap = nystrom_map(Bd, k)
    assert fmap.n_components == 6
    X = rng.normal(size=(40, 3))
    Z, Z6 = np.asarray(fmap.transform(X)), np.asarray(nystrom_map(B, k).transform(X))
    np.testing.assert_allclose(Z @ Z.T, Z6 @ Z6.T, rtol=0, atol=1e-10)
    # an explicit rcond keeps exactly the eigenvalues above rcond·λ_1
    ev = np.linalg.eigvalsh(np.asarray(k(jnp.asarray(B), jnp.asarray(B))))[::-1]
    for rcond in (0.0, 1e-3, 0.2, 0.9):
        assert nystrom_map(B, k, rcond=rcond).n_components == int(np.sum(ev > rcond * ev[0]))


def test_streamed_in_chunks(data, monkeypatch):
    X, y, _ = data
    B = X[y == 1]
    whole = np.asarray(nystrom_features(X, B))
    monkeypatch.setattr(kernels, "_CHUNK_BYTES", 24 * 8 * 7)  # ~7 rows per chunk
    assert kernels.chunk_rows(X.shape[0], B.shape[0] * 2, 8)[1] > 10
    np.testing.assert_allclose(nystrom_features(X, B), whole, rtol=0, atol=1e-13)


def test_float32_default_and_pytree(data):
    X, y, _ = data
    fmap = nystrom_map(X[y == 1], X=X, dtype=np.float32)
    assert fmap.transform(X).dtype == np.float32
    leaves, tree = jax.tree.flatten(fmap)
    assert isinstance(jax.tree.unflatten(tree, leaves), NystromMap)
    # a pytree crosses jit: the map's arrays are leaves
    total = jax.jit(lambda f: jnp.sum(f.proj) + jnp.sum(f.eigvals))(fmap)
    assert float(total) == pytest.approx(float(jnp.sum(fmap.proj) + jnp.sum(fmap.eigvals)))
    f64 = nystrom_map(X[y == 1], X=X)
    assert f64.transform(X).dtype == np.float64
    Z32, Z64 = np.asarray(fmap.transform(X), np.float64), np.asarray(f64.transform(X))
    np.testing.assert_allclose(Z32 @ Z32.T, Z64 @ Z64.T, atol=1e-4)  # eigenvector signs differ


def test_clear_errors(data):
    X, y, _ = data
    B = X[y == 1]
    fmap = nystrom_map(B, X=X)
    with pytest.raises(ValueError, match="features"):
        fmap.transform(X[:, :3])
    with pytest.raises(ValueError, match="features"):
        nystrom_features(X[:, :3], B)
    with pytest.raises(ValueError, match="NaN"):
        fmap.transform(np.where(X > 2, np.nan, X))
    with pytest.raises(ValueError, match="σ² heuristic needs the training rows"):
        nystrom_map(B)
    with pytest.raises(ValueError, match="belong to the fitted NystromMap"):
        nystrom_features(X, fmap, kernels.linear())
    for bad in (-0.1, 1.0, "x", True):
        with pytest.raises(ValueError, match="rcond"):
            nystrom_map(B, X=X, rcond=bad)
    with pytest.raises(ValueError, match="no positive eigenvalue"):
        nystrom_map(np.zeros((3, 5)), kernels.linear())
    with pytest.raises(jaxrank.MemoryBudgetError, match="Nyström features"):
        fmap.transform(X, memory_budget=1000)
    with pytest.raises(ValueError, match="basis"):
        nystrom_features(X, np.arange(5))


# ------------------------------------------------------------------------------------------
# landmark strategies
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def labels():
    pos = np.zeros(200, bool)
    pos[np.random.default_rng(3).choice(200, 20, replace=False)] = True
    X = np.random.default_rng(4).normal(size=(200, 3))
    return pos, X


@pytest.mark.parametrize("name", ["random", "rare_first", "kmeans++"])
@pytest.mark.parametrize("n", [None, 5, 20, 35, 200])
def test_strategy_sizes_and_determinism(labels, name, n):
    pos, X = labels
    key = jax.random.key(0)
    a = resolve_basis(name, pos, key=key, n_basis=n, X=X)
    b = resolve_basis(name, pos, key=key, n_basis=n, X=X)
    size = 20 if n is None else n
    assert a.shape == (size,) and a.dtype == np.int64
    assert np.unique(a).size == size and a.min() >= 0 and a.max() < 200
    np.testing.assert_array_equal(a, b)  # a function of the key
    if size not in (20, 200):
        c = resolve_basis(name, pos, key=jax.random.key(1), n_basis=n, X=X)
        assert not np.array_equal(a, c)
    if name != "random":
        # rare rows first: every rare row before any majority row, as many as fit
        assert np.all(pos[a[: min(size, 20)]])
        assert not np.any(pos[a[20:]])


@pytest.mark.parametrize("name", ["rare_first", "kmeans++"])
def test_growing_basis_extends_smaller(labels, name):
    # a larger n_basis with the same key extends the smaller basis (Fig. 3's growing |R|)
    pos, X = labels
    key = jax.random.key(5)
    for small, large in ((3, 12), (25, 60)):
        a = resolve_basis(name, pos, key=key, n_basis=small, X=X)
        b = resolve_basis(name, pos, key=key, n_basis=large, X=X)
        np.testing.assert_array_equal(a, b[:small])
    # with n_basis = m+ both are the RankRC basis (as a set)
    for nm in ("rare_first", "kmeans++"):
        r = resolve_basis(nm, pos, key=key, X=X)
        np.testing.assert_array_equal(np.sort(r), np.flatnonzero(pos))


def test_rare_first_draws_majority_uniformly(labels):
    pos, _ = labels
    counts = np.zeros(200)
    for s in range(300):
        idx = resolve_basis("rare_first", pos, key=jax.random.key(s), n_basis=38)
        counts[idx[20:]] += 1
    assert counts[pos].sum() == 0
    # 18 of 180 majority rows per draw: each row is drawn with probability 0.1 (300 draws:
    # mean 30, sd 5.2); no row is systematically favoured
    freq = counts[~pos]
    assert abs(freq.mean() - 30) < 1e-12 and freq.min() >= 12 and freq.max() <= 50


def test_kmeanspp_sampling_law():
    # centres at 0 (forced), candidates at 1 and 3: P(next = 1) = 1/(1 + 9) = 0.1
    X = np.array([[0.0], [1.0], [3.0]])
    picks = np.array([kmeanspp(X, 2, key=jax.random.key(s), fixed=1)[1] for s in range(600)])
    assert set(picks.tolist()) == {1, 2}
    assert abs(np.mean(picks == 1) - 0.1) < 0.04  # binomial sd 0.012
    # duplicates of chosen centres are never drawn while other mass remains, and a set of
    # identical rows falls back to uniform draws without repeats
    Xd = np.array([[0.0], [0.0], [0.0], [5.0]])
    for s in range(20):
        idx = kmeanspp(Xd, 2, key=jax.random.key(s), fixed=1)
        assert idx.tolist() == [0, 3]
        same = kmeanspp(np.zeros((4, 2)), 4, key=jax.random.key(s))
        assert sorted(same.tolist()) == [0, 1, 2, 3]


def test_kmeanspp_spreads_points():
    # rare class in 5 tight, well separated clusters of 8 rows; 5 landmarks
    centres = np.array([[0, 0], [10, 0], [0, 10], [10, 10], [5, 20]], float)
    rng = np.random.default_rng(0)
    Xr = np.repeat(centres, 8, axis=0) + 0.1 * rng.normal(size=(40, 2))
    X = np.concatenate([Xr, rng.normal(size=(160, 2)) * 8])
    pos = np.arange(200) < 40
    cluster = np.repeat(np.arange(5), 8)

    def covered(name, s):
        idx = resolve_basis(name, pos, key=jax.random.key(s), n_basis=5, X=X)
        assert np.all(pos[idx])
        return np.unique(cluster[idx]).size

    kpp = [covered("kmeans++", s) for s in range(20)]
    rnd = [covered("rare_first", s) for s in range(20)]  # n < m+: uniform rare rows
    # k-means++ hits every cluster (a miss needs a draw of weight ~1e-4 against ~1e2)
    assert min(kpp) == 5
    assert np.mean(rnd) < 4.5  # uniform picks: P(all 5 clusters) = 8⁵·5!/C(40,5) ≈ 0.06


def test_strategy_fit_end_to_end(data):
    X, y, _ = data
    idx = resolve_basis("kmeans++", y == 1, key=jax.random.key(2), n_basis=16, X=X)
    # |R| = 16 < m+: k-means++ on the rare class; fitted as an index basis
    model = jaxrank.fit(X, y, 1e-2, basis=idx, dtype=np.float64)
    np.testing.assert_array_equal(model.basis_index, idx)
    np.testing.assert_array_equal(model.basis, X[idx])
    assert np.all(y[idx] == 1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(basis="kmeans++", key=jax.random.key(0)), "needs the training rows"),
        (dict(basis="kmeans++", X=np.ones((200, 2))), r"needs key=jax.random.key"),
        (dict(basis="rare_first"), r"needs key=jax.random.key"),
        (dict(basis="rare_first", key=jax.random.key(0), n_basis=0), r"n_basis must be in"),
        (dict(basis="rare_first", key=jax.random.key(0), n_basis=201), r"n_basis must be in"),
        (dict(basis="kmeans++", key=jax.random.key(0), n_basis=2.5, X=np.ones((200, 2))),
         "n_basis must be an integer"),
        (dict(basis="random", key=jax.random.key(0), n_basis=True), "n_basis must be an integer"),
        (dict(basis="kmeans++", key=jax.random.key(0), X=np.ones((199, 2))), "rows"),
        (dict(basis="kmeans", key=jax.random.key(0)), r"'rare_first', 'kmeans\+\+'"),
    ],
)  # fmt: skip
def test_strategy_errors(labels, kwargs, match):
    pos, _ = labels
    basis = kwargs.pop("basis")
    with pytest.raises(ValueError, match=match):
        resolve_basis(basis, pos, **kwargs)


def test_existing_strategies_unchanged(labels):
    pos, _ = labels
    key = jax.random.key(3)
    np.testing.assert_array_equal(resolve_basis("rare", pos), np.flatnonzero(pos))
    np.testing.assert_array_equal(resolve_basis("all", pos), np.arange(200))
    perm = np.asarray(jax.random.permutation(key, 200))
    np.testing.assert_array_equal(
        resolve_basis("random", pos, key=key, n_basis=30), np.sort(perm[:30])
    )
    assert resolve_basis("random", pos, key=key, n_basis=30.0).size == 30  # integral float
    for a, b in itertools.combinations([np.array([3, 1]), [3, 1]], 2):
        np.testing.assert_array_equal(resolve_basis(a, pos), resolve_basis(b, pos))
