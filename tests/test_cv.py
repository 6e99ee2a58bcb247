"""RankRCClassifierCV and its search (jaxrank._cv): the auto basis, equal folds, the selection
rules, the CV table against direct fits, the estimator's conventions and scikit-learn's checks.

Every fit here uses one data set, one fold count and one λ grid, so the programs compiled by the
first search serve the later tests (compilation dominates on 2 cores)."""

import threading
import warnings

import jax
import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone
from sklearn.metrics import roc_auc_score
from sklearn.utils.estimator_checks import parametrize_with_checks

import jaxrank
from jaxrank import _buckets, _cv, datasets
from jaxrank.select import stratified_folds

LAMS = (2.0**-10, 2.0**-4, 2.0**2)
FACTORS = (0.5, 2.0)
CV = 3
MIN_BASIS = 40


@pytest.fixture(scope="module")
def data():
    X, y = datasets.make_rare_class(160, 0.1, 0.75, seed=1)  # 16 rare rows
    return (X - X.mean(0)) / X.std(0), y


def _est(**kw):
    from jaxrank.sklearn import RankRCClassifierCV

    # the σ² grid as given (the edge extension has its tests in test_ard.py)
    opts = dict(lams=LAMS, sigma2_factors=FACTORS, cv=CV, min_basis=MIN_BASIS, random_state=0,
                extend_edges=False)  # fmt: skip
    return RankRCClassifierCV(**{**opts, **kw})


@pytest.fixture(scope="module")
def fitted(data):
    X, y = data
    names = np.where(y == 1, "rare", "common")
    return _est(basis=("rare", "auto")).fit(X, names)


# ---------------------------------------------------------------------------- auto basis


def test_auto_basis_size_rule():
    assert _cv.auto_basis_size(1000, 10, 128) == 128  # starved: grown to the floor
    assert _cv.auto_basis_size(1000, 300, 128) == 300  # enough rare rows: RankRC's basis
    assert _cv.auto_basis_size(100, 10, 128) == 100  # small data: every row
    assert _cv.auto_basis_size(10_000, 3000) == jaxrank.bases.AUTO_MAX_BASIS == 512  # thinned
    assert _cv.auto_basis_size(10_000, 3000, 128, 1000) == 1000
    assert _cv.auto_basis_size(10_000, 3000, 128, None) == 3000  # every rare row
    assert _cv.auto_basis_size(10_000, 3000, 2048, 1000) == 2048  # the floor wins over the cap
    assert _cv.auto_basis_size(10_000, 512) == _cv.auto_basis_size(10_000, 512, 256, None)
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="min_basis"):
            _cv.auto_basis_size(10, 1, bad)
        with pytest.raises(ValueError, match="max_basis"):
            _cv.auto_basis_size(10, 1, 5, bad)


@pytest.mark.parametrize("floor, cap", [(40, 100), (150, 100)])
def test_auto_basis_thins_a_large_rare_class_by_kmeanspp(floor, cap):
    X, y = datasets.make_rare_class(600, 0.4, 0.75, seed=1)
    key = jax.random.key(0)
    rare = np.flatnonzero(y == 1)
    idx = _cv.auto_basis(X, y, key=key, min_basis=floor, max_basis=cap)
    assert idx.size == max(floor, cap) < rare.size
    assert np.all(y[idx] == 1) and np.all(np.diff(idx) > 0)  # rare rows only, ascending
    again = _cv.auto_basis(X, y, key=key, min_basis=floor, max_basis=cap)
    np.testing.assert_array_equal(idx, again)
    assert not np.array_equal(
        idx, _cv.auto_basis(X, y, key=jax.random.key(1), min_basis=floor, max_basis=cap)
    )
    # k-means++ spreads them: farther from one another than a uniform draw, on average
    near = lambda rows: np.mean(
        np.sort(((X[rows][:, None] - X[rows][None]) ** 2).sum(-1), axis=1)[:, 1]
    )  # fmt: skip
    rng = np.random.default_rng(0)
    uniform = np.mean([near(rng.choice(rare, idx.size, replace=False)) for _ in range(20)])
    assert near(idx) > uniform
    np.testing.assert_array_equal(
        _cv.auto_basis(X, y, key=key, min_basis=floor, max_basis=None), rare
    )


def test_auto_basis_rare_first_then_majority(data):
    X, y = data
    key = jax.random.key(0)
    idx = _cv.auto_basis(X, y, key=key, min_basis=MIN_BASIS)
    rare = np.flatnonzero(y == 1)
    assert idx.size == MIN_BASIS and np.unique(idx).size == idx.size
    np.testing.assert_array_equal(idx[: rare.size], rare)
    assert np.all(y[idx[rare.size :]] != 1)
    np.testing.assert_array_equal(idx, _cv.auto_basis(X, y, key=key, min_basis=MIN_BASIS))
    # k-means++ spreads the landmarks: farther from the rare rows than a uniform draw, on average
    d = lambda rows: np.mean(
        np.min(((X[rows][:, None] - X[rare][None]) ** 2).sum(-1), axis=1)
    )  # fmt: skip
    rng = np.random.default_rng(0)
    neg = np.flatnonzero(y != 1)
    uniform = np.mean([d(rng.choice(neg, MIN_BASIS - rare.size, replace=False))
                       for _ in range(20)])  # fmt: skip
    assert d(idx[rare.size :]) > uniform
    np.testing.assert_array_equal(_cv.auto_basis(X, y, key=key, min_basis=10), rare)
    allrows = _cv.auto_basis(X, y, key=key, min_basis=10_000)
    np.testing.assert_array_equal(np.sort(allrows), np.arange(y.size))
    with pytest.raises(ValueError, match="key"):
        _cv.auto_basis(X, y, key=None)


def test_estimator_thins_a_large_rare_class_to_the_cap():
    # 700 rare rows of 1800: the refit's basis is 512 of them (the folds' 350 rare rows are
    # under the cap and kept whole), and the model scores as well as the paper's whole rare basis
    # (measured: test AUC 0.63507 both)
    X, y = datasets.make_rare_class(3800, 0.4, 0.75, seed=2)
    (X, Xt), (y, yt) = np.split(X, [1800]), np.split(y, [1800])
    capped = _est(lams=(2.0**-6,), sigma2_factors=(1.0,), cv=2, min_basis=256).fit(X, y)
    whole = _est(lams=(2.0**-6,), sigma2_factors=(1.0,), cv=2, basis="rare").fit(X, y)
    assert capped.best_params_["n_basis"] == capped.model_.n_basis == 512
    assert whole.model_.n_basis == int((y == 1).sum()) == 700
    auc = lambda est: roc_auc_score(yt, est.decision_function(Xt))
    assert auc(capped) > auc(whole) - 0.01


