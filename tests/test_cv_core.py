"""The search as batched calls of the pure core (jaxrank._cv_core) and the pairwise operators'
batching at any vmap depth: the table and the pick equal the loop of fits, chunks equal one
call, nested vmaps (and their JVP) equal the member-by-member operators."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import _cv, core, datasets, pairwise
from jaxrank.losses import get_loss

LAMS = (2.0**-10, 2.0**-4, 2.0**2)


@pytest.fixture(scope="module")
def data():
    X, y = datasets.make_rare_class(160, 0.1, 0.75, seed=1)
    return np.asarray((X - X.mean(0)) / X.std(0), np.float64), y == 1


def _search(X, pos, engine, monkeypatch, chunk=None, **kw):
    monkeypatch.setattr(_cv, "CORE_CHUNK", chunk)
    opts = dict(lams=LAMS, sigma2s=(2.0, 8.0), policies=("rare", "auto"), folds=3,
                key=jax.random.key(0), min_basis=24, dtype="float64", tol=1e-10,
                engine=engine)  # fmt: skip
    return _cv.cv_search(X, pos, **{**opts, **kw})


@pytest.mark.slow  # two searches' programs (~30-80 s on 2 loaded cores)
def test_core_table_equals_the_loop_of_fits_and_picks_alike(data, monkeypatch):
    """Same objective, basis, kernel and tolerance per cell; only the block's row layout
    differs, so in float64 at a tight tolerance the held-out AUC are the loop's."""
    X, pos = data
    calls = []
    real = _cv._cv_core.fold_table
    monkeypatch.setattr(
        _cv._cv_core, "fold_table", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    got = _search(X, pos, "core", monkeypatch, policies=("auto",))
    assert len(calls) == 1  # every fold and σ² in one batched call
    want = _search(X, pos, "fits", monkeypatch, policies=("auto",))
    np.testing.assert_allclose(got.cv_auc, want.cv_auc, rtol=0, atol=1e-9)
    for rule in _cv.RULES:
        args = (np.asarray(LAMS), got.sigma2s, rule)
        assert _cv.choose(got.mean_auc, got.se_auc, *args) == _cv.choose(
            want.mean_auc, want.se_auc, *args
        )


@pytest.mark.slow  # another compiled program (~20 s on 2 cores)
@pytest.mark.parametrize("basis, sigma2_grid", [("rare", None), ("all", (2.0, 8.0))])
def test_select_lambda_core_equals_the_loop(data, monkeypatch, basis, sigma2_grid):
    """select_lambda's folds (untrimmed: sizes differ by fold) as masks, σ² by the heuristic
    on each training fold or from a grid: the loop's table and pick."""
    X, pos = data
    kw = dict(folds=3, key=jax.random.key(1), basis=basis, sigma2_grid=sigma2_grid,
              dtype="float64", tol=1e-10, refit=False)  # fmt: skip
    calls = []
    real = jaxrank.select._cv_core.fold_table
    monkeypatch.setattr(
        jaxrank.select._cv_core, "fold_table", lambda *a, **k: calls.append(1) or real(*a, **k)
    )
    got = jaxrank.select_lambda(X, pos, LAMS, engine="core", **kw)
    assert calls
    want = jaxrank.select_lambda(X, pos, LAMS, engine="fits", **kw)
    np.testing.assert_allclose(got.cv_auc, want.cv_auc, rtol=0, atol=1e-9)
    assert got.best_index == want.best_index


@pytest.mark.slow  # another compiled program (~20 s on 2 cores)
def test_core_chunks_equal_one_call(data, monkeypatch):
    X, pos = data
    one = _search(X, pos, "core", monkeypatch, policies=("rare",))
    # 3 folds × 2 σ² = 6 members in chunks of 4: two calls, the second padded
    chunked = _search(X, pos, "core", monkeypatch, chunk=4, policies=("rare",))
    np.testing.assert_allclose(chunked.cv_auc, one.cv_auc, rtol=0, atol=1e-12)


def test_core_engine_falls_back_for_options_it_does_not_run():
    assert not _cv._cv_core.usable({"max_kernel_bytes": 10**6}, 100, 10)
    assert not _cv._cv_core.usable({"path": "warm", "chains": 2}, 100, 10)
    assert _cv._cv_core.usable({"path": "warm", "chains": 1, "dtype": "float64"}, 100, 10)


@pytest.mark.slow  # two more compiled programs (~20 s on 2 cores)
def test_fit_core_warm_path_equals_fit(data):
    X, pos = data
    lams = np.asarray(LAMS)[::-1]  # large to small, as fit sorts the warm path
    ref = jaxrank.fit_rankrc(X, pos, lams, tol=1e-10, path="warm", chains=1)
    sizes = (int(pos.sum()), int((~pos).sum()))
    out = core.fit_core(X, pos, lams, X[pos], tol=1e-10, sizes=sizes, path="warm")
    np.testing.assert_allclose(out.coef, ref.coef, atol=1e-9, rtol=0)
    with pytest.raises(ValueError, match="path"):
        core.fit_core(X, pos, lams, X[pos], sizes=sizes, path="scan")


def test_nested_vmaps_fold_into_one_native_batch():
    """Three vmap levels over value_and_grad and hvp equal the member-by-member operators, and
    the JVP of the nested map (custom_vmap's JVP re-vmaps the rule) terminates."""
    loss = get_loss("smoothed_hinge")
    rng = np.random.default_rng(0)
    fp = jnp.asarray(rng.normal(size=(2, 2, 3, 7)))
    fn = jnp.asarray(rng.normal(size=(2, 2, 3, 11)))
    d = jnp.asarray(rng.normal(size=(2, 2, 3, 7)))

    def op(fp, fn, d):
        v, gp, gn, w = pairwise.value_and_grad(fp, fn, loss, 6, 10)
        hp, hn = pairwise.hvp(w, d, jnp.zeros_like(fn), loss)
        return v, gp, gn, hp, hn

    nested = jax.jit(jax.vmap(jax.vmap(jax.vmap(op))))
    out = nested(fp, fn, d)
    single = jax.jit(op)
    for idx in np.ndindex(2, 2, 3):
        ref = single(fp[idx], fn[idx], d[idx])
        for a, b in zip(out, ref, strict=True):
            np.testing.assert_allclose(a[idx], b, rtol=1e-12, atol=1e-12)
    # d enters linearly: the JVP in d is the operator at the tangent
    _, tan = jax.jvp(lambda d: nested(fp, fn, d)[3], (d,), (d,))
    np.testing.assert_allclose(tan, out[3], rtol=1e-12, atol=1e-12)
