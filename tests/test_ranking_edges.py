"""pairwise_loss / pairwise_auc at the edges of their inputs (issue 41): far and infinite scores,
NaN, segment ids, half precision, weights and ε; every number against the pair definition."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrank
from jaxrank import losses

F32_F64 = pytest.mark.parametrize("dt", [jnp.float32, jnp.float64])


def pair_matrix(s, pos, *, keep=None, w=None, seg=None, loss="smoothed_hinge", eps=0.5):
    """Sum, pair weight and score gradient of Σ_{i∈+, j∈−, same segment} w_i w_j ℓ(s_i − s_j),
    as the pair matrix in float64 (the oracle's definition, vectorised for n in the thousands).
    The pieces are decided as the pair loop decides them: s_i < s_j + lo, s_i < s_j + 1."""
    lo, q, c = (float(v) for v in losses.get_loss(loss, eps))
    s = np.asarray(s, np.float64)
    n = s.size
    keep = np.ones(n, bool) if keep is None else np.asarray(keep, bool)
    w = np.ones(n) if w is None else np.asarray(w, np.float64)
    seg = np.zeros(n, np.int64) if seg is None else np.asarray(seg)
    pos = np.asarray(pos, bool)
    P, N = np.flatnonzero(pos & keep), np.flatnonzero(~pos & keep)
    sp, sn = s[P][:, None], s[N][None, :]
    ww = w[P][:, None] * w[N][None, :] * (seg[P][:, None] == seg[N][None, :])
    with np.errstate(invalid="ignore"):
        z = sp - sn
        lin = sp < sn + lo
        quad = ~lin & (sp < sn + 1)
        ell = np.where(lin, c - z, np.where(quad, q * (1 - z) ** 2, 0.0))
        dz = np.where(lin, -1.0, np.where(quad, -2 * q * (1 - z), 0.0))
    g = np.zeros(n)
    np.add.at(g, P, (ww * dz).sum(1))
    np.add.at(g, N, -(ww * dz).sum(0))
    return float((ww * ell).sum()), float(ww.sum()), g


def _rare(n, seed, dt, rho=0.1):
    rng = np.random.default_rng(seed)
    s = rng.normal(size=n).astype(dt)
    pos = rng.random(n) < rho
    return s, pos


# --- 1. far scores: every sum is taken relative to its window -------------------------------


@F32_F64
def test_far_positive_above_the_rest_is_exact(dt):
    # beyond every negative's margin: its pairs cost zero and must not disturb the others'
    y = jnp.array([1, 0, 1, 0])
    for big in (1e8, 1e30):
        f = jnp.array([big, 0.5, 0.0, -1.0], dt)
        assert float(jaxrank.pairwise_loss(f, y)) == pytest.approx(0.25, rel=1e-6)
        g = jax.grad(jaxrank.pairwise_loss)(f, y)
        np.testing.assert_allclose(g, [0.0, 0.25, -0.25, 0.0], atol=1e-7)
    # the case: 2000 scores, 10 % positives, one positive at 1e6 (float32: 1.2265 for
    # 0.9852 before), at 1e10 and 1e30 in float64
    s, pos = _rare(2000, 0, dt)
    for big in (1e6, 1e10, 1e30):
        s[np.flatnonzero(pos)[0]] = big
        v, pairs, og = pair_matrix(s, pos)
        f = jnp.asarray(s, dt)
        got, g = jax.value_and_grad(jaxrank.pairwise_loss)(f, pos)
        tol = 2e-6 if dt == jnp.float32 else 1e-12
        assert float(got) == pytest.approx(v / pairs, rel=tol)
        np.testing.assert_allclose(g, og / pairs, atol=tol * np.abs(og / pairs).max())


@F32_F64
def test_far_scores_on_the_costly_side_and_per_segment(dt):
    # a positive far below (its pairs cost a lot: the value is dominated by them, the others'
    # gradients stay exact), a negative far above, and segments at offsets 0 and 1e6: each
    # segment's sums are its own
    s, pos = _rare(600, 1, dt, rho=0.2)
    seg = np.arange(600) % 2
    s = np.where(seg == 1, s + np.asarray(1e6 if dt == jnp.float32 else 1e12, dt), s).astype(dt)
    P, N = np.flatnonzero(pos & (seg == 0)), np.flatnonzero(~pos & (seg == 0))
    s[P[0]] = -1e5
    s[N[0]] = 1e5
    tol = 5e-5 if dt == jnp.float32 else 1e-10
    for loss in ("smoothed_hinge", "squared_hinge"):
        for eps in (0.5, 0.1):
            v, _, og = pair_matrix(s, pos, seg=seg, loss=loss, eps=eps)

            def f(x, r="sum", loss=loss, eps=eps):
                return jaxrank.pairwise_loss(x, pos, segments=seg, loss=loss, eps=eps, reduce=r)

            got, g = jax.value_and_grad(f)(jnp.asarray(s))
            assert float(got) == pytest.approx(v, rel=tol)
            np.testing.assert_allclose(g, og, rtol=tol, atol=tol * 10)
            # segment 1 alone: exact to its own scale, whatever segment 0 holds
            e = np.asarray(f(jnp.asarray(s), "none"), np.float64)
            v1 = pair_matrix(np.where(seg == 1, s, 0), pos & (seg == 1), loss=loss, eps=eps)[0]
            assert e[seg == 1].sum() == pytest.approx(v1, rel=tol)


# --- 5. infinite scores ---------------------------------------------------------------------


@F32_F64
def test_infinite_scores_whose_pairs_cost_nothing(dt):
    y = jnp.array([1, 0, 1, 0])
    f = jnp.array([jnp.inf, 0.5, 0.0, -jnp.inf], dt)  # NaN value and gradient before
    assert float(jaxrank.pairwise_loss(f, y)) == 0.25
    g = jax.grad(jaxrank.pairwise_loss)(f, y)
    np.testing.assert_array_equal(g, np.array([0.0, 0.25, -0.25, 0.0], dt))
    hv = jax.jvp(jax.grad(lambda x: jaxrank.pairwise_loss(x, y)), (f,), (jnp.ones(4, dt),))[1]
    assert np.isfinite(np.asarray(hv)).all()
    # ties at +inf among the positives, with segments
    f = jnp.array([jnp.inf, jnp.inf, 0.3, 0.0, 1.0, -jnp.inf], dt)
    y = jnp.array([1, 1, 1, 0, 1, 0])
    v, pairs, og = pair_matrix(np.asarray(f), np.asarray(y, bool), seg=np.array([0, 1, 0, 0, 1, 1]))
    got, g = jax.value_and_grad(
        lambda x: jaxrank.pairwise_loss(x, y, segments=jnp.array([0, 1, 0, 0, 1, 1]))
    )(f)
    assert float(got) == pytest.approx(v / pairs)
    np.testing.assert_allclose(g, og / pairs, atol=1e-7)
    # a pair that does cost infinitely much says so
    f = jnp.array([-jnp.inf, 0.5, 0.0, -1.0], dt)
    assert float(jaxrank.pairwise_loss(f, jnp.array([1, 0, 1, 0]))) == np.inf


# --- 2. NaN scores --------------------------------------------------------------------------


@F32_F64
def test_auc_of_a_nan_score_is_nan(dt):
    y = jnp.array([1, 0, 1, 0])
    f = jnp.array([jnp.nan, 0.5, 0.0, -1.0], dt)  # 1.0 before
    assert np.isnan(float(jaxrank.pairwise_auc(f, y)))
    assert np.isnan(float(jaxrank.pairwise_loss(f, y)))
    assert np.isnan(np.asarray(jax.grad(jaxrank.pairwise_loss)(f, y))).all()
    # a masked NaN enters nothing; another ranking is not touched
    keep = jnp.array([False, True, True, True])
    assert float(jaxrank.pairwise_auc(f, y, where=keep)) == 0.5
    two = jnp.stack([f, jnp.array([2.0, 0.5, 0.0, -1.0], dt)])
    np.testing.assert_array_equal(np.isnan(jaxrank.pairwise_auc(two, y)), [True, False])


# --- 3. segment ids -------------------------------------------------------------------------


@F32_F64
def test_segment_ids_are_checked_and_kept_exactly(dt):
    f = jnp.array([2.0, 0.5, 0.0, -1.0], dt)
    y = jnp.array([1, 0, 1, 0])
    # the largest int32 id is its own segment (it ran into "id + 1" before: 0.0 and -inf)
    top = np.full(4, 2**31 - 1)
    assert float(jaxrank.pairwise_loss(f, y, segments=top)) == 0.25
    assert float(jaxrank.pairwise_auc(f, y, segments=top)) == 0.75
    # x64 (on in the tests): 2**32 and 0 are different segments (they merged through int32)
    apart = np.array([0, 0, 2**32, 2**32])
    assert float(jaxrank.pairwise_auc(f, y, segments=apart)) == 1.0  # pairs (2, .5), (0, -1)
    assert float(jaxrank.pairwise_loss(f, y, segments=apart)) == 0.0  # merged: 0.75 and 0.25
    with pytest.raises(ValueError, match="ids >= 0"):
        jaxrank.pairwise_loss(f, y, segments=np.array([-1, -1, 0, 0]))
    with pytest.raises(TypeError, match="integer ids"):
        jaxrank.pairwise_auc(f, y, segments=np.array([0.0, 0.5, 1.0, 1.0]))


# --- 4. half precision ----------------------------------------------------------------------


@pytest.mark.parametrize("half", [jnp.float16, jnp.bfloat16])
def test_half_precision_scores_sum_in_float32(half):
    s, pos = _rare(5000, 2, np.float32, rho=0.3)  # NaN in float16, 0.4 % off in bfloat16 before
    f = jnp.asarray(s).astype(half)
    v, pairs, og = pair_matrix(np.asarray(f.astype(jnp.float32)), pos)
    got, g = jax.value_and_grad(jaxrank.pairwise_loss)(f, pos)
    assert got.dtype == half and g.dtype == half
    assert float(got) == pytest.approx(v / pairs, rel=4e-3)
    np.testing.assert_allclose(
        np.asarray(g, np.float64), og / pairs, atol=2e-2 * np.abs(og).max() / pairs
    )
    a = pair_matrix(np.asarray(f.astype(jnp.float32)), pos, loss="hinge")  # any value: AUC below
    assert a[1] == pairs
    auc = jaxrank.pairwise_auc(f, pos)
    assert float(auc) == pytest.approx(
        float(jaxrank.metrics.auc(pos, np.asarray(f, np.float32))), abs=4e-3
    )


# --- 6. weights and ε -----------------------------------------------------------------------


@F32_F64
def test_weights_and_eps_invalid_inputs(dt):
    f = jnp.array([2.0, 0.5, 0.0, -1.0], dt)
    y = jnp.array([1, 0, 1, 0])
    keep = jnp.array([True, True, False, True])
    w = jnp.array([1.0, 1.0, jnp.nan, 1.0], dt)
    # a NaN weight on a masked entry is never read (it leaked into the result before)
    assert float(jaxrank.pairwise_loss(f, y, where=keep, weights=w)) == 0.0
    assert float(jaxrank.pairwise_auc(f, y, where=keep, weights=w)) == 1.0
    # a negative weight is refused (0.0 before); traced, its ranking is NaN
    neg = jnp.array([1.0, -1.0, 1.0, 1.0], dt)
    with pytest.raises(ValueError, match="weights must be >= 0"):
        jaxrank.pairwise_loss(f, y, weights=neg)
    assert np.isnan(float(jax.jit(lambda w: jaxrank.pairwise_loss(f, y, weights=w))(neg)))
    # a traced ε <= 0 gives NaN, value and gradient (ε = -1 gave 1.14 before)
    loss = jax.jit(jax.value_and_grad(lambda x, e: jaxrank.pairwise_loss(x, y, eps=e)))
    for e in (-1.0, 0.0, float("nan")):
        v, g = loss(f, jnp.asarray(e, dt))
        assert np.isnan(float(v)) and np.isnan(np.asarray(g)).all()
    v, g = loss(f, jnp.asarray(0.5, dt))
    assert float(v) == 0.25
    # ε per ranking: vmap (an array ε outside vmap said "Only scalar arrays can be converted")
    with pytest.raises(ValueError, match="eps must be a scalar"):
        jaxrank.pairwise_loss(f, y, eps=jnp.array([0.5, 0.25]))
    per = jax.vmap(lambda e: jaxrank.pairwise_loss(f, y, eps=e))(jnp.array([0.5, 0.25], dt))
    assert per.shape == (2,)


# --- 10. shapes -----------------------------------------------------------------------------


def test_no_ranking_at_all():
    # a leading axis of length 0: no ranking, an empty result ("zero-size array" before)
    assert jaxrank.pairwise_loss(jnp.zeros((0, 4)), jnp.zeros((0, 4))).shape == (0,)
    assert jaxrank.pairwise_loss(jnp.zeros((0, 4)), jnp.zeros((0, 4)), reduce="none").shape == (
        0,
        4,
    )
    assert jaxrank.pairwise_auc(jnp.zeros((0, 4)), jnp.zeros((0, 4))).shape == (0,)
