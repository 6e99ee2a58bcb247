"""The ARD Gaussian kernel, binary-aware distances, the implicit-gradient tuner and the search's
edge extension: the kernel equals the Gaussian on rescaled rows, goes wherever the Gaussian
goes (fit, core under jit / vmap / grad, model files, estimators), its implicit derivatives in
the per-column scales equal central finite differences, and the estimator's ARD option learns
which columns matter."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import _cv, core, kernels
from jaxrank import tune as T
from jaxrank.kernels import ARDGaussian, Gaussian


@pytest.fixture(scope="module")
def data():
    X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
    return np.asarray(X, np.float64), np.asarray(y == 1)


def _sizes(pos):
    return int(pos.sum()), int((~pos).sum())


# ------------------------------------------------------------------------------ the kernel


def test_ard_equals_gaussian_on_rescaled_rows(data):
    X, _ = data
    s = np.array([1.0, 0.5, 2.0, 0.0, 1.5])
    k = ARDGaussian(sigma2=3.0, scales=s)
    got = np.asarray(k(jnp.asarray(X[:7]), jnp.asarray(X[:9])))
    want = np.asarray(Gaussian(3.0)(jnp.asarray(X[:7] * s), jnp.asarray(X[:9] * s)))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    diff = X[:7, None] - X[None, :9]
    np.testing.assert_allclose(got, np.exp(-np.sum((diff * s) ** 2, -1) / 3.0), rtol=1e-10)
    ones = ARDGaussian(sigma2=3.0, scales=np.ones(5))(jnp.asarray(X[:7]), jnp.asarray(X[:9]))
    np.testing.assert_allclose(ones, Gaussian(3.0)(jnp.asarray(X[:7]), jnp.asarray(X[:9])))
    assert isinstance(k, Gaussian)  # wherever the Gaussian goes


@pytest.mark.parametrize(
    "scales", [np.array([1.0, -1.0]), np.array([np.nan, 1.0]), np.zeros(3), np.ones((2, 2)), []]
)
def test_ard_refuses_bad_scales(scales):
    with pytest.raises(ValueError, match="scales"):
        ARDGaussian(sigma2=1.0, scales=scales)


def test_ard_factory_groups():
    k = kernels.ard(2.0, [1.0, 0.5, 3.0], groups=[0, 1, 1, 2])
    assert k.scales.tolist() == [1.0, 0.5, 0.5, 3.0] and k.sigma2 == 2.0
    with pytest.raises(ValueError, match="group 3"):
        kernels.ard(2.0, [1.0, 0.5], groups=[0, 3])
    with pytest.raises(ValueError, match="needs scales"):
        kernels.ard(groups=[0, 1])


def test_binary_scales_rule():
    rng = np.random.default_rng(0)
    dummy = (rng.random(500) < 0.02).astype(float)
    X = np.c_[rng.standard_normal(500), dummy, 3 * dummy - 1, np.full(500, 4.0)]
    Xs = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1)
    s = kernels.binary_scales(Xs)
    # the standardised dummy's two values end 1 apart, whatever the scaler made of them
    for j in (1, 2):
        vals = np.unique(Xs[:, j] * s[j])
        np.testing.assert_allclose(vals[1] - vals[0], 1.0, rtol=1e-12)
    assert s[0] == 1.0 and s[3] == 1.0  # continuous and constant columns untouched
    assert kernels.binary_scales(X[:, [0, 1]]) is None  # a 0/1 dummy is already unit spread
    assert kernels.binary_scales(X[:, [0]]) is None


def test_binary_kernel_and_the_plain_default(data):
    """``kernel="binary"`` rescales the two-valued columns (an ARD kernel holding the scales);
    the default Gaussian stays the paper's plain one."""
    X, pos = data
    rng = np.random.default_rng(1)
    Xb = np.c_[X, 7.0 * (rng.random(X.shape[0]) < 0.1)]
    k = kernels.resolve_kernel("binary", Xb)
    assert isinstance(k, ARDGaussian)
    np.testing.assert_allclose(k.scales, [1, 1, 1, 1, 1, 1 / 7])
    np.testing.assert_allclose(k.sigma2, kernels.sigma2_heuristic(Xb * k.scales))
    for kernel in (None, "gaussian", kernels.gaussian()):
        assert type(kernels.resolve_kernel(kernel, Xb)) is Gaussian
    assert type(kernels.resolve_kernel("binary", X)) is Gaussian  # no two-valued column
    m = jaxrank.fit_rankrc(Xb, pos, 1e-2, kernel="binary")
    assert isinstance(m.kernel, ARDGaussian)


