"""Stochastic RankRC (seed 000 Sec. 7, extension 3): minibatch estimates against the pair loop,
unbiasedness, convergence to the batch optimum, determinism, memory, validation."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from oracles import rank_grad_hess, rank_objective

import jaxrank
from jaxrank import datasets, kernels, losses
from jaxrank.stochastic import (
    StochasticHistory,
    _batch_index,
    _batch_jit,
    _run,
    batch_objective,
    default_optimizer,
    fit_rankrc_stochastic,
    full_objective,
    whitening,
)

LOSS = losses.smoothed_hinge(0.5)


@pytest.fixture(scope="module")
def data():
    # m− = 570 = 6 · 95: batches of 95 partition the majority class exactly.
    X, y = datasets.make_rare_class(600, 0.05, 0.75, seed=1)
    X = (X - X.mean(0)) / X.std(0)
    return X, y


def _blocks(X, y):
    pos = y == 1
    k = kernels.resolve_kernel(None, X)
    K = np.asarray(k(jnp.asarray(X), jnp.asarray(X[pos])))
    return pos, K, K[pos]


def _beta(n, seed=0):
    return np.random.default_rng(seed).normal(size=n)


def test_batch_objective_matches_pair_loop(data):
    X, y = data
    pos, K, Kpp = _blocks(X, y)
    beta = _beta(pos.sum())
    rows = np.flatnonzero(~pos)[[3, 17, 40, 41, 200, 555, 9]]
    F, g = batch_objective(jnp.asarray(beta), Kpp, K[rows], 0.03)
    # The batch problem is the RankRC objective on [positives; batch rows].
    Kab = np.concatenate([Kpp, K[rows]])
    mask = np.r_[np.ones(pos.sum(), bool), np.zeros(rows.size, bool)]
    F_ref = rank_objective(beta, Kab, Kpp, mask, 0.03, LOSS)
    g_ref, _ = rank_grad_hess(beta, Kab, Kpp, mask, 0.03, LOSS)
    assert float(F) == pytest.approx(F_ref, rel=1e-12)
    np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-12)


def test_padded_rows_contribute_nothing(data):
    X, y = data
    pos, K, Kpp = _blocks(X, y)
    beta = jnp.asarray(_beta(pos.sum(), 1))
    rows = np.flatnonzero(~pos)[:12]
    Kb = jnp.asarray(K[rows])
    valid = jnp.asarray(np.arange(12) % 4 != 1)  # rows 1, 5, 9 are padding
    loss = jax.tree.map(lambda v: jnp.asarray(v, jnp.float64), LOSS)
    lam = jnp.asarray(0.03)
    got = _batch_jit(beta, jnp.asarray(Kpp), Kb, valid, lam, loss, jnp.asarray(1.0 / (30 * 9)))
    want = batch_objective(beta, Kpp, K[rows[np.asarray(valid)]], 0.03)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("chunk", [7, 1000])
def test_full_objective_matches_pair_loop(data, chunk):
    X, y = data
    pos, K, Kpp = _blocks(X, y)
    beta = _beta(pos.sum(), 2)
    F, g = full_objective(jnp.asarray(beta), X, y, 0.01, chunk=chunk)
    F_ref = rank_objective(beta, K, Kpp, pos, 0.01, LOSS)
    g_ref, _ = rank_grad_hess(beta, K, Kpp, pos, 0.01, LOSS)
    assert float(F) == pytest.approx(F_ref, rel=1e-12)
    np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-12)


def test_batches_partition_the_majority_class():
    for n_neg, n_batches, size in [(570, 6, 95), (571, 7, 82)]:
        ix = np.asarray(_batch_index(jax.random.key(5), n_neg, n_batches, size))
        assert ix.shape == (n_batches, size)
        real = ix[ix < n_neg]
        np.testing.assert_array_equal(np.sort(real), np.arange(n_neg))  # each row once
        counts = (ix < n_neg).sum(axis=1)
        assert counts.max() - counts.min() <= 1


def test_minibatch_gradient_is_unbiased(data):
    """The mean over one epoch's equal-sized batches is exactly the full (F, ∇F)."""
    X, y = data
    pos, K, Kpp = _blocks(X, y)
    beta = jnp.asarray(_beta(pos.sum(), 3))
    neg = np.flatnonzero(~pos)
    ix = np.asarray(_batch_index(jax.random.key(0), neg.size, 6, 95))
    assert (ix < neg.size).all()
    parts = [batch_objective(beta, Kpp, K[neg[b]], 0.02) for b in ix]
    F_mean = np.mean([float(p[0]) for p in parts])
    g_mean = np.mean([np.asarray(p[1]) for p in parts], axis=0)
    F, g = full_objective(beta, X, y, 0.02, chunk=64)
    assert F_mean == pytest.approx(float(F), rel=1e-13)
    np.testing.assert_allclose(g_mean, g, rtol=1e-11, atol=1e-14)
    # ... and a single batch is not (the check can fail).
    assert abs(float(parts[0][0]) - float(F)) > 1e-6


