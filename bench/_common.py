"""The run harness of the bench scripts: arguments, run header (device, versions, commit),
timing, memory, subprocesses per size, JSON and markdown output, plots, recorded warnings.
Data and model helpers are in ``bench/_data.py``, the KEEL data and protocol in
``bench/_keel.py``; a script imports these three and jaxrank's public API, never another script
(``tests/test_architecture.py``).

Timing rules used by every bench: jitted functions are called once (compile + warm-up) before
they are timed, every timed call ends with ``jax.block_until_ready`` on its result, and a timing
is reported as the median over repeats (the minimum and every run are kept in the JSON). The
machines are shared, so medians of a few repeats are the honest summary; single runs are noisy.

A reproduction bench is ``p = parser(NAME, __doc__, "what --quick runs")`` plus its own flags,
and ``main(NAME, args, settings, lambda: run(cfg), markdown=markdown, plot=plot)``: its JSON goes
to ``bench/out/<name>.json`` (``<name>_quick.json`` for ``--quick``) with the PNG beside it, and
``--save`` copies both to ``bench/results/`` (what ``bench/results.py`` renders). A bench over
sizes m is ``parser(NAME, __doc__, quick, sizes=..., repeats=...)`` and :func:`sizes_main`, one
subprocess per size (:func:`run_children`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

OUT_DIR = Path(__file__).resolve().parent / "out"


RESULTS_DIR = Path(__file__).resolve().parent / "results"


# ---------------------------------------------------------------------------- arguments


def out_path(name: str, quick: bool = False) -> Path:
    """The default JSON path: ``bench/out/<name>.json``, ``<name>_quick.json`` for a quick run."""
    return OUT_DIR / (f"{name}_quick.json" if quick else f"{name}.json")


class _Parser(argparse.ArgumentParser):
    def parse_args(self, args=None, namespace=None):
        ns = super().parse_args(args, namespace)
        if ns.out is None:
            ns.out = out_path(self.bench_name, ns.quick and self.quick_out)
        return ns


def parser(name: str, doc: str, quick: str, *, seed=None, reduced=False, sizes=None, repeats=None):
    """Argument parser with ``--quick`` (help ``quick``) and ``--out``, plus where asked for
    ``--sizes`` (help ``sizes``), ``--repeats`` (default ``repeats``), ``--seed`` (default
    ``seed``) and ``--reduced``. A reproduction bench (no ``sizes``) also has ``--save`` and
    ``--out`` defaulting to :func:`out_path`; a bench over sizes m writes ``bench/out/<name>.json``
    for ``--quick`` too."""
    p = _Parser(description=doc.split("\n\n")[0])
    p.bench_name, p.quick_out = name, sizes is None
    if sizes is not None:
        p.add_argument("--sizes", type=int, nargs="+", default=None, help=sizes)
    p.add_argument("--quick", action="store_true", help=quick)
    if repeats is not None:
        p.add_argument("--repeats", type=int, default=repeats, help="timed repeats (median)")
    p.add_argument("--out", type=Path, default=None, help="JSON path (the PNG beside it)")
    if sizes is None:
        p.add_argument(
            "--save", action="store_true", help="also copy JSON and PNG to bench/results/"
        )
    if seed is not None:
        p.add_argument("--seed", type=int, default=seed)
    if reduced:
        p.add_argument("--reduced", default=None, help="why this run is smaller than the full one")
    return p


def add_child_args(p, in_process: bool = True) -> None:
    """The hidden ``--child M --child-out PATH`` of :func:`run_children` and (``in_process``)
    ``--in-process``."""
    if in_process:
        p.add_argument("--in-process", action="store_true", help="no subprocess per size")
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-out", type=Path, default=None, help=argparse.SUPPRESS)


def mode_defaults(args, quick: dict, full: dict):
    """Set each ``args.<key>`` left ``None`` to the value in the run's mode (``quick`` with
    ``args.quick``, else ``full``; a tuple as a list); ``args``."""
    for k, v in (quick if args.quick else full).items():
        if getattr(args, k) is None:
            setattr(args, k, list(v) if isinstance(v, tuple) else v)
    return args


# ---------------------------------------------------------------------------- run


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


def header(name: str, detail: str = "") -> dict[str, Any]:
    """Print the run's first line (device, CPUs, jax version, ``detail``); return ``env_info()``."""
    env = env_info()
    print(f"jaxrank {name}: {env['platform']} ({env['device_kind']}), {env['cpu_count']} CPUs, "
          f"jax {env['jax']}" + (f"; {detail}" if detail else ""), flush=True)  # fmt: skip
    return env


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


