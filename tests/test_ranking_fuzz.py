"""Fuzz (hypothesis) of pairwise_loss / pairwise_auc against the pair loop of tests/oracles.py
(issue 41): scores with outliers up to 1e30, ties, ±inf and NaN, with masks, weights and
segments, in float64 and float32; value, gradient, Hessian-vector product and AUC.

Tolerances are relative to each number's own scale (the sum of the absolute pair terms that
make it), which is what summing in floating point can promise. A NaN score that enters a
ranking makes its value, gradient and AUC NaN (the pair loop would skip it).
"""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from oracles import ranking_loss_oracle

import jaxrank
from jaxrank import losses

PROFILE = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
N = 10  # one shape: one compilation per option set
FAR = [1e6, -1e6, 1e10, -1e10, 1e30, -1e30, np.inf, -np.inf]


@st.composite
def rankings(draw, nan=True):
    quarters = draw(st.lists(st.integers(-8, 8), min_size=N, max_size=N))
    s = np.asarray(quarters, np.float64) / 4  # many ties and breakpoint hits
    far = draw(st.lists(st.sampled_from(FAR + ([np.nan] if nan else [])), max_size=4))
    idx = draw(st.lists(st.integers(0, N - 1), min_size=len(far), max_size=len(far)))
    s[idx] = far
    pos = np.asarray(draw(st.lists(st.booleans(), min_size=N, max_size=N)))
    keep = np.asarray(draw(st.lists(st.booleans(), min_size=N, max_size=N)))
    if draw(st.booleans()):  # half the cases without a mask
        keep = np.ones(N, bool)
    w = np.asarray(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=N, max_size=N)))
    seg = np.asarray(draw(st.lists(st.integers(0, 2), min_size=N, max_size=N)))
    if draw(st.booleans()):
        seg = np.zeros(N, np.int64)
    d = np.asarray(draw(st.lists(st.integers(-4, 4), min_size=N, max_size=N)), np.float64)
    return s, pos, keep, w, seg, d


@jax.jit
def _run(x, d, pos, keep, w, seg, eps, squared):
    def f(x, reduce):
        loss = "squared_hinge" if squared else "smoothed_hinge"
        return jaxrank.pairwise_loss(
            x, pos, where=keep, weights=w, segments=seg, loss=loss, eps=eps, reduce=reduce
        )

    v, g = jax.value_and_grad(lambda x: f(x, "sum"))(x)
    h = jax.jvp(jax.grad(lambda x: f(x, "sum")), (x,), (d,))[1]
    auc = jaxrank.pairwise_auc(x, pos, where=keep, weights=w, segments=seg)
    return v, g, h, f(x, "mean"), auc


_run = jax.jit(_run.__wrapped__, static_argnums=7)


def _scales(s, pos, keep, w, seg, loss):
    # per entry: Σ over its pairs of |w_i w_j ℓ'|, and the sum of |w_i w_j ℓ| (the value's scale)
    lo, q, c = (float(v) for v in loss)
    with np.errstate(invalid="ignore", over="ignore"):
        z = s[:, None] - s[None, :]
        pair = (pos & keep)[:, None] & (~pos & keep)[None, :] & (seg[:, None] == seg[None, :])
        ww = np.where(pair, w[:, None] * w[None, :], 0.0)
        lin = s[:, None] < s[None, :] + lo
        quad = ~lin & (s[:, None] < s[None, :] + 1)
        dl = np.where(lin, 1.0, np.where(quad, np.abs(2 * q * (1 - z)), 0.0))
        ell = np.where(lin, np.abs(c - z), np.where(quad, q * (1 - z) ** 2, 0.0))
        gs = np.nansum(ww * dl, 1) + np.nansum(ww * dl, 0)
        return gs, float(np.nansum(ww * ell)), float(ww.sum())


def _auc_oracle(s, pos, keep, w, seg):
    num = den = 0.0
    for i in np.flatnonzero(pos & keep):
        for j in np.flatnonzero(~pos & keep):
            if seg[i] == seg[j]:
                ww = w[i] * w[j]
                den += ww
                num += ww * ((s[i] > s[j]) + 0.5 * (s[i] == s[j]))
    return num / den if den else np.nan


def _check(case, eps, squared, dt, rtol):
    s, pos, keep, w, seg, d = case
    s = np.asarray(s, dt).astype(np.float64)  # the scores the loss sees
    loss = losses.squared_hinge() if squared else losses.smoothed_hinge(eps)
    x = jnp.asarray(s, dt)
    v, g, h, mean, auc = _run(x, jnp.asarray(d, dt), pos, keep, jnp.asarray(w, dt), seg,
                              jnp.asarray(eps, dt), squared)  # fmt: skip
    v, g, h, mean, auc = (np.asarray(a, np.float64) for a in (v, g, h, mean, auc))
    if np.isnan(s[keep]).any():
        assert np.isnan(v) and np.isnan(g).all() and np.isnan(auc)
        return
    # an entry of weight 0 enters no pair (the pair loop would make 0 · inf = NaN of it)
    keep = keep & (w > 0)
    ov, pairs, og, oh = ranking_loss_oracle(s, pos, keep, w, seg, loss, d)
    gscale, vscale, _ = _scales(s, pos, keep, w, seg, loss)
    if not np.isfinite(ov):  # an infinite pair term
        assert v == ov or (np.isnan(v) and np.isnan(ov)), (v, ov)
    else:
        assert abs(v - ov) <= rtol * (1 + vscale), (v, ov)
        assert abs(mean - (ov / pairs if pairs else 0.0)) <= rtol * (
            1 + vscale / max(pairs, 1e-300)
        )
    inf = np.isinf(og)
    np.testing.assert_array_equal(g[inf], og[inf])
    assert (np.abs(g[~inf] - og[~inf]) <= rtol * (1 + gscale[~inf])).all(), (g, og)
    hscale = 2 * (1 / (4 * eps) if not squared else 1) * np.abs(d).max() * 2 * (1 + gscale)
    assert (np.abs(h - oh) <= rtol * (1 + hscale)).all(), (h, oh)
    oa = _auc_oracle(s, pos, keep, w, seg)
    assert (np.isnan(auc) and np.isnan(oa)) or abs(auc - oa) <= rtol, (auc, oa)


@settings(max_examples=60, **PROFILE)
@given(rankings(), st.sampled_from([0.5, 0.25, 1.0]), st.booleans())
def test_fuzz_float64(case, eps, squared):
    _check(case, eps, squared, np.float64, 1e-10)


def _ambiguous_in_float32(s):
    # a pair of large near-equal scores: float32 cannot place its breakpoints (s + 1 rounds
    # to s above 2**24) where the float64 pair loop does
    big = np.abs(s) >= 2.0**22
    with np.errstate(invalid="ignore"):
        close = np.abs(s[:, None] - s[None, :]) < 2
    return bool((close & big[:, None] & np.isfinite(s)[:, None]).any())


@settings(max_examples=40, **PROFILE)
@given(rankings(), st.sampled_from([0.5, 0.25]))
def test_fuzz_float32(case, eps):
    assume(not _ambiguous_in_float32(np.asarray(case[0], np.float32).astype(np.float64)))
    _check(case, eps, False, np.float32, 2e-5)
