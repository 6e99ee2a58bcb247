"""λ (and σ²) selection by stratified k-fold cross-validated AUC (jaxrank.select)."""

import warnings

import jax
import numpy as np
import pytest

import jaxrank
from jaxrank import datasets, metrics
from jaxrank.select import SelectionResult, select_lambda, stratified_folds

LAMS = 2.0 ** np.array([-2.0, -10.0, -6.0])  # deliberately not sorted
F64 = dict(dtype=np.float64, max_iter=30)


@pytest.fixture(scope="module")
def data():
    X, y = datasets.make_rare_class(120, 0.25, 0.75, seed=0)  # 30 positives, 90 negatives
    return (X - X.mean(0)) / X.std(0), y


@pytest.fixture(scope="module")
def result(data):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        return select_lambda(X, y, LAMS, folds=3, key=jax.random.key(0), **F64)


def test_table_shapes_and_best(result):
    assert isinstance(result, SelectionResult)
    assert result.cv_auc.shape == (3, 3) and result.cv_auc.dtype == np.float64
    assert result.mean_auc.shape == result.se_auc.shape == (3,)
    np.testing.assert_allclose(result.mean_auc, result.cv_auc.mean(0), rtol=0, atol=1e-15)
    np.testing.assert_allclose(
        result.se_auc, result.cv_auc.std(0, ddof=1) / np.sqrt(3), rtol=0, atol=1e-15
    )
    assert result.best_index == int(np.argmax(result.mean_auc))
    assert result.best_lam == LAMS[result.best_index]
    assert result.sigma2s is None and result.best_sigma2 is None
    assert np.all((result.cv_auc > 0.5) & (result.cv_auc <= 1))
    assert result.model.lam.shape == () and float(result.model.lam) == result.best_lam


def test_equals_manual_loop_of_fits(data, result):
    X, y = data
    fold = result.fold
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        for f in range(3):
            tr = fold != f
            model = jaxrank.fit(X[tr], y[tr], LAMS, **F64)
            auc = np.asarray(metrics.auc(y[~tr], model.decision_function(X[~tr])))
            np.testing.assert_allclose(result.cv_auc[f], auc, rtol=0, atol=1e-10)
        refit = jaxrank.fit(X, y, result.best_lam, **F64)
    np.testing.assert_allclose(result.model.coef, refit.coef, rtol=0, atol=1e-10)


def test_folds_deterministic_and_stratified(data, result):
    _, y = data
    k0, _ = jax.random.split(jax.random.key(0))
    np.testing.assert_array_equal(result.fold, stratified_folds(y, 3, key=k0))
    for folds in (3, 7, 30):
        fold = stratified_folds(y, folds, key=jax.random.key(5))
        np.testing.assert_array_equal(fold, stratified_folds(y, folds, key=jax.random.key(5)))
        n_pos = np.bincount(fold[y == 1], minlength=folds)
        sizes = np.bincount(fold, minlength=folds)
        assert n_pos.min() >= 1 and n_pos.max() - n_pos.min() <= 1
        assert sizes.max() - sizes.min() <= 1
    other = stratified_folds(y, 3, key=jax.random.key(6))
    assert not np.array_equal(other, stratified_folds(y, 3, key=jax.random.key(5)))


def test_ties_go_to_the_larger_lambda():
    # One feature and a linear kernel: f = c·x for every λ, so every λ ranks alike (equal AUC).
    X, y = datasets.make_rare_class(80, 0.25, 0.75, d=1, seed=1)  # folds: 10 + 30
    lams = np.array([1e-2, 1e1, 1e-4])
    res = select_lambda(X, y, lams, folds=2, key=jax.random.key(1), kernel="linear",
                        refit=False, dtype=np.float64)  # fmt: skip
    assert np.all(res.mean_auc == res.mean_auc[0])
    assert res.best_lam == 1e1 and res.best_index == 1 and res.model is None


def test_sigma2_grid(data, result):
    X, y = data
    s2 = [0.5, 8.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        res = select_lambda(X, y, LAMS, folds=3, key=jax.random.key(0), sigma2_grid=s2,
                            refit=False, **F64)  # fmt: skip
        tr = res.fold != 1
        kern = jaxrank.kernels.gaussian(8.0)
        model = jaxrank.fit(X[tr], y[tr], LAMS, kernel=kern, **F64)
    assert res.cv_auc.shape == (2, 3, 3) and res.mean_auc.shape == (2, 3)
    np.testing.assert_array_equal(res.fold, result.fold)
    auc = np.asarray(metrics.auc(y[~tr], model.decision_function(X[~tr])))
    np.testing.assert_allclose(res.cv_auc[1, 1], auc, rtol=0, atol=1e-10)
    s, j = res.best_index
    assert res.mean_auc[s, j] == res.mean_auc.max()
    assert (res.best_sigma2, res.best_lam) == (s2[s], LAMS[j])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(folds=1), "folds must be an integer >= 2"),
        (dict(folds=2.5), "folds must be an integer >= 2"),
        (dict(folds=31), "more than the 30 rows of the positive"),
        (dict(key=None), "key is required"),
        (dict(basis=np.arange(10)), "named basis"),
        (dict(sigma2_grid=[1.0, -1.0]), "sigma2_grid"),
        (dict(sigma2_grid=[1.0], kernel="linear"), "do not pass kernel"),
        (dict(lams=[1e-2, 0.0]), "lam must be finite and > 0"),
        (dict(y=np.zeros(120)), "one class only"),
    ],
)
def test_bad_inputs(data, kwargs, match):
    X, y = data
    args = dict(X=X, y=y, lams=LAMS, folds=3, key=jax.random.key(0)) | kwargs
    with pytest.raises(ValueError, match=match):
        select_lambda(**args)


def test_key_is_keyword_and_required(data):
    X, y = data
    with pytest.raises(TypeError, match="key"):
        select_lambda(X, y, LAMS)


def test_majority_positive_class_warned_once(data):
    """basis='rare' with +1 the majority: one warning for the search, none per fold; a rare +1
    class gives none."""
    X, y = data
    grid = [1e-2, 1e-1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        select_lambda(X, -y, grid, folds=3, key=jax.random.key(0))
    majority = [w for w in caught if "they are the majority here" in str(w.message)]
    assert len(majority) == 1, [str(w.message) for w in caught]
    assert majority[0].filename == __file__  # points at the caller, not inside jaxrank
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*they are the majority here")
        select_lambda(X, y, grid, folds=3, key=jax.random.key(0), refit=False)
