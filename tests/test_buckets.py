"""Shape buckets (issue 16): padded fits equal the unpadded ones, and a new size inside a bucket
compiles nothing.

The unpadded reference is the same code with the ladder switched off
(``jaxrank._buckets.disabled()``: every size exact, as before buckets) and, independently, the
explicit pair loop of ``tests/oracles.py`` (objective and gradient at the returned solution).
"""

import warnings

import jax
import numpy as np
import pytest
from _compiles import count_compiles
from oracles import rank_grad_hess, rank_objective

import jaxrank
from jaxrank import _buckets, datasets, kernels, losses
from jaxrank._fitting import solve as _solve
from jaxrank.select import select_lambda

F64 = dict(dtype=np.float64)
LAMS = 2.0 ** np.array([-4.0, 0.0, -8.0])  # 3 values: padded to a bucket of 4


def _data(m, seed):
    X, y = datasets.make_rare_class(m, 0.1, 0.75, seed=seed)
    return (X - X.mean(0)) / X.std(0), y


@pytest.fixture(scope="module")
def data():
    return _data(150, 0)  # 15 positives (bucket 16), 135 negatives (bucket 160)


def test_ladder():
    n = np.arange(1, 300_000)
    b = np.array([_buckets.bucket(int(v)) for v in n[::37]])
    v = n[::37]
    assert np.all(b >= v) and np.all(np.diff(b) >= 0)
    assert np.all(b % 8 == 0)
    small = (v > 8) & (v <= 8192)
    assert np.all(b[small] < 1.25 * v[small] + 8)  # four rungs per octave
    assert np.all(b[v > 8192] - v[v > 8192] < 1024)  # then steps of 1024
    assert all(_buckets.bucket(_buckets.bucket(int(k))) == _buckets.bucket(int(k)) for k in v)
    # rungs: few distinct programs over a decade of sizes
    assert len({_buckets.bucket(k) for k in range(1000, 10_001)}) == 15
    assert [_buckets.bucket_lams(k) for k in (1, 2, 3, 16, 17)] == [1, 2, 4, 16, 32]
    assert _buckets.bucket_lams(5, 4) == 8 and _buckets.bucket_lams(3, 3) == 6
    with _buckets.disabled():
        assert _buckets.bucket(1001) == 1001 and _buckets.bucket_lams(3) == 3
    with pytest.raises(ValueError, match=">= 1"):
        _buckets.bucket(0)