def test_equal_folds(data):
    _, y = data
    pos = y == 1
    fold = stratified_folds(pos, CV, key=jax.random.key(3))
    train = _cv.equal_folds(fold, pos, key=jax.random.key(4))
    counts = {(int(pos[t].sum()), int((~pos[t]).sum())) for t in train}
    assert len(counts) == 1  # the same class counts in every training fold
    for f, t in enumerate(train):
        assert np.all(fold[t] != f)  # never a held-out row
        full = np.flatnonzero(fold != f)
        assert full.size - t.size <= 2 and np.all(np.isin(t, full))


# ---------------------------------------------------------------------------- rules


def test_choose_rules():
    lams = np.array([1e-4, 1e-2, 1.0, 1e2])
    s2 = np.array([0.5, 2.0])
    mean = np.zeros((1, 2, 4))
    se = np.full((1, 2, 4), 0.025)
    mean[0, 0] = [0.80, 0.90, 0.85, 0.85]
    mean[0, 1] = [0.70, 0.89, 0.89, 0.88]
    assert _cv.choose(mean, se, lams, s2, "max") == (0, 0, 1)
    # one SE: the largest λ with mean ≥ 0.90 − 0.025
    assert _cv.choose(mean, se, lams, s2, "one_se") == (0, 1, 3)
    # smoothed: (0.89 + 0.89 + 0.88)/3 at σ² = 2, λ = 1 beats (0.8 + 0.9 + 0.85)/3
    assert _cv.choose(mean, se, lams, s2, "smooth") == (0, 1, 2)
    # smoothed over σ² and λ: both σ² rows share every box here; column means .75 .895 .87 .865
    # give boxes .8225 .838 .8767 .8675, so λ = 1, the tie to the larger σ²
    assert _cv.choose(mean, se, lams, s2, "smooth_grid") == (0, 1, 2)
    # exact ties go to the larger λ, then the larger σ², then the first basis
    flat = np.full((2, 2, 4), 0.7)
    assert _cv.choose(flat, se.repeat(2, 0), lams, s2, "max") == (0, 1, 3)
    with pytest.raises(ValueError, match="rule"):
        _cv.choose(mean, se, lams, s2, "median")
    with pytest.raises(ValueError, match="finite"):
        _cv.choose(mean * np.nan, se, lams, s2, "max")


def test_smooth_grid_is_the_box_mean_and_prefers_a_plateau_to_a_spike():
    rng = np.random.default_rng(0)
    m = rng.random((2, 4, 5))
    want = np.empty_like(m)
    for b, s, j in np.ndindex(*m.shape):
        want[b, s, j] = m[b, max(0, s - 1) : s + 2, max(0, j - 1) : j + 2].mean()
    np.testing.assert_allclose(_cv._smooth_grid(m), want, rtol=1e-15)
    # a lone spike (one lucky fold pattern) against a broad plateau slightly below it
    table = np.full((1, 5, 6), 0.60)
    table[0, 0, 0] = 0.95
    table[0, 2:5, 3:6] = 0.90
    lams, s2 = 2.0 ** np.arange(6), 2.0 ** np.arange(5)
    se = np.zeros_like(table)
    assert _cv.choose(table, se, lams, s2, "max") == (0, 0, 0)
    assert _cv.choose(table, se, lams, s2, "smooth_grid") == (0, 4, 5)


def test_smooth_ends():
    m = np.array([[[1.0, 2.0, 6.0]]])
    np.testing.assert_allclose(_cv._smooth(m), [[[1.5, 3.0, 4.0]]])
    np.testing.assert_allclose(_cv._smooth(np.array([[[5.0]]])), [[[5.0]]])


# ---------------------------------------------------------------------------- search


def test_cv_table_matches_direct_fits(data, fitted):
    X, y = data
    pos = y == 1
    est = fitted
    key = jax.random.key(np.random.RandomState(0).randint(np.iinfo(np.int32).max))
    s2 = est.cv_results_["param_sigma2"][:: len(LAMS)][: len(FACTORS)]
    search = _cv.cv_search(X, pos, lams=LAMS, sigma2s=s2, policies=("rare", "auto"), folds=CV,
                           key=key, min_basis=MIN_BASIS, dtype="float32", tol=1e-4)  # fmt: skip
    np.testing.assert_allclose(search.mean_auc.ravel(), est.cv_results_["mean_test_score"])
    # one entry of the table by hand: fold 1, auto basis, second σ², every λ
    k_fold, k_trim, _ = jax.random.split(key, 3)
    fold = stratified_folds(pos, CV, key=k_fold)
    tr = _cv.equal_folds(fold, pos, key=k_trim)[1]
    te = np.flatnonzero(fold == 1)
    idx = _cv.auto_basis(X[tr], pos[tr], key=jax.random.fold_in(_cv.basis_key(key), 1),
                         min_basis=MIN_BASIS)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        kernel = jaxrank.kernels.gaussian(float(s2[1]))
        # the search's defaults: the warm path, and the estimator's search_tol
        model = jaxrank.fit(X[tr], pos[tr], LAMS, basis=idx, kernel=kernel, dtype="float32",
                            path="warm", chains=1, tol=1e-4)  # fmt: skip
    scores = np.asarray(model.decision_function(X[te]), np.float64)
    want = [roc_auc_score(pos[te], s) for s in scores]
    np.testing.assert_allclose(search.cv_auc[1, 1, 1], want, atol=1e-6)
    assert search.n_basis.tolist() == [int(pos.sum()), MIN_BASIS]


