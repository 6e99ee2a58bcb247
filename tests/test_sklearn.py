"""scikit-learn estimators (jaxrank.sklearn): API checks, Pipeline + GridSearchCV, agreement."""

import importlib
import sys
import warnings

import jax
import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.exceptions import NotFittedError
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import jaxrank
from jaxrank import datasets, metrics
from jaxrank.sklearn import RandomBasisRankClassifier, RankRCClassifier, RankSVMClassifier
from jaxrank.sklearn._base import block_rows as _block_rows
from jaxrank.sklearn._base import midpoint as _midpoint
from jaxrank.sklearn._base import rank_scores as _scores


def sklearn_checks(estimators):
    """``parametrize_with_checks(estimators)`` (no expected failures), its cases as a list:
    scikit-learn 1.6 hands pytest a generator, which pytest 9 deprecates."""
    mark = parametrize_with_checks(estimators)
    argnames, argvalues = mark.args
    return pytest.mark.parametrize(argnames, list(argvalues), **mark.kwargs)


def run_check(estimator, check):
    with warnings.catch_warnings():
        # several checks fit random labels or far-from-centred data at the default λ
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        check(estimator)


# scikit-learn's whole check suite with no expected failures (any two labels, predict ==
# decision_function > 0, batch-independent float32 scores). Each check fits new data shapes and
# each new shape compiles the solver (~2-5 s on 2 cores): RankRC's suite takes ~70 s of CPU;
# RANK-RND's (basis size m+, as RankRC) then reuses its compilations (~2 s).
@sklearn_checks([RankRCClassifier(), RandomBasisRankClassifier(random_state=0)])
def test_sklearn_api(estimator, check):
    run_check(estimator, check)


# RankSVM (basis = all rows) compiles its own solvers (~1.5 min of CPU): in the slow set, as are
# the other estimators' suites (test_sklearn_bases.py, test_sklearn_greedy.py).
@pytest.mark.slow
@sklearn_checks([RankSVMClassifier()])
def test_sklearn_api_ranksvm(estimator, check):
    run_check(estimator, check)


@pytest.fixture(scope="module")
def data():
    X, y = datasets.make_rare_class(120, 0.25, 0.75, seed=0)  # 30 positives, 90 negatives
    return (X - X.mean(0)) / X.std(0), y


ESTIMATORS = [
    (RankRCClassifier, {}, dict(basis="rare")),
    (RankSVMClassifier, {}, dict(basis="all")),
    (
        RandomBasisRankClassifier,
        dict(random_state=3, n_basis=30),  # |R| = m+: shares the compiled solver with RankRC
        dict(basis="random", key=jax.random.key(3), n_basis=30),
    ),
]


@pytest.mark.parametrize("cls, params, fit_kwargs", ESTIMATORS)
def test_decision_function_equals_fit(data, cls, params, fit_kwargs):
    X, y = data
    est = cls(lam=2.0**-6, dtype="float64", **params).fit(X, y)
    model = jaxrank.fit(X, y, 2.0**-6, dtype=np.float64, **fit_kwargs)
    np.testing.assert_array_equal(est.model_.basis_index, model.basis_index)
    scores = est.decision_function(X)
    assert scores.shape == (120,) and scores.dtype == np.float64
    # the rare class +1 is classes_[1]: the model's score, shifted by the threshold
    want = np.asarray(model.decision_function(X)) - est.threshold_
    np.testing.assert_allclose(scores, want, rtol=0, atol=1e-10)
    assert est.n_features_in_ == 5 and est.n_iter_ == int(model.info.iterations)
    np.testing.assert_array_equal(est.classes_, [-1, 1])
    assert est.pos_label_ == 1


def test_pipeline_and_grid_search(data):
    X, y = data
    pipe = Pipeline([("scale", StandardScaler()), ("rank", RankRCClassifier(dtype="float64"))])
    grid = {"rank__lam": [2.0**-14, 2.0**-6, 2.0**2]}
    cv = StratifiedKFold(3, shuffle=True, random_state=0)  # every training fold: 20 + 60 rows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        search = GridSearchCV(pipe, grid, scoring="roc_auc", cv=cv).fit(X * 3.0 + 1.0, y)
    scores = search.cv_results_["mean_test_score"]
    assert search.best_params_["rank__lam"] == grid["rank__lam"][int(np.argmax(scores))]
    assert search.best_score_ > 0.6
    dec = search.decision_function(X * 3.0 + 1.0)
    assert roc_auc_score(y, dec) == pytest.approx(float(metrics.auc(y, dec)), abs=1e-12)


