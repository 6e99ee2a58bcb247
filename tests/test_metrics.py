"""Tests for jaxrank.metrics: exact pair-count oracles, scikit-learn, jit/vmap, bad inputs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import balanced_accuracy_score, f1_score, roc_auc_score
from sklearn.metrics import roc_curve as sk_roc_curve

from jaxrank import metrics
from jaxrank.metrics import _exact_count_sum

# ---------------------------------------------------------------------------------------------
# oracles
# ---------------------------------------------------------------------------------------------


def pair_auc(pos, s):
    """Brute-force Mann-Whitney AUC over every (positive, negative) pair; ties count 1/2."""
    total, pairs = 0.0, 0
    for si in s[pos]:
        for sj in s[~pos]:
            total += 1.0 if si > sj else 0.5 if si == sj else 0.0
            pairs += 1
    return total / pairs


def pair_mauc(levels, s, half=False):
    """Brute-force multi-level AUC: every pair from two different levels, once."""
    levels = np.asarray(levels)
    diff = levels[:, None] > levels[None, :]  # i higher level than j
    gt = s[:, None] > s[None, :]
    eq = s[:, None] == s[None, :]
    credit = gt + (0.5 * eq if half else 0.0)
    return float(np.sum(credit * diff) / np.sum(diff))


def row_pairs(pos, s, keep):
    """Apply the pair oracle row by row over leading axes."""
    pos, s, keep = np.broadcast_arrays(pos, s, keep)
    lead = s.shape[:-1]
    out = np.empty(lead)
    for idx in np.ndindex(*lead):
        k = keep[idx]
        out[idx] = pair_auc(pos[idx][k], s[idx][k])
    return out


def tied_scores(rng, shape):
    """Scores with many ties: normal draws rounded to one decimal."""
    return np.round(rng.normal(size=shape), 1)


def labels(rng, n, coding):
    """Two-valued labels with both classes present (about 30 % positive)."""
    pos = rng.random(n) < 0.3
    pos[0], pos[1] = True, False
    if coding == "pm1":
        return pos, np.where(pos, 1, -1)
    if coding == "01":
        return pos, pos.astype(np.int64)
    if coding == "float":
        return pos, np.where(pos, 1.0, -1.0)
    return pos, pos


# ---------------------------------------------------------------------------------------------
# auc
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("lead, n", [((), 2), ((), 60), ((5,), 9), ((3, 4), 60)])
@pytest.mark.parametrize("coding", ["pm1", "01", "bool", "float"])
def test_auc_matches_pair_oracle(lead, n, coding):
    rng = np.random.default_rng(n + 10 * len(lead))
    pos, y = labels(rng, n, coding)
    s = tied_scores(rng, (*lead, n))
    got = np.asarray(metrics.auc(y, s))
    assert got.shape == lead
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, row_pairs(pos, s, np.ones(n, bool)), rtol=0, atol=1e-12)


@pytest.mark.parametrize("lead", [(), (3, 4)])
def test_auc_where_mask(lead):
    rng = np.random.default_rng(1)
    n = 60
    pos, y = labels(rng, n, "pm1")
    s = tied_scores(rng, (*lead, n))
    keep = rng.random((*lead, n)) < 0.7
    keep[..., 0] = keep[..., 1] = True  # both classes stay in every row
    got = np.asarray(metrics.auc(y, s, where=keep))
    np.testing.assert_allclose(got, row_pairs(pos, s, keep), rtol=0, atol=1e-12)


def test_auc_matches_sklearn_and_trapezoid_roc():
    rng = np.random.default_rng(2)
    pos, y = labels(rng, 500, "01")
    s = tied_scores(rng, 500)
    want = roc_auc_score(pos, s)
    assert abs(float(metrics.auc(y, s)) - want) < 1e-12
    fpr, tpr, _ = metrics.roc_curve(y, s)
    assert abs(np.trapezoid(tpr, fpr) - want) < 1e-12


def test_auc_jit_vmap_and_dtypes():
    rng = np.random.default_rng(3)
    pos, y = labels(rng, 30, "pm1")
    S = tied_scores(rng, (4, 30))
    eager = np.asarray(metrics.auc(y, S))
    jitted = jax.jit(metrics.auc)(jnp.asarray(y), jnp.asarray(S))
    vmapped = jax.vmap(metrics.auc, in_axes=(None, 0))(y, jnp.asarray(S))
    np.testing.assert_allclose(jitted, eager, atol=1e-12)
    np.testing.assert_allclose(vmapped, eager, atol=1e-12)
    masked = jax.jit(lambda yy, ss, w: metrics.auc(yy, ss, where=w))(y, S, np.ones(30, bool))
    np.testing.assert_allclose(masked, eager, atol=1e-12)
    # float32 scores give a float32 AUC; integer scores the default float; bool labels traced.
    f32 = metrics.auc(y, S.astype(np.float32))
    assert f32.dtype == jnp.float32
    np.testing.assert_allclose(f32, eager, atol=1e-6)
    ints = metrics.auc(y, np.round(S * 10).astype(np.int32))
    assert ints.dtype == jnp.float64
    np.testing.assert_allclose(ints, eager, atol=1e-12)
    traced_bool = jax.jit(metrics.auc)(jnp.asarray(pos), jnp.asarray(S))
    np.testing.assert_allclose(traced_bool, eager, atol=1e-12)


def test_auc_extremes():
    y = np.array([1, 1, -1, -1, -1])
    assert float(metrics.auc(y, [5.0, 4, 3, 2, 1])) == 1.0
    assert float(metrics.auc(y, [1.0, 2, 3, 4, 5])) == 0.0
    assert float(metrics.auc(y, np.zeros(5))) == 0.5


def test_exact_count_sum_blocks():
    rng = np.random.default_rng(4)
    c = jnp.asarray(rng.integers(0, 20, size=(3, 101)), dtype=jnp.int32)
    want = np.sum(np.asarray(c), axis=-1)
    for limit in (2**31 - 1, 20 * 7, 20, 19):
        got = _exact_count_sum(c, 20, jnp.float64, limit=limit)
        np.testing.assert_array_equal(got, want)


def test_auc_large_n_block_path_float32():
    # n > 65535 exceeds the single int32 sum; the block path must stay exact.
    rng = np.random.default_rng(5)
    n = 40_000  # n * 2n > 2**31 - 1
    pos = rng.random(n) < 0.4
    s = np.round(rng.normal(size=n) + pos, 2)
    want = roc_auc_score(pos, s)
    assert abs(float(metrics.auc(pos, s)) - want) < 1e-12
    assert abs(float(metrics.auc(pos, s.astype(np.float32))) - want) < 1e-6


PAD = 24  # fixed length: shorter draws are padded and masked out with `where` (one compile)


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.booleans(), st.integers(min_value=-3, max_value=3)), min_size=2, max_size=PAD
    ),
    filler=st.integers(min_value=-5, max_value=5),
)
def test_auc_property_pair_oracle(data, filler):
    k = len(data)
    pos = np.array([d[0] for d in data] + [True] * (PAD - k))
    s = np.array([d[1] for d in data] + [filler] * (PAD - k), dtype=np.float64) / 2
    pos[0], pos[k - 1] = True, False
    keep = np.arange(PAD) < k
    got = float(metrics.auc(np.where(pos, 1, -1), s, where=keep))
    assert abs(got - pair_auc(pos[:k], s[:k])) < 1e-12
    # Reversing the scores reflects the AUC.
    assert abs(float(metrics.auc(pos, -s, where=keep)) - (1 - got)) < 1e-12


# ---------------------------------------------------------------------------------------------
# roc_curve
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("coding", ["pm1", "01", "bool"])
@pytest.mark.parametrize("n", [2, 17, 300])
def test_roc_curve_matches_sklearn(coding, n):
    rng = np.random.default_rng(n)
    pos, y = labels(rng, n, coding)
    s = tied_scores(rng, n)
    fpr, tpr, thr = metrics.roc_curve(y, s)
    sk_fpr, sk_tpr, sk_thr = sk_roc_curve(pos, s, drop_intermediate=False)
    np.testing.assert_allclose(fpr, sk_fpr, atol=1e-15)
    np.testing.assert_allclose(tpr, sk_tpr, atol=1e-15)
    np.testing.assert_array_equal(thr, sk_thr)
    assert thr[0] == np.inf and np.all(np.diff(thr) < 0)


# ---------------------------------------------------------------------------------------------
# mauc
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n_levels, lead, ties",
    [(2, (), "strict"), (3, (2, 3), "half"), (6, (3,), "strict"), (6, (), "half")],
)
def test_mauc_matches_brute_count(n_levels, lead, ties):
    rng = np.random.default_rng(n_levels)
    n = 80
    levels = rng.integers(0, n_levels, size=n) * 3 - 2  # non-contiguous integer levels
    levels[:n_levels] = np.arange(n_levels) * 3 - 2
    s = tied_scores(rng, (*lead, n))
    got = np.asarray(metrics.mauc(levels, s, ties=ties))
    assert got.shape == lead
    want = np.empty(lead)
    for idx in np.ndindex(*lead):
        want[idx] = pair_mauc(levels, s[idx], half=ties == "half")
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    levels=st.lists(st.integers(min_value=0, max_value=2), min_size=20, max_size=20),
    scores=st.lists(st.integers(min_value=-2, max_value=2), min_size=20, max_size=20),
    half=st.booleans(),
)
def test_mauc_property_brute_count(levels, scores, half):
    levels = np.array(levels)
    levels[:3] = [0, 1, 2]  # three levels, fixed length: one compile per tie rule
    s = np.array(scores, dtype=np.float64)
    got = float(metrics.mauc(levels, s, ties="half" if half else "strict"))
    assert abs(got - pair_mauc(levels, s, half=half)) < 1e-12


def test_mauc_two_levels_is_auc_and_jits():
    rng = np.random.default_rng(6)
    pos, _ = labels(rng, 50, "bool")
    s = tied_scores(rng, 50)
    levels = pos.astype(int)
    assert abs(float(metrics.mauc(levels, s, ties="half")) - float(metrics.auc(pos, s))) < 1e-12
    jitted = jax.jit(lambda sc: metrics.mauc(levels, sc))(jnp.asarray(s))
    assert abs(float(jitted) - pair_mauc(levels, s)) < 1e-12


# ---------------------------------------------------------------------------------------------
# am, qm, f1
# ---------------------------------------------------------------------------------------------


def rates(pos, hat):
    tpr = np.sum(pos & hat) / np.sum(pos)
    tnr = np.sum(~pos & ~hat) / np.sum(~pos)
    return tpr, tnr


@pytest.mark.parametrize("kind", ["pm1", "01", "bool", "scores"])
@pytest.mark.parametrize("n", [7, 333])
def test_am_qm_f1_match_references(kind, n):
    rng = np.random.default_rng(n)
    pos, y = labels(rng, n, "pm1")
    raw = rng.normal(size=(4, n)) + pos
    raw[0] = -1.0  # no predicted positive: F1 is 0
    hat = raw > 0
    pred = {
        "pm1": np.where(hat, 1, -1),
        "01": hat.astype(np.int32),
        "bool": hat,
        "scores": raw,
    }[kind]
    got_am, got_qm, got_f1 = (np.asarray(f(y, pred)) for f in (metrics.am, metrics.qm, metrics.f1))
    for k in range(4):
        tpr, tnr = rates(pos, hat[k])
        assert abs(got_am[k] - balanced_accuracy_score(pos, hat[k])) < 1e-12
        assert abs(got_am[k] - (tpr + tnr) / 2) < 1e-12
        assert abs(got_qm[k] - (1 - np.sqrt(((1 - tpr) ** 2 + (1 - tnr) ** 2) / 2))) < 1e-12
        assert abs(got_f1[k] - f1_score(pos, hat[k], zero_division=0)) < 1e-12
        assert got_qm[k] <= got_am[k] + 1e-15
    assert got_f1[0] == 0.0


def test_am_qm_f1_jit_and_perfect():
    y = jnp.array([1, -1, 1, -1])
    pred = jnp.array([0.3, -2.0, 1.0, 0.0])  # 0.0 is predicted negative
    for f in (metrics.am, metrics.qm, metrics.f1):
        assert float(f(y, pred)) == 1.0
        assert float(jax.jit(f)(y, pred)) == 1.0
    assert float(metrics.qm(y, jnp.array([-1, 1, -1, 1]))) == 0.0
    assert float(metrics.am(y, jnp.array([-1, 1, -1, 1]))) == 0.0
    assert metrics.am(y, pred.astype(jnp.float32)).dtype == jnp.float32


# ---------------------------------------------------------------------------------------------
# bad inputs
# ---------------------------------------------------------------------------------------------

GOOD_Y = np.array([1, -1, 1, -1])
GOOD_S = np.array([0.1, 0.2, 0.3, 0.4])


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: metrics.auc(GOOD_Y, GOOD_S[:3]), "length mismatch"),
        (lambda: metrics.auc([1, 2, 3, 1], GOOD_S), "two-valued"),
        (lambda: metrics.auc([1, 1, 1, 1], GOOD_S), "one class only"),
        (lambda: metrics.auc([0, 2, 0, 2], GOOD_S), r"\+1, 1 or True"),
        (lambda: metrics.auc(GOOD_Y, [0.1, np.nan, 0.3, 0.4]), "NaN or infinite"),
        (lambda: metrics.auc(GOOD_Y, [0.1, np.inf, 0.3, 0.4]), "NaN or infinite"),
        (lambda: metrics.auc(GOOD_Y, 0.5), "scalar"),
        (lambda: metrics.auc(GOOD_Y, np.array(["a", "b", "c", "d"])), "numeric"),
        (lambda: metrics.auc(GOOD_Y, GOOD_S, where=np.array([1, 1, 0, 1])), "boolean"),
        (
            lambda: metrics.auc(GOOD_Y, GOOD_S, where=np.array([False, True, False, True])),
            "one class only",
        ),
        (lambda: metrics.auc(GOOD_Y, np.ones((2, 3, 4)), where=np.ones((4, 4), bool)), "broadcast"),
        (lambda: metrics.roc_curve(GOOD_Y, GOOD_S[:3]), "length mismatch"),
        (lambda: metrics.roc_curve([1, 0, 2, 1], GOOD_S), "two-valued"),
        (lambda: metrics.roc_curve([0, 0, 0, 0], GOOD_S), "one class only"),
        (lambda: metrics.roc_curve(GOOD_Y, [np.nan, 1, 2, 3]), "NaN or infinite"),
        (lambda: metrics.roc_curve(GOOD_Y, np.ones((2, 4))), "1-D"),
        (lambda: metrics.mauc([0, 1, 2], GOOD_S), "length mismatch"),
        (lambda: metrics.mauc([3, 3, 3, 3], GOOD_S), "one level only"),
        (lambda: metrics.mauc([0, 0.5, 1, 2], GOOD_S), "integer"),
        (lambda: metrics.mauc([0, np.nan, 1, 2], GOOD_S), "NaN"),
        (lambda: metrics.mauc([0, 1, 1, 2], [np.inf, 1, 2, 3]), "NaN or infinite"),
        (lambda: metrics.mauc([0, 1, 1, 2], GOOD_S, ties="bogus"), "ties"),
        (lambda: metrics.am(GOOD_Y, [1, -1, 1]), "length mismatch"),
        (lambda: metrics.qm([1, 2, 3, 4], [1, -1, 1, -1]), "two-valued"),
        (lambda: metrics.f1([-1, -1, -1, -1], [1, -1, 1, -1]), "one class only"),
        (lambda: metrics.am(GOOD_Y, [0.5, np.nan, 1, 1]), "NaN or infinite"),
        (lambda: metrics.f1(GOOD_Y, [1, 2, 1, 2]), "integers other than"),
    ],
)
def test_bad_inputs_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_traced_levels_refused():
    with pytest.raises(ValueError, match="concrete"):
        jax.jit(metrics.mauc)(jnp.array([0, 1, 1, 2]), jnp.asarray(GOOD_S))