@pytest.mark.parametrize("search_tol, want", [(1e-4, 1e-4), (1e-3, 1e-3), (None, 1e-7)])
def test_search_tol_reaches_the_cv_fits_and_tol_the_refit(data, monkeypatch, search_tol, want):
    X, y = data
    seen = []
    real_fit = _cv.fit_cell

    def spy(*args, **kwargs):
        options = kwargs["options"]  # checked once per search (_cv.fit_options)
        seen.append((options.tol, options.path, options.chains))
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(_cv, "fit_cell", spy)  # the search's fits and the refit
    _est(search_tol=search_tol, tol=1e-7, basis="rare").fit(X, y)
    # every CV fit: the search tolerance on the warm path (one chain); the refit keeps tol
    assert seen == [(want, "warm", 1)] * (CV * len(FACTORS)) + [(1e-7, "warm", 1)]


def test_cv_search_copies_identical_policies(data):
    X, y = data
    # min_basis below every fold's rare count: "auto" is "rare", so its rows are copies
    search = _cv.cv_search(
        X, y == 1, lams=LAMS, sigma2s=(4.0,), policies=("rare", "auto"), folds=CV,
        key=jax.random.key(0), min_basis=2, dtype="float32",
    )  # fmt: skip
    np.testing.assert_array_equal(search.cv_auc[0], search.cv_auc[1])
    with pytest.raises(ValueError, match="policies"):
        _cv.cv_search(X, y, lams=LAMS, sigma2s=(1.0,), policies=("nystrom",), key=jax.random.key(0))
    with pytest.raises(ValueError, match="sigma2s"):
        _cv.cv_search(X, y, lams=LAMS, sigma2s=(-1.0,), key=jax.random.key(0))


@pytest.mark.parametrize("threads, max_block", [(1, 2**27), (4, 2**27), (3, 0)])
def test_search_threads_give_the_one_thread_table(data, monkeypatch, threads, max_block):
    X, y = data
    kw = dict(lams=LAMS, sigma2s=(1.0, 4.0, 16.0), policies=("rare", "auto"), folds=CV,
              key=jax.random.key(5), min_basis=MIN_BASIS, dtype="float32", tol=1e-4,
              max_iter=3)  # fmt: skip
    monkeypatch.setattr(_cv, "SEARCH_THREADS", 1)
    ref = _cv.cv_search(X, y == 1, **kw)
    monkeypatch.setattr(_cv, "SEARCH_THREADS", threads)
    monkeypatch.setattr(_cv, "SEARCH_THREADS_MAX_BLOCK", max_block)
    real_fit, seen = _cv.fit_cell, []
    concurrent = threading.Barrier(2, timeout=30) if threads > 1 and max_block else None

    def spy(*args, **kwargs):
        seen.append((threading.get_ident(), _buckets.floors()))
        if concurrent is not None and len(seen) <= 2:
            concurrent.wait()  # two fits in flight at once, or this times out
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(_cv, "fit_cell", spy)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        filters = list(warnings.filters)
        got = _cv.cv_search(X, y == 1, **kw)
        assert warnings.filters == filters
    # max_iter=3 leaves fits unconverged: the search's filter kept their warnings in
    assert not [w for w in caught if issubclass(w.category, jaxrank.ConvergenceWarning)]
    np.testing.assert_array_equal(got.cv_auc, ref.cv_auc)
    # every fit ran off the calling thread, inside the search's floors
    assert len(seen) == CV * 3 * (1 if ref.n_basis[0] == ref.n_basis[1] else 2)
    assert threading.get_ident() not in {t for t, _ in seen}
    assert all(f and f == seen[0][1] and f["basis"] for _, f in seen)
    workers = {t for t, _ in seen}
    assert len(workers) == 1 if threads == 1 or not max_block else len(workers) >= 2


def test_search_narrower_adds_narrow_sigma2_with_a_larger_floor(data):
    X, y = data
    pos = y == 1
    key = jax.random.key(3)
    kw = dict(lams=LAMS, policies=("auto",), folds=CV, key=key, dtype="float32", tol=1e-4)
    search = _cv.cv_search(X, pos, sigma2s=(2.0, 8.0), min_basis=MIN_BASIS, **kw)
    opts = dict(folds=CV, key=key, min_basis=MIN_BASIS, dtype="float32", tol=1e-4)
    # the pick does not call for it (not the narrowest σ², and the narrowest more than one
    # standard error below), or the set is below min_rows (160 < 512) or above max_rows:
    # unchanged
    wide = search._replace(mean_auc=np.array([[[0.5] * len(LAMS), [0.9] * len(LAMS)]]),
                           se_auc=np.full((1, 2, len(LAMS)), 0.01))  # fmt: skip
    assert _cv.search_narrower(X, pos, wide, (0, 1, 0), min_rows=10, rule="max", **opts) is wide
    assert _cv.search_narrower(X, pos, search, (0, 0, 0), **opts) is search
    assert _cv.search_narrower(X, pos, search, (0, 0, 0), min_rows=10, max_rows=159,
                               **opts) is search  # fmt: skip
    one = search._replace(sigma2s=search.sigma2s[:1], cv_auc=search.cv_auc[:, :1])
    assert _cv.search_narrower(X, pos, one, (0, 0, 0), min_rows=10, **opts) is one  # one σ²
    ext = _cv.search_narrower(X, pos, search, (0, 0, 0), min_rows=100, steps=(0.25, 1 / 16),
                              narrow_basis=80, **opts)  # fmt: skip
    # prepended in ascending order, at the larger floor, on the same folds as a direct search
    np.testing.assert_allclose(ext.sigma2s, [0.125, 0.5, 2.0, 8.0])
    assert ext.min_basis.tolist() == [80, 80, MIN_BASIS, MIN_BASIS]
    for f in ("cv_auc", "mean_auc", "se_auc"):
        np.testing.assert_array_equal(getattr(ext, f)[:, 2:], getattr(search, f))
    direct = _cv.cv_search(X, pos, sigma2s=(0.125, 0.5), min_basis=80, **kw)
    np.testing.assert_array_equal(ext.cv_auc[:, :2], direct.cv_auc)
    assert ext.n_basis.tolist() == search.n_basis.tolist() == [MIN_BASIS]
    assert ext.fit_seconds > search.fit_seconds
    with pytest.raises(ValueError, match="steps"):
        _cv.search_narrower(X, pos, search, (0, 0, 0), min_rows=100, steps=(2.0,), **opts)


