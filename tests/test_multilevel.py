"""Multi-level RankRC (seed 003 eq. 47-48): operators vs the pair loop, fits, MAUC, validation."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracles import multilevel_objective, multilevel_value_grad_hvp

import jaxrank
from jaxrank import datasets, kernels, losses, metrics, multilevel
from jaxrank._fitting import solve as _solve
from jaxrank.multilevel import fit_multilevel, make_ordinal

LOSSES = {
    "smoothed_hinge_0.5": losses.smoothed_hinge(0.5),
    "smoothed_hinge_0.1": losses.smoothed_hinge(0.1),
    "squared_hinge": losses.squared_hinge(),
}


# Fixed level sizes per R (rows in random order), so that each jitted operator compiles once
# per R whatever the loss and the scores.
COUNTS = {2: (40, 17), 3: (36, 14, 7), 4: (34, 13, 7, 3)}
PAD = 5  # padding rows beyond sum(counts), as in the padded kernel block


@functools.partial(jax.jit, static_argnames="counts")
def _ops(f, d, loss, counts):
    value, g, ws = multilevel.value_and_grad(f, counts, loss)
    return value, g, multilevel.hvp(ws, d, counts, loss)


def _levels(rng, R):
    return rng.permutation(np.repeat(np.arange(R), COUNTS[R]))


@pytest.mark.parametrize("R", [2, 3, 4])
@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize("name", list(LOSSES))
def test_score_space_matches_pair_loop(R, ties, name):
    """value, gradient and Hv of Σ_{level_i > level_j} ℓ(f_i − f_j) equal the pair loop."""
    loss = LOSSES[name]
    rng = np.random.default_rng([R, ties, list(LOSSES).index(name)])
    lv = _levels(rng, R)
    n = lv.size
    f = rng.normal(size=n) + 0.4 * lv
    if ties:  # equal scores within and across levels, pair differences on the breakpoints
        f = np.round(f, 1)
    d = rng.normal(size=n)
    order = np.argsort(lv, kind="stable")
    fo = jnp.asarray(np.concatenate([f[order], rng.normal(size=PAD)]))
    do = jnp.asarray(np.concatenate([d[order], rng.normal(size=PAD)]))
    value, g, h = _ops(fo, do, loss, COUNTS[R])
    ov, og, oh = multilevel_value_grad_hvp(f, lv, loss, d)
    scale = max(1.0, abs(ov))
    assert abs(float(value) - ov) <= 1e-10 * scale
    np.testing.assert_allclose(g[:n], og[order], rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(h[:n], oh[order], rtol=0, atol=1e-10 * scale)
    np.testing.assert_array_equal(g[n:], 0)
    np.testing.assert_array_equal(h[n:], 0)


def test_all_scores_tied():
    """At β = 0 every cross-level pair sits at z = 0 (the quadratic piece for ε = 0.5)."""
    loss = losses.smoothed_hinge(0.5)
    counts = COUNTS[4]
    lv = np.repeat(np.arange(4), counts)
    n = lv.size
    d = np.arange(n + PAD, dtype=np.float64)
    value, g, h = _ops(jnp.zeros(n + PAD), jnp.asarray(d), loss, counts)
    ov, og, oh = multilevel_value_grad_hvp(np.zeros(n), lv, loss, d[:n])
    np.testing.assert_allclose([value, *g[:n], *h[:n]], [ov, *og, *oh], atol=1e-12)
    assert ov == pytest.approx(multilevel.n_pairs(counts) * 0.5)


def test_operator_refuses_bad_counts():
    loss = losses.smoothed_hinge(0.5)
    for counts in [(5,), (3, 0, 2)]:
        with pytest.raises(ValueError, match="counts"):
            multilevel.value_and_grad(jnp.zeros(5), counts, loss)
    with pytest.raises(ValueError, match="fewer than sum"):
        multilevel.value_and_grad(jnp.zeros(4), (3, 2), loss)


@functools.partial(jax.jit, static_argnames="counts")
def _closures_grid(K, Krr, lams, B, V, loss, counts):
    def one(lam, b, v):
        fun, hvp = multilevel.objective_closures(K, Krr, lam, loss, counts, block=16)
        F, g, ws = fun(b)
        return F, g, hvp(ws, v)

    return jax.vmap(one)(lams, B, V)


@pytest.mark.parametrize("R", [2, 3, 4])
def test_objective_closures_match_pair_loop(R):
    """F, ∇F and ∇²F·v in β-space (eq. 48, normalised by Σ_{r<s} m_r m_s) equal the pair loop,
    for each member of a vmapped λ grid; duplicated rows across levels give tied scores."""
    rng = np.random.default_rng(R)
    lv = _levels(rng, R)
    n = lv.size
    X = rng.normal(size=(n, 3))
    X[1::7] = X[0]  # duplicates (ties in every score vector)
    order = np.argsort(lv, kind="stable")
    basis = np.flatnonzero(lv != 0)
    K = np.asarray(kernels.gaussian(3.0)(jnp.asarray(X), jnp.asarray(X[basis])))
    Krr = K[basis]
    loss = losses.smoothed_hinge(0.5)
    Ko = jnp.asarray(np.concatenate([K[order], np.zeros((64 - n, basis.size))]))  # padded
    lams = np.array([1e-2, 0.3])
    B = rng.normal(size=(2, basis.size))
    V = rng.normal(size=(2, basis.size))
    F, grad, Hv = _closures_grid(Ko, jnp.asarray(Krr), jnp.asarray(lams), jnp.asarray(B),
                                 jnp.asarray(V), loss, COUNTS[R])  # fmt: skip
    for k in range(2):
        oF, og, oHv = multilevel_objective(B[k], K, Krr, lv, lams[k], loss, V[k])
        assert float(F[k]) == pytest.approx(oF, rel=1e-10)
        np.testing.assert_allclose(grad[k], og, rtol=0, atol=1e-10 * max(1, np.abs(og).max()))
        np.testing.assert_allclose(Hv[k], oHv, rtol=0, atol=1e-10 * max(1, np.abs(oHv).max()))


@pytest.fixture(scope="module")
def rare():
    X, y = datasets.make_rare_class(300, 0.1, 0.75, seed=0)
    return (X - X.mean(0)) / X.std(0), y


def test_two_levels_equal_biclass_rankrc(rare):
    """Two levels (labels ±1, majority −1): fit_multilevel is jaxrank.fit(basis="rare")."""
    X, y = rare
    lams = [1e-1, 1e-3]
    ref = jaxrank.fit(X, y, lams, basis="rare")
    model = fit_multilevel(X, y, lams, majority=-1)
    np.testing.assert_array_equal(model.basis_index, ref.basis_index)
    np.testing.assert_allclose(model.info.objective, ref.info.objective, rtol=1e-10)
    np.testing.assert_allclose(model.coef, ref.coef, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(model.info.status, jaxrank.Status.CONVERGED)


@pytest.fixture(scope="module")
def ordinal():
    X, lv = make_ordinal(500, key=jax.random.key(1))
    Xt, lt = make_ordinal(2000, key=jax.random.key(2))
    return X, lv, Xt, lt


LAMS = [1e-2, 1e-3]


@pytest.fixture(scope="module")
def ordinal_model(ordinal):
    X, lv, _, _ = ordinal
    return fit_multilevel(X, lv, LAMS)


def test_fit_converges_and_ranks(ordinal, ordinal_model):
    _, lv, Xt, lt = ordinal
    model = ordinal_model
    np.testing.assert_array_equal(model.info.status, jaxrank.Status.CONVERGED)
    assert np.all(np.asarray(model.info.grad_norm) <= 1e-6)
    # basis: every non-majority row, in row order (eq. 48)
    np.testing.assert_array_equal(model.basis_index, np.flatnonzero(lv != 0))
    assert model.coef.shape == (2, int((lv != 0).sum()))
    assert model.decision_function(Xt[:7]).shape == (2, 7)
    # training lowers the objective below its value at β = 0 (every pair at z = 0: ℓ(0) = 0.5)
    assert np.all(np.asarray(model.info.objective) < 0.5)
    # held-out MAUC beats a random score by far and is near the generator's Bayes ranking uᵀx
    test = np.asarray(metrics.mauc(lt, model.decision_function(Xt)))
    rand = float(metrics.mauc(lt, jax.random.normal(jax.random.key(3), (lt.size,))))
    bayes = float(metrics.mauc(lt, Xt.sum(axis=1)))
    assert abs(rand - 0.5) < 0.05
    assert np.all(test > rand + 0.25)
    assert np.all(test > bayes - 0.03)


def test_mauc_improves_with_training_data(ordinal, ordinal_model):
    """Held-out MAUC grows with the training set (50 → 500 rows of the same generator)."""
    _, _, Xt, lt = ordinal
    Xs, ls = make_ordinal(50, key=jax.random.key(4))
    small = fit_multilevel(Xs, ls, LAMS)
    m_small = np.asarray(metrics.mauc(lt, small.decision_function(Xt)))
    m_large = np.asarray(metrics.mauc(lt, ordinal_model.decision_function(Xt)))
    assert np.all(m_large > m_small + 0.01), (m_small, m_large)


def test_no_recompilation_when_lambda_or_tol_changes(ordinal, ordinal_model):
    X, lv, _, _ = ordinal
    before = _solve._cache_size()
    model = fit_multilevel(X, lv, [3e-2, 5e-4], tol=1e-5, eps=0.3)
    assert _solve._cache_size() == before
    assert np.all(np.asarray(model.info.grad_norm) <= 1e-5)


def test_warm_path_matches_batch(ordinal, ordinal_model):
    X, lv, _, _ = ordinal
    warm = fit_multilevel(X, lv, LAMS, path="warm")
    # both stop at ||∇F||_∞ ≤ 1e-6 along different paths
    np.testing.assert_allclose(warm.info.objective, ordinal_model.info.objective, rtol=1e-7)
    np.testing.assert_array_equal(warm.info.status, jaxrank.Status.CONVERGED)
    assert warm.select(1).decision_function(X[:3]).shape == (3,)


def test_relabelled_levels_same_fit_no_recompilation(rare):
    """Only the order of the level values matters: relabelled levels give the same fit (and,
    with the same level sizes, reuse the compiled solver)."""
    X, y = rare
    a = fit_multilevel(X, y, [1e-1, 1e-3], majority=-1)
    before = _solve._cache_size()
    b = fit_multilevel(X, np.where(y == 1, 40.0, -7.0), [1e-1, 1e-3], majority=-7)
    assert _solve._cache_size() == before
    np.testing.assert_array_equal(a.basis_index, b.basis_index)
    np.testing.assert_allclose(a.coef, b.coef, rtol=0, atol=1e-13)


def test_check_levels_and_a_majority_that_is_not_lowest():
    values, index, counts, maj = multilevel.check_levels([5, 2, 2, 9, 2, 5], majority=5)
    np.testing.assert_array_equal(values, [2, 5, 9])
    np.testing.assert_array_equal(index, [1, 0, 0, 2, 0, 1])
    np.testing.assert_array_equal(counts, [3, 2, 1])
    assert maj == 1  # fit_multilevel's basis: rows whose level is not 5, i.e. 1, 2, 3, 4
    assert multilevel.n_pairs(counts) == 3 * 2 + 3 * 1 + 2 * 1


def _bad_inputs():
    X = np.random.default_rng(0).normal(size=(20, 2))
    lv = np.repeat([0, 1, 2], [14, 4, 2])
    Xnan, Xinf = X.copy(), X.copy()
    Xnan[3, 1], Xinf[0, 0] = np.nan, np.inf
    return [
        ("one level", (X, np.zeros(20, int), 1e-2), {}, "one level"),
        ("nan X", (Xnan, lv, 1e-2), {}, "NaN"),
        ("inf X", (Xinf, lv, 1e-2), {}, "NaN or infinite"),
        ("length", (X, lv[:-1], 1e-2), {}, "different lengths"),
        ("lam 0", (X, lv, 0.0), {}, "lam"),
        ("lam <0", (X, lv, [1e-2, -1.0]), {}, "lam"),
        ("non-integral", (X, lv + 0.5, 1e-2), {}, "non-integral"),
        ("nan levels", (X, np.where(lv == 2, np.nan, lv), 1e-2), {}, "NaN"),
        ("strings", (X, lv.astype(str), 1e-2), {}, "integer ordinal"),
        ("bool", (X, lv > 0, 1e-2), {}, "integer ordinal"),
        ("2-D levels", (X, np.stack([lv, lv], 1), 1e-2), {}, "1-D"),
        ("empty levels", (X, np.zeros(0, int), 1e-2), {}, "empty"),
        ("no majority", (X, lv + 1, 1e-2), {}, "majority=0 is not one of the levels"),
        ("bad majority", (X, lv, 1e-2), {"majority": 0.5}, "majority"),
        ("1-D X", (X[:, 0], lv, 1e-2), {}, "2-D"),
        ("eps", (X, lv, 1e-2), {"eps": 0.0}, "eps"),
        ("path", (X, lv, 1e-2), {"path": "fast"}, "path"),
        ("loss", (X, lv, 1e-2), {"loss": "hinge"}, "loss"),
        ("max_iter", (X, lv, 1e-2), {"max_iter": 0}, "max_iter"),
        ("precondition", (X, lv, 1e-2), {"precondition": "x"}, "precondition"),
    ]


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [case[1:] for case in _bad_inputs()],
    ids=[case[0] for case in _bad_inputs()],
)
def test_bad_inputs_refused(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        fit_multilevel(*args, **kwargs)


def test_make_ordinal():
    X, lv = make_ordinal(2000, levels=5, key=jax.random.key(0))
    assert X.shape == (2000, 5) and X.dtype == np.float64 and lv.dtype == np.int32
    sizes = np.bincount(lv)
    assert sizes.sum() == 2000 and sizes[0] == 1700  # majority 85 %
    assert np.all(np.diff(sizes) < 0)  # rarer levels progressively smaller
    # level means move along (1, …, 1)/√d by sep = 1 per level
    proj = X.sum(axis=1) / np.sqrt(5)
    means = np.array([proj[lv == r].mean() for r in range(5)])
    np.testing.assert_allclose(np.diff(means), 1.0, atol=0.35)
    X2, lv2 = make_ordinal(2000, levels=5, seed=None, key=jax.random.key(0))
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(lv, lv2)
    assert not np.array_equal(make_ordinal(2000, levels=5, seed=1)[0], X)
    # tiny sets keep every level non-empty
    assert np.all(np.bincount(make_ordinal(6, levels=6, seed=0)[1]) == 1)
    assert np.all(np.bincount(make_ordinal(20, levels=4, majority_frac=0.99, seed=0)[1]) >= 1)
    for kwargs, match in [
        ({"m": 3, "levels": 4}, "m must be >= 4"),
        ({"m": 10, "levels": 1}, "levels"),
        ({"m": 10, "majority_frac": 1.0}, "majority_frac"),
        ({"m": 10, "sep": 0}, "sep"),
        ({"m": 10, "d": 0}, "d must be"),
    ]:
        with pytest.raises(ValueError, match=match):
            make_ordinal(**kwargs, seed=0)
    with pytest.raises(ValueError, match="key"):
        make_ordinal(10)