def test_predict_threshold(data):
    X, y = data
    est = RankRCClassifier(dtype="float64").fit(X, y)
    scores = np.asarray(est.model_.decision_function(X))  # the rare (+1 = classes_[1]) score
    # threshold_ sits between the n−-th and (n− + 1)-th smallest training score
    low = np.sort(scores)[89:91]
    assert low[0] < est.threshold_ < low[1]
    assert est.threshold_ == pytest.approx(low.mean(), rel=1e-12, abs=1e-12)
    pred = est.predict(X)
    assert np.sum(pred == 1) == 30 and set(pred) == {-1, 1}
    np.testing.assert_array_equal(pred, np.where(scores > est.threshold_, 1, -1))
    # scikit-learn's contract: predict is decision_function > 0, exactly
    dec = est.decision_function(X)
    np.testing.assert_array_equal(pred, est.classes_[(dec > 0).astype(int)])
    assert np.sum(dec > 0) == 30
    assert est.score(X, y) == np.mean(pred == y)  # ClassifierMixin's accuracy


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_shift_keeps_ranking_and_auc(data, dtype):
    # decision_function is the model's score minus a constant: the same order, the same AUC
    X, y = data
    est = RankRCClassifier(dtype=dtype).fit(X, y)
    raw = _scores(est.model_, X)  # the model's score, evaluated as the estimator does
    np.testing.assert_allclose(raw, est.model_.decision_function(X), rtol=0, atol=1e-5)
    dec = est.decision_function(X)
    assert dec.dtype == np.float64 and est.threshold_ != 0.0
    np.testing.assert_array_equal(dec, raw - est.threshold_)
    np.testing.assert_array_equal(np.argsort(dec, kind="stable"), np.argsort(raw, kind="stable"))
    assert roc_auc_score(y, dec) == roc_auc_score(y, raw)
    assert float(metrics.auc(y, dec)) == pytest.approx(float(metrics.auc(y, raw)), abs=1e-12)
    # on the training rows: as many predicted rare as there are rare rows (no ties here)
    assert np.unique(raw).size == 120 and np.sum(est.predict(X) == 1) == 30


def test_block_rows():
    # a power of two in [64, 4096], about 2^20 kernel entries per block, from the model alone
    class M:
        def __init__(self, n_basis):
            self.n_basis = n_basis

    got = [_block_rows(M(p)) for p in (1, 30, 256, 257, 1000, 2**14, 10**5, 10**7)]
    assert got == [4096, 4096, 4096, 2048, 1024, 64, 64, 64]


def test_threshold_between_adjacent_floats():
    # two neighbouring float32 scores: the float64 midpoint separates them exactly
    lo = np.float32(1.0)
    hi = np.nextafter(lo, np.float32(2.0))
    s = np.array([0.0, lo, hi, 3.0], np.float64)
    t = _midpoint(s, 2)
    assert lo < t < hi and np.sum(s - t > 0) == 2
    # float64 neighbours: the midpoint rounds onto one of them; it must not be the upper one
    lo, hi = 1.0, np.nextafter(1.0, 2.0)
    t = _midpoint(np.array([0.0, lo, hi, 3.0]), 2)
    assert t == lo and np.sum(np.array([0.0, lo, hi, 3.0]) - t > 0) == 2


LABELS = [(1, 2), (True, False), (1, 0), ("pos", "neg"), ("two", "one"), ("one", "two")]
LABEL_IDS = ["1-2", "bool", "1-0", "pos-neg", "two-one", "one-two"]


