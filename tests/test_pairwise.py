"""The sorted-window operators equal the explicit pair loop (value, gradient, Hv) to 1e-10."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from oracles import pair_value_grad_hvp

from jaxrank import losses, pairwise

LOSSES = {
    "smoothed_hinge_0.5": losses.smoothed_hinge(0.5),
    "smoothed_hinge_0.1": losses.smoothed_hinge(0.1),
    "smoothed_hinge_0.25": losses.smoothed_hinge(0.25),
    "smoothed_hinge_2": losses.smoothed_hinge(2.0),
    "squared_hinge": losses.squared_hinge(),
}


def _scores(rng, n_pos, n_neg, ties):
    fp = rng.normal(size=n_pos)
    fn = rng.normal(size=n_neg) - 0.3
    if ties:  # many equal scores, and pair differences landing exactly on the breakpoints
        fp, fn = np.round(fp, 1), np.round(fn, 1)
    return fp, fn


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (7, 1), (23, 61), (40, 40)])
def test_matches_pair_loop(name, ties, shape):
    loss = LOSSES[name]
    rng = np.random.default_rng(hash((name, ties, shape)) % 2**32)
    fp, fn = _scores(rng, *shape, ties)
    dp, dn = rng.normal(size=shape[0]), rng.normal(size=shape[1])
    value, gp, gn, w = pairwise.value_and_grad(jnp.asarray(fp), jnp.asarray(fn), loss)
    hp, hn = pairwise.hvp(w, jnp.asarray(dp), jnp.asarray(dn), loss)
    ov, ogp, ogn, ohp, ohn = pair_value_grad_hvp(fp, fn, loss, dp, dn)
    scale = max(1.0, abs(ov))
    assert abs(float(value) - ov) <= 1e-10 * scale
    np.testing.assert_allclose(gp, ogp, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(gn, ogn, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(hp, ohp, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(hn, ohn, rtol=0, atol=1e-10 * scale)


def test_all_scores_tied():
    """At β = 0 every score is equal: all pairs sit at z = 0."""
    loss = losses.smoothed_hinge(0.5)
    fp, fn = np.zeros(5), np.zeros(8)
    d = np.arange(13.0)
    v, gp, gn, w = pairwise.value_and_grad(jnp.asarray(fp), jnp.asarray(fn), loss)
    hp, hn = pairwise.hvp(w, jnp.asarray(d[:5]), jnp.asarray(d[5:]), loss)
    ov, ogp, ogn, ohp, ohn = pair_value_grad_hvp(fp, fn, loss, d[:5], d[5:])
    np.testing.assert_allclose([v, *gp, *gn, *hp, *hn], [ov, *ogp, *ogn, *ohp, *ohn], atol=1e-12)


def test_vmap_over_batch_matches_loop():
    rng = np.random.default_rng(2)
    loss = losses.smoothed_hinge(0.5)
    fp, fn = jnp.asarray(rng.normal(size=(4, 11))), jnp.asarray(rng.normal(size=(4, 50)))
    # jitted (one compilation per shape) rather than run op by op: the same code, 3x faster
    vg = jax.jit(lambda a, b: pairwise.value_and_grad(a, b, loss)[:3])
    batched = jax.jit(jax.vmap(vg))(fp, fn)
    for k in range(4):
        single = vg(fp[k], fn[k])
        for x, y in zip(batched, single, strict=True):
            np.testing.assert_allclose(x[k], y, atol=1e-12)
    # one argument unbatched, and a vmap of a vmap (λ grid inside CV folds)
    half = jax.jit(jax.vmap(lambda a: vg(a, fn[1])))(fp)
    nested = jax.jit(jax.vmap(jax.vmap(vg)))(fp.reshape(2, 2, 11), fn.reshape(2, 2, 50))
    for k in range(4):
        single = vg(fp[k], fn[1])
        for x, y in zip(half, single, strict=True):
            np.testing.assert_allclose(x[k], y, atol=1e-12)
        single = vg(fp[k], fn[k])
        for x, y in zip(nested, single, strict=True):
            np.testing.assert_allclose(x.reshape(4, *x.shape[2:])[k], y, atol=1e-12)
    w = pairwise.windows(fp[0], fn[0], loss)
    hb = jax.vmap(lambda d: pairwise.hvp(w, d, fn[0], loss))(fp)  # windows unbatched
    np.testing.assert_allclose(hb[0][2], pairwise.hvp(w, fp[2], fn[0], loss)[0], atol=1e-12)


def test_float32_large_m_matches_float64():
    """Prefix-sum cancellation (docs/design.md §5): float32 at m = 10⁶ stays close to float64.

    Scores lie on the float32 grid inside [4, 7) (an offset the loss does not see), so both
    dtypes see the same pairs in the same pieces (f + 1 is exact there) and the difference is
    accumulation error alone.
    """
    rng = np.random.default_rng(3)
    fp = np.clip(rng.normal(size=1000) * 0.4 + 5.5, 4.0, 6.99).astype(np.float32)
    fn = np.clip(rng.normal(size=1_000_000) * 0.4 + 5.0, 4.0, 6.99).astype(np.float32)
    dp = rng.normal(size=1000).astype(np.float32)
    dn = rng.normal(size=1_000_000).astype(np.float32)
    loss64 = losses.smoothed_hinge(0.5)
    loss32 = jax.tree.map(lambda v: jnp.float32(v), loss64)
    out = {}
    for dt, loss in ((jnp.float64, loss64), (jnp.float32, loss32)):
        v, gp, gn, w = pairwise.value_and_grad(jnp.asarray(fp, dt), jnp.asarray(fn, dt), loss)
        hp, hn = pairwise.hvp(w, jnp.asarray(dp, dt), jnp.asarray(dn, dt), loss)
        out[dt] = [np.asarray(a, np.float64) for a in (v, gp, gn, hp, hn)]
    for a32, a64 in zip(out[jnp.float32], out[jnp.float64], strict=True):
        err = np.max(np.abs(a32 - a64)) / max(1.0, np.max(np.abs(a64)))
        assert err < 1e-5, err