def main(name: str, args, settings: dict, run: Callable[[], dict], *, markdown, plot,
         detail: str = "") -> int:  # fmt: skip
    """Pin host BLAS, print the header and :func:`finish` the result ``{benchmark, env, settings
    (+ openblas_num_threads), **run(), seconds}``."""
    blas = limit_blas()
    env = header(name, detail)
    t0 = time.perf_counter()
    out = run()
    result = {"benchmark": name, "env": env, "settings": {**settings, "openblas_num_threads": blas},
              **out, "seconds": time.perf_counter() - t0}  # fmt: skip
    finish(result, args.out, name=name, quick=args.quick, save=args.save, markdown=markdown,
           plot=plot)  # fmt: skip
    return 0


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


def sizes_main(name, script, args, run_size, flags, settings, print_all, detail="", jobs=1) -> int:
    """The run of a bench over the sizes ``args.sizes``: header, ``run_size(m)`` for each size
    (in a subprocess each, :func:`run_children` of ``script`` with ``flags``; here without a
    ``script`` or with ``--in-process``), ``print_all(results)``, the JSON ``{benchmark, env,
    settings, results, seconds}`` to ``args.out``. Exit status 1 when a size failed."""
    env = header(name, detail)
    t0 = time.perf_counter()
    if script is None or args.in_process:
        results = [run_size(m) for m in args.sizes]
    else:
        results = run_children(script, args.sizes, flags, jobs)
    print_all(results)
    report = {"benchmark": name, "env": env, "settings": settings, "results": results}
    report["seconds"] = time.perf_counter() - t0
    write_report(report, args.out)
    return 0 if all("error" not in r for r in results) else 1


def run_children(script: str, sizes, args: Sequence[str], jobs: int = 1, key: str = "m") -> list:
    """Run ``script --child m --child-out PATH *args`` for each size m in a fresh interpreter
    (per-size peak memory, cold compiles), ``jobs`` at once; each child's JSON in the order of
    ``sizes``, ``{key: m, "error"}`` for a child that failed."""
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        pending, running = list(sizes), []
        while pending or running:
            while pending and len(running) < jobs:
                m = pending.pop(0)
                out = Path(tmp) / f"{m}.json"
                cmd = [sys.executable, script, "--child", str(m), "--child-out", str(out), *args]
                running.append((m, out, subprocess.Popen(cmd)))
            m, out, proc = running.pop(0)
            code = proc.wait()
            if code == 0 and out.exists():
                results[m] = json.loads(out.read_text())
            else:
                results[m] = {key: m, "error": f"subprocess exited with code {code}"}
    return [results[m] for m in sizes]


#: the environment variables that choose a child's compilation cache (:func:`cache_subprocess`)
CACHE_ENV = ("JAX_COMPILATION_CACHE_DIR", "JAXRANK_NO_COMPILATION_CACHE")


def cache_subprocess(cmd, cache: Path | None, tmp: Path, timeout, what: str) -> tuple[float, str]:
    """Run ``cmd`` in ``tmp`` with only the cache setting of ``cache`` (no cache for ``None``):
    its wall time (start-up and exit included) and its output."""
    env = {k: v for k, v in os.environ.items() if k not in CACHE_ENV}
    env.pop("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", None)  # jaxrank's default threshold
    if cache is None:
        env["JAXRANK_NO_COMPILATION_CACHE"] = "1"
    else:  # jaxrank's default directory (and threshold), as the CLI and the estimators set it
        env["XDG_CACHE_HOME"] = str(cache)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return time.perf_counter() - t0, proc.stdout


def cache_entries(cache: Path | None) -> int | None:
    """Entries of jaxrank's default cache directory under ``XDG_CACHE_HOME = cache``."""
    if cache is None:
        return None
    cache = cache / "jaxrank" / "jax"  # the default directory under XDG_CACHE_HOME = cache
    return sum(1 for p in cache.iterdir() if p.name.endswith("-cache")) if cache.exists() else 0