def test_wants_narrower_at_the_narrowest_or_within_the_margin():
    mean = np.array([[[0.80, 0.82, 0.80], [0.85, 0.86, 0.85], [0.84, 0.84, 0.84]]])
    se = np.full_like(mean, 0.02)
    s2 = np.array([1.0, 4.0, 16.0])
    table = _cv.CVSearch(("auto",), None, s2, np.array(LAMS), None, mean, se, 0.0)
    pick = _cv.choose(mean, se, LAMS, s2, "max")
    assert pick == (0, 1, 1)
    # the narrowest's best raw mean 0.82 is 0.04 = 2 standard errors below the pick's 0.86
    assert not _cv.wants_narrower(table, pick, "max")
    assert not _cv.wants_narrower(table, pick, "max", trigger_se=1.9)
    assert _cv.wants_narrower(table, pick, "max", trigger_se=2.1)
    assert not _cv.wants_narrower(table, pick, "max", trigger_se=None)
    # a pick at the narrowest always does, with or without the margin
    assert _cv.wants_narrower(table, (0, 0, 2), "max", trigger_se=None)
    # the narrowest by value, wherever it stands in the table
    perm = [1, 0, 2]
    shuffled = table._replace(sigma2s=s2[perm], mean_auc=mean[:, perm], se_auc=se[:, perm])
    assert _cv.wants_narrower(shuffled, (0, 1, 2), "max", trigger_se=None)
    assert _cv.wants_narrower(shuffled, (0, 0, 1), "max", trigger_se=2.1)
    assert not _cv.wants_narrower(shuffled, (0, 0, 1), "max", trigger_se=1.9)
    # under "smooth_grid" the scores compared are the rule's 3×3 averages
    sg = _cv._smooth_grid(mean)
    pick = _cv.choose(mean, se, LAMS, s2, "smooth_grid")
    gap = sg[pick] - sg[:, 0].max()
    assert gap > 0
    assert _cv.wants_narrower(table, pick, "smooth_grid", trigger_se=gap / 0.02 + 0.1)
    assert not _cv.wants_narrower(table, pick, "smooth_grid", trigger_se=gap / 0.02 - 0.1)


@pytest.mark.parametrize("extend", [True, False])
def test_estimator_extends_sigma2_and_refits_at_the_chosen_floor(data, monkeypatch, extend):
    X, y = data
    calls = []
    real = _cv.search_narrower

    def forced(X, y, search, pick, **kw):
        # always at the narrowest σ², on a set this small: the extension must run
        calls.append(pick)
        pick = (pick[0], int(np.argmin(search.sigma2s)), pick[2])
        return real(X, y, search, pick, **{**kw, "min_rows": 0, "narrow_basis": 80})

    monkeypatch.setattr(_cv, "search_narrower", forced)
    est = _est(extend_sigma2=extend).fit(X, y)
    L = len(LAMS)
    if not extend:
        assert calls == [] and est.cv_results_["mean_test_score"].size == len(FACTORS) * L
        return
    assert len(calls) == 1
    res = est.cv_results_
    f0 = min(FACTORS)
    want = np.repeat([*(f0 * np.sort(_cv.NARROW_STEPS)), *FACTORS], L)
    np.testing.assert_allclose(res["param_sigma2_factor"], want)
    np.testing.assert_allclose(res["param_sigma2"] / res["param_sigma2_factor"],
                               jaxrank.kernels.sigma2_heuristic(X))  # fmt: skip
    # the pick: the best narrow cell under NARROW_RULE, kept only as keep_narrower says
    n_new = len(_cv.NARROW_STEPS)
    shape = (1, n_new + len(FACTORS), len(LAMS))
    mean = np.asarray(res["mean_test_score"]).reshape(shape)
    folds = np.stack([res[f"split{f}_test_score"] for f in range(est.n_folds_)], -1)
    folds = folds.reshape(*shape, -1).transpose(0, 1, 3, 2)
    table = _cv.CVSearch(("auto",), None, res["param_sigma2"][::L], LAMS, folds, mean, mean * 0,
                         0.0)  # fmt: skip
    base = _cv.choose(mean[:, n_new:], mean[:, n_new:] * 0, LAMS, table.sigma2s[n_new:],
                      est.rule)  # fmt: skip
    narrow = _cv.narrow_candidate(table, n_new)
    assert narrow[1] < n_new
    merged = _cv.choose(mean, mean * 0, LAMS, table.sigma2s, est.rule)
    ref = (0, merged[1] - n_new, merged[2]) if merged[1] >= n_new else base
    want_pick = _cv.keep_narrower(table, ref, narrow, n_new)
    assert want_pick == _cv.narrow_pick(table, base, n_new, est.rule)
    assert est.best_index_ == np.ravel_multi_index(want_pick, shape)
    bp = est.best_params_
    assert bp["sigma2"] == res["param_sigma2"][est.best_index_]
    assert bp["lam"] == res["param_lam"][est.best_index_]
    floor = 80 if bp["sigma2_factor"] < f0 else MIN_BASIS
    n = _cv.auto_basis_size(y.size, int((y == 1).sum()), floor)
    assert bp["n_basis"] == est.model_.n_basis == n
    np.testing.assert_allclose(bp["sigma2"] / bp["sigma2_factor"],
                               jaxrank.kernels.sigma2_heuristic(X))  # fmt: skip


# ---------------------------------------------------------------------------- estimator


