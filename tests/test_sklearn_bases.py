"""scikit-learn faces of the Nyström landmarks and of multi-level RankRC (jaxrank.sklearn)."""

import warnings

import jax
import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from test_sklearn import run_check, sklearn_checks

import jaxrank
from jaxrank import datasets, metrics
from jaxrank.bases import resolve_basis
from jaxrank.multilevel import fit_multilevel, make_ordinal
from jaxrank.sklearn import MultiLevelRankRC, NystromRankClassifier


# scikit-learn's whole check suite, no expected failures. Each check fits new shapes and
# compiles new solvers: ~1-2 min per suite on 2 cores.
@pytest.mark.slow
@sklearn_checks([NystromRankClassifier(random_state=0), MultiLevelRankRC()])
def test_sklearn_api(estimator, check):
    run_check(estimator, check)


@pytest.fixture(scope="module")
def data():
    X, y = datasets.make_rare_class(120, 0.25, 0.75, seed=0)  # 30 positives, 90 negatives
    return (X - X.mean(0)) / X.std(0), y


# |R| = 30 = m+ shares RankRC's compiled solver (test_sklearn.py); |R| = 40 compiles another
@pytest.mark.parametrize(
    "landmarks, n_basis",
    [
        ("rare_first", None),
        ("random", 30),
        pytest.param("rare_first", 40, marks=pytest.mark.slow),
        pytest.param("kmeans++", 40, marks=pytest.mark.slow),
    ],
)
def test_nystrom_equals_fit_on_landmarks(data, landmarks, n_basis):
    X, y = data
    est = NystromRankClassifier(
        2.0**-6, landmarks=landmarks, n_basis=n_basis, random_state=3, dtype="float64"
    ).fit(X, y)
    idx = resolve_basis(landmarks, y == 1, key=jax.random.key(3), n_basis=n_basis, X=X)
    np.testing.assert_array_equal(est.landmarks_, idx)
    model = jaxrank.fit(X, y, 2.0**-6, basis=idx, dtype=np.float64)
    want = np.asarray(model.decision_function(X)) - est.threshold_  # shifted by the threshold
    np.testing.assert_allclose(est.decision_function(X), want, atol=1e-10)
    if landmarks != "random":
        rare = min(30, idx.size)
        assert np.all(y[idx[:rare]] == 1) and np.all(y[idx[rare:]] == -1)
    np.testing.assert_array_equal(est.classes_, [-1, 1])
    assert np.sum(est.predict(X) == 1) == 30  # the training-prevalence threshold
    dec = est.decision_function(X)
    np.testing.assert_array_equal(est.predict(X), est.classes_[(dec > 0).astype(int)])


def test_nystrom_random_state(data):
    X, y = data
    make = lambda s: NystromRankClassifier(n_basis=40, random_state=s, dtype="float64").fit(X, y)
    a, b, c = make(1), make(1), make(2)
    np.testing.assert_array_equal(a.landmarks_, b.landmarks_)
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert not np.array_equal(a.landmarks_, c.landmarks_)
    rs = np.random.RandomState(0)
    est = NystromRankClassifier(n_basis=40, random_state=rs, dtype="float64").fit(X, y)
    assert est.landmarks_.shape == (40,)


def test_nystrom_pipeline_and_grid_search(data):
    X, y = data
    pipe = Pipeline(
        [
            ("scale", StandardScaler()),
            ("rank", NystromRankClassifier(random_state=0, dtype="float64")),
        ]
    )
    grid = {"rank__lam": [2.0**-10, 2.0**-2], "rank__landmarks": ["rare_first", "kmeans++"]}
    cv = StratifiedKFold(3, shuffle=True, random_state=0)  # every training fold: 20 + 60 rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        search = GridSearchCV(pipe, grid, scoring="roc_auc", cv=cv).fit(X * 3.0 + 1.0, y)
    scores = search.cv_results_["mean_test_score"]
    assert search.best_score_ == pytest.approx(scores.max()) and search.best_score_ > 0.6
    dec = search.decision_function(X * 3.0 + 1.0)
    assert roc_auc_score(y, dec) == pytest.approx(float(metrics.auc(y, dec)), abs=1e-12)
    best = search.best_estimator_.named_steps["rank"]
    assert best.landmarks == search.best_params_["rank__landmarks"]


@pytest.fixture(scope="module")
def ordinal():
    # 153 / 18 / 9 rows: every level divisible by 3, so the 3 stratified folds of the grid
    # search have equal level counts (one compiled solver for all of them)
    X, lv = make_ordinal(180, levels=3, key=jax.random.key(0))
    return X, lv


