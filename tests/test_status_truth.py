"""Status truth: a CONVERGED λ satisfies its fitter's optimality certificate, recomputed here.

For every Newton-based fitter (and the FISTA ℓ1 fitter, which shares the status codes), each λ
labelled CONVERGED must satisfy, at the returned coefficients, the certificate documented in
:mod:`jaxrank.solver` ("Stopping and rounding")::

    ||∇F(β)||_∞ ≤ max(tol, floor) + floor,   floor = eps·(√b + √(m_pad/b))·max(k_max, 1)

(for ℓ1: the minimum-norm subgradient ``dist(0, ∂F(β))`` in place of ``∇F``), with ``∇F``
recomputed independently in numpy float64 by the explicit pair loops of ``tests/oracles.py``
(or, for the p-norm push, the pair loop below) from the model alone: its basis rows, kernel
and coefficients. ``m_pad ≤ 2m`` bounds any row padding (shape buckets), so the floor is taken
at ``2m`` (the depth grows with m). Fits run in float32 — where the floor is what CONVERGED
rests on — over λ from 1e-12 to 1e6, and no CONVERGED model may be degenerate (β = 0 or every
score tied) on these informative data.

Greedy (:func:`jaxrank.fit_greedy`) ends with the same solver over its chosen basis, so the same
certificate holds with the squared hinge. The stochastic fitter's certificate is its own:
``||∇F(β)||_∞ ≤ grad_tol·||∇F(0)||_∞`` at the returned β (:mod:`jaxrank.stochastic`).
"""

import importlib
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracles import multilevel_objective, pieces, rank_grad_hess

import jaxrank
from jaxrank import datasets, kernels, losses
from jaxrank.l1 import fit_l1
from jaxrank.multilevel import fit_multilevel
from jaxrank.push import fit_push
from jaxrank.solver import Status

fitmod = importlib.import_module("jaxrank.fit")

F32 = np.float32
TOL = 1e-6
LAMS = np.array([1e-12, 1e-6, 1e-3, 1.0, 1e6])
LOSS = losses.smoothed_hinge(0.5)


@pytest.fixture(scope="module")
def data():
    # issue 17 item 2's data (RankSVM at λ = 1e-12 stopped at β = 0 labelled PRECISION)
    X, y = datasets.make_rare_class(60, 0.2, 0.75, seed=0)
    X = (X - X.mean(0)) / X.std(0)
    return X, y


def _floor(m: int, dtype) -> float:
    """The documented gradient floor, at the largest padding a fit may use (2m rows)."""
    m_pad = 2 * m
    b = kernels.product_block(m_pad)
    return float(np.finfo(dtype).eps) * (math.sqrt(b) + math.sqrt(m_pad / b))  # k_max = 1


def _blocks(model, X, rows):
    """``K`` (rows × basis) and the solved ``K_RR`` in float64, from the model alone.

    ``K_RR`` carries the positive-definiteness shift the fit documents (:func:`psd_gram`: the
    smallest δ making the dtype's Gram matrix factorisable), read off the dtype's Gram matrix.
    """
    dt = np.dtype(model.basis.dtype)
    k = kernels.Gaussian(sigma2=float(model.kernel.sigma2))
    B = np.asarray(model.basis, np.float64)
    K = np.asarray(k(jnp.asarray(X[rows], jnp.float64), jnp.asarray(B)))
    Krr = np.asarray(k(jnp.asarray(B), jnp.asarray(B)))
    Kd = k(jnp.asarray(B, dt), jnp.asarray(B, dt))
    shift = float(np.asarray(fitmod.psd_gram(Kd) - Kd, np.float64)[0, 0])
    return K, Krr + shift * np.eye(B.shape[0])


def _check(model, grads, m):
    """Every CONVERGED member satisfies the certificate and is not degenerate."""
    status = np.atleast_1d(np.asarray(model.info.status))
    coef = np.atleast_2d(np.asarray(model.coef, np.float64))
    floor = _floor(m, np.dtype(model.basis.dtype))
    bound = max(TOL, floor) + floor
    converged = 0
    for j, st in enumerate(status):
        if st != Status.CONVERGED:
            continue
        converged += 1
        g = grads(j, coef[j])
        assert np.max(np.abs(g)) <= bound, (j, np.max(np.abs(g)), bound)
        assert np.any(coef[j] != 0), f"member {j}: β = 0 labelled CONVERGED"
    return converged


