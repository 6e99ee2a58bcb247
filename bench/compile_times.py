"""Compile time per jitted entry point of a fit (issue 16, item 3), measured with ``jax.stages``.

Runs a few representative fits (16-λ batched grid, a single λ, the warm path, prediction) at
``--m`` rows in float32, records the arguments every jitted entry point of jaxrank is called with
(the distinct shapes/static options, i.e. the programs a process compiles), then times each
program's ``jitted.lower(*args)`` and ``lowered.compile()`` separately, in this process, one
after the other (the persistent compilation cache is switched off, so every compile is real).

Also counts the programs a *second* data set of a nearby size builds (``--m2``, the same buckets
when shape buckets are on): with buckets, none.

Usage::

    python bench/compile_times.py [--m 1000] [--m2 1100] [--out bench/out/compile_times.json]

Prints a table and writes JSON: per entry point and configuration ``lower_s``, ``compile_s``,
plus the totals, the jax version and the environment (``bench/_common.env_info``).
"""

from __future__ import annotations

import os

os.environ.setdefault("JAXRANK_NO_COMPILATION_CACHE", "1")  # every compile is a real one

import argparse
import importlib
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

import jaxrank
from jaxrank import datasets

#: (module, attribute) of every jitted function a fit runs (missing ones are skipped, so the
#: script also runs on older versions of jaxrank for a before/after comparison).
ENTRY_POINTS = [
    ("jaxrank.fit", "_solve"),
    ("jaxrank.fit", "_gram"),
    ("jaxrank.fit", "_weighted_gram"),
    ("jaxrank.fit", "_jit_rmatmul"),
    ("jaxrank.kernels", "_block"),
    ("jaxrank.kernels", "_transpose"),
    ("jaxrank.kernels", "_stream"),
]


class Recorder:
    """Replace each entry point by a wrapper that records its distinct argument signatures."""

    def __init__(self):
        self.calls: dict[tuple, tuple] = {}
        self.order: list[tuple] = []
        self._saved = []

    def _signature(self, args, kwargs):
        leaves, tree = jax.tree.flatten((args, kwargs))
        # arrays by shape and dtype; Python values (static options such as path="warm") by value
        sig = tuple((np.shape(v), str(v.dtype)) if hasattr(v, "dtype") else repr(v) for v in leaves)
        return (str(tree), sig)

    def install(self):
        for mod_name, attr in ENTRY_POINTS:
            mod = importlib.import_module(mod_name)
            fn = getattr(mod, attr, None)
            if fn is None or not hasattr(fn, "lower"):
                continue
            self._saved.append((mod, attr, fn))

            def wrapper(*args, __fn=fn, __name=f"{mod_name}.{attr}", **kwargs):
                key = (__name, self._signature(args, kwargs))
                if key not in self.calls:
                    self.calls[key] = (__fn, args, kwargs, self.config)
                    self.order.append(key)
                return __fn(*args, **kwargs)

            setattr(mod, attr, wrapper)
        self.config = "?"

    def uninstall(self):
        for mod, attr, fn in self._saved:
            setattr(mod, attr, fn)


def _data(m, seed):
    X, y = datasets.make_rare_class(m, 0.1, 0.75, seed=seed)
    return (X - X.mean(0)) / X.std(0), y


def count_programs(fn) -> int:
    """Number of XLA compilations while running ``fn()``."""
    from jax._src import dispatch

    n = [0]

    def listen(event, duration, **kw):
        if event == dispatch.BACKEND_COMPILE_EVENT:
            n[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        fn()
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    return n[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, default=1000, help="rows of the data set (rho = 0.1)")
    ap.add_argument("--m2", type=int, default=1100, help="rows of the second data set")
    ap.add_argument("--out", default=str(C.OUT_DIR / "compile_times.json"))
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    lams = 2.0 ** np.arange(-20, 11, 2)
    X, y = _data(args.m, 0)
    configs = {
        "grid16_batch": lambda: jaxrank.fit_rankrc(X, y, lams).decision_function(X),
        "single_lambda": lambda: jaxrank.fit_rankrc(X, y, 1e-2).decision_function(X),
        "grid16_warm": lambda: jaxrank.fit_rankrc(X, y, lams, path="warm").coef,
    }
    rec = Recorder()
    rec.install()
    first = {}
    try:
        for name, run in configs.items():
            rec.config = name
            t = time.perf_counter()
            jax.block_until_ready(run())
            first[name] = time.perf_counter() - t
    finally:
        rec.uninstall()
    X2, y2 = _data(args.m2, 1)
    second = count_programs(lambda: jaxrank.fit_rankrc(X2, y2, lams).decision_function(X2))

    jax.clear_caches()
    rows = []
    for key in rec.order:
        fn, a, kw, config = rec.calls[key]
        t = time.perf_counter()
        lowered = fn.lower(*a, **kw)
        t_lower = time.perf_counter() - t
        t = time.perf_counter()
        lowered.compile()
        t_compile = time.perf_counter() - t
        rows.append(
            dict(
                entry=key[0],
                config=config,
                lower_s=t_lower,
                compile_s=t_compile,
                hlo_chars=len(lowered.as_text()),
            )
        )
    result = dict(
        bench="compile_times",
        jax_version=jax.__version__,
        jaxrank_file=jaxrank.__file__,
        m=args.m,
        m2=args.m2,
        first_call_s=first,
        programs_second_size=second,
        rows=rows,
        total_lower_s=sum(r["lower_s"] for r in rows),
        total_compile_s=sum(r["compile_s"] for r in rows),
        env=C.env_info(),
    )
    print(
        f"{'entry point':28s} {'config':15s} {'lower s':>8s} {'compile s':>10s} {'HLO chars':>10s}"
    )
    for r in rows:
        print(f"{r['entry']:28s} {r['config']:15s} {r['lower_s']:8.3f} {r['compile_s']:10.3f} "
              f"{r['hlo_chars']:10d}")  # fmt: skip
    print(f"{'total':44s} {result['total_lower_s']:8.3f} {result['total_compile_s']:10.3f}")
    print(f"programs compiled by a fit at m = {args.m2} after m = {args.m}: {second}")
    C.write_json(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