def run_spec_child(script, spec: dict, cache: Path | None, tmp: Path, timeout: float) -> dict:
    """``script --child SPEC --child-out OUT`` in a fresh process with the cache ``cache``
    (:func:`cache_subprocess`), ``spec`` written as JSON: the child's JSON plus
    ``subprocess_s`` and ``cache_entries``."""
    spec_path, out_path = tmp / f"spec_{spec['kind']}.json", tmp / f"out_{spec['kind']}.json"
    spec_path.write_text(json.dumps(spec))
    out_path.unlink(missing_ok=True)
    cmd = [sys.executable, str(Path(script).resolve()), "--child", str(spec_path)]
    cmd += ["--child-out", str(out_path)]
    wall = cache_subprocess(cmd, cache, tmp, timeout, f"child {spec['kind']}")[0]
    if not out_path.exists():
        raise RuntimeError(f"child {spec['kind']} wrote no {out_path}")
    res = json.loads(out_path.read_text())
    return {**res, "subprocess_s": wall, "cache_entries": cache_entries(cache)}


# ---------------------------------------------------------------------------- timing and memory


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


def time_warm(fn, below: float) -> tuple[Any, dict[str, Any]]:
    """``(result, timing)`` of ``fn()``: its first call, repeated once (warm) when that took under
    ``below`` seconds; ``timing`` has ``fit_s``, ``fit_first_s`` and ``fit_includes_compile``."""
    out, first = time_first(fn)
    fit_s = first
    if first < below:
        out, fit_s = time_first(fn)
    return out, {"fit_s": fit_s, "fit_first_s": first, "fit_includes_compile": first >= below}


