"""Shared by the bench smoke tests: run a ``bench/<name>.py --quick`` in a subprocess and load
its JSON report, or load a bench script as a module (for its ``markdown`` and helpers)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"


def have(module: str) -> bool:
    """Whether an optional dependency is installed."""
    return importlib.util.find_spec(module) is not None


#: Added to ``XLA_FLAGS`` by ``conftest.py`` for the test process (compile time), never for a bench.
TEST_XLA_FLAG = "--xla_backend_optimization_level=0"


def bench_env(*, user_level: bool = False) -> dict:
    """The environment without ``JAX_*`` variables: a bench runs with JAX's defaults (the
    session's x64 and strict promotion are not passed on).

    ``user_level``: also without the test session's XLA flag, so the bench compiles at XLA's
    default backend optimisation level as a user's run does. The scale and latency benches run
    so (what they measure depends on the level); the others are compile-bound smoke runs whose
    checks are self-consistency, and keep the session's level 0 (``bench/bases.py --quick``
    16.7 s against 24.9 s at the default level, on 2 idle cores)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    flags = env.get("XLA_FLAGS", "").split()
    if user_level and TEST_XLA_FLAG in flags:
        flags.remove(TEST_XLA_FLAG)
        env["XLA_FLAGS"] = " ".join(flags)
    return env


def _command(name: str, out: Path, extra) -> list[str]:
    return [sys.executable, str(BENCH / f"{name}.py"), "--quick", "--out", str(out), *extra]


def run_quick(
    name: str, out: Path, *extra: str, timeout: float, user_level: bool = False
) -> tuple[dict, str]:
    """Run ``bench/<name>.py --quick --out out`` to completion; ``(report, stdout)``.
    ``user_level``: as in :func:`bench_env`."""
    proc = subprocess.run(
        _command(name, out, extra), cwd=ROOT, env=bench_env(user_level=user_level),
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-4000:]
    assert out.exists(), text[-4000:]
    return json.loads(out.read_text()), proc.stdout


def start_quick(names, tmp: Path, *, timeout: float, user_level: bool = False):
    """Start several quick runs side by side (``user_level``: as in :func:`bench_env`).
    Returns ``(wait, stop)``: ``wait(name)`` waits for one and gives ``(returncode, output,
    report or None, out_path)``; ``stop()`` kills any still running (call it when the fixture
    ends)."""
    procs = {}
    for name in names:
        out = tmp / f"{name}.json"
        proc = subprocess.Popen(
            _command(name, out, ()), cwd=ROOT, env=bench_env(user_level=user_level),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        procs[name] = (proc, out)
    done = {}

    def wait(name):
        if name not in done:
            proc, out = procs[name]
            text = proc.communicate(timeout=timeout)[0]
            report = json.loads(out.read_text()) if out.exists() else None
            done[name] = (proc.returncode, text, report, out)
        return done[name]

    def stop():
        for proc, _ in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    return wait, stop


def check_quick(result, name: str) -> dict:
    """Assert that one ``wait(name)`` result of :func:`start_quick` is a finished quick run of
    ``name`` with the environment recorded; returns its report."""
    code, text, report, _ = result
    assert code == 0, text[-4000:]
    assert report is not None, text[-4000:]
    assert report["benchmark"] == name
    for key in ("platform", "device_kind", "jax", "jaxlib", "cpu_count", "git_commit"):
        assert key in report["env"]
    assert report["settings"]["quick"] is True
    return report


def load_bench(name: str):
    """``bench/<name>.py`` as a module (``bench/`` on ``sys.path`` for its ``_common``)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
