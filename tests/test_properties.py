"""Property-based tests (hypothesis): the sorted-window operators and the metrics against
brute-force oracles on small random inputs with many ties.

Every test is derandomized (the examples are a function of the test, so CI sees the same ones
on every run), has no deadline (the first example of a shape compiles) and keeps
``max_examples`` modest. Shapes come from a short list so that each compiles once.
"""

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import pair_value_grad_hvp

from jaxrank import losses, metrics, pairwise

PROFILE = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Breakpoints of these losses (z = 1 − 2ε and z = 1) are multiples of 1/4, like the scores
# below: many pair differences land exactly on a breakpoint, and many scores are tied.
LOSSES = {
    "smoothed ε=1/2": losses.smoothed_hinge(0.5),
    "smoothed ε=1/4": losses.smoothed_hinge(0.25),
    "smoothed ε=1/8": losses.smoothed_hinge(0.125),
    "smoothed ε=1": losses.smoothed_hinge(1.0),
    "smoothed ε=3/2": losses.smoothed_hinge(1.5),
    "squared hinge": losses.squared_hinge(),
}
SHAPES = [(1, 1), (1, 6), (5, 1), (4, 9)]


def quarters(n):
    return st.lists(st.integers(-8, 8), min_size=n, max_size=n).map(
        lambda v: np.asarray(v, np.float64) / 4
    )


@jax.jit
def _operators(fp, fn, dp, dn, loss):
    value, gp, gn, w = pairwise.value_and_grad(fp, fn, loss)
    hp, hn = pairwise.hvp(w, dp, dn, loss)
    return value, gp, gn, hp, hn


@st.composite
def pairwise_problems(draw):
    n_pos, n_neg = draw(st.sampled_from(SHAPES))
    fp, fn = draw(quarters(n_pos)), draw(quarters(n_neg))
    dp, dn = draw(quarters(n_pos)), draw(quarters(n_neg))
    ep, en = draw(quarters(n_pos)), draw(quarters(n_neg))
    return draw(st.sampled_from(sorted(LOSSES))), fp, fn, dp, dn, ep, en


@settings(max_examples=80, **PROFILE)
@given(pairwise_problems())
def test_pairwise_matches_pair_loop(problem):
    name, fp, fn, dp, dn, ep, en = problem
    loss = LOSSES[name]
    got = _operators(*(jnp.asarray(v) for v in (fp, fn, dp, dn)), loss)
    want = pair_value_grad_hvp(fp, fn, loss, dp, dn)
    scale = max(1.0, abs(want[0]))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=0, atol=1e-10 * scale)
    # the Hessian in score space is symmetric and positive semi-definite
    _, _, _, hp_e, hn_e = _operators(*(jnp.asarray(v) for v in (fp, fn, ep, en)), loss)
    d_he = float(dp @ np.asarray(hp_e) + dn @ np.asarray(hn_e))
    e_hd = float(ep @ np.asarray(got[3]) + en @ np.asarray(got[4]))
    assert abs(d_he - e_hd) <= 1e-10 * scale * (1 + abs(d_he))
    assert float(dp @ np.asarray(got[3]) + dn @ np.asarray(got[4])) >= -1e-10 * scale


@settings(max_examples=30, **PROFILE)
@given(pairwise_problems(), st.integers(-8, 8))
def test_pairwise_invariant_to_a_common_shift(problem, shift):
    """The loss only sees differences f_i − f_j: shifting every score changes nothing."""
    name, fp, fn, dp, dn, _, _ = problem
    loss = LOSSES[name]
    a = _operators(*(jnp.asarray(v) for v in (fp, fn, dp, dn)), loss)
    b = _operators(*(jnp.asarray(v) for v in (fp + shift, fn + shift, dp, dn)), loss)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=1e-10)


# --------------------------------------------------------------------------------------------
# metrics
# --------------------------------------------------------------------------------------------

N = 14  # fixed length: one compilation per metric


def brute_auc(pos, s):
    total = 0.0
    for i in np.flatnonzero(pos):
        for j in np.flatnonzero(~pos):
            total += 1.0 if s[i] > s[j] else 0.5 if s[i] == s[j] else 0.0
    return total / (pos.sum() * (~pos).sum())


def brute_mauc(levels, s, half):
    num = den = 0.0
    for i in range(levels.size):
        for j in range(levels.size):
            if levels[i] > levels[j]:
                den += 1
                num += 1.0 if s[i] > s[j] else (0.5 if half and s[i] == s[j] else 0.0)
    return num / den


