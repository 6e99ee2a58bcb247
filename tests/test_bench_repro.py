"""Smoke tests of the paper-reproduction benches (issue 5): ``bench/fig6.py`` (seed 000 Fig. 6),
``bench/sparse_auc.py`` (seed 001 Tables 2-3) and ``bench/fig5_multilevel.py`` (seed 003
Fig. 5). Each runs at its ``--quick`` size in a subprocess (the three side by side, started once
for the module; they are compile-bound) and must write its JSON with the expected keys and
numbers in range, its PNG, and a ``markdown()`` that renders the paper's claims beside ours.
Plus the multi-level bench's engine call against ``fit_multilevel`` (same basis, same model).

The three quick runs take about 150 s of CPU together (~80 s wall on an idle 2-core machine,
minutes under load): they are marked slow (``python -m pytest -m slow tests/test_bench_repro.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
from _bench import check_quick, have, load_bench, start_quick

SCRIPTS = ("fig6", "sparse_auc", "fig5_multilevel")
TIMEOUT = 900  # seconds; well under a minute each on an idle 2-core machine, more under load


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Start the three quick runs at once; ``runs[name]()`` waits for one and returns
    ``(returncode, output, report, out_path)``."""
    if not (have("sklearn") and have("matplotlib")):
        pytest.skip("the reproduction benches need scikit-learn and matplotlib")
    tmp = tmp_path_factory.mktemp("repro")
    wait, stop = start_quick(SCRIPTS, tmp, timeout=TIMEOUT)
    yield wait
    stop()


def _ok(runs, name):
    report = check_quick(runs(name), name)
    png = runs(name)[3].with_suffix(".png")
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = load_bench(name).markdown(report)
    assert md.startswith("### ") and "QUICK" in md and "claim" in md
    return report, md


# ---------------------------------------------------------------------------- fig6


@pytest.mark.slow
def test_fig6_quick(runs):
    report, md = _ok(runs, "fig6")
    s = report["settings"]
    assert s["sizes"] == [1000, 2000] and s["rho"] == 0.02 and s["dtype"] == "float32"
    assert 0.5 < report["bayes_test_auc"] <= 1.0
    sel = report["selection"]
    assert sel["m"] == 1000
    assert sel["m_lambda"] == 1000 == s["select_m"]
    for name in ("rank-rc", "rank-rnd"):
        assert sel[name]["lam"] in s["lams"]
        assert len(sel[name]["val_auc"]) == len(s["lams"])
    assert sel["rank-svm"] == {**sel["rank-svm"], "lam": sel["rank-rc"]["lam"], "from": "rank-rc"}
    assert sel["svm-w"]["C"] in s["svc_cs"]
    (r0, r1) = report["results"]
    for r in (r0, r1):
        assert r["m_pos"] == round(s["rho"] * r["m"])
        for name in ("rank-rc", "rank-rnd"):
            res = r["methods"][name]
            assert 0.0 <= res["test_auc"] <= 1.0 and res["fit_s"] > 0
            assert res["n_basis"] == r["m_pos"]  # |R| = m+ for both
            assert res["K_bytes"] == r["m"] * r["m_pos"] * 4
    # RankSVM: trained at 1000 rows, over the 1/32 GiB budget at 2000 (48 MB of blocks)
    svm0, svm1 = r0["methods"]["rank-svm"], r1["methods"]["rank-svm"]
    assert svm0["n_basis"] == 1000 and 0.0 <= svm0["test_auc"] <= 1.0
    assert svm1["infeasible"] is True and "memory budget" in svm1["reason"]
    assert "infeasible from m = 2,000" in md
    for r in (r0, r1):
        w = r["methods"]["svm-w"]
        assert w["stopped"] is False and 0.0 <= w["test_auc"] <= 1.0
        assert 0 < w["n_basis"] <= r["m"]
    assert "RANK-RC" in md and "SVM-W" in md and "| 2,000 | 40 |" in md


# ---------------------------------------------------------------------------- sparse_auc


@pytest.mark.slow
def test_sparse_auc_quick(runs):
    report, md = _ok(runs, "sparse_auc")
    s = report["settings"]
    assert s["datasets"] == ["glass0"] and s["splits"] == 1
    if not report["keel"]:
        pytest.skip("KEEL data unavailable")
    g = report["keel"]["glass0"]
    assert g["rows"] == 214
    (run,) = g["runs"]
    m = run["m"]
    assert run["methods"]["greedy"]["n_basis"] <= max(1, m // 10)
    assert run["methods"]["ranksvm"]["n_basis"] == m
    for meth in ("greedy", "ranksvm"):
        sm = g["summary"][meth]
        assert 0.5 <= sm["test_auc_mean"] <= 1.0
        assert np.isnan(sm["test_auc_se"])  # one split: no standard error
    c = report["claim"]
    assert c["sets"] == 1 and 0 < c["basis_frac_max"] <= 0.1 + 1e-9
    assert "glass0 (glass)" in md and "87.1 ± 5.4 (150)" in md  # the paper's Table 2 row


# ---------------------------------------------------------------------------- fig5_multilevel


@pytest.mark.slow
def test_fig5_multilevel_quick(runs):
    report, md = _ok(runs, "fig5_multilevel")
    s = report["settings"]
    assert s["sizes"] == [400, 800]
    assert 0.5 < report["bayes_test_mauc"] <= 1.0
    (r0, r1) = report["results"]
    for r in (r0, r1):
        n_rare = r["m"] - r["level_counts"][0]
        assert sum(r["level_counts"]) == r["m"]
        for name in ("ml-rankrc", "ml-rnd", "rankrc-biclass"):
            res = r["methods"][name]
            assert 0.5 <= res["test_mauc"] <= 1.0 and res["fit_s"] > 0
            assert res["n_basis"] == n_rare
    assert r0["methods"]["ml-ranksvm"]["n_basis"] == 400
    assert r1["methods"]["ml-ranksvm"]["infeasible"] is True
    assert "infeasible (memory) from m = 800" in md and "RANK-RC MAUC minus" in md


def test_fit_ml_basis_reproduces_fit_multilevel():
    """The bench's engine call with the non-majority basis is fit_multilevel's model."""
    import jax

    import jaxrank

    f5 = load_bench("fig5_multilevel")
    X, lv = f5.make_ordinal(300, key=jax.random.key(3))
    lam = 2.0**-6
    ref = jaxrank.fit_multilevel(X, lv, lam, dtype="float32")
    got = f5.fit_ml_basis(X, lv, lam, np.flatnonzero(lv != 0))
    np.testing.assert_allclose(np.asarray(got.coef), np.asarray(ref.coef), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(got.basis_index), np.asarray(ref.basis_index))