def test_estimator_conventions(data, fitted):
    X, y = data
    est = fitted
    assert est.classes_.tolist() == ["common", "rare"] and est.pos_label_ == "rare"
    d = est.decision_function(X)
    np.testing.assert_array_equal(est.predict(X), est.classes_[(d > 0).astype(int)])
    assert np.sum(d > 0) == np.sum(y == 1)  # training-prevalence threshold
    assert roc_auc_score(y == 1, d) > 0.65  # the generator's Bayes AUC is about 0.70
    assert not hasattr(est, "predict_proba")
    res = est.cv_results_
    i = est.best_index_
    assert res["mean_test_score"][i] == est.best_score_
    # the default rule's pick from the table (smoothed, so not always the raw maximum)
    assert est.rule == "smooth_mirror"
    table = np.asarray(res["mean_test_score"]).reshape(2, len(FACTORS), len(LAMS))
    s2 = res["param_sigma2"][:: len(LAMS)][: len(FACTORS)]
    pick = _cv.choose(table, np.zeros_like(table), LAMS, s2, "smooth_mirror")
    assert i == np.ravel_multi_index(pick, table.shape)
    # ranks are by raw mean (scikit-learn's); the smoothed pick need not hold rank 1
    mean = res["mean_test_score"]
    assert res["rank_test_score"][i] == 1 + np.sum(mean > mean[i])
    assert res["rank_test_score"][np.argmax(mean)] == 1
    bp = est.best_params_
    assert bp["lam"] == res["param_lam"][i] and bp["sigma2"] == res["param_sigma2"][i]
    assert bp["basis"] == res["param_basis"][i] and bp["n_basis"] == est.model_.n_basis
    assert len(res["params"]) == 2 * len(FACTORS) * len(LAMS)
    for f in range(CV):
        assert res[f"split{f}_test_score"].shape == res["mean_test_score"].shape
    # the refitted model is jaxrank.fit at the chosen parameters
    idx = _cv.refit_basis(bp["basis"], X, y, key=jax.random.key(
        np.random.RandomState(0).randint(np.iinfo(np.int32).max)), min_basis=MIN_BASIS)  # fmt: skip
    model = jaxrank.fit(X, y, bp["lam"], basis=idx, kernel=jaxrank.kernels.gaussian(bp["sigma2"]),
                        dtype="float32")  # fmt: skip
    # the same optimum, reached on the search's warm path (float32, gradient tolerance 1e-6)
    assert int(est.model_.info.status) == int(model.info.status) == 0
    np.testing.assert_allclose(est.model_.coef, model.coef, rtol=1e-3, atol=2e-5)


def test_rare_class_sorting_first(data, fitted):
    # the rare class is classes_[0] here ({1, 2}, rare = 1): scores are negated, same ranking
    X, y = data
    est = clone(fitted).set_params(basis=("rare", "auto")).fit(X, np.where(y == 1, 1, 2))
    assert est.pos_label_ == 1
    total = est.decision_function(X) + fitted.decision_function(X)  # a constant: the offsets
    assert np.ptp(total) <= 1e-6 * np.abs(fitted.decision_function(X)).max()


@pytest.mark.parametrize(
    ("params", "labels", "match"),
    [
        ({}, "one", "binary"),
        ({}, "three", "binary"),
        ({"pos_label": "x"}, None, "pos_label"),
        ({"rule": "best"}, None, "rule"),
        ({"sigma2_factors": (0.0,)}, None, "sigma2_factors"),
        ({"cv": 1}, None, "cv"),
        ({"basis": "greedy"}, None, "basis policies"),
        ({"lams": (-1.0,)}, None, "λ|lam"),
        ({"min_basis": 0}, None, "min_basis"),
        ({"extend_sigma2": "yes"}, None, "extend_sigma2"),
        ({"max_sigma2_factor": 0.0}, None, "max_sigma2_factor"),
        ({"max_sigma2_factor": True}, None, "max_sigma2_factor"),
    ],
)
def test_estimator_errors(data, params, labels, match):
    X, y = data
    y = {"one": np.zeros_like(y), "three": np.arange(y.size) % 3, None: y}[labels]
    with pytest.raises(ValueError, match=match):
        _est(**params).fit(X, y)


def test_too_few_rare_rows(data):
    X, y = data
    y = np.full(y.size, -1)
    y[0] = 1
    with pytest.raises(ValueError, match="at least 2 rows of each class"):
        _est().fit(X, y)


@pytest.mark.slow  # new shapes: ~30-100 s of compilation on 2 cores
def test_few_rare_rows_fewer_folds(data, fitted):
    X, y = data
    keep = np.concatenate([np.flatnonzero(y == 1)[:2], np.flatnonzero(y != 1)])
    est = clone(fitted).fit(X[keep], y[keep])
    assert est.n_folds_ == 2


@pytest.mark.slow
@parametrize_with_checks([_est()])
def test_sklearn_api(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)
        check(estimator)


def test_sklearn_api_smoke():
    """scikit-learn's checks that fit nothing, in the default run (the whole suite, which fits
    dozens of new shapes, is slow)."""
    from sklearn.utils.estimator_checks import (
        check_estimators_unfitted,
        check_get_params_invariance,
        check_no_attributes_set_in_init,
        check_parameters_default_constructible,
    )

    est = _est()
    for check in (check_no_attributes_set_in_init, check_get_params_invariance,
                  check_estimators_unfitted, check_parameters_default_constructible):  # fmt: skip
        check(type(est).__name__, est)


def test_fit_basis_auto_is_the_auto_basis(data):
    """``jaxrank.fit(basis="auto")`` fits on exactly :func:`auto_basis`'s rows (key required)."""
    X, y = data
    key = jax.random.key(3)
    idx = _cv.auto_basis(X, y, key=key, min_basis=48)
    a = jaxrank.fit(X, y, 1e-2, basis="auto", key=key, n_basis=48)
    b = jaxrank.fit(X, y, 1e-2, basis=idx)
    np.testing.assert_array_equal(np.asarray(a.basis), np.asarray(b.basis))
    np.testing.assert_allclose(np.asarray(a.coef), np.asarray(b.coef), rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError, match="key"):
        jaxrank.fit(X, y, 1e-2, basis="auto", n_basis=48)


def test_search_refit_and_similar_sets_share_one_compiled_solver():
    import importlib

    # the compiled fit (basis preparation + solver): jitted directly, or through a stored
    # jax.export program when the persistent cache is on (the estimators switch it on)
    fitting = importlib.import_module("jaxrank._fitting")
    exported = importlib.import_module("jaxrank._exported")

    def programs():  # small blocks compile fit_block_low_effort (fitting.LOW_EFFORT_MAX_BYTES)
        jitted = (fitting.fit_block, fitting.fit_block_low_effort)
        return sum(f._cache_size() for f in jitted) + len(exported._LOADED)

    X, y = datasets.make_rare_class(150, 0.12, 0.75, seed=3)
    n0 = programs()
    _est(lams=(2.0**-8, 2.0**-2), sigma2_factors=(1.0,), basis="auto").fit(X, y)
    # the folds and the refit (one λ, padded to the search's floors): one program
    assert programs() == n0 + 1
    # another set: other rows, other class counts, the same power-of-two buckets
    X2, y2 = datasets.make_rare_class(170, 0.15, 0.75, seed=4)
    assert (y2 == 1).sum() != (y == 1).sum()
    _est(lams=(2.0**-8, 2.0**-2), sigma2_factors=(1.0,), basis="auto").fit(X2, y2)
    assert programs() == n0 + 1