def _scores_untied(model, X):
    s = np.atleast_2d(np.asarray(model.decision_function(X), np.float64))
    st = np.atleast_1d(np.asarray(model.info.status))
    for j in np.flatnonzero(st == Status.CONVERGED):
        assert np.ptp(s[j]) > 0, f"member {j}: every score tied, labelled CONVERGED"


def _fit_quiet(fn, *args, **kwargs):
    # a non-CONVERGED λ warns (tested in test_fit.py); here only the CONVERGED ones matter
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        return fn(*args, **kwargs)


@pytest.mark.parametrize("basis", ["rare", "all", "random", "index"])
def test_fit_converged_is_true(data, basis):
    X, y = data
    pos = y == 1
    kw = {}
    # random and index bases of m+ rows: the rare basis's shapes, so its compiled solver
    if basis == "random":
        kw = dict(key=jax.random.key(0), n_basis=int(pos.sum()))
    elif basis == "index":
        basis = np.arange(0, X.shape[0], 5)
    model = _fit_quiet(jaxrank.fit, X, y, LAMS, basis=basis, dtype=F32, tol=TOL, **kw)
    K, Krr = _blocks(model, X, np.arange(X.shape[0]))
    grads = lambda j, b: rank_grad_hess(b, K, Krr, pos, LAMS[j], LOSS)[0]
    assert _check(model, grads, X.shape[0]) >= 3
    _scores_untied(model, X)
    if isinstance(basis, str) and basis == "all":
        # issue 17 item 2: RankSVM at λ = 1e-12 in float32 solves (was PRECISION at β = 0)
        assert int(model.info.status[0]) == Status.CONVERGED
        auc = jaxrank.metrics.auc(y, model.decision_function(X)[0])
        assert float(auc) > 0.99


def test_multilevel_converged_is_true(data):
    X, _ = data
    levels = np.digitize(X[:, 0], [0.3, 1.0])  # 0 (majority), 1, 2
    model = _fit_quiet(fit_multilevel, X, levels, LAMS, dtype=F32, tol=TOL)
    K, Krr = _blocks(model, X, np.arange(X.shape[0]))
    v = np.zeros(K.shape[1])
    grads = lambda j, b: multilevel_objective(b, K, Krr, levels, LAMS[j], LOSS, v)[1]
    assert _check(model, grads, X.shape[0]) >= 3
    _scores_untied(model, X)


def _push_grad(b, K, Krr, pos, lam, p):
    """∇F of F(β) = 1/m− Σ_j (1/m+ Σ_i ℓ(f_i − f_j))^p + (λ/2) βᵀK_RRβ by the pair loop."""
    lo, q, c = (float(v) for v in LOSS)
    f = K @ b
    fp, fn = f[pos], f[~pos]
    z = fp[:, None] - fn[None, :]
    lin, quad = pieces(fp, fn, lo)
    ell = np.where(lin, c - z, np.where(quad, q * (1 - z) ** 2, 0.0))
    dl = np.where(lin, -1.0, np.where(quad, -2 * q * (1 - z), 0.0))
    mp, mn = fp.size, fn.size
    S = ell.mean(axis=0)  # (m−,)
    W = dl * (p * S ** (p - 1) / (mn * mp))[None, :]  # ∂F/∂z_ij
    return K[pos].T @ W.sum(1) - K[~pos].T @ W.sum(0) + lam * Krr @ b


def test_push_converged_is_true(data):
    X, y = data
    pos = y == 1
    model = _fit_quiet(fit_push, X, y, LAMS, p=4, dtype=F32, tol=TOL)
    K, Krr = _blocks(model, X, np.arange(X.shape[0]))
    grads = lambda j, b: _push_grad(b, K, Krr, pos, LAMS[j], 4)
    assert _check(model, grads, X.shape[0]) >= 3
    _scores_untied(model, X)


def test_l1_converged_is_true(data):
    """FISTA reports CONVERGED by the same rule; its certificate is dist(0, ∂F) (lam = 0)."""
    X, y = data
    pos = y == 1
    mus = np.array([1e-4, 1e-3, 1e-2])
    model = _fit_quiet(fit_l1, X, y, l1=mus, dtype=F32, tol=TOL, max_iter=3000)
    K, _ = _blocks(model, X, np.arange(X.shape[0]))
    zero = np.zeros((K.shape[1], K.shape[1]))

    def resid(j, b):
        g = rank_grad_hess(b, K, zero, pos, 0.0, LOSS)[0]
        return np.where(b != 0, np.abs(g + mus[j] * np.sign(b)), np.maximum(np.abs(g) - mus[j], 0))

    assert _check(model, resid, X.shape[0]) >= 1
    _scores_untied(model, X)