def test_multilevel_equals_fit_multilevel(ordinal):
    X, lv = ordinal
    est = MultiLevelRankRC(2.0**-6, dtype="float64").fit(X, lv)
    model = fit_multilevel(X, lv, 2.0**-6, dtype=np.float64)
    scores = est.ranking_score(X)
    assert scores.shape == (180,) and scores.dtype == np.float64
    np.testing.assert_allclose(scores, model.decision_function(X), rtol=0, atol=1e-10)
    np.testing.assert_array_equal(est.classes_, [0, 1, 2])
    np.testing.assert_array_equal(est.model_.basis_index, np.flatnonzero(lv != 0))
    assert est.score(X, lv) == pytest.approx(float(metrics.mauc(lv, scores)), abs=1e-12)
    assert est.n_features_in_ == 5 and est.n_iter_ == int(model.info.iterations)


def test_multilevel_predict_thresholds(ordinal):
    X, lv = ordinal
    est = MultiLevelRankRC(2.0**-6, dtype="float64").fit(X, lv)
    scores = est.ranking_score(X)
    s = np.sort(scores)
    counts = np.bincount(lv)
    below = np.cumsum(counts)[:-1]
    # oracle: the midpoints between the N_k-th and (N_k + 1)-th smallest training scores
    np.testing.assert_allclose(est.thresholds_, (s[below - 1] + s[below]) / 2, rtol=1e-15)
    assert np.all(s[below - 1] < est.thresholds_) and np.all(est.thresholds_ < s[below])
    pred = est.predict(X)
    # each level predicted as often as it occurs on the training rows (scores have no ties)
    assert np.unique(scores).size == 180
    np.testing.assert_array_equal(np.bincount(pred, minlength=3), counts)
    # and predictions are monotone in the score: the explicit count of thresholds below
    want = np.array([np.sum(v > est.thresholds_) for v in scores])
    np.testing.assert_array_equal(pred, want)


# float32 compiles its own multi-level solver (~10 s of CPU): in the slow set
@pytest.mark.parametrize("dtype", [pytest.param("float32", marks=pytest.mark.slow), "float64"])
def test_multilevel_decision_function_margins(ordinal, dtype):
    # scikit-learn's multiclass contract: decision_function is (n, R) and its argmax is predict;
    # here the cumulative margins D_k = Σ_{j≤k} (f − t_j), D_0 = 0
    X, lv = ordinal
    est = MultiLevelRankRC(2.0**-6, dtype=dtype).fit(X, lv)
    f = est.ranking_score(X)
    t = est.thresholds_
    D = est.decision_function(X)
    assert D.shape == (180, 3) and D.dtype == np.float64
    want = np.stack([np.zeros(180), f - t[0], (f - t[0]) + (f - t[1])], axis=1)
    np.testing.assert_allclose(D, want, rtol=0, atol=1e-12)
    pred = est.predict(X)
    np.testing.assert_array_equal(pred, est.classes_[np.argmax(D, axis=1)])
    # the argmax is the number of thresholds below the score
    np.testing.assert_array_equal(pred, np.sum(f[:, None] > t[None, :], axis=1))
    np.testing.assert_array_equal(np.bincount(pred, minlength=3), np.bincount(lv))
    # a row's margins do not depend on the batch it is scored in (float32 too)
    alone = np.concatenate([est.decision_function(X[i : i + 1]) for i in (0, 17, 179)])
    np.testing.assert_array_equal(alone, D[[0, 17, 179]])


def test_multilevel_two_levels_binary_convention(data):
    # two levels: decision_function is scikit-learn's binary (n,) score of classes_[1], > 0 iff
    # predict is classes_[1]; with string labels (levels ordered as they sort)
    X, y = data
    yl = np.where(y == 1, "b", "a")  # "b" (the 30 rare rows) is the higher level
    est = MultiLevelRankRC(2.0**-6, dtype="float64").fit(X, yl)
    ref = jaxrank.fit(X, y, 2.0**-6, dtype=np.float64)  # two levels: biclass RankRC
    dec = est.decision_function(X)
    assert dec.shape == (120,) and est.thresholds_.shape == (1,)
    np.testing.assert_allclose(
        dec, np.asarray(ref.decision_function(X)) - est.thresholds_[0], rtol=0, atol=1e-10
    )
    pred = est.predict(X)
    np.testing.assert_array_equal(pred, est.classes_[(dec > 0).astype(int)])
    assert np.sum(pred == "b") == 30
    assert est.score(X, yl) == pytest.approx(float(metrics.auc(y, dec)), abs=1e-12)
    assert roc_auc_score(yl, dec) == pytest.approx(est.score(X, yl), abs=1e-12)
    with pytest.raises(ValueError, match="among the fitted levels"):
        est.score(X, np.where(y == 1, "b", "c"))


