"""Multi-process fits on JAX's runtime (``jax.distributed``, CPU collectives over gloo).

Each test starts 2, 3 or 4 local processes (``python -m jaxrank.launch`` or ``subprocess``
directly), which run ``tests/_scripts/distributed_fit.py`` / ``distributed_fault.py``: the
multi-process fit (λ grid, streamed block, random basis, global arrays, the search in both
layouts) against the one-process fit on the same rows, to 1e-10 relative objective in float64;
inputs that differ across processes refused before any work; a process killed mid-fit stopping
the others.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from jaxrank import _cache

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).parent / "_scripts"


def _env():
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return dict(os.environ, PYTHONPATH=path, JAX_PLATFORMS="cpu")


def _launch(n, *args, timeout=900, env=None):
    return subprocess.run(
        [sys.executable, "-m", "jaxrank.launch", "-n", str(n), *map(str, args)],
        capture_output=True, text=True, env=env or _env(), timeout=timeout, cwd=ROOT,
    )  # fmt: skip


#: (processes, cases) of each launch: at P = 2 the grid on a stored block, the streamed block and
#: the row-sharded search; at P = 4 the grid on the streamed block and the search with its cells
#: dealt out to the processes (a 4-process job costs ~45 s of CPU on 2 cores: one launch checks
#: all of it); a random basis, float32 and global arrays through ``jaxrank.fit`` at P = 2, and
#: the stored block and the row-sharded search at P = 4. Every launch of this module is in the
#: slow run (``-m slow``, which the README's test command and CI run after the default run):
#: together ~190 s of the default run's time on 2 cores.
RUNS = {
    "p2": (2, "rare_batch,streamed,search,ard,binary"),
    "p4": (4, "streamed,search_cells"),
    "p2_more": (2, "random,float32,global_arrays"),
    "p4_more": (4, "rare_batch,search"),
}


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory):
    # one persistent compilation cache for the module's launches: the one-process programs the
    # P = 2 run's references compile (the search's fits at the whole set's bucket sizes) are
    # loaded by the P = 4 run's cells, which run the same fits. The test session's own cache
    # (conftest.py) where there is one, so a later run loads them too
    return _cache.compilation_cache_dir() or tmp_path_factory.mktemp("jax_cache")


@pytest.fixture(
    scope="module",
    params=["p2", "p4", "p2_more", "p4_more"],
)
def result(request, tmp_path_factory, compile_cache):
    P, cases = RUNS[request.param]
    out = tmp_path_factory.mktemp(request.param)
    env = dict(_env(), JAXRANK_TEST_CACHE=str(compile_cache))
    proc = _launch(P, SCRIPTS / "distributed_fit.py", out, cases, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return P, json.loads((out / "result.json").read_text())


def _rel(got, ref):
    got, ref = np.asarray(got), np.asarray(ref)
    return float(np.max(np.abs(got - ref) / np.abs(ref)))


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", ["rare_batch", "streamed", "random", "float32", "global_arrays", "ard", "binary"]
)
def test_multiprocess_fit_equals_one_process(result, case):
    P, res = result
    if case not in res:
        pytest.skip(f"{case} is not in this run")
    r = res[case]
    # float64 to 1e-10; float32 to its rounding (sums over processes in another order)
    assert _rel(r["got"], r["ref"]) < (1e-5 if case == "float32" else 1e-10), (P, r)
    if "sigma2" in r:  # the σ² heuristic from per-process moments
        assert r["sigma2"][0] == pytest.approx(r["sigma2"][1], rel=1e-13)
        assert r["status"] == [0] * len(r["status"])
        assert r["coef_diff"] < (1e-2 if case == "float32" else 1e-6)
    if case in ("ard", "binary"):  # the kernel too: ARD, binary-aware across processes
        assert r["kernel"] == ["ARDGaussian", "ARDGaussian"], r


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["search", "search_cells"])
def test_multiprocess_search_equals_one_process(result, layout):
    _, res = result
    if layout not in res:
        pytest.skip(f"{layout} is not in this run")
    r = res[layout]
    assert r["fold_equal"]
    np.testing.assert_allclose(r["got"], r["ref"], rtol=0, atol=1e-12)
    assert r["pick"][0] == r["pick"][1]
    assert _rel(r["refit"][0], r["refit"][1]) < 1e-10


@pytest.mark.slow
def test_mismatched_inputs_are_refused_naming_the_process():
    kinds = ["lams", "features", "dtype", "kernel", "labels"]
    proc = _launch(2, SCRIPTS / "distributed_fault.py", "mismatch", ",".join(kinds), timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for kind in kinds:
        for p in (0, 1):  # every process refuses, and names process 1
            line = re.search(rf"\[{p}\] refused {kind}: (.*)", proc.stderr)
            assert line, (kind, p, proc.stderr[-3000:])
            assert "process 1" in line.group(1), line.group(1)
    assert "accepted" not in proc.stderr


@pytest.mark.slow
def test_a_filled_compilation_cache_is_not_loaded_by_a_multiprocess_run(tmp_path):
    # the same multi-process search twice on one persistent cache: the second launch found the
    # programs the first stored, and loading them hung both processes in their first collective
    # (XLA:CPU, gloo); a multi-process run compiles what it runs (jaxrank._cache._multi_process)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    env = dict(_env(), JAXRANK_TEST_CACHE=str(cache))
    for run in ("empty", "filled"):
        out = tmp_path / run
        out.mkdir()
        try:
            proc = _launch(2, SCRIPTS / "distributed_fit.py", out, "search", env=env, timeout=300)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the multi-process search hung with the {run} cache")
        assert proc.returncode == 0, (run, proc.stderr[-4000:])
        r = json.loads((out / "result.json").read_text())["search"]
        np.testing.assert_allclose(r["got"], r["ref"], rtol=0, atol=1e-12)
    assert any(cache.glob("*-cache")), "the first launch stored nothing: the test tests nothing"


@pytest.mark.slow
def test_killed_process_stops_the_others(tmp_path):
    n = 3
    port = __import__("jaxrank.launch", fromlist=["free_port"]).free_port()
    procs, logs = [], []
    for p in range(n):
        env = dict(_env(), JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
                   JAXRANK_NUM_PROCESSES=str(n), JAXRANK_PROCESS_ID=str(p))  # fmt: skip
        log = open(tmp_path / f"err{p}.txt", "w+")  # closed below
        logs.append(log)
        procs.append(subprocess.Popen(
            [sys.executable, str(SCRIPTS / "distributed_fault.py"), "kill", str(tmp_path)],
            stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=ROOT,
        ))  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while not all("fit started" in (tmp_path / f"err{p}.txt").read_text() for p in range(n)):
            assert all(pr.poll() is None for pr in procs), "a process ended before the fit"
            assert time.monotonic() < deadline, "the fit did not start"
            time.sleep(0.2)
        time.sleep(1.0)
        procs[-1].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        for pr in procs[:-1]:
            pr.wait(timeout=max(1.0, killed + 60 - time.monotonic()))
        elapsed = time.monotonic() - killed
    finally:
        for pr in procs:
            if pr.poll() is None:
                pr.kill()
                pr.wait()
        for log in logs:
            log.close()
    assert elapsed < 60
    for p, pr in enumerate(procs[:-1]):
        err = (tmp_path / f"err{p}.txt").read_text()
        assert pr.returncode != 0, err[-2000:]
        # our ProcessLostError, or the runtime's own report of the task without heartbeats
        named = re.search(rf"process {n - 1} of {n} was lost", err) or re.search(
            rf"stopped sending heartbeats\):\s*\n\s*{n - 1}\s*\n", err
        )
        assert named, err[-3000:]
    assert not (tmp_path / "model.npz").exists()


@pytest.mark.slow
def test_cli_fit_reads_one_shard_per_process(tmp_path):
    import jaxrank
    from jaxrank.cli._modelfile import load_model_file

    X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=4)
    head = ",".join([f"f{i}" for i in range(X.shape[1])] + ["y"])

    def write(path, rows):
        lines = [",".join([*map(repr, map(float, X[r])), str(int(y[r]))]) for r in rows]
        path.write_text("\n".join([head, *lines]) + "\n")

    write(tmp_path / "all.csv", range(300))
    for i, (a, b) in enumerate([(0, 80), (80, 200), (200, 300)]):
        write(tmp_path / f"part-{i}.csv", range(a, b))
    opts = ["--target", "y", "--lam", "0.01", "--dtype", "float64", "-q"]
    proc = _launch(2, "-m", "jaxrank", "fit", tmp_path / "part-*.csv", *opts,
                   "-o", tmp_path / "m2.npz", timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    one = subprocess.run(
        [sys.executable, "-m", "jaxrank", "fit", tmp_path / "all.csv", *opts, "-o",
         tmp_path / "m1.npz"], capture_output=True, text=True, env=_env(), timeout=600,
    )  # fmt: skip
    assert one.returncode == 0, one.stderr[-3000:]
    a, b = load_model_file(tmp_path / "m1.npz"), load_model_file(tmp_path / "m2.npz")
    np.testing.assert_allclose(b.mean, a.mean, rtol=1e-13)
    np.testing.assert_allclose(b.scale, a.scale, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(b.model.coef), np.asarray(a.model.coef), atol=1e-8)
    assert (b.positive_label, b.classes) == (a.positive_label, a.classes)


def test_search_layout_is_checked_and_chosen_by_size():
    import jax

    import jaxrank
    from jaxrank import distributed_search as ds

    # cells while a cell's block fits one process and every process gets a cell
    assert ds.choose_layout(10_000, 100, cells=8, processes=4, memory_budget=2**30) == "cells"
    assert ds.choose_layout(10_000, 100, cells=3, processes=4, memory_budget=2**30) == "rows"
    assert ds.choose_layout(10**6, 10**4, cells=8, processes=4, memory_budget=2**30) == "rows"
    X, y = jaxrank.datasets.make_rare_class(100, 0.2, 0.75, seed=0)
    with pytest.raises(ValueError, match="layout must be one of"):
        ds.select_lambda(X, y, [1.0], folds=2, key=jax.random.key(0), layout="folds")