def test_plain_estimators_take_the_binary_and_ard_kernels(data):
    pytest.importorskip("sklearn")
    from jaxrank.sklearn import RankRCClassifier

    X, pos = data
    Xb = np.c_[X, 5.0 * (X[:, 0] > 0.8)]
    y = pos.astype(int)
    est = RankRCClassifier(kernel="binary", lam=1e-2).fit(Xb, y)
    assert isinstance(est.model_.kernel, ARDGaussian)
    np.testing.assert_allclose(est.model_.kernel.scales, [1, 1, 1, 1, 1, 0.2])
    est = RankRCClassifier(kernel="binary", sigma2=3.0, lam=1e-2).fit(Xb, y)
    assert est.model_.kernel.sigma2 == 3.0 and est.model_.kernel.scales[-1] == 0.2
    k = kernels.ard(2.0, [1.0, 0.5, 0.5, 2.0, 1.0, 0.0])
    est = RankRCClassifier(kernel=k, lam=1e-2).fit(Xb, y)
    want = jaxrank.fit_rankrc(Xb, y, 1e-2, kernel=k, dtype="float32")  # the estimator's dtype
    np.testing.assert_allclose(est.model_.coef, want.coef, rtol=1e-5, atol=1e-6)


def test_ard_model_file_roundtrip_and_refusal(data, tmp_path):
    X, pos = data
    k = kernels.ard(4.0, np.array([1.0, 0.2, 3.0, 0.0, 1.0]))
    model = jaxrank.fit_rankrc(X, pos, [1e-3, 1e-1], kernel=k, dtype="float64")
    path = tmp_path / "ard.npz"
    model.save(path)
    back = jaxrank.load(path)
    assert isinstance(back.kernel, ARDGaussian)
    np.testing.assert_array_equal(back.decision_function(X), model.decision_function(X))
    with pytest.raises(ValueError, match="scales"):
        jaxrank.io._check_kernel(ARDGaussian(sigma2=1.0, scales=None), "kernel")


def test_ard_in_the_core_jit_vmap(data):
    X, pos = data
    idx = np.flatnonzero(pos)
    run = jax.jit(
        jax.vmap(
            lambda s: core.fit_core(
                X, pos, 1e-2, X[idx], kernel=ARDGaussian(3.0, s), tol=1e-10, sizes=_sizes(pos)
            )
        )
    )
    S = jnp.asarray([[1.0, 1, 1, 1, 1], [1.0, 0.1, 2.0, 1, 0.5]])
    out = run(S)
    for i in range(2):
        one = jaxrank.fit_rankrc(X, pos, 1e-2, kernel=kernels.ard(3.0, np.asarray(S[i])),
                                 tol=1e-10, dtype="float64")  # fmt: skip
        np.testing.assert_allclose(out.coef[i], one.coef, atol=1e-8)
    assert np.all(np.asarray(out.info.status) == 0)


def test_implicit_gradient_in_the_scales_equals_finite_differences(data):
    """d/ds of a held-out quantity of the solution, by the implicit function theorem, against
    central differences of converged float64 fits: 1e-6 relative."""
    X, pos = data
    idx = np.flatnonzero(pos)

    def q(s):
        r = core.fit_core(X, pos, 1e-2, X[idx], kernel=ARDGaussian(3.0, s), tol=1e-13,
                          sizes=_sizes(pos))  # fmt: skip
        f = core.decision_function(r, X[:60])
        return jnp.mean(jnp.tanh(f)) + r.info.objective

    s0 = jnp.asarray([1.0, 0.7, 1.3, 0.9, 1.1])
    g = np.asarray(jax.jit(jax.grad(q))(s0))
    qj = jax.jit(q)
    h = 1e-5  # small enough that no pair crosses a window of the loss (1e-4 crosses one)
    fd = np.array([
        float((qj(s0.at[j].add(h)) - qj(s0.at[j].add(-h))) / (2 * h)) for j in range(5)
    ])  # fmt: skip
    np.testing.assert_allclose(g, fd, rtol=1e-6)