def test_whitening_is_eq14_with_pseudo_inverse(data):
    X, y = data
    _, _, Kpp = _blocks(X, y)
    T, fwd = whitening(Kpp)
    r = T.shape[1]
    np.testing.assert_allclose(T.T @ Kpp @ T, np.eye(r), atol=1e-9)  # βᵀKβ = ||w||²
    np.testing.assert_allclose(fwd @ T, np.eye(r), atol=1e-9)
    beta = _beta(Kpp.shape[0], 4)
    w = fwd @ beta
    # f_+ = K β is unchanged by the round trip β -> w -> β up to the dropped eigenvalues.
    np.testing.assert_allclose(Kpp @ (T @ w), Kpp @ beta, atol=1e-9)
    # An indefinite matrix (rounding in float32 makes one): negative directions are dropped.
    Q = np.linalg.qr(np.random.default_rng(0).normal(size=(4, 4)))[0]
    A = Q @ np.diag([-1e-6, 1e-9, 0.5, 2.0]) @ Q.T
    T, fwd = whitening(A, rcond=1e-6)
    assert T.shape == (4, 2)
    np.testing.assert_allclose(T.T @ A @ T, np.eye(2), atol=1e-12)
    assert whitening(A, rcond=1e-12)[0].shape == (4, 3)
    with pytest.raises(ValueError, match="positive eigenvalue"):
        whitening(-np.eye(3))


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model, hist = fit_rankrc_stochastic(
            X, y, 1e-3, batch_size=95, key=jax.random.key(0), epochs=60, return_history=True
        )
    return model, hist


@pytest.mark.parametrize("lam", [1e-2, 1e-3])
def test_reaches_batch_objective(data, fitted, lam):
    X, y = data
    ref = jaxrank.fit_rankrc(X, y, lam, tol=1e-9)
    if lam == 1e-3:
        model, hist = fitted
    else:
        # With the default tol this λ plateaus at 1.4 % of ||∇F(0)||_∞, above the default
        # grad_tol = 1e-2 (PRECISION); a finer plateau tolerance reaches 0.26 %.
        model, hist = fit_rankrc_stochastic(
            X,
            y,
            lam,
            batch_size=95,
            key=jax.random.key(0),
            epochs=60,
            return_history=True,
            tol=1e-6,
        )
    F_batch = float(ref.info.objective)
    F = float(model.info.objective)
    assert int(model.info.status) == jaxrank.Status.CONVERGED
    assert F_batch - 1e-12 <= F <= 1.01 * F_batch
    # info.objective is the exact objective at the returned coefficients.
    pos, K, Kpp = _blocks(X, y)
    assert F == pytest.approx(rank_objective(np.asarray(model.coef), K, Kpp, pos, lam, LOSS),
                              rel=1e-12)  # fmt: skip
    g, _ = rank_grad_hess(np.asarray(model.coef), K, Kpp, pos, lam, LOSS)
    assert float(model.info.grad_norm) == pytest.approx(np.abs(g).max(), rel=1e-9)
    # CONVERGED is the gradient certificate, not only the plateau (default grad_tol = 1e-2).
    g0, _ = rank_grad_hess(np.zeros(pos.sum()), K, Kpp, pos, lam, LOSS)
    assert np.abs(g).max() <= 1e-2 * np.abs(g0).max()
    n = int(hist.epochs)
    assert int(model.info.iterations) == 6 * n and int(model.info.cg_iterations) == 0
    obj = np.asarray(hist.objective)
    assert np.all(np.isfinite(obj[:n])) and np.all(np.isnan(obj[n:]))
    assert F == pytest.approx(obj[:n].min(), rel=1e-14)
    # Same model type as the batch fit: rare-class basis, scores on new rows.
    np.testing.assert_array_equal(model.basis_index, ref.basis_index)
    assert model.decision_function(X[:5]).shape == (5,)