def test_keep_narrower_needs_a_paired_win_beyond_one_standard_error():
    # table (B=1, S=3, k=5, L=2): σ² index 0 is the extension's (n_new = 1)
    cv = np.full((1, 3, 5, 2), 0.8)
    search = _cv.CVSearch(("auto",), np.array([10]), np.array([0.1, 1.0, 4.0]),
                          np.array([1.0, 2.0]), cv, cv.mean(2), cv.std(2), 0.0)  # fmt: skip
    base, pick = (0, 0, 1), (0, 0, 0)
    # a pick among the old σ² is returned as it is
    assert _cv.keep_narrower(search, base, (0, 2, 0), 1) == (0, 2, 0)
    # tied on every fold: the base pick (index shifted past the new row) stands
    assert _cv.keep_narrower(search, base, pick, 1) == (0, 1, 1)
    # one lucky fold: mean difference 0.04 < its standard error 0.04 -> the base pick
    cv[0, 0, :, 0] = [0.8, 0.8, 0.8, 0.8, 1.0]
    assert _cv.keep_narrower(search, base, pick, 1) == (0, 1, 1)
    # a win on every fold -> the narrow pick
    cv[0, 0, :, 0] = [0.85, 0.9, 0.86, 0.88, 0.9]
    assert _cv.keep_narrower(search, base, pick, 1) == pick
    # ... unless the margin asks for more standard errors than it has
    d = cv[0, 0, :, 0] - 0.8
    t = d.mean() / (d.std(ddof=1) / np.sqrt(5))
    assert _cv.keep_narrower(search, base, pick, 1, margin_se=t + 0.1) == (0, 1, 1)
    assert _cv.keep_narrower(search, base, pick, 1, margin_se=t - 0.1) == pick


def test_narrow_candidate_is_judged_under_the_narrow_rule_whatever_picked_the_base():
    # (B=1, S=3, L=3): σ² index 0 is the extension's row, clearly the best
    mean = np.array([[[0.95, 0.95, 0.90], [0.70, 0.70, 0.70], [0.72, 0.72, 0.72]]])
    cv = np.repeat(mean[:, :, None, :], 5, axis=2)
    search = _cv.CVSearch(("auto",), np.array([10]), np.array([0.01, 0.1, 1.0]),
                          np.array([1.0, 2.0, 4.0]), cv, mean, mean * 0, 0.0)  # fmt: skip
    assert _cv.narrow_candidate(search, 1) == (0, 0, 0)
    # the mirror rule counts the wider row twice in the narrow row's box and passes it over
    assert _cv.choose(mean, mean * 0, search.lams, search.sigma2s, "smooth_mirror")[1] == 1
    assert _cv.choose(mean, mean * 0, search.lams, search.sigma2s, "smooth_grid")[1] == 0
    # only the new rows are candidates, even where an old row scores higher
    mean2 = mean.copy()
    mean2[0, 2] = 0.99
    assert _cv.narrow_candidate(search._replace(mean_auc=mean2), 1)[1] == 0


@pytest.mark.parametrize(("gain", "min_gain", "se", "steps", "counted"), [
    (0.0, 1e-3, 0.0, 1, 0),  # a flat surface: one step shows the edge holds nothing better
    (0.01, 1e-3, 0.0, 2, 2),  # rising by 0.01 a step: on to the limit (two steps of 4, to 256)
    (0.01, 0.02, 0.0, 1, 0),  # rising by less than the gate asks: one step, not counted
    (0.01, 1e-3, 0.009, 2, 2),  # a rise above one standard error of the pick: on
    (0.01, 1e-3, 0.011, 1, 0),  # below it: one step, not counted
])  # fmt: skip
@pytest.mark.parametrize("discard", [True, False])
def test_search_edges_goes_on_only_while_the_edge_gains(
    monkeypatch, gain, min_gain, se, steps, counted, discard
):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 2))
    pos = np.arange(40) < 8
    searched = []

    def fake(X, pos, *, lams, sigma2s, policies, folds, key, min_basis, scales=None, **kw):
        # every cell scores by its σ² alone: log4(σ²) * gain, highest at the widest σ²
        s2 = np.asarray(sigma2s, np.float64)
        searched.append(s2)
        m = np.log(s2)[:, None] / np.log(4.0) * gain + 0.5 + 0 * np.asarray(lams)[None, :]
        cv = np.repeat(m[None, :, None, :], folds, axis=2)
        floors = np.full(s2.size, min_basis)
        return _cv.CVSearch(tuple(policies), np.array([8]), s2, np.asarray(lams, np.float64), cv,
                            m[None], se + 0 * m[None], 0.0, floors)  # fmt: skip

    monkeypatch.setattr(_cv, "cv_search", fake)
    lams = np.array([1.0, 4.0])
    base = fake(X, pos, lams=lams, sigma2s=[1.0, 4.0, 16.0], policies=("auto",), folds=3,
                key=None, min_basis=16)  # fmt: skip
    pick = _cv.choose(base.mean_auc, base.se_auc, lams, base.sigma2s, "smooth_mirror")
    assert pick[1] == 2  # at the widest σ²: the extension starts
    out, new = _cv.search_edges(X, pos, base, pick, folds=3, key=None, max_sigma2=256.0,
                                min_lam=1.0, min_gain=min_gain, gain_se=1.0,
                                discard_failed=discard, min_basis=16)  # fmt: skip
    assert len(searched) - 1 == steps
    # every step searched stays in the table as data ...
    kept = 3 + steps
    np.testing.assert_allclose(out.sigma2s, 4.0 ** np.arange(kept))
    assert out.cv_auc.shape[1] == out.mean_auc.shape[1] == out.min_basis.size == kept
    assert new == _cv.pick_of(out, "smooth_mirror")  # the rule's pick on the returned table
    if discard:
        # ... but a step inside the noise is never picked (nor by a later choice on the table,
        # the narrow extension's), and on this rising surface the pick stays the old edge
        failed = steps - counted
        assert (
            out.where is None
            if not failed
            else (out.where[:, : kept - failed].all() and not out.where[:, kept - failed :].any())
        )
        assert new == (0, 2 + counted, pick[2]) and out.sigma2s[new[1]] == 16.0 * 4.0**counted
    else:
        assert out.where is None and new[1] == out.sigma2s.size - 1  # the widest row