# ------------------------------------------------------------------------------ the tuner


def _tune_data(X, pos, k=3, nb=12, weights=None, shrink=0.0):
    n = X.shape[0] - X.shape[0] % k  # equal held-out folds
    X, pos = X[:n], pos[:n]
    fold = np.arange(n) % k
    train = np.stack([fold != f for f in range(k)])
    held = np.stack([np.flatnonzero(fold == f) for f in range(k)]).astype(np.int32)
    B = np.stack([X[np.flatnonzero(pos & (fold != f))][:nb] for f in range(k)])
    d = X.shape[1]
    w = np.ones(k) if weights is None else np.asarray(weights, float)
    return T.TuneData(
        jnp.asarray(X), jnp.asarray(pos), jnp.asarray(train), jnp.asarray(held),
        jnp.ones(held.shape, bool), jnp.asarray(B), jnp.full(k, nb, jnp.int32),
        jnp.arange(d, dtype=jnp.int32), jnp.ones(d), jnp.asarray(w), jnp.zeros(d),
        jnp.asarray(shrink), jnp.asarray(0.3),
    )  # fmt: skip


def test_heldout_loss_gradient_equals_finite_differences(data):
    """The tuner's objective (smoothed held-out AUC of 3 folds as masks, shrinkage): its
    implicit gradient in the log-scales, log λ and log σ² against central differences of
    converged float64 fits, 1e-6 relative."""
    X, pos = data
    td = _tune_data(X, pos, shrink=0.01)
    p = T.TuneParams(jnp.log(jnp.asarray([1.0, 0.7, 1.3, 0.9, 1.1])), jnp.log(1e-2), jnp.log(3.0))
    f = jax.jit(lambda p: T.heldout_loss(p, td, sizes=(20, 180), tol=1e-13)[0])
    g = jax.jit(jax.grad(lambda p: T.heldout_loss(p, td, sizes=(20, 180), tol=1e-13)[0]))(p)
    h = 1e-6  # 1e-4 and 1e-5 move a pair across a window of the loss: a kink, not an error
    for field in ("log_scales", "log_lam", "log_sigma2"):
        v = getattr(p, field)
        for j in range(v.size):
            e = jnp.zeros_like(v).reshape(-1).at[j].set(h).reshape(v.shape)
            fd = (f(p._replace(**{field: v + e})) - f(p._replace(**{field: v - e}))) / (2 * h)
            got = np.asarray(getattr(g, field)).reshape(-1)[j]
            np.testing.assert_allclose(got, float(fd), rtol=1e-6)


@pytest.mark.slow  # a compiled tuner step and ten steps: ~50 s on 2 cores
def test_tune_moves_toward_informative_columns():
    """One informative column and four of pure noise: the tuned log-scale of the informative
    column ends above every noise column's, the gradient members' smoothed AUC rises, and the
    early stop is judged on the weight-0 member."""
    rng = np.random.default_rng(0)
    m = 240
    X = rng.standard_normal((m, 5))
    pos = X[:, 0] + 0.3 * rng.standard_normal(m) > 1.0
    td = _tune_data(X, pos, k=3, nb=12, weights=[1.0, 1.0, 0.0])
    p0 = T.TuneParams(jnp.zeros(5), jnp.log(1e-2), jnp.log(float(kernels.sigma2_heuristic(X))))
    out = T.tune(p0, td, sizes=(int(pos.sum()), m), steps=10, patience=10)
    ls = np.asarray(out.params.log_scales)
    assert out.history.shape[1] == 3 and out.stop_scores.size == out.history.shape[0]
    assert out.history[-1, 1] > out.history[0, 1]  # the smoothed AUC of the gradient members
    assert out.best_step > 0
    assert ls[0] > ls[1:].max()


