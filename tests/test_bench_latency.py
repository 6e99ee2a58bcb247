"""Smoke test of ``bench/latency.py --quick`` (issue 16, item 5): it runs in a subprocess, each
phase in its own fresh process, and its JSON must be complete and self-consistent — the empty
cache loads nothing and fills the directory, the warm cache loads from it, warm repeats compile
nothing, compile + run add up to the wall time, the targets are the ratios they claim — and
its ``markdown`` must render the tables RESULTS.md shows."""

from __future__ import annotations

import pytest
from _bench import load_bench, run_quick

TIMEOUT = 900  # seconds; ~40 s on an idle 2-core machine (35 s of CPU), 250 s under load

# Six fresh processes that each compile from scratch (that is what it measures): slow.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("latency") / "latency.json"
    return run_quick("latency", out, timeout=TIMEOUT, user_level=True)[0]


def _check_step(step):
    assert step["wall"] > 0 and step["programs"] >= step["loaded"] >= 0
    assert step["compiled"] == step["programs"] - step["loaded"]
    assert step["run"] == pytest.approx(step["wall"] - step["compile"])
    # The union of all compile intervals covers each kind's union and fits in the wall time.
    assert max(step["trace"], step["lower"], step["backend"]) <= step["compile"] + 1e-9
    assert step["compile"] <= step["wall"] + 0.05


def test_latency_quick(report):
    assert report["benchmark"] == "latency"
    for key in ("platform", "device_kind", "jax", "jaxlib", "cpu_count", "git_commit"):
        assert key in report["env"]
    s = report["settings"]
    assert s["quick"] is True and s["folds"] == 5 and len(s["lams"]) == 16
    lat = load_bench("latency")
    assert s["sizes"] == list(lat.QUICK_SIZES) and s["select_sizes"] == list(lat.QUICK_SELECT_SIZES)
    assert set(report["fits"]) == set(report["select"]) == {"empty", "warm"}
    for kind, key, sizes in (("fits", "fits", s["sizes"]), ("select", "select", s["select_sizes"])):
        empty, warm = report[kind]["empty"], report[kind]["warm"]
        assert empty["cache_dir"] == warm["cache_dir"] is not None
        assert empty["cache_entries"] > 0 and warm["cache_entries"] >= empty["cache_entries"]
        assert [r["m"] for r in empty[key]] == [r["m"] for r in warm[key]] == sizes
        for phase in (empty, warm):
            assert phase["subprocess_s"] >= phase["process_s"] > 0
            for row in phase[key]:
                _check_step(row["first"])
                w = row["warm"]
                assert w["programs"] == 0  # a repeat compiles nothing
                assert len(w["runs"]) == s["repeats"] and w["min"] <= w["median"]
        first_empty, first_warm = empty[key][0]["first"], warm[key][0]["first"]
        assert first_empty["loaded"] == 0 and first_empty["compiled"] > 0
        assert first_warm["loaded"] > 0  # the second process loads from the first one's cache
    for row in report["fits"]["empty"]["fits"]:
        assert set(row["status"]) <= {"CONVERGED", "PRECISION", "MAX_ITER"}
        assert len(row["status"]) == 16
    assert report["demo"] is None  # not run in --quick
    imp = report["import"]
    assert imp["jaxrank"]["median"] > 0 and imp["jax"]["median"] > 0
    base = report["baseline"]
    assert set(base["svc16"]) == {str(m) for m in s["sizes"]}
    assert set(base["gridsearch"]) == {str(m) for m in s["select_sizes"]}
    t = report["targets"]
    m0 = s["sizes"][0]
    fits = report["fits"]
    second = fits["warm"]["fits"][0]
    assert t["second_process"]["value"] == pytest.approx(
        second["first"]["wall"] / second["warm"]["median"]
    )
    assert t["first_ever_vs_svc16"]["value"] == pytest.approx(
        fits["empty"]["fits"][0]["first"]["wall"] / base["svc16"][str(m0)]["median"]
    )
    assert set(t) == {
        "second_process", "first_ever_vs_svc16", f"select_{s['select_sizes'][0]}_seconds",
        *(
            f"{'new_size' if lat.same_buckets(m, m0, s['rho']) else 'new_bucket'}_{m}"
            for m in s["sizes"][1:]
        ),
    }  # fmt: skip
    for k, v in t.items():
        # a size in a new bucket compiles by design: reported, not judged
        assert v["ok"] == (None if k.startswith("new_bucket") else v["value"] <= v["limit"])
    md = lat.markdown(report)
    assert "| m | cache | first | compile (XLA) |" in md and "Issue-16 targets" in md
    assert md.count("| 200 | empty |") == 2  # one fits row, one select row


def test_export_latency_runs_latency_children_on_latency_data():
    # bench/export_latency.py runs bench/latency.py as a child process (scripts import no other
    # script): its copy of latency's grid and data settings must be latency's
    lat, exp = load_bench("latency"), load_bench("export_latency")
    assert exp.LATENCY.name == "latency.py" and exp.LATENCY.exists()
    assert (exp.EXPONENTS, exp.RHO, exp.OVERLAP) == (lat.EXPONENTS, lat.RHO, lat.OVERLAP)