def test_deterministic_given_key(data, fitted):
    X, y = data
    model, _ = fitted
    again = fit_rankrc_stochastic(X, y, 1e-3, batch_size=95, key=jax.random.key(0), epochs=60)
    np.testing.assert_array_equal(model.coef, again.coef)
    other = fit_rankrc_stochastic(X, y, 1e-3, batch_size=95, key=jax.random.key(1), epochs=60)
    assert not np.array_equal(model.coef, other.coef)


def test_lambda_does_not_recompile(data, fitted):
    X, y = data
    before = _run._cache_size()
    with warnings.catch_warnings():  # this λ plateaus above grad_tol: PRECISION, warned
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        fit_rankrc_stochastic(X, y, 2e-3, batch_size=95, key=jax.random.key(0), epochs=60)
    assert _run._cache_size() == before


def test_plateau_without_the_gradient_certificate_is_precision(data, fitted):
    """The fixture's plateau (0.78 % of ||∇F(0)||_∞) with a certificate SGD cannot reach is
    PRECISION with a ConvergenceWarning, the same iterate (the status is decided at the end)."""
    X, y = data
    model, hist = fitted
    with pytest.warns(jaxrank.ConvergenceWarning, match="PRECISION"):
        strict, h2 = fit_rankrc_stochastic(
            X,
            y,
            1e-3,
            batch_size=95,
            key=jax.random.key(0),
            epochs=60,
            return_history=True,
            grad_tol=1e-4,
        )
    assert int(strict.info.status) == jaxrank.Status.PRECISION
    assert int(h2.epochs) == int(hist.epochs) < 60  # a plateau, not the epoch cap
    np.testing.assert_array_equal(strict.coef, model.coef)
    _, g0 = full_objective(jnp.zeros(30), X, y, 1e-3)
    assert float(strict.info.grad_norm) > 1e-4 * float(jnp.max(jnp.abs(g0)))


def test_init_is_kept_when_nothing_improves(data):
    """Starting at the batch optimum no epoch improves (beyond rounding): the returned β is the
    start, so its objective is the batch optimum (checks the w = Lᵀβ round trip)."""
    X, y = data
    ref = jaxrank.fit_rankrc(X, y, 1e-2, tol=1e-10)
    model = fit_rankrc_stochastic(
        X, y, 1e-2, batch_size=95, key=jax.random.key(0), epochs=60, init=ref.coef
    )
    assert float(model.info.objective) == pytest.approx(float(ref.info.objective), rel=1e-10)


def test_epoch_cap_warns_with_status_custom_optimizer_float32(data):
    X, y = data
    with pytest.warns(jaxrank.ConvergenceWarning, match="MAX_ITER"):
        model, hist = fit_rankrc_stochastic(
            X, y, 1e-3, batch_size=200, key=jax.random.key(0), epochs=2, return_history=True,
            optimizer=optax.sgd(0.5, momentum=0.9), dtype=np.float32, whiten=False,
        )  # fmt: skip
    assert int(model.info.status) == jaxrank.Status.MAX_ITER
    assert isinstance(hist, StochasticHistory) and int(hist.epochs) == 2
    assert int(model.info.iterations) == 2 * 3  # 570 rows in 3 batches of 190
    assert model.coef.dtype == jnp.float32 and np.all(np.isfinite(model.coef))
    assert default_optimizer() is default_optimizer(1.0)