def test_lambda_range_of_the_dtype(data):
    """Issue 17 item 3: λ a float32 fit cannot solve is refused naming the range (1e39 was inf:
    NONFINITE with all-zero scores; 1e-300 rounds to 0); λ inside it, up to the edges, fits."""
    X, y = data
    pos = y == 1
    for lam in (1e39, 1e-300, [1.0, 1e20]):
        with pytest.raises(ValueError, match=r"outside the range a float32 fit can solve"):
            jaxrank.fit_rankrc(X, y, lam, dtype=F32)
    lo, hi = jaxrank._validation.lam_range(F32)
    edges = np.array([lo * 1.01, 1e-20, 1e10, 1e15, hi * 0.99])  # the shapes of LAMS: no compile
    model = _fit_quiet(jaxrank.fit_rankrc, X, y, edges, dtype=F32, tol=TOL)
    assert np.all(np.isfinite(np.asarray(model.decision_function(X))))
    K, Krr = _blocks(model, X, np.arange(X.shape[0]))
    grads = lambda j, b: rank_grad_hess(b, K, Krr, pos, edges[j], LOSS)[0]
    assert _check(model, grads, X.shape[0]) == edges.size
    _scores_untied(model, X)


def test_greedy_converged_is_true(data):
    """Greedy's final model is fit_rows over its chosen basis with the squared hinge (seed 001
    eq. 4.5): its status carries the same certificate, recomputed here with that loss."""
    X, y = data
    pos = y == 1
    sq = losses.get_loss("squared_hinge")
    model = _fit_quiet(jaxrank.fit_greedy, X, y, LAMS, n_basis=12, kappa=10,
                       key=jax.random.key(0), dtype=F32, tol=TOL)  # fmt: skip
    assert model.loss == "squared_hinge"
    K, Krr = _blocks(model, X, np.arange(X.shape[0]))
    grads = lambda j, b: rank_grad_hess(b, K, Krr, pos, LAMS[j], sq)[0]
    assert _check(model, grads, X.shape[0]) >= 3
    _scores_untied(model, X)


def test_stochastic_converged_is_true(data):
    """fit_rankrc_stochastic's CONVERGED is a plateau whose exact gradient satisfies
    ``||∇F(β)||_∞ ≤ grad_tol·||∇F(0)||_∞``; both gradients recomputed here by the pair loop in
    float64 (its K_{++} is the plain kernel: no shift). A grad_tol SGD cannot reach turns the
    same plateau into PRECISION with a warning (so the check can fail)."""
    from jaxrank.stochastic import fit_rankrc_stochastic

    X, y = data
    pos = y == 1
    K, Krr = None, None
    seen = {Status.CONVERGED: 0, Status.PRECISION: 0}
    for lam, grad_tol in ((1e-3, 1e-2), (1e-2, 1e-2), (1e-3, 1e-6)):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            model = fit_rankrc_stochastic(X, y, lam, batch_size=12, key=jax.random.key(0),
                                          grad_tol=grad_tol, tol=1e-6)  # fmt: skip
        conv = [x for x in w if issubclass(x.category, jaxrank.ConvergenceWarning)]
        if K is None:
            k = kernels.Gaussian(sigma2=float(model.kernel.sigma2))
            K = np.asarray(k(jnp.asarray(X, jnp.float64), jnp.asarray(X[pos], jnp.float64)))
            Krr = K[pos]
        b = np.asarray(model.coef, np.float64)
        g = np.abs(rank_grad_hess(b, K, Krr, pos, lam, LOSS)[0]).max()
        g0 = np.abs(rank_grad_hess(np.zeros_like(b), K, Krr, pos, lam, LOSS)[0]).max()
        assert float(model.info.grad_norm) == pytest.approx(g, rel=1e-8)
        st = Status(int(model.info.status))
        seen[st] = seen.get(st, 0) + 1
        if st == Status.CONVERGED:
            assert g <= grad_tol * g0, (lam, g, g0)
            assert not conv and np.ptp(np.asarray(model.decision_function(X))) > 0
        else:
            assert conv and st.name in str(conv[0].message)
            if st == Status.PRECISION:
                assert g > grad_tol * g0
    assert seen[Status.CONVERGED] >= 1 and seen[Status.PRECISION] >= 1, seen
