"""Programs shared across data sets: feature columns, permutations and k-means++ on the ladder.

A search on a new data set compiles each program whose shapes it has not met (seconds each on
a 2-core CPU): ``bench/keel_wide.py`` meets 19 feature counts and a row count per set. The
fold permutations and the k-means++ draws run over rows padded to their rung (k-means++ also
over zero feature columns, ``_buckets.features``), with the results of the exact shapes. And a
search's cells stop after their float32 stage (``_fitting.fit_rows(polish=False)``): the polish,
one more program per set, is the refit's.
"""

import threading

import jax
import numpy as np
import pytest

import jaxrank
from jaxrank import _buckets, _cv, _fitting, _random, _validation, bases, kernels
from jaxrank.model import ConvergenceWarning


@pytest.mark.parametrize("n", [1, 2, 7, 50, 129, 1000, 1625, 1626, 3001])
@pytest.mark.parametrize("x64", [False, True])
def test_permutation_is_jax_random_permutation(n, x64):
    # 1625 / 1626: where jax.random's shuffle goes from one sort round to two
    with jax.enable_x64(x64):
        for s in range(3):
            key = jax.random.key(1000 * s + n)
            got = _random.permutation(key, n)
            ref = np.asarray(jax.random.permutation(key, n))
            assert got.dtype == ref.dtype
            np.testing.assert_array_equal(got, ref)


def test_permutation_is_one_program_per_rung():
    key = jax.random.key(0)
    _random.permutation(key, 1281)  # rung 1536; 1281-1536 all share it
    before = _random._permutation_padded._cache_size()
    for n in (1300, 1400, 1536):
        _random.permutation(key, n)
    assert _random._permutation_padded._cache_size() == before
    assert _buckets.rung(1281) == _buckets.rung(1536) == 1536


@pytest.mark.parametrize("x64", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_kmeanspp_equals_the_unpadded_draw(x64, seed):
    rng = np.random.default_rng(seed)
    m, d = int(rng.integers(5, 300)), int(rng.integers(1, 20))
    X = rng.normal(size=(m, d))
    X[rng.integers(0, m, 4)] = X[0]  # duplicate rows: ties in the distances
    n = int(rng.integers(1, m + 1))
    fixed = int(rng.integers(0, min(n, 4) + 1))
    key = jax.random.key(seed)
    with jax.enable_x64(x64):
        got = bases.kmeanspp(X, n, key=key, fixed=fixed)
        dt = np.float64 if x64 else np.float32  # the dtype kmeanspp draws in
        exact = bases._kmeanspp(np.asarray(X, dt), key, np.int32(fixed), np.int32(n), np.int32(m))
    np.testing.assert_array_equal(got, np.asarray(exact)[:n])
    assert len(set(got.tolist())) == n


def test_kmeanspp_is_one_program_per_rung():
    rng = np.random.default_rng(0)
    bases.kmeanspp(rng.normal(size=(201, 5)), 10, key=jax.random.key(0))
    before = bases._kmeanspp._cache_size()
    # rows 201-224 share rung 224, features 5-8 share rung 8
    for m, d in ((210, 7), (224, 8), (205, 6)):
        bases.kmeanspp(rng.normal(size=(m, d)), 10, key=jax.random.key(1))
    assert bases._kmeanspp._cache_size() == before


# --- the float32 stage only: a search's cells ------------------------------------------------


def _stalled_fit(polish=True):
    # λ = 2⁻²⁰, σ² = 160 at m = 300: float32 stalls and the fit is polished (tests/test_polish)
    X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
    if polish:
        return jaxrank.fit_rankrc(
            X, y, 2.0**-20, kernel=kernels.gaussian(160.0), dtype=np.float32, tol=1e-6
        )
    X, pos = np.asarray(X), np.asarray(y) == 1  # the search's cell fit, polish a parameter
    lams, scalar = _validation.check_lam(2.0**-20)
    options = _cv.fit_options(X, dict(dtype=np.float32, tol=1e-6))
    return _cv.fit_cell(X, pos, lams, scalar, basis=np.flatnonzero(pos), polish=False,
                        kernel=kernels.gaussian(160.0), options=options)  # fmt: skip


def test_float32_stage_only_skips_the_polish():
    polished = _stalled_fit()
    assert int(polished.info.status) == jaxrank.Status.CONVERGED
    assert int(polished.info.iterations) > _fitting.POLISH_AFTER
    with pytest.warns(ConvergenceWarning, match="MAX_ITER|PRECISION"):
        cell = _stalled_fit(polish=False)
    assert int(cell.info.status) != jaxrank.Status.CONVERGED  # no claim it did not check
    assert int(cell.info.iterations) <= _fitting.POLISH_AFTER


def test_float32_stage_only_is_per_call():
    """The switch is a parameter of the one fit: another thread's fit (and the next one) is
    polished."""
    seen = []
    t = threading.Thread(target=lambda: seen.append(_stalled_fit(polish=False)))
    with pytest.warns(ConvergenceWarning, match="MAX_ITER|PRECISION"):  # the stalled cell says so
        t.start()
        t.join()
    assert int(seen[0].info.status) != jaxrank.Status.CONVERGED
    assert int(_stalled_fit().info.status) == jaxrank.Status.CONVERGED


def test_search_cells_skip_the_polish_and_the_refit_does_not(monkeypatch):
    states = []
    real = _fitting.fit_rows

    def spy(*a, **k):
        states.append(k.get("polish", True))
        return real(*a, **k)

    monkeypatch.setattr(_fitting, "fit_rows", spy)
    X, y = jaxrank.datasets.make_rare_class(200, 0.15, 0.75, seed=3)
    est = jaxrank.sklearn.RankRCClassifierCV(random_state=0, cv=3).fit(X, y)
    assert est.best_params_
    assert len(states) > 2
    assert not any(states[:-1])  # every cell, on the search's worker threads
    assert states[-1]  # the refit
