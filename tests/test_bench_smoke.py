"""Smoke tests of the scale benchmarks (``bench/roofline.py``, ``bench/gpu.py``,
``bench/sort_cost.py``): each runs at its ``--quick`` size in a subprocess and must write its
JSON with the expected keys and self-consistent numbers (exact sorts really exact, ratios
equal to the times they are made of). The three run side by side (they are compile-bound),
started once for the module. Plus the pure helpers against independent oracles: the uint64
sort keys against ``np.lexsort``, the device-peak table and the size planner.
"""

from __future__ import annotations

import numpy as np
import pytest
from _bench import BENCH, check_quick, start_quick

SCRIPTS = ("roofline", "gpu", "sort_cost")
TIMEOUT = 900  # seconds; ~30 s on an idle 2-core machine, far more under load


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Start the three quick runs at once; ``runs[name]()`` waits for one and returns
    ``(returncode, output, report, out_path)``."""
    tmp = tmp_path_factory.mktemp("bench")
    wait, stop = start_quick(SCRIPTS, tmp, timeout=TIMEOUT, user_level=True)
    yield wait
    stop()


def _ok(runs, name):
    return check_quick(runs(name), name)


# ---------------------------------------------------------------------------- roofline


@pytest.mark.slow
def test_roofline_quick(runs):
    report = _ok(runs, "roofline")
    s = report["settings"]
    assert s["sizes"] == [2000] and s["lams_L"] == [1, 2] and s["dtype"] == "float32"
    (r,) = report["results"]
    assert r["m"] == 2000 and r["m_pos"] == r["n_basis"] == 20
    assert r["m_pad"] >= r["m"] and r["m_pad"] % r["block"] == 0
    assert r["K_bytes"] == r["m_pad"] * r["n_basis"] * 4
    stream = r["stream"]
    assert stream["what"] == "jnp.sum(K)" and stream["time"] > 0
    assert stream["GBps"] == pytest.approx(r["K_bytes"] / stream["time"] / 1e9)
    passes = {"Kv": 1, "gK": 1, "hvp": 2, "value_grad": 2}
    for name, p in passes.items():
        c = r["single"][name]
        assert c["time"] > 0
        assert c["ratio"] == pytest.approx(c["time"] / stream["time"])
        assert c["per_pass"] == pytest.approx(c["time"] / (p * stream["time"]))
        assert c["at_roofline"] == (c["per_pass"] <= 2)
    rate = r["gemm"]["flops_per_s"]
    assert rate == max(r["gemm"]["by_size"].values()) > 0
    flops = 2 * r["m_pad"] * r["n_basis"]  # one column, one pass
    assert set(r["batched"]) == {"1", "2"}
    for L, b in r["batched"].items():
        assert set(b) == {"KV", "GK", "GK_rows", "GK_plain", "hvp", "value_grad"}
        for name, c in b.items():
            p = 2 if name in ("hvp", "value_grad") else 1
            assert c["compute"] == pytest.approx(p * int(L) * flops / rate)
            roof = max(p * stream["time"], c["compute"])  # the larger roof binds
            assert c["per_roof"] == pytest.approx(c["time"] / roof)
            assert c["per_roof"] <= c["per_pass"] * (1 + 1e-9)
    h = r["hvp_per_lambda"]
    t = [r["batched"][L]["hvp"]["time"] for L in ("1", "2")]
    assert h["slope"] == pytest.approx(t[1] - t[0])  # two points: the line through them
    assert h["slope/stream"] == pytest.approx(h["slope"] / stream["time"])
    st = r["streamed"]  # the only size is the streamed size
    assert s["streamed_size"] == 2000 and st["L"] == 2
    assert set(st["single"]) == set(passes) and set(st["batched"]) == set(b)
    for v in st["single"].values():
        assert v["recompute"] == pytest.approx(v["time"] - v["stored"])


# ---------------------------------------------------------------------------- gpu


@pytest.mark.slow
def test_gpu_quick(runs):
    report = _ok(runs, "gpu")
    dev = report["device"]
    assert dev["platform"] == report["env"]["platform"]
    assert dev["memory_budget_bytes"] > 0
    (r,) = report["results"]
    assert "error" not in r and "skipped" not in r, r
    assert r["plan"]["fits"] and r["plan"]["K_bytes"] == r["products"]["K_bytes"]
    assert r["fit"]["info"]["status"] == "CONVERGED"
    assert len(r["grid"]["info"]["status"]) == 16 == len(r["grid"]["lams"])
    assert r["grid"]["newton_max"] == max(r["grid"]["info"]["iterations"])
    p = r["products"]
    for key in ("stream", "Kv", "gK", "hvp", "value_grad"):
        assert p[key] > 0
    assert p["bandwidth_GBps"]["hvp"] == pytest.approx(2 * p["K_bytes"] / p["hvp"] / 1e9)
    assert p["hvp/(2*stream)"] == pytest.approx(p["hvp"] / (2 * p["stream"]))
    assert set(r["memory"]) >= {"start", "after_fit", "after_grid", "after_products"}
    if dev["platform"] == "cpu":
        assert r["m"] == 2000
        assert p["peak_fraction"] == p["nominal_peak_GBps"] == dev["nominal_peak_GBps"] == "unknown"


def _import_bench(name, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import importlib

    return importlib.import_module(name)


def test_nominal_peak_table(monkeypatch):
    gpu = _import_bench("gpu", monkeypatch)
    expect = {
        "NVIDIA H100 80GB HBM3": 3.35e12,
        "NVIDIA H100 PCIe": 2.0e12,
        "NVIDIA H100 NVL": 3.9e12,
        "NVIDIA H200": 4.8e12,
        "NVIDIA A100-SXM4-80GB": 2.039e12,
        "NVIDIA A100-SXM4-40GB": 1.555e12,
        "NVIDIA A100-PCIE-40GB": 1.555e12,
        "NVIDIA A100 80GB PCIe": 1.935e12,
        "NVIDIA GH200 480GB": None,
        "Tesla V100-SXM2-16GB": None,
        "cpu": None,
    }
    for kind, peak in expect.items():
        assert gpu.nominal_peak(kind) == peak, kind


def test_gpu_plan(monkeypatch):
    gpu = _import_bench("gpu", monkeypatch)
    from jaxrank import kernels

    m, nb = 1_000_000, 1000
    rows, n = kernels.chunk_rows(m, nb, 4, kernels.product_block(m))
    block = rows * n * nb * 4
    need = block + 2 * m * 40 * 4 + 2 * nb * nb * 4
    assert gpu.plan(m, nb, need) == {
        "K_bytes": block, "need_bytes": need, "budget_bytes": need, "fits": True
    }  # fmt: skip
    assert not gpu.plan(m, nb, need - 1)["fits"]
    assert gpu.default_sizes("cpu", True) == [2000]
    assert max(gpu.default_sizes("gpu", False)) == 4_000_000


# ---------------------------------------------------------------------------- sort cost


@pytest.mark.slow
def test_sort_cost_quick(runs):
    report = _ok(runs, "sort_cost")
    assert report["settings"]["sizes"] == [10_000]
    (r,) = report["results"]
    full = r["full"]
    # exact by construction: stable sorts, index as a second key, unique uint64 keys
    for name in ("argsort", "lax_two_keys", "host_argsort", "host_key64"):
        assert full["checks"][name]["exact"] is True, name
    assert full["checks"]["sort_values"]["values_equal"] is True
    assert r["tied_values"] > 0  # the tie-breaking check is not vacuous
    (inc,) = r["incremental"]
    assert inc["step"] == report["settings"]["steps"][0]
    for name in ("incr_lax_two_keys", "incr_host_key64"):
        assert inc["checks"][name]["exact"] is True, name
    for summary in [full, inc]:
        for name, c in summary["checks"].items():
            if c.get("exact") is False:
                assert c["mismatches"] > 0 and name not in summary["exact_variants"]
        best = summary["fastest_exact"]
        assert summary["median"][best] == min(
            summary["median"][k] for k in summary["exact_variants"]
        )
    assert r["fastest_exact"]["median"] <= full["median"][full["fastest_exact"]]
    assert r["windows"]["m_pos"] == 100 and r["windows"]["time"]["median"] > 0


def test_key64_orders_like_lexsort(monkeypatch):
    sc = _import_bench("sort_cost", monkeypatch)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(5000).astype(np.float32)
    x[:200] = np.round(x[:200] * 4) / 4  # ties
    x[200:210] = [0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 3.4e38, -3.4e38, 0.0, -0.0]
    idx = rng.permutation(x.size).astype(np.uint32)
    keys = sc._key64(x, idx)
    assert np.unique(keys).size == x.size
    # oracle: order by value (−0 == +0), then by idx
    np.testing.assert_array_equal(np.argsort(keys), np.lexsort((idx, x)))
    perm = np.asarray(sc._np_key64_sort(x))
    np.testing.assert_array_equal(perm, np.argsort(x, kind="stable"))


def test_make_scores_keeps_ties(monkeypatch):
    sc = _import_bench("sort_cost", monkeypatch)
    x0, x1 = sc.make_scores(2000, 1e-3)
    x0b, x1b = sc.make_scores(2000, 1e-6)
    np.testing.assert_array_equal(x0, x0b)  # one x0 for every step
    assert x0.dtype == x1.dtype == np.float32
    assert np.unique(x0).size < x0.size and np.unique(x1).size < x1.size
    assert 0 < np.max(np.abs(x1b - x0)) < np.max(np.abs(x1 - x0))


def test_roofline_times_the_block_as_the_fit_stores_it(monkeypatch):
    import jax.numpy as jnp

    from jaxrank import kernels

    roofline = _import_bench("roofline", monkeypatch)
    K = jnp.zeros((64, 4), jnp.float32)
    assert isinstance(roofline.fit_layout(K, 16), kernels.DualBlock)  # a grid on CPU: Kᵀ kept
    assert roofline.fit_layout(K, 2) is K  # fewer columns than DUAL_MIN_COLUMNS: one copy


def test_session_compiles_at_level_0_and_scale_benches_at_the_default(monkeypatch):
    # conftest.py adds the flag for the test process (compile-bound); bench_env(user_level=True)
    # strips it again so the scale benches compile as a user's run does, and keeps every other
    # flag; the smoke runs of the others keep it
    import os

    from _bench import TEST_XLA_FLAG, bench_env

    assert TEST_XLA_FLAG in os.environ["XLA_FLAGS"].split()
    monkeypatch.setenv("XLA_FLAGS", f"--xla_force_host_platform_device_count=2 {TEST_XLA_FLAG}")
    monkeypatch.setenv("JAX_ENABLE_X64", "1")
    env = bench_env(user_level=True)
    assert env["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
    assert "JAX_ENABLE_X64" not in env
    smoke = bench_env()
    assert smoke["XLA_FLAGS"].split() == ["--xla_force_host_platform_device_count=2", TEST_XLA_FLAG]
    assert "JAX_ENABLE_X64" not in smoke


def test_compile_times_finds_the_fit_programs_where_they_are_called(monkeypatch):
    """``bench/compile_times.py`` finds jaxrank's jitted functions instead of naming them: the
    solver's program, defined in ``jaxrank._fitting._block`` and called from ``_rows``, is
    wrapped where it is called (a name table had gone stale there, and the bench measured only
    the kernels' programs)."""
    monkeypatch.setenv("JAXRANK_NO_COMPILATION_CACHE", "1")  # the bench's own default, restored
    ct = _import_bench("compile_times", monkeypatch)
    from jaxrank._fitting import _block, _rows

    found = ct.entry_points()
    fn, holders = found["jaxrank._fitting._block.fit_block"]
    assert fn is _block.fit_block and (_rows, "fit_block") in holders
    assert found["jaxrank._fitting._block.fit_block_low_effort"][0] is _block.fit_block_low_effort
    names = set(found)
    assert "jaxrank._fitting._precondition._inverse_factor_jit" in names
    assert all(ct._is_jitted(f) for f, _ in found.values())