def test_multilevel_string_levels_and_majority(ordinal):
    X, lv = ordinal
    names = np.array(["l0", "l1", "l2"])[lv]  # sorts in level order
    ref = MultiLevelRankRC(2.0**-6, dtype="float64").fit(X, lv)
    est = MultiLevelRankRC(2.0**-6, dtype="float64").fit(X, names)
    assert est.classes_.tolist() == ["l0", "l1", "l2"]
    np.testing.assert_array_equal(est.ranking_score(X), ref.ranking_score(X))
    np.testing.assert_array_equal(est.predict(X), np.array(["l0", "l1", "l2"])[ref.predict(X)])
    assert est.score(X, names) == ref.score(X, lv)


@pytest.mark.slow  # another basis, another compiled solver (~10 s of CPU)
def test_multilevel_majority_label(ordinal):
    # majority given as a label: leaves that level out of the basis
    X, lv = ordinal
    names = np.array(["l0", "l1", "l2"])[lv]
    top = MultiLevelRankRC(2.0**-6, majority="l1", dtype="float64").fit(X, names)
    model = fit_multilevel(X, lv, 2.0**-6, majority=1, dtype=np.float64)
    np.testing.assert_array_equal(top.model_.basis_index, np.flatnonzero(lv != 1))
    np.testing.assert_allclose(top.ranking_score(X), model.decision_function(X), atol=1e-10)


def test_multilevel_other_level_values(ordinal):
    X, lv = ordinal
    ref = MultiLevelRankRC(2.0**-6, dtype="float64").fit(X, lv)
    shifted = MultiLevelRankRC(2.0**-6, dtype="float64").fit(X, 10 * lv - 5)  # only order matters
    np.testing.assert_array_equal(shifted.ranking_score(X), ref.ranking_score(X))
    np.testing.assert_array_equal(shifted.decision_function(X), ref.decision_function(X))
    np.testing.assert_array_equal(shifted.predict(X), 10 * ref.predict(X) - 5)


@pytest.mark.slow  # compiles the multi-level solver for the folds' layout (~10 s of CPU)
def test_multilevel_pipeline_and_grid_search(ordinal):
    X, lv = ordinal
    pipe = Pipeline([("scale", StandardScaler()), ("rank", MultiLevelRankRC(dtype="float64"))])
    grid = {"rank__lam": [2.0**-8, 2.0**0]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        # a classifier: GridSearchCV's integer cv splits stratified by level, and the default
        # scoring is the estimator's score (MAUC)
        search = GridSearchCV(pipe, grid, cv=3).fit(X, lv)
    assert search.best_score_ > 0.6
    est = clone(search.best_estimator_).fit(X, lv)
    assert search.best_estimator_.score(X, lv) == pytest.approx(est.score(X, lv), abs=1e-12)


@pytest.mark.parametrize(
    "est, target, match",
    [
        (NystromRankClassifier(landmarks="greedy", random_state=0), "binary", "landmarks must be"),
        (NystromRankClassifier(n_basis=500, random_state=0), "binary", "n_basis must be in"),
        (NystromRankClassifier(random_state=0), "multiclass", "Only binary classification"),
        (MultiLevelRankRC(majority="c"), "names", r"majority='c' is not one of the levels"),
        (MultiLevelRankRC(), "continuous", "Unknown label type"),
        (MultiLevelRankRC(), "one", "one class"),
        (MultiLevelRankRC(lam=[1.0, 2.0]), "levels", "lam must be one value"),
        (MultiLevelRankRC(majority=7), "levels", "majority=7 is not one of the levels"),
        (MultiLevelRankRC(majority=[0]), "levels", r"majority=\[0\] is not one of the levels"),
        (MultiLevelRankRC(kernel="linear", sigma2=1.0), "levels", "sigma2 is the Gaussian"),
    ],
)
def test_clear_errors(data, est, target, match):
    X, y = data
    y = {
        "binary": y,
        "multiclass": np.arange(120) % 3,
        "levels": np.arange(120) % 3,
        "names": np.where(y == 1, "a", "b"),
        "continuous": np.linspace(0, 1, 120),
        "one": np.zeros(120, int),
    }[target]
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)


def test_multilevel_score_refuses_weights(ordinal):
    X, lv = ordinal
    est = MultiLevelRankRC(dtype="float64").fit(X, lv)
    with pytest.raises(ValueError, match="sample_weight"):
        est.score(X, lv, sample_weight=np.ones(180))
    with pytest.raises(ValueError, match="features"):
        est.decision_function(X[:, :3])