def test_never_holds_the_kernel_block():
    """The compiled solver's temporaries are far below one m × m+ block (here 4.8 MB)."""
    X, y = datasets.make_rare_class(6000, 0.0167, 0.75, seed=0)
    pos = y == 1
    m_pos = int(pos.sum())
    Xp, Xn = jnp.asarray(X[pos]), jnp.asarray(X[~pos])
    k = kernels.resolve_kernel(None, X)
    Kpp = k(Xp, Xp)
    loss = jax.tree.map(lambda v: jnp.asarray(v, jnp.float64), LOSS)
    w0 = jnp.zeros(m_pos)
    n_neg = Xn.shape[0]
    compiled = _run.lower(
        Xp, Xn, Kpp, jnp.eye(m_pos), jnp.asarray(1e-3), loss, k, w0, jax.random.key(0),
        jnp.asarray(1e-4), jnp.asarray(0.5), optimizer=default_optimizer(),
        n_batches=-(-n_neg // 50), size=50, chunk=50, epochs=5, patience=3,
    ).compile()  # fmt: skip
    mem = compiled.memory_analysis()
    block = X.shape[0] * m_pos * 8
    assert mem.temp_size_in_bytes < block / 8  # measured: 0.22 MB


def test_bad_input(data):
    X, y = data
    fit = lambda **kw: fit_rankrc_stochastic(
        X, y, kw.pop("lam", 1e-3), **{"batch_size": 95, "key": jax.random.key(0), **kw}
    )
    with pytest.raises(ValueError, match="scalar"):
        fit(lam=[1e-3, 1e-2])
    with pytest.raises(ValueError, match="lam"):
        fit(lam=-1.0)
    with pytest.raises(ValueError, match="key"):
        fit(key=None)
    with pytest.raises(ValueError, match="key"):
        fit(key=3)
    for bs in (0, 2.5, True):
        with pytest.raises(ValueError, match="batch_size"):
            fit(batch_size=bs)
    with pytest.raises(ValueError, match="epochs"):
        fit(epochs=0)
    with pytest.raises(ValueError, match="patience"):
        fit(patience=-1)
    with pytest.raises(ValueError, match="decay"):
        fit(decay=1.5)
    with pytest.raises(ValueError, match="decay"):
        fit(decay=0.0)
    with pytest.raises(ValueError, match="tol"):
        fit(tol=0.0)
    with pytest.raises(ValueError, match="grad_tol"):
        fit(grad_tol=0.0)
    with pytest.raises(ValueError, match="eps"):
        fit(eps=-0.5)
    with pytest.raises(ValueError, match="learning_rate"):
        fit(learning_rate=float("nan"))
    with pytest.raises(ValueError, match="optimizer"):
        fit(optimizer="adam")
    with pytest.raises(ValueError, match="init"):
        fit(init=np.zeros(3))
    with pytest.raises(ValueError, match="init"):
        fit(init=np.full(30, np.nan))
    with pytest.raises(ValueError, match="rcond"):
        fit(rcond=-1.0)
    with pytest.raises(ValueError, match="NaN"):
        fit_rankrc_stochastic(np.where(np.eye(600, 5) > 0, np.nan, X), y, 1e-3, batch_size=9,
                              key=jax.random.key(0))  # fmt: skip
    with pytest.raises(ValueError, match="one class"):
        fit_rankrc_stochastic(X, np.ones(600), 1e-3, batch_size=9, key=jax.random.key(0))
    with pytest.raises(ValueError, match="lengths"):
        fit_rankrc_stochastic(X[:10], y, 1e-3, batch_size=9, key=jax.random.key(0))
    with pytest.raises(ValueError, match="beta"):
        full_objective(np.zeros(4), X, y, 1e-3)
    with pytest.raises(ValueError, match="chunk"):
        full_objective(np.zeros(30), X, y, 1e-3, chunk=0)


@pytest.mark.parametrize("lam", [1e39, 1e-300])
def test_lam_outside_the_dtype_range_is_refused(data, lam):
    """As ``jaxrank.fit``: a float32 λ the objective cannot represent is a ValueError up front
    (1e39 overflowed to NONFINITE with zero scores; 1e-300 is not a float32 normal)."""
    X, y = data
    with pytest.raises(ValueError, match="float32"):
        fit_rankrc_stochastic(X, y, lam, batch_size=16, key=jax.random.key(0), dtype=np.float32)