@pytest.mark.parametrize("labels", LABELS, ids=LABEL_IDS)
def test_other_labels(data, labels):
    # any two labels; the rare class defaults to the minority one (30 of 120 rows here)
    X, y = data
    rare, other = labels
    yl = np.where(y == 1, rare, other)
    est = RankRCClassifier(dtype="float64").fit(X, yl)
    ref = RankRCClassifier(dtype="float64").fit(X, y)
    assert est.pos_label_ == rare
    np.testing.assert_array_equal(est.classes_, np.unique(yl))
    # the same ranker: jaxrank's positive class is the rare one whatever its label
    np.testing.assert_array_equal(est.model_.decision_function(X), ref.model_.decision_function(X))
    # decision_function ranks classes_[1] first, whichever class is the rare one
    sign = 1.0 if est.classes_[1] == rare else -1.0
    raw = _scores(ref.model_, X)  # the model's score, evaluated as the estimator does
    np.testing.assert_array_equal(est.decision_function(X), sign * raw - est.threshold_)
    np.testing.assert_allclose(
        est.decision_function(X), sign * ref.decision_function(X), rtol=0, atol=1e-12
    )
    np.testing.assert_array_equal(est.predict(X), np.where(ref.predict(X) == 1, rare, other))
    dec = est.decision_function(X)
    np.testing.assert_array_equal(est.predict(X), est.classes_[(dec > 0).astype(int)])
    auc = roc_auc_score(yl == est.classes_[1], dec)
    assert auc == pytest.approx(float(metrics.auc(y, ref.decision_function(X))), abs=1e-12)
    assert roc_auc_score(yl, dec) == pytest.approx(auc, abs=1e-15)  # scikit-learn's own reading


def test_pos_label_default_is_minority(data):
    X, y = data
    # the majority class sorts last and is labelled 1: the rare class is still the minority
    yl = np.where(y == 1, 0, 1)  # 30 zeros (rare), 90 ones
    est = RankRCClassifier(dtype="float64").fit(X, yl)
    ref = RankRCClassifier(dtype="float64").fit(X, y)
    assert est.pos_label_ == 0 and est.classes_.tolist() == [0, 1]
    np.testing.assert_array_equal(est.model_.decision_function(X), ref.model_.decision_function(X))
    np.testing.assert_array_equal(est.model_.basis_index, np.flatnonzero(y == 1))
    # classes_[1] = 1 is the majority: decision_function is the negated rare score
    auc = roc_auc_score(yl, est.decision_function(X))
    assert auc == pytest.approx(float(metrics.auc(y, ref.decision_function(X))), abs=1e-12)
    assert np.sum(est.predict(X) == 0) == 30


@pytest.mark.parametrize("labels", [(-1, 1), (0, 1), ("a", "b")], ids=["pm1", "01", "str"])
def test_pos_label_tie_is_classes_1(labels):
    # an exact 50/50 split: the rare class is classes_[1], the larger label in sorted order
    X, y = datasets.make_rare_class(60, 0.5, 0.75, seed=1)
    assert np.sum(y == 1) == 30
    yl = np.where(y == 1, labels[0], labels[1])
    est = RankRCClassifier(dtype="float64").fit(X, yl)
    assert est.pos_label_ == labels[1] == est.classes_[1]
    model = jaxrank.fit(X, yl == labels[1], 2.0**-8, dtype=np.float64)
    np.testing.assert_array_equal(est.model_.basis_index, model.basis_index)
    np.testing.assert_allclose(
        est.decision_function(X), model.decision_function(X) - est.threshold_, atol=1e-10
    )
    # pos_label picks the other class: the other basis, scores still ranking classes_[1] first
    other = RankRCClassifier(pos_label=labels[0], dtype="float64").fit(X, yl)
    assert other.pos_label_ == labels[0]
    np.testing.assert_array_equal(other.model_.basis_index, np.flatnonzero(yl == labels[0]))
    assert roc_auc_score(yl, other.decision_function(X)) > 0.8