def _row_search(row: dict, se: float):
    """A stand-in for ``cv_search``: the mean AUC ``row[σ²]`` at every λ, fold and basis, one
    standard error ``se`` (``row`` is read at each call, so a test may change it)."""

    def fake(X, pos, *, lams, sigma2s, policies, folds, key, min_basis, scales=None, **kw):
        s2 = np.asarray(sigma2s, np.float64)
        m = np.array([row[v] for v in s2])[:, None] + 0 * np.asarray(lams)[None, :]
        cv = np.repeat(m[None, :, None, :], folds, axis=2)
        return _cv.CVSearch(tuple(policies), np.array([8]), s2, np.asarray(lams, np.float64),
                            cv, m[None], se + 0 * m[None], 0.0,
                            np.full(s2.size, min_basis))  # fmt: skip

    return fake


def _row_table(monkeypatch, row: dict, se: float, sigma2s):
    """``cv_search`` replaced by :func:`_row_search`; ``(X, pos, table, its "smooth_mirror"
    pick)`` on ``sigma2s`` (40 rows, 8 rare, λ ∈ {1, 4}, 3 folds)."""
    X, pos, lams = np.zeros((40, 2)), np.arange(40) < 8, np.array([1.0, 4.0])
    fake = _row_search(row, se)
    monkeypatch.setattr(_cv, "cv_search", fake)
    base = fake(X, pos, lams=lams, sigma2s=sigma2s, policies=("auto",), folds=3, key=None,
                min_basis=16)  # fmt: skip
    return X, pos, base, _cv.choose(base.mean_auc, base.se_auc, lams, base.sigma2s,
                                          "smooth_mirror")  # fmt: skip


def test_a_failed_edge_step_judges_the_old_edge_as_an_inner_cell(monkeypatch):
    """``"smooth_mirror"`` counts an edge cell's inner neighbour twice, so where the surface peaks
    one step inside the grid the edge wins (KEEL vehicle1, split 0: the CV peaks at 4h, 0.929,
    the widest 16h scores 0.891 and was picked; test AUC 91.6 against 93.9 at 4h). The step
    past it finds nothing better and does not count, but it makes the old edge an inner cell:
    its true neighbours then score it, and the pick moves inward."""
    # a plateau over 4 and 16 that ends past the grid: the mirror puts 16's inner neighbour
    # in its box twice, (2·0.92 + 0.92)/3, and the widest row wins; the step finds 64 low
    row = {1.0: 0.90, 4.0: 0.92, 16.0: 0.92, 64.0: 0.80}
    X, pos, base, pick = _row_table(monkeypatch, row, 0.01, [1.0, 4.0, 16.0])
    assert base.sigma2s[pick[1]] == 16.0
    for discard in (True, False):
        out, new = _cv.search_edges(
            X,
            pos,
            base,
            pick,
            folds=3,
            key=None,
            max_sigma2=256.0,
            min_lam=1.0,
            discard_failed=discard,
            min_basis=16,
        )
        np.testing.assert_allclose(out.sigma2s, [1.0, 4.0, 16.0, 64.0])
        # (the table before the step alone, as a dropped step left it, picks 16 again)
        assert out.sigma2s[new[1]] == 4.0 and (out.where is None) != discard


def test_choose_picks_only_where_allowed():
    mean = np.array([[[0.70, 0.80, 0.90], [0.75, 0.78, 0.60]]])
    se = np.full_like(mean, 0.01)
    where = np.ones(mean.shape, bool)
    where[0, 0, 2] = False
    for rule, want in (("max", (0, 0, 1)), ("one_se", (0, 0, 1)), ("smooth", (0, 0, 1))):
        assert _cv.choose(mean, se, [1, 2, 3], [1, 4], rule) == (0, 0, 2)
        assert _cv.choose(mean, se, [1, 2, 3], [1, 4], rule, where=where) == want
    # a masked cell still counts in its neighbours' smoothed scores
    g = _cv._smooth_grid(mean)
    assert _cv.choose(mean, se, [1, 2, 3], [1, 4], "smooth_grid", where=where) == tuple(
        np.unravel_index(np.argmax(np.where(where, g, -1)), g.shape)
    )
    with pytest.raises(ValueError, match="where"):
        _cv.choose(mean, se, [1, 2, 3], [1, 4], "max", where=np.zeros(mean.shape, bool))
    with pytest.raises(ValueError, match="where"):
        _cv.choose(mean, se, [1, 2, 3], [1, 4], "max", where=where[..., :2])


def _slope_search(h: float, slope: float, se: float, searched: list):
    """A stand-in for ``cv_search``: mean AUC 0.7 + ``slope`` per factor 4 of σ² / ``h``, flat
    in λ, one standard error ``se``; appends ``(σ² / h, min_basis)`` of each call to
    ``searched``."""

    def fake(X, pos, *, lams, sigma2s, policies, folds, key, min_basis, scales=None, **kw):
        s2 = np.asarray(sigma2s, np.float64)
        searched.append((tuple(np.round(s2 / h, 6)), min_basis))
        m = 0.7 + slope * np.log(s2 / h)[:, None] / np.log(4.0) + 0 * np.asarray(lams)[None, :]
        m = np.broadcast_to(m[None], (len(policies), *m.shape))
        cv = np.repeat(m[:, :, None, :], folds, axis=2)
        return _cv.CVSearch(tuple(policies), np.full(len(policies), 60), s2,
                            np.asarray(lams, np.float64), cv, m.copy(), se + 0 * m, 0.0,
                            np.full(s2.size, min_basis))  # fmt: skip

    return fake