def brute_rates(pos, hat):
    tp = sum(1 for p, h in zip(pos, hat, strict=True) if p and h)
    fn = sum(1 for p, h in zip(pos, hat, strict=True) if p and not h)
    tn = sum(1 for p, h in zip(pos, hat, strict=True) if not p and not h)
    fp = sum(1 for p, h in zip(pos, hat, strict=True) if not p and h)
    return tp, fn, tn, fp


def encode(pos, coding):
    return {
        "pm1": np.where(pos, 1, -1),
        "01": pos.astype(np.int64),
        "bool": pos,
        "float": np.where(pos, 1.0, -1.0),
    }[coding]


@st.composite
def labelled(draw, n=N, rows=1):
    pos = np.asarray(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    pos[0], pos[1] = True, False  # both classes present
    s = np.stack([draw(quarters(n)) for _ in range(rows)])
    coding = draw(st.sampled_from(["pm1", "01", "bool", "float"]))
    return pos, s, coding


@settings(max_examples=60, **PROFILE)
@given(labelled(rows=3))
def test_auc_matches_brute_force(case):
    pos, s, coding = case
    got = np.asarray(metrics.auc(encode(pos, coding), s))
    assert got.shape == (3,)
    for r in range(3):
        assert abs(got[r] - brute_auc(pos, s[r])) <= 1e-12
    # a strictly increasing map keeps every pair's order: same AUC
    np.testing.assert_allclose(np.asarray(metrics.auc(pos, np.exp(s))), got, rtol=0, atol=1e-12)
    # reversing the scores swaps won and lost pairs
    np.testing.assert_allclose(np.asarray(metrics.auc(pos, -s)), 1 - got, rtol=0, atol=1e-12)


@settings(max_examples=60, **PROFILE)
@given(st.integers(2, 30).flatmap(lambda n: labelled(n=n)))
def test_roc_curve_matches_brute_force(case):
    pos, s, coding = case
    s = s[0]
    fpr, tpr, thr = metrics.roc_curve(encode(pos, coding), s)
    distinct = np.unique(s)[::-1]
    np.testing.assert_array_equal(thr, np.r_[np.inf, distinct])
    for k, t in enumerate(thr):
        above = s >= t
        assert tpr[k] == np.sum(above & pos) / pos.sum()
        assert fpr[k] == np.sum(above & ~pos) / (~pos).sum()
    area = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))
    assert abs(area - brute_auc(pos, s)) <= 1e-12


@settings(max_examples=50, **PROFILE)
@given(
    st.integers(2, 4).flatmap(
        lambda r: st.tuples(
            st.just(r),
            st.lists(st.integers(0, r - 1), min_size=N, max_size=N),
            st.sampled_from([1, 3]),
            st.integers(-5, 5),
        )
    ),
    quarters(N),
    st.booleans(),
)
def test_mauc_matches_brute_force(levels_spec, s, half):
    r, idx, step, offset = levels_spec
    idx = np.asarray(idx)
    idx[:r] = np.arange(r)  # every level present
    levels = idx * step + offset  # only the order of the level values matters
    got = float(metrics.mauc(levels, s, ties="half" if half else "strict"))
    assert abs(got - brute_mauc(levels, s, half)) <= 1e-12


@st.composite
def predictions(draw):
    pos = np.asarray(draw(st.lists(st.booleans(), min_size=N, max_size=N)))
    pos[0], pos[1] = True, False
    kind = draw(st.sampled_from(["pm1", "01", "bool", "scores"]))
    if kind == "scores":
        pred = draw(quarters(N))  # thresholded at 0; a score of exactly 0 is negative
        hat = pred > 0
    else:
        hat = np.asarray(draw(st.lists(st.booleans(), min_size=N, max_size=N)))
        pred = encode(hat, kind)
    return pos, pred, hat, draw(st.sampled_from(["pm1", "01", "bool"]))


@settings(max_examples=80, **PROFILE)
@given(predictions())
def test_am_qm_f1_match_brute_force(case):
    pos, pred, hat, coding = case
    tp, fn, tn, fp = brute_rates(pos, hat)
    tpr, tnr = tp / (tp + fn), tn / (tn + fp)
    y = encode(pos, coding)
    assert abs(float(metrics.am(y, pred)) - (tpr + tnr) / 2) <= 1e-12
    qm = 1 - np.sqrt(((1 - tpr) ** 2 + (1 - tnr) ** 2) / 2)
    assert abs(float(metrics.qm(y, pred)) - qm) <= 1e-12
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    assert abs(float(metrics.f1(y, pred)) - f1) <= 1e-12
    assert float(metrics.qm(y, pred)) <= float(metrics.am(y, pred)) + 1e-12
