"""SparseAUCClassifier (jaxrank.sklearn over jaxrank.greedy.fit_greedy): scikit-learn API checks,
agreement with fit_greedy, determinism, errors."""

import jax
import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from test_sklearn import run_check, sklearn_checks

from jaxrank import datasets, metrics
from jaxrank.greedy import fit_greedy
from jaxrank.sklearn import SparseAUCClassifier
from jaxrank.sklearn._base import rank_scores as _scores


# scikit-learn's whole check suite, no expected failures. Every check fits new shapes and each
# compiles the candidate scorer and the solver (~10 s on 2 cores): the whole suite takes
# minutes, so it runs in the slow set.
@pytest.mark.slow
@sklearn_checks([SparseAUCClassifier(kappa=10, random_state=0)])
def test_sklearn_api(estimator, check):
    run_check(estimator, check)


@pytest.fixture(scope="module")
def data():
    X, y = datasets.make_rare_class(120, 0.25, 0.75, seed=0)  # 30 positives, 90 negatives
    return (X - X.mean(0)) / X.std(0), y


def _est(**kw):
    # n_basis=None: ⌈120/10⌉ = 12 basis functions, so every test shares one set of compilations
    return SparseAUCClassifier(lam=2.0**-5, kappa=15, dtype="float64", **kw)


def test_decision_function_equals_fit_greedy(data):
    X, y = data
    est = _est(random_state=3, n_basis=12).fit(X, y)
    model = fit_greedy(X, y, 2.0**-5, n_basis=12, kappa=15, key=jax.random.key(3),
                       dtype=np.float64)  # fmt: skip
    np.testing.assert_array_equal(est.model_.basis_index, model.basis_index)
    scores = est.decision_function(X)
    assert scores.shape == (120,) and scores.dtype == np.float64
    raw = np.asarray(est.model_.decision_function(X))
    np.testing.assert_array_equal(raw, model.decision_function(X))
    block = _scores(est.model_, X)  # the model's score, evaluated as the estimator does
    np.testing.assert_allclose(block, raw, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(scores, block - est.threshold_)  # shifted by the threshold
    assert est.n_features_in_ == 5 and est.n_iter_ == 12  # greedy steps
    np.testing.assert_array_equal(est.classes_, [-1, 1])
    # predict: the training-prevalence threshold, as many predicted rare as rare rows
    low = np.sort(raw)[89:91]
    assert low[0] < est.threshold_ < low[1]
    assert np.sum(est.predict(X) == 1) == 30
    np.testing.assert_array_equal(est.predict(X), est.classes_[(scores > 0).astype(int)])


def test_default_basis_size_and_random_state(data):
    X, y = data
    a, b, c = (_est(random_state=s).fit(X, y) for s in (1, 1, 2))
    assert a.model_.n_basis == 12  # ⌈120 / 10⌉
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert not np.array_equal(a.model_.basis_index, c.model_.basis_index)


def test_labels_rare_class_first(data):
    X, y = data
    yl = np.where(y == 1, 1, 2)  # rare = 1 (the minority) sorts first: scores are negated
    est = _est(random_state=0).fit(X, yl)
    ref = _est(random_state=0).fit(X, y)
    assert est.pos_label_ == 1
    raw = _scores(ref.model_, X)  # the model's score, evaluated as the estimator does
    np.testing.assert_array_equal(est.model_.decision_function(X), ref.model_.decision_function(X))
    np.testing.assert_array_equal(est.decision_function(X), -raw - est.threshold_)
    np.testing.assert_allclose(
        est.decision_function(X), -ref.decision_function(X), rtol=0, atol=1e-12
    )
    auc = roc_auc_score(yl == est.classes_[1], est.decision_function(X))
    assert auc == pytest.approx(float(metrics.auc(y, ref.decision_function(X))), abs=1e-12)
    dec = est.decision_function(X)
    np.testing.assert_array_equal(est.predict(X), est.classes_[(dec > 0).astype(int)])


def test_string_labels_and_pos_label(data):
    # any two labels; pos_label names the rare class (here the minority, as by default)
    X, y = data
    yl = np.where(y == 1, "one", "two")
    ref = _est(random_state=0).fit(X, y)
    for pos_label in (None, "one"):
        est = _est(random_state=0, pos_label=pos_label).fit(X, yl)
        assert est.pos_label_ == "one" and est.classes_.tolist() == ["one", "two"]
        np.testing.assert_array_equal(est.model_.basis_index, ref.model_.basis_index)
        assert roc_auc_score(yl, est.decision_function(X)) == pytest.approx(
            roc_auc_score(y, ref.decision_function(X)), abs=1e-12
        )


@pytest.mark.slow  # the 60-row folds compile their own solvers
def test_grid_search(data):
    X, y = data
    pipe = Pipeline([("scale", StandardScaler()), ("rank", _est(random_state=0))])
    grid = {"rank__lam": [2.0**-8, 2.0**-2]}
    cv = StratifiedKFold(2, shuffle=True, random_state=0)  # two training folds of 60 rows
    search = GridSearchCV(pipe, grid, scoring="roc_auc", cv=cv).fit(X * 3.0 + 1.0, y)
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_["rank__lam"] == grid["rank__lam"][int(np.argmax(scores))]
    assert search.best_score_ > 0.6


@pytest.mark.parametrize(
    "params, y_kind, match",
    [
        ({}, "multiclass", "Only binary classification"),
        (dict(pos_label="c"), "names", r"pos_label='c' is not one of the labels"),
        (dict(lam=[1e-2, 1e-3]), "ok", "lam must be one value"),
        (dict(n_basis=500), "ok", "n_basis must be in"),
        (dict(kappa=0), "ok", "kappa must be >= 1"),
        (dict(schedule="never"), "ok", "unknown schedule"),
        (dict(kernel="linear", sigma2=1.0), "ok", "sigma2 is the Gaussian"),
        (dict(loss="hinge"), "ok", "not twice differentiable"),
    ],
)
def test_clear_errors(data, params, y_kind, match):
    X, y = data
    y = {
        "ok": y,
        "multiclass": np.arange(120) % 3,
        "names": np.where(y == 1, "a", "b"),
    }[y_kind]
    with pytest.raises(ValueError, match=match):
        _est(random_state=0).set_params(**params).fit(X, y)
