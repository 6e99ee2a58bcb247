"""Shared helpers for the bench scripts: environment, timing, memory, JSON output, formatting.

Timing rules used by every bench: jitted functions are called once (compile + warm-up) before
they are timed, every timed call ends with ``jax.block_until_ready`` on its result, and a timing
is reported as the median over repeats (the minimum and every run are kept in the JSON). The
machines are shared, so medians of a few repeats are the honest summary; single runs are noisy.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

__all__ = [
    "OUT_DIR",
    "current_rss_bytes",
    "device_peak_bytes",
    "env_info",
    "fmt_bytes",
    "fmt_seconds",
    "peak_rss_bytes",
    "time_first",
    "time_median",
    "write_json",
]

OUT_DIR = Path(__file__).resolve().parent / "out"
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _cpu_count() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count()


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def env_info() -> dict[str, Any]:
    """Where the numbers were measured: device, versions, CPU count, XLA flags, git commit."""
    dev = jax.devices()[0]
    import jaxlib

    return {
        "platform": dev.platform,
        "device_kind": dev.device_kind,
        "device_count": jax.device_count(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "numpy": np.__version__,
        "python": sys.version.split()[0],
        "machine": platform.platform(),
        "cpu_count": _cpu_count(),
        "x64": bool(jax.config.jax_enable_x64),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "git_commit": _git_commit(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def time_first(fn, *args) -> tuple[Any, float]:
    """``(result, seconds)`` of one call, blocked on its result (the first call: with compile)."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    return out, time.perf_counter() - t0


def time_median(fn, *args, repeats: int = 3, warmup: int = 1) -> dict[str, Any]:
    """Median wall time of ``fn(*args)`` over ``repeats`` blocked calls after ``warmup`` calls.

    Returns:
      ``{"median": s, "min": s, "runs": [s, ...]}``.
    """
    for _ in range(warmup):
        jax.block_until_ready(fn(*args))
    runs = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        runs.append(time.perf_counter() - t0)
    return {"median": float(np.median(runs)), "min": float(np.min(runs)), "runs": runs}


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (``getrusage``; KiB on Linux)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def current_rss_bytes() -> int | None:
    """Current resident set size (Linux ``/proc``), or ``None`` elsewhere."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def device_peak_bytes() -> int | None:
    """Peak bytes in use on the first device (GPU/TPU allocators), ``None`` where not reported."""
    try:
        stats = jax.devices()[0].memory_stats() or {}
    except Exception:  # not implemented on every backend (CPU)
        return None
    peak = stats.get("peak_bytes_in_use")
    return int(peak) if peak is not None else None


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray | jax.Array):
        return np.asarray(obj).tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj)!r}")


def write_json(path: str | Path, obj: Any) -> Path:
    """Write ``obj`` as indented JSON (numpy and jax arrays become lists); create parent dirs."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, default=_json_default) + "\n")
    return path


def fmt_seconds(s: float | None) -> str:
    """``1.23 s``, ``45.6 ms``, ``789 µs``; ``-`` for ``None``."""
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} µs"


def fmt_bytes(b: float | None) -> str:
    """``1.23 GiB`` / ``45.6 MiB``; ``-`` for ``None``."""
    if b is None:
        return "-"
    if b >= 2**30:
        return f"{b / 2**30:.2f} GiB"
    return f"{b / 2**20:.1f} MiB"


def limit_blas() -> str | None:
    """Pin host BLAS to one thread unless ``OPENBLAS_NUM_THREADS`` is set (module notes: a
    threaded OpenBLAS on the oversubscribed shared machines made the host ``eigh`` of the
    spectral preconditioner 7-15x slower). Called by a bench's ``main`` (importing has no side
    effects)."""
    if "OPENBLAS_NUM_THREADS" in os.environ:
        return os.environ["OPENBLAS_NUM_THREADS"]
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    threadpool_limits(1, user_api="blas")
    return "1"


def finish(result: dict, out: Path, *, name: str, quick: bool, save: bool, markdown, plot) -> None:
    """A reproduction bench's last step: print its markdown, write the JSON and the figure to
    ``out`` (``.json`` / ``.png``), and with ``save`` copy both to ``bench/results/`` (stem
    ``name``, ``name_quick`` for a quick run)."""
    print("\n" + markdown(result))
    path = write_json(out, result)
    png = plot(result, Path(out).with_suffix(".png"))
    print(f"\nwrote {path}, {png} ({result['seconds']:.0f} s)")
    if save:
        stem = f"{name}_quick" if quick else name
        write_json(RESULTS_DIR / f"{stem}.json", result)
        plot(result, RESULTS_DIR / f"{stem}.png")
        print(f"saved to {RESULTS_DIR}/{stem}.{{json,png}}")