def test_a_dropped_edge_step_is_not_picked_by_the_narrow_extension(monkeypatch):
    """The narrow extension re-chooses on the table it extends; a dropped edge step's cells must
    not be there. On yeast-1-2-8-9_vs_7 (KEEL, split 3) the edge step to σ² = 64h did not count,
    but the narrow extension's re-choice found its cell (64h, λ = 2⁻²⁰) all the same: test AUC
    68.9 against 82.5 for the grid's pick."""
    from jaxrank.kernels import sigma2_heuristic
    from jaxrank.sklearn import RankRCClassifierCV

    rng = np.random.default_rng(0)
    X = rng.standard_normal((600, 3))  # 512-2048 rows: the narrow extension may run
    y = np.where(np.arange(600) % 10 == 0, 1, 0)
    h = float(sigma2_heuristic(X))
    searched = []

    # rising slowly with σ² (0.003 per factor 4), flat in λ, one standard error 0.05: the
    # step to 64h raises the mirror rule's best by 0.003, inside the noise; the narrowest
    # σ² is within a standard error of the pick, so the narrow extension runs
    monkeypatch.setattr(_cv, "cv_search", _slope_search(h, 0.003, 0.05, searched))
    est = RankRCClassifierCV(random_state=0).fit(X, y)
    steps = [s for s, _ in searched]
    assert (64.0,) in steps and (0.25 / 16,) in steps  # the edge step, then the narrow one
    assert est.best_params_["sigma2_factor"] == 16.0
    # the step's cells are in the table (data), never picked
    assert 64.0 in set(est.cv_results_["param_sigma2_factor"])


def test_a_narrow_edge_steps_narrower_on_the_unit_step_logic(monkeypatch):
    """The mirror image of the wide step: a pick at the narrowest σ² steps to σ² / 4 when
    ``min_sigma2`` allows it; a step that finds nothing better is data, and the old edge,
    judged by its true neighbours, gives way to the cell inside it."""
    row = {0.25: 0.93, 1.0: 0.92, 4.0: 0.90, 0.0625: 0.80}
    X, pos, base, pick = _row_table(monkeypatch, row, 0.001, [0.25, 1.0, 4.0])
    assert base.sigma2s[pick[1]] == 0.25
    edges = lambda **kw: _cv.search_edges(X, pos, base, pick, folds=3, key=None, max_sigma2=4.0,
                                          min_lam=1.0, min_basis=16, **kw)  # fmt: skip
    out, new = edges()  # no min_sigma2: the narrow end is left alone
    assert out is base and new == pick
    out, new = edges(min_sigma2=0.1)  # the limit: no step below it
    assert out is base and new == pick
    out, new = edges(min_sigma2=1 / 64)
    np.testing.assert_allclose(out.sigma2s, [0.0625, 0.25, 1.0, 4.0])
    assert out.sigma2s[new[1]] == 1.0 and not out.where[:, 0].any()
    row[0.0625] = 0.99  # a step that counts is picked; the limit ends the steps
    out, new = edges(min_sigma2=1 / 16)
    np.testing.assert_allclose(out.sigma2s, [0.0625, 0.25, 1.0, 4.0])
    assert out.sigma2s[new[1]] == 0.0625 and out.where is None


@pytest.mark.parametrize("rows,extend,want", [(2100, True, True), (2100, False, False),
                                              (600, True, False)])  # fmt: skip
def test_the_estimator_steps_narrower_only_where_the_narrow_extension_does_not_run(
    monkeypatch, rows, extend, want
):
    """More than NARROW_MAX_ROWS rows: a pick at the narrowest σ² steps to σ² / 4 down to
    h/64 (EDGE_MIN_SIGMA2_FACTOR); 512 to 2048 rows keep the narrow extension (a 1024-row
    floor, a margin) and no narrow edge step; ``extend_sigma2=False`` turns both off."""
    from jaxrank.kernels import sigma2_heuristic
    from jaxrank.sklearn import RankRCClassifierCV

    rng = np.random.default_rng(0)
    X = rng.standard_normal((rows, 3))
    y = np.where(np.arange(rows) % 10 == 0, 1, 0)
    h = float(sigma2_heuristic(X))
    searched = []

    # better the narrower, by 0.01 per factor 4, far outside the noise (se 0.001)
    monkeypatch.setattr(_cv, "cv_search", _slope_search(h, -0.01, 0.001, searched))
    est = RankRCClassifierCV(random_state=0, kernel="gaussian", extend_sigma2=extend).fit(X, y)
    floor = est.min_basis
    narrow_steps = [s for s, f in searched if s in ((0.0625,), (0.015625,)) and f == floor]
    if want:
        assert narrow_steps == [(0.0625,), (0.015625,)]  # to the limit h/64, then no further
        assert est.best_params_["sigma2_factor"] == 0.015625
    else:
        assert narrow_steps == []
        # 512-2048 rows: the narrow extension's own step instead (h/64, a 1024-row floor)
        assert (((0.015625,), _cv.NARROW_MIN_BASIS) in searched) == (extend and rows <= 2048)


def test_paired_win_asks_for_more_than_the_folds_noise():
    b = np.full(5, 0.8)
    assert not _cv.paired_win(b, b, 0.0)  # a tie is no win
    assert not _cv.paired_win([0.8, 0.8, 0.8, 0.8, 1.0], b, 1.0)  # one lucky fold
    a = np.array([0.85, 0.9, 0.86, 0.88, 0.9])
    d = a - b
    t = d.mean() / (d.std(ddof=1) / np.sqrt(5))
    assert _cv.paired_win(a, b, t - 0.1) and not _cv.paired_win(a, b, t + 0.1)
    assert not _cv.paired_win(b, a, 0.0)


@pytest.mark.parametrize("margin", [-np.inf, np.inf])
def test_auto_kernel_keeps_the_binary_one_only_past_the_margin(data, monkeypatch, margin):
    import jaxrank.sklearn._cv as skcv

    X, y = data
    # a two-valued measured column that carries the signal: binary-aware distances differ
    X = np.column_stack([X, np.where((y == 1) & (np.arange(y.size) % 3 > 0), 3.0, -0.2)])
    calls = []
    real = _cv.paired_win
    monkeypatch.setattr(_cv, "paired_win", lambda a, b, m: calls.append(m) or real(a, b, m))
    monkeypatch.setattr(skcv, "KERNEL_MARGIN_SE", margin)
    est = _est().fit(X, y)
    assert calls == [margin]
    if margin == np.inf:
        assert est.kernel_choice_ == "gaussian"
    else:  # a bare positive mean gain is enough; a tie or a loss is not
        gauss = _est(kernel="gaussian").fit(X, y)
        binary = _est(kernel="binary").fit(X, y)
        fold = lambda e: np.array([e.cv_results_[f"split{f}_test_score"][e.best_index_]
                                   for f in range(e.n_folds_)])  # fmt: skip
        want = "binary" if (fold(binary) - fold(gauss)).mean() > 0 else "gaussian"
        assert est.kernel_choice_ == want
