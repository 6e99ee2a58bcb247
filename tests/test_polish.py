"""The float64 polish of float32 fits (issue 29 item 5): small λ on the paper's d = 5 data.

At λ = 2⁻²⁰ on ``make_rare_class(2·10⁴, 0.01, 0.75)`` (d = 5) the float32 solver alone ends
MAX_ITER after 100 Newton steps (its scores carry rounding of ~1e-3: the coefficients reach 10³
against scores within ±30), so after :data:`~jaxrank._fitting.POLISH_AFTER` steps the fit goes
on in float64 and rounds back to float32 (:func:`~jaxrank._fitting.round_float32`). The claim
it then makes is checked here from the model alone, by pair loops in numpy float64: the
certificate ``||∇F(β)||_∞ ≤ max(tol, floor) + floor`` at the returned float32 coefficients (the
polish itself demands ``≤ max(tol, floor)`` of its float64 gradient, and that is what the model
reports).
"""

import importlib
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import _fitting, kernels, losses

fitmod = importlib.import_module("jaxrank.fit")
LOSS = losses.smoothed_hinge(0.5)
TOL = 1e-6


def _pair_grad(beta, K, Krr, pos, lam):
    """∇F by the pair loop over an (m+, m−) matrix of pieces (float64)."""
    lo, q, _ = (float(v) for v in LOSS)
    f = K @ beta
    z = f[pos][:, None] - f[~pos][None, :]
    dl = np.where(z < lo, -1.0, np.where(z < 1, -2 * q * (1 - z), 0.0))
    return (K[pos].T @ dl.sum(1) - K[~pos].T @ dl.sum(0)) / dl.size + lam * Krr @ beta


@pytest.fixture(scope="module")
def fitted():
    X, y = jaxrank.datasets.make_rare_class(20_000, 0.01, 0.75, seed=0)
    lams = np.array([2.0**-20, 2.0**-4])
    return X, y, lams, jaxrank.fit_rankrc(X, y, lams, dtype=np.float32, tol=TOL)


def test_small_lambda_float32_converges_by_polish(fitted):
    model = fitted[3]
    its = np.asarray(model.info.iterations)
    assert np.asarray(model.info.status).tolist() == [jaxrank.Status.CONVERGED] * 2
    assert model.coef.dtype == np.float32
    assert its[0] > _fitting.POLISH_AFTER  # λ = 2⁻²⁰ went on in float64, in a few steps
    assert its[0] <= _fitting.POLISH_AFTER + 5
    assert its[1] <= _fitting.POLISH_AFTER  # λ = 2⁻⁴ converged in float32 alone


def test_polished_claim_is_true(fitted):
    X, y, lams, model = fitted
    pos = y == 1
    k = kernels.Gaussian(sigma2=float(model.kernel.sigma2))
    B = np.asarray(model.basis, np.float64)
    K = np.asarray(k(jnp.asarray(X, jnp.float64), jnp.asarray(B)))
    Kd = k(jnp.asarray(model.basis), jnp.asarray(model.basis))
    shift = float(np.asarray(fitmod.psd_gram(Kd) - Kd, np.float64)[0, 0])
    Krr = np.asarray(k(jnp.asarray(B), jnp.asarray(B))) + shift * np.eye(B.shape[0])
    m_pad = 2 * X.shape[0]  # the largest row padding a fit may use
    b = kernels.product_block(m_pad)
    floor = float(np.finfo(np.float32).eps) * (math.sqrt(b) + math.sqrt(m_pad / b))
    for j, lam in enumerate(lams):
        g = np.max(np.abs(_pair_grad(np.asarray(model.coef[j], np.float64), K, Krr, pos, lam)))
        assert g <= max(TOL, floor) + floor, (j, g)
    # the polished member reports the float64 gradient at the float32 coefficients it returns
    g0 = np.max(np.abs(_pair_grad(np.asarray(model.coef[0], np.float64), K, Krr, pos, lams[0])))
    np.testing.assert_allclose(float(model.info.grad_norm[0]), g0, rtol=1e-3)
    assert g0 <= max(TOL, floor)


def test_round_float32_beats_plain_rounding():
    # coefficients of size 10³ and an ill-conditioned metric, as at λ = 2⁻²⁰ on d = 5 data
    rng = np.random.default_rng(0)
    n = 60
    Q = np.linalg.qr(rng.normal(size=(n, n)))[0]
    M = (Q * np.logspace(-9, 0, n)) @ Q.T
    M = 0.5 * (M + M.T)
    beta = rng.normal(size=n) * 1e3
    b32 = np.asarray(jax.jit(_fitting.round_float32)(jnp.asarray(beta), jnp.asarray(M)))
    assert b32.dtype == np.float32
    d_near = np.asarray(b32, np.float64) - beta
    d_plain = np.asarray(beta.astype(np.float32), np.float64) - beta
    energy = lambda d: float(d @ M @ d)
    # nearest plane: (R δ)_i is R_ii times one coordinate's rounding error, at most half a
    # float32 spacing there (M = RᵀR)
    R = np.linalg.cholesky(M).T
    ulp = np.spacing(np.abs(b32)).astype(np.float64)
    assert energy(d_near) <= np.sum((np.diag(R) * ulp) ** 2)
    assert energy(d_near) < 0.1 * energy(d_plain)
    # a metric Cholesky cannot factor: plain rounding
    bad = np.asarray(_fitting.round_float32(jnp.asarray(beta), jnp.asarray(-np.eye(n))))
    np.testing.assert_array_equal(bad, beta.astype(np.float32))


def test_small_block_polish_is_one_program_whatever_the_count(monkeypatch):
    # a small block's polish pads its members to SHARED_GRID_LAMS: one compiled program per
    # block bucket, not one per count of unconverged λ (each ~1-2 s of XLA on CPU)
    from jaxrank import _exported

    seen = []
    real = _exported.call

    def spy(name, fn, args, *a, **k):
        if name == "polish_block":
            seen.append(np.shape(args[5]))  # the λ of the polished members
        return real(name, fn, args, *a, **k)

    monkeypatch.setattr(_exported, "call", spy)
    X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
    kern = kernels.gaussian(160.0)
    polished = []
    for lams in ([2.0**-14], [2.0**-14, 2.0**-18, 2.0**-20]):
        model = jaxrank.fit_rankrc(X, y, np.array(lams), kernel=kern, dtype=np.float32, tol=TOL)
        its = np.atleast_1d(np.asarray(model.info.iterations))
        polished.append(int(np.sum(its > _fitting.POLISH_AFTER)))
        assert set(np.atleast_1d(np.asarray(model.info.status)).tolist()) == {0}
    assert polished[0] != polished[1], polished  # different counts reached the polish
    assert seen and all(s == (_fitting.SHARED_GRID_LAMS,) for s in seen), seen