# ---------------------------------------------------------------------- search and estimator


def test_smooth_mirror_has_no_corner_bias():
    """A table whose surface peaks inside, with a lone high corner: ``smooth_grid``'s corner
    box averages four cells and picks the corner, the mirrored box picks the peak."""
    mean = np.full((1, 5, 6), 0.80)
    mean[0, 1:4, 1:4] = 0.88  # the surface peaks inside ...
    mean[0, 2, 2] = 0.90
    # ... and one lucky corner with two good neighbours
    mean[0, 4, 5], mean[0, 3, 5], mean[0, 4, 4], mean[0, 3, 4] = 0.95, 0.88, 0.88, 0.84
    args = (np.zeros_like(mean), 2.0 ** np.arange(6), 2.0 ** np.arange(5))
    assert _cv.choose(mean, *args, rule="smooth_grid") == (0, 4, 5)
    assert _cv.choose(mean, *args, rule="smooth_mirror") == (0, 2, 2)
    flat = np.full((1, 3, 3), 0.7)
    ties = _cv.choose(flat, np.zeros_like(flat), 2.0 ** np.arange(3), 2.0 ** np.arange(3),
                      rule="smooth_mirror")  # fmt: skip
    assert ties == (0, 2, 2)  # a flat table: the largest λ and σ², as every rule


def test_search_edges_extends_until_interior_or_limit(data):
    X, pos = data
    key = jax.random.key(0)
    lams = 2.0 ** np.arange(-6, 3, 2)
    h = kernels.sigma2_heuristic(X)
    opts = dict(folds=3, key=key, dtype="float64", tol=1e-6)
    search = _cv.cv_search(X, pos, lams=lams, sigma2s=[h / 64, h / 16], **opts)
    # a pick at the widest σ² and the smallest λ: both edges call for an extension
    # no gate on the gain (its tests are in test_cv.py): on until interior or the limit
    out, new = _cv.search_edges(X, pos, search, (0, 1, 0), max_sigma2=4 * h,
                                min_lam=lams[0] / 16, min_gain=-np.inf, gain_se=0.0,
                                **opts)  # fmt: skip
    s2, ll = out.sigma2s, out.lams
    assert s2.size >= 3 and np.all(np.diff(s2) > 0) and s2.max() <= 4 * h * (1 + 1e-9)
    assert np.all(np.diff(ll) > 0) and ll.min() >= lams[0] / 16 * (1 - 1e-9)
    assert out.cv_auc.shape == (1, s2.size, 3, ll.size)
    widest = new[1] == s2.size - 1
    assert not widest or s2.max() * 4 > 4 * h * (1 + 1e-9)  # interior, or at the limit
    assert new[2] > 0 or ll.min() / 4 < lams[0] / 16 * (1 - 1e-9)
    assert new == _cv.choose(out.mean_auc, out.se_auc, ll, s2, "smooth_mirror")
    # a merged row is the search of that σ² alone, on the same folds
    again = _cv.cv_search(X, pos, lams=lams, sigma2s=s2[2:3], **opts)
    np.testing.assert_allclose(out.cv_auc[:, 2:3, :, np.isin(ll, lams)], again.cv_auc)