@pytest.mark.slow  # a 90-row basis compiles its own solver (~6 s); the tie test covers the sign
def test_pos_label_majority(data):
    # pos_label names the class the ranker puts first, even when it is the majority
    X, y = data
    yl = np.where(y == 1, "rare", "common")
    # the basis is the positive class, here the majority: both fits say so
    with pytest.warns(UserWarning, match="they are the majority here: 90 of 120 rows"):
        est = RankRCClassifier(pos_label="common", dtype="float64").fit(X, yl)
    with pytest.warns(UserWarning, match="they are the majority here: 90 of 120 rows"):
        model = jaxrank.fit(X, y == -1, 2.0**-8, dtype=np.float64)  # basis: the 90 common rows
    assert est.pos_label_ == "common" and est.classes_.tolist() == ["common", "rare"]
    np.testing.assert_array_equal(est.model_.basis_index, model.basis_index)
    # classes_[1] = "rare" is not the positive class: the model's score is negated
    np.testing.assert_allclose(
        est.decision_function(X), -np.asarray(model.decision_function(X)) - est.threshold_,
        rtol=0, atol=1e-10,
    )  # fmt: skip
    dec = est.decision_function(X)
    assert roc_auc_score(yl, dec) > 0.8
    np.testing.assert_array_equal(est.predict(X), est.classes_[(dec > 0).astype(int)])
    assert np.sum(est.predict(X) == "rare") == 30  # the training prevalence of classes_[1]


def _cv_auc_oracle(X, rare, folds):
    """Per fold, the AUC of the rare class by jaxrank.fit's own score on the test rows."""
    out = []
    for train, test in folds:
        model = jaxrank.fit(X[train], rare[train], 2.0**-6, dtype=np.float64)
        out.append(float(metrics.auc(rare[test], model.decision_function(X[test]))))
    return np.array(out)