def _fit_both(X, y, lams, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        padded = jaxrank.fit(X, y, lams, **F64, **kw)
        with _buckets.disabled():
            exact = jaxrank.fit(X, y, lams, **F64, **kw)
    return padded, exact


def _check_against_oracle(model, X, y, lams):
    """The padded fit's solution is a solution of the unpadded problem: objective equals the pair
    loop's at the returned β, and the pair loop's gradient there is at the tolerance."""
    pos = np.asarray(y) == 1
    B = np.asarray(model.basis)
    K = np.asarray(model.kernel(X, B))
    Krr = np.asarray(model.kernel(B, B))
    loss = losses.smoothed_hinge(0.5)
    for i, lam in enumerate(lams):
        beta = np.asarray(model.coef[i], np.float64)
        F = rank_objective(beta, K, Krr, pos, lam, loss)
        assert float(model.info.objective[i]) == pytest.approx(F, rel=1e-11, abs=1e-14)
        grad, _ = rank_grad_hess(beta, K, Krr, pos, lam, loss)
        # K_RR of the fit carries psd_gram's δ ≈ 1e-13: not seen at this tolerance
        assert np.max(np.abs(grad)) <= 2e-6


@pytest.mark.parametrize("basis", ["rare", "all", "random", "index"])
def test_padded_fit_equals_unpadded(data, basis):
    X, y = data
    kw = {"index": dict(basis=np.flatnonzero(y == 1)[::-1].copy()),
          "random": dict(basis="random", key=jax.random.key(1)),
          "rare": dict(basis="rare"), "all": dict(basis="all")}[basis]  # fmt: skip
    padded, exact = _fit_both(X, y, LAMS, **kw)
    assert padded.coef.shape == exact.coef.shape == (3, exact.basis.shape[0])
    np.testing.assert_array_equal(padded.basis_index, exact.basis_index)
    np.testing.assert_array_equal(padded.info.iterations, exact.info.iterations)
    np.testing.assert_allclose(padded.info.objective, exact.info.objective, rtol=1e-12)
    # scores to 1e-9 (β itself is ill-determined along near-null directions of K_RR at small λ)
    np.testing.assert_allclose(padded.decision_function(X), exact.decision_function(X),
                               rtol=0, atol=1e-9)  # fmt: skip
    _check_against_oracle(padded, X, y, LAMS)


@pytest.mark.parametrize("precondition", ["cholesky", "jacobi", "none"])
def test_padded_preconditioners(data, precondition):
    """Each preconditioner keeps the padded basis coordinates out of the solve (block-diagonal
    M with zero coupling): the padded fit solves the unpadded problem."""
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        model = jaxrank.fit(X, y, LAMS, precondition=precondition, max_iter=200, **F64)
    assert np.all(np.asarray(model.info.status) == jaxrank.Status.CONVERGED)
    _check_against_oracle(model, X, y, LAMS)


def test_warm_path_padded_equals_unpadded(data):
    X, y = data
    padded, exact = _fit_both(X, y, LAMS, path="warm", chains=2)
    np.testing.assert_allclose(padded.info.objective, exact.info.objective, rtol=1e-12)
    np.testing.assert_allclose(padded.decision_function(X), exact.decision_function(X),
                               rtol=0, atol=1e-9)  # fmt: skip


def test_new_size_in_bucket_compiles_nothing(data):
    """After one fit, a fit on another data set of a size in the same buckets (classes, basis,
    λ count), with other λ values, tol, eps and max_iter, and its scores, build no program."""
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        jaxrank.fit_rankrc(X, y, LAMS, **F64).decision_function(X[:40])
        X2, y2 = _data(160, 1)  # 16 / 144 rows: the buckets of 15 / 135
        assert _buckets.bucket(16) == _buckets.bucket(15)
        assert _buckets.bucket(144) == _buckets.bucket(135)
        with count_compiles() as n:
            lams = [0.1, 1e-3, 3e-2, 2e-4]  # 4 values: the bucket of 3
            model = jaxrank.fit_rankrc(X2, y2, lams, tol=1e-5, eps=0.3, max_iter=50, max_cg=20,
                                       **F64)  # fmt: skip
            model.decision_function(X2[:37])
    assert n == {"traces": 0, "compiles": 0}
    assert model.coef.shape == (4, 16)


def test_select_lambda_compiles_one_solver(data):
    """Five folds and the refit share one compiled solver (bucket floors at the whole set's
    sizes), and a second data set of the same buckets compiles nothing."""
    X, y = data
    kw = dict(folds=5, key=jax.random.key(0), dtype=np.float64, max_iter=30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        before = _solve._cache_size()
        res = select_lambda(X, y, LAMS, **kw)
        assert _solve._cache_size() - before <= 1
        X2, y2 = _data(145, 3)
        with count_compiles() as n:
            res2 = select_lambda(X2, y2, 2.0 ** np.array([-3.0, -1.0, -7.0]), **kw)
    assert n == {"traces": 0, "compiles": 0}
    assert res.cv_auc.shape == res2.cv_auc.shape == (5, 3)
    assert res2.model.coef.shape == (int((y2 == 1).sum()),)


def test_stream_matvec_buckets_equal_exact():
    rng = np.random.default_rng(0)
    X, B, coef = rng.normal(size=(53, 3)), rng.normal(size=(11, 3)), rng.normal(size=(3, 11))
    k = kernels.gaussian(2.0)
    want = coef @ np.asarray(k(X, B)).T
    got = kernels.stream_matvec(k, X, B, coef)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(kernels.stream_matvec(k, X, B, coef[0]), want[0], rtol=1e-12,
                               atol=1e-14)  # fmt: skip
    # far from the origin: padding rows must not pull the kernel's centring away from the data
    far = kernels.stream_matvec(k, X + 1e8, B + 1e8, coef)
    np.testing.assert_allclose(far, want, rtol=0, atol=1e-6)


def test_push_padded_equals_unpadded_and_reuses_the_solver(data):
    X, y = data
    lams = [1e-2, 1e-1, 1e-3]
    padded, exact = _fit_both(X, y, lams, p=4.0)
    np.testing.assert_array_equal(padded.info.iterations, exact.info.iterations)
    np.testing.assert_allclose(padded.info.objective, exact.info.objective, rtol=1e-12)
    np.testing.assert_allclose(padded.decision_function(X), exact.decision_function(X),
                               rtol=0, atol=1e-9)  # fmt: skip
    X2, y2 = _data(160, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        with count_compiles() as n:
            jaxrank.fit(X2, y2, [0.3, 3e-3], p=4.0, tol=1e-5, **F64).decision_function(X2[:37])
    assert n == {"traces": 0, "compiles": 0}


def test_l1_padded_equals_unpadded_and_reuses_the_solver(data):
    from jaxrank.l1 import _solve as l1_solve
    from jaxrank.l1 import fit_l1

    X, y = data
    mus = [1e-2, 1e-3, 3e-3]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        padded = fit_l1(X, y, l1=mus, **F64)
        with _buckets.disabled():
            exact = fit_l1(X, y, l1=mus, **F64)
        np.testing.assert_array_equal(padded.info.iterations, exact.info.iterations)
        np.testing.assert_array_equal(padded.info.n_nonzero, exact.info.n_nonzero)
        np.testing.assert_allclose(padded.info.objective, exact.info.objective, rtol=1e-12)
        np.testing.assert_allclose(padded.coef, exact.coef, rtol=0, atol=1e-11)
        before = l1_solve._cache_size()
        X2, y2 = _data(160, 1)
        fit_l1(X2, y2, l1=[2e-2, 5e-3, 1e-3, 4e-3], tol=1e-5, max_iter=300, **F64)
    assert l1_solve._cache_size() == before


def test_multilevel_padded_equals_unpadded_and_reuses_the_solver():
    from jaxrank.multilevel import fit_multilevel, make_ordinal

    X, lv = make_ordinal(300, key=jax.random.key(0))  # levels of 255 / 26 / 13 / 6 rows
    lams = [1e-2, 1e-3, 1e-1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        padded = fit_multilevel(X, lv, lams, **F64)
        with _buckets.disabled():
            exact = fit_multilevel(X, lv, lams, **F64)
        np.testing.assert_array_equal(padded.info.iterations, exact.info.iterations)
        np.testing.assert_allclose(padded.info.objective, exact.info.objective, rtol=1e-12)
        np.testing.assert_allclose(padded.decision_function(X), exact.decision_function(X),
                                   rtol=0, atol=1e-9)  # fmt: skip
        padded.decision_function(X[:40])
        X2, lv2 = make_ordinal(290, key=jax.random.key(2))
        sizes = lambda v: [_buckets.bucket(int(c)) for c in np.unique(v, return_counts=True)[1]]
        assert sizes(lv2) == sizes(lv)
        with count_compiles() as n:
            fit_multilevel(X2, lv2, [0.3, 3e-3], tol=1e-5, **F64).decision_function(X2[:37])
    assert n == {"traces": 0, "compiles": 0}