@pytest.mark.slow  # five searches and a compiled tuner: ~2 min on 2 cores
def test_estimator_kernels_and_feature_scales():
    sk = pytest.importorskip("sklearn")
    del sk
    from jaxrank.sklearn import RankRCClassifierCV

    rng = np.random.default_rng(0)
    m = 300
    Z = rng.standard_normal((m, 2))
    y = (Z[:, 0] + 0.5 * Z[:, 1] ** 2 + 0.5 * rng.standard_normal(m) > 1.6).astype(int)
    cat = rng.integers(0, 3, m)
    X = np.c_[Z, 2 * rng.standard_normal((m, 2)), np.eye(3)[cat]]
    X = (X - X.mean(0)) / X.std(0)
    groups = [0, 1, 2, 3, 4, 4, 4]
    kw = dict(cv=3, random_state=0, lams=2.0 ** np.arange(-10, 3, 4), dtype="float64")
    base = RankRCClassifierCV(kernel="binary", **kw).fit(X, y)
    assert isinstance(base.model_.kernel, ARDGaussian)  # binary-aware: the one-hot columns
    iso = RankRCClassifierCV(kernel="gaussian", **kw).fit(X, y)
    assert type(iso.model_.kernel) is Gaussian and iso.kernel_choice_ == "gaussian"
    auto = RankRCClassifierCV(**kw).fit(X, y)  # both searched: the better on the same folds
    pick = base if auto.kernel_choice_ == "binary" else iso
    assert auto.best_params_ == pick.best_params_
    np.testing.assert_allclose(auto.decision_function(X), pick.decision_function(X))
    ard = RankRCClassifierCV(kernel="ard", feature_groups=groups, **kw).fit(X, y)
    assert isinstance(ard.model_.kernel, ARDGaussian)
    fs = ard.feature_scales_
    assert fs.shape == (7,) and np.all(fs >= 0)
    assert ard.ard_["kept"] in ("start", "tuned") and ard.ard_["start"] in (
        "isotropic",
        "univariate",
    )
    if ard.ard_["kept"] == "start":  # the grid's own λ, not exp(log λ) (2⁻⁶ as 0.0156249998)
        assert ard.best_params_["lam"] in kw["lams"].tolist()
    # one scale per group: the one-hot columns of one variable share the learned factor
    ratio = fs[4:] / (base if ard.kernel_choice_ == "binary" else iso).feature_scales_[4:]
    np.testing.assert_allclose(ratio / ratio[0], 1.0, rtol=1e-6)
    assert ard.decision_function(X).shape == (m,)
    with pytest.raises(ValueError, match="kernel must be one of"):
        RankRCClassifierCV(kernel="laplace").fit(X, y)
    with pytest.raises(ValueError, match="one entry per column"):
        RankRCClassifierCV(kernel="ard", feature_groups=[0, 1]).fit(X, y)


def test_cli_fits_saves_loads_and_scores_a_binary_aware_model(tmp_path, capsys):
    """The command line standardises, so a dummy column comes out far from 0/1: with
    ``--kernel binary`` its model is the binary-aware Gaussian (an ARD kernel), saved, loaded
    and scored like any other, equal to jaxrank.fit with the same kernel on the same
    standardised rows."""
    from jaxrank import cli
    from jaxrank.cli import _modelfile as _cli_modelfile

    rng = np.random.default_rng(0)
    m = 240
    X = np.c_[rng.standard_normal((m, 3)), (rng.random(m) < 0.1).astype(float)]
    y = np.where(X[:, 0] + 2 * X[:, 3] + 0.5 * rng.standard_normal(m) > 1.3, 1, 0)
    path = tmp_path / "d.csv"
    np.savetxt(path, np.c_[X, y], delimiter=",", header="a,b,c,dummy,label", comments="")
    out = tmp_path / "m.npz"
    argv = ["fit", path, "--target", "label", "--lam", "0.01", "--dtype", "float64", "-o", out,
            "--kernel", "binary"]  # fmt: skip
    assert cli.main([str(a) for a in argv]) == 0
    assert "1 column(s) rescaled" in capsys.readouterr().out
    mf = _cli_modelfile.load_model_file(out)
    assert isinstance(mf.model.kernel, ARDGaussian)
    Xs = (X - X.mean(0)) / X.std(0)
    want = jaxrank.fit(Xs, y, 0.01, kernel=kernels.ard(None, kernels.binary_scales(Xs)),
                       dtype="float64")  # fmt: skip
    assert cli.main(["predict", str(out), str(path)]) == 0
    got = np.array([float(v) for v in capsys.readouterr().out.split()])
    np.testing.assert_allclose(got, np.asarray(want.decision_function(Xs)), rtol=1e-6, atol=1e-6)