@pytest.mark.parametrize(
    "labels", [(1, 2), (2, 1), ("a", "b"), ("b", "a")], ids=["1-2", "2-1", "a-b", "b-a"]
)
def test_roc_auc_scoring_both_label_orders(data, labels):
    # scikit-learn's roc_auc scorer reads decision_function as the score of classes_[1]: the
    # rare class sorting first (1-2, a-b) or last (2-1, b-a) must give the ranker's own AUC,
    # not 1 − AUC.
    X, y = data
    rare, other = labels
    yl = np.where(y == 1, rare, other)
    folds = list(StratifiedKFold(3, shuffle=True, random_state=0).split(X, y))
    est = RankRCClassifier(lam=2.0**-6, dtype="float64")
    got = cross_val_score(est, X, yl, scoring="roc_auc", cv=folds)
    want = _cv_auc_oracle(X, y == 1, folds)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert want.min() > 0.7  # far from 1/2, so a flipped sign could not pass

    grid = {"lam": [2.0**-10, 2.0**-6]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        search = GridSearchCV(est, grid, scoring="roc_auc", cv=folds).fit(X, yl)
    np.testing.assert_allclose(search.cv_results_["mean_test_score"][1], want.mean(), atol=1e-12)
    assert search.best_score_ > 0.7
    assert roc_auc_score(yl, search.decision_function(X)) > 0.8


def test_random_state(data):
    X, y = data
    a, b, c = (
        RandomBasisRankClassifier(random_state=s, dtype="float64").fit(X, y) for s in (1, 1, 2)
    )
    np.testing.assert_array_equal(a.decision_function(X), b.decision_function(X))
    assert not np.array_equal(a.model_.basis_index, c.model_.basis_index)


@pytest.mark.parametrize(
    "est, y_kind, match",
    [
        (RankRCClassifier(), "multiclass", "Only binary classification"),
        (RankRCClassifier(pos_label="c"), "names", r"pos_label='c' is not one of the labels"),
        (
            RankRCClassifier(pos_label=2),
            "ok",
            r"pos_label=2 is not one of the labels of y \[-1, 1\]",
        ),
        (RankRCClassifier(pos_label=[1]), "ok", "pos_label must be one label"),
        (RankRCClassifier(), "one", r"y has one class only \(1\);"),  # 1, not np.int64(1)
        (RankRCClassifier(), "continuous", "Unknown label type"),
        (RankRCClassifier(lam=[1e-2, 1e-3]), "ok", "lam must be one value"),
        (RankRCClassifier(lam=-1.0), "ok", "lam must be finite and > 0"),
        (RankRCClassifier(kernel="linear", sigma2=1.0), "ok", "sigma2 is the Gaussian"),
        (RankRCClassifier(kernel="laplace"), "ok", "unknown kernel"),
        (RankRCClassifier(dtype="int32"), "ok", "dtype must be float32 or float64"),
        (RandomBasisRankClassifier(n_basis=500), "ok", "n_basis must be in"),
    ],
)
def test_clear_errors(data, est, y_kind, match):
    X, y = data
    y = {
        "ok": y,
        "multiclass": np.arange(120) % 3,
        "names": np.where(y == 1, "a", "b"),
        "continuous": np.linspace(0, 1, 120),
        "one": np.ones(120, int),
    }[y_kind]
    with pytest.raises(ValueError, match=match):
        est.fit(X, y)


def test_subset_invariance_float64(data):
    X, y = data
    est = RankRCClassifier(dtype="float64").fit(X, y)
    alone = np.concatenate([est.decision_function(X[i : i + 1]) for i in range(0, 120, 7)])
    np.testing.assert_allclose(alone, est.decision_function(X)[::7], rtol=0, atol=1e-12)


def test_subset_invariance_float32(data):
    # float32 (the default): a row's score does not depend on the batch it is scored in, also
    # across scoring blocks (rows are scored in zero-padded blocks of one fixed size)
    X, y = data
    est = RankRCClassifier().fit(X, y)
    block = _block_rows(est.model_)
    assert block == 4096  # 30 basis rows
    big = np.concatenate([X, datasets.make_rare_class(block + 30, 0.5, 0.75, seed=2)[0]])
    full = est.decision_function(big)
    rows = [0, 7, 119, block - 1, block, big.shape[0] - 1]
    alone = np.concatenate([est.decision_function(big[i : i + 1]) for i in rows])
    np.testing.assert_array_equal(alone, full[rows])
    np.testing.assert_array_equal(est.decision_function(big[5:40]), full[5:40])
    np.testing.assert_array_equal(est.predict(big[3:4]), est.predict(big)[3:4])


def test_import_error_without_sklearn(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.base", None)  # as if scikit-learn were missing
    monkeypatch.delitem(sys.modules, "jaxrank.sklearn")
    with pytest.raises(ImportError, match="pip install"):
        importlib.import_module("jaxrank.sklearn")


def test_unfitted_and_wrong_width(data):
    X, y = data
    with pytest.raises(NotFittedError):
        RankRCClassifier().predict(X)
    est = RankRCClassifier(dtype="float64").fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.decision_function(X[:, :3])
    assert not hasattr(est, "predict_proba")


ALL_ESTIMATORS = [
    RankRCClassifier,
    RankSVMClassifier,
    RandomBasisRankClassifier,
    jaxrank.sklearn.SparseAUCClassifier,
    jaxrank.sklearn.NystromRankClassifier,
    jaxrank.sklearn.MultiLevelRankRC,
    jaxrank.sklearn.RankRCClassifierCV,
]


@pytest.mark.parametrize("cls", ALL_ESTIMATORS)
def test_parameters_declared_once(cls):
    """The parameters are dataclass fields (declared once, in the class that introduces them):
    the generated ``__init__`` is an explicit signature, the first parameter positional and the
    rest keyword-only, every one stored unchanged; equality, hashing and ``repr`` stay
    scikit-learn's."""
    import dataclasses
    import inspect

    from sklearn.base import clone

    sig = inspect.signature(cls)
    kinds = [p.kind for p in sig.parameters.values()]
    assert kinds[0] is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert set(kinds[1:]) == {inspect.Parameter.KEYWORD_ONLY}
    assert sorted(sig.parameters) == sorted(cls().get_params())
    assert sorted(sig.parameters) == sorted(f.name for f in dataclasses.fields(cls))
    values = {name: object() for name in sig.parameters}  # any value is stored as given
    est = cls(**values)
    assert all(getattr(est, name) is v for name, v in values.items())
    first = next(iter(sig.parameters))
    est = cls(0.25)
    assert getattr(est, first) == 0.25
    with pytest.raises(TypeError):
        cls(0.25, 0.5)  # only the first parameter is positional
    twin = clone(est)
    assert twin is not est and twin != est and len({est, twin}) == 2  # identity, hashable
    assert repr(est) == f"{cls.__name__}({first}=0.25)"  # scikit-learn's: changed params only
    assert repr(cls()) == f"{cls.__name__}()"
