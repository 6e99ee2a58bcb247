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