def time_budget(fn, repeats: int, budget: float, *, record: bool = False) -> tuple[Any, dict]:
    """``(result, timing)`` of ``fn()``: a first call (maybe compiling), then the median of up to
    ``repeats`` more, fewer (at least one) when ``repeats`` × the first call would exceed
    ``budget`` seconds (a 10⁶-row grid takes minutes a call); ``timing`` is :func:`time_median`'s
    plus ``first``, ``repeats`` and (``record``) the distinct ``warnings`` messages raised."""
    with caught_warnings() if record else contextlib.nullcontext() as caught:
        out, first = time_first(fn)
        n = max(1, min(repeats, int(budget // max(first, 1e-9))))
        timing = {"first": first, **time_median(fn, repeats=n, warmup=0), "repeats": n}
    if record:
        timing["warnings"] = sorted({str(w.message) for w in caught})
    return out, timing


def time_budgeted(fn, *args, repeats: int, budget: float, keep_probe: bool = False) -> dict:
    """:func:`time_median` of ``fn(*args)`` after a compile call and a probe call: at least
    ``repeats`` runs, more (≤ 50) while they fit in ``budget`` seconds at the probe's time (fast
    calls on a loaded machine need many for a stable median). ``keep_probe``: the probe is the
    first of the runs."""
    time_first(fn, *args)
    t = time_first(fn, *args)[1]
    n = int(min(50, max(repeats, budget // max(t, 1e-9))))
    if not keep_probe:
        return time_median(fn, *args, repeats=n, warmup=0)
    runs = [t] + (time_median(fn, *args, repeats=n - 1, warmup=0)["runs"] if n > 1 else [])
    return {"median": float(np.median(runs)), "min": float(np.min(runs)), "runs": runs}


def loglog_slope(x, y) -> float | None:
    """Least-squares slope of log y on log x (``None`` below two points)."""
    if len(x) < 2:
        return None
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


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


# ---------------------------------------------------------------------------- output


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


def write_report(report: dict, out, save_as: str | None = None) -> Path:
    """Write ``report`` as JSON to ``out`` and print ``wrote PATH (N s)``; with ``save_as``, also
    to ``bench/results/<save_as>`` (printed)."""
    path = write_json(out, report)
    print(f"\nwrote {path} ({report['seconds']:.0f} s)")
    if save_as:
        print(f"wrote {write_json(RESULTS_DIR / save_as, report)}")
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


def fmt_pm(mean: float | None, se: float | None = None, scale: float = 100) -> str:
    """``scale · mean ± scale · se`` to one decimal (``92.3 ± 1.4``): no ``±`` part for a
    missing or NaN ``se``, ``-`` for a missing or NaN ``mean``."""
    if mean is None or np.isnan(mean):
        return "-"
    return f"{scale * mean:.1f}" + ("" if se is None or np.isnan(se) else f" ± {scale * se:.1f}")


def print_table(
    title: str | None, header: Sequence[str], rows: Sequence[Sequence[str]], left: int = 0
) -> None:
    """Print ``title`` (after a blank line; none for ``None``) and a plain-text table, each column
    as wide as its widest cell: the first ``left`` columns left-aligned, the others right-aligned.
    A titled table without rows prints nothing."""
    if not rows and title is not None:
        return
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    if title is not None:
        print(f"\n{title}")
    align = [str.ljust] * left + [str.rjust] * (len(header) - left)
    for r in [header, *rows]:
        print("  ".join(a(c, w) for a, c, w in zip(align, r, widths, strict=True)))


def quick_tag(settings: dict) -> str:
    """`` — QUICK`` for a quick run's heading, else empty."""
    return " — QUICK" if settings.get("quick") else ""


def md_table(header: str | Sequence[str], rows: Sequence[Sequence], align: str = "") -> list[str]:
    """Lines of a markdown table: ``header`` (a list, or one string split at ``" | "``), the
    alignment row (``align``: ``l`` / ``r`` per column, ``l`` past its end) and ``rows``."""
    if isinstance(header, str):
        header = header.split(" | ")
    marks = ["---:" if a == "r" else "---" for a in align.ljust(len(header), "l")]
    return [_md_row(header), "|" + "|".join(marks) + "|", *(_md_row(r) for r in rows)]


def _md_row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def md_text(lines: list[str], settings: dict) -> str:
    """Join ``lines``, with the note of a reduced run (``settings["reduced"]``) at the end."""
    if settings.get("reduced"):
        lines = [*lines, "", f"**Reduced run:** {settings['reduced']}"]
    return "\n".join(lines)


# ---------------------------------------------------------------------------- plotting


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (imported on first use: imports stay light)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def style_axes(ax, title=None, xlabel=None, *, xlog=False, ylog=False, xticks=None):
    """Title, x label, log scales, explicit x ticks (labelled ``1,000``; no minor labels), grid."""
    if xlog:
        ax.set_xscale("log")
    if ylog:
        ax.set_yscale("log")
    if xticks is not None:
        from matplotlib.ticker import NullFormatter

        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(xticks, [f"{v:,}" for v in xticks])
    if xlabel:
        ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)


def save_figure(fig, path, *, title: str | None = None, quick=False, dpi: int = 110) -> Path:
    """Suptitle (`` (quick)`` appended for a quick run), tight layout, write ``path`` (parents
    created) and close the figure."""
    if title:
        fig.suptitle(title + (" (quick)" if quick else ""))
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path


def plot_vs_size(result: dict, path, *, metric: str, labels: dict, markers: dict, titles,
                 title: str, ceiling: float, xticks: bool = False) -> Path:  # fmt: skip
    """Three panels against training rows m (log x) of ``result["results"]``: 100 × ``metric``
    (a dotted Bayes ``ceiling``), ``fit_s`` and ``n_basis`` (log y) per method of the settings;
    circles mark the fits that include compilation."""
    fig, axes = pyplot().subplots(1, 3, figsize=(15, 4.2))
    labelled = False
    for name in result["settings"]["methods"]:
        done = sweep_done(result, name, metric)
        if not done:
            continue
        m, res = [r["m"] for r in done], [r["methods"][name] for r in done]
        kw = dict(marker=markers[name], label=labels[name])
        axes[0].plot(m, [100 * r[metric] for r in res], **kw)
        axes[1].plot(m, [r["fit_s"] for r in res], **kw)
        axes[2].plot(m, [r["n_basis"] for r in res], **kw)
        first = [(r["m"], r["methods"][name]["fit_s"]) for r in done
                 if r["methods"][name].get("fit_includes_compile")]  # fmt: skip
        axes[1].scatter([x for x, _ in first], [t for _, t in first], s=90, facecolors="none",
                        edgecolors="black", zorder=3,
                        label="first call (with compile)" if not labelled else None)  # fmt: skip
        labelled = labelled or bool(first)
    axes[0].axhline(100 * ceiling, color="grey", ls=":", label="Bayes")
    ticks = [r["m"] for r in result["results"]] if xticks else None
    for k, (ax, t) in enumerate(zip(axes, titles, strict=True)):
        style_axes(ax, t, "training rows m", xlog=True, ylog=k > 0, xticks=ticks)
    axes[0].legend(fontsize=8)
    if labelled:
        axes[1].legend(fontsize=8)
    return save_figure(fig, path, title=title, quick=result["settings"]["quick"])


def sweep_done(result: dict, name: str, metric: str) -> list[dict]:
    """The entries of ``result["results"]`` (one per size) where method ``name`` has ``metric``."""
    return [r for r in result["results"] if metric in r["methods"].get(name, {})]


def sweep_cell(res: dict, metric: str) -> str:
    """``100 × metric / fit time / basis size`` of a completed fit (``*``: compile included)."""
    star = "*" if res.get("fit_includes_compile") else ""
    return f"{100 * res[metric]:.2f} / {fmt_seconds(res['fit_s'])}{star} / {res['n_basis']:,}"


def sweep_scaling(result: dict, labels: dict, metric: str) -> tuple[str, str]:
    """``("A time ∝ m^0.63, …", "A 40 (m = 2,000), …")``: the log-log slope of fit time on m and
    the basis size at the largest completed m, per method of the settings."""
    slopes, sizes = [], []
    for n in result["settings"]["methods"]:
        done = sweep_done(result, n, metric)
        sl = loglog_slope([r["m"] for r in done], [r["methods"][n]["fit_s"] for r in done])
        if sl is not None:
            slopes.append(f"{labels[n]} time ∝ m^{sl:.2f}")
        if done:
            sizes.append(
                f"{labels[n]} {done[-1]['methods'][n]['n_basis']:,} (m = {done[-1]['m']:,})"
            )
    return ", ".join(slopes) or "-", ", ".join(sizes)


# ------------------------------------------------------------------- warnings and size loops


@contextlib.contextmanager
def caught_warnings():
    """Record every warning raised inside (``with caught_warnings() as caught``)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def warning_list(caught, limit: int = 300) -> list[str]:
    """Distinct ``Category: message`` lines (cut at ``limit`` characters), sorted."""
    return sorted({f"{w.category.__name__}: {w.message}"[:limit] for w in caught})


def capped_sweep(sizes, methods, entry, fit, *, cap: float, metric: str, skipped):
    """The size loop of fig6 and fig5_multilevel: per size m, ``(e, ctx) = entry(m)`` (``e`` a
    dict with ``"methods": {}``) and ``e["methods"][name] = fit(ctx, name)`` per method, a line
    printed per fit. A method whose fit takes over ``cap`` seconds (``fit_s``, or a result marked
    ``stopped``) is marked ``stopped`` and not run at larger sizes: ``{"skipped", "reason",
    **skipped(e, name)}`` there. Returns ``(entries, {method: why stopped})``."""
    stopped, results = {}, []
    for m in sizes:
        e, ctx = entry(m)
        for name in methods:
            if name in stopped:
                e["methods"][name] = {"skipped": True, "reason": stopped[name], **skipped(e, name)}
                continue
            t0 = time.perf_counter()
            res = e["methods"][name] = fit(ctx, name)
            if res.get("stopped") or res.get("fit_s", 0.0) > cap:
                t = res.get("fit_s", res.get("elapsed_s"))
                stopped[name] = f"a fit at m = {m} took {t:.0f} s > cap {cap:.0f} s"
                res["stopped"] = True
            if res.get("infeasible"):
                what = f"infeasible: {res['reason'][:90]}"
            elif metric not in res:
                what = f"stopped ({stopped[name]})"
            else:
                what = f"{metric} {100 * res[metric]:.2f} |R|={res['n_basis']} fit "
                what += fmt_seconds(res["fit_s"])
            print(f"  m={m:8d} {name:14s} {what} ({time.perf_counter() - t0:.0f} s)", flush=True)
        results.append(e)
    return results, stopped
