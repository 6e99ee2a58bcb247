"""Compile time per jitted entry point of a fit (issue 16, item 3), measured with ``jax.stages``.

Runs a few representative fits at ``--m`` rows (float32), records the distinct arguments every
jitted entry point of jaxrank is called with (the programs a process compiles), then times each
program's ``jitted.lower(*args)`` and ``lowered.compile()`` apart, in this process, with the
persistent compilation cache off. Also counts the programs a second data set of a nearby size
(``--m2``) builds: none when shape buckets put both in the same bucket.
"""

import os

os.environ.setdefault("JAXRANK_NO_COMPILATION_CACHE", "1")  # every compile is a real one

import argparse
import sys
import warnings

import _common as C
import jax
import numpy as np

import jaxrank

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"  # jax._src.dispatch


def _is_jitted(v) -> bool:
    return callable(v) and hasattr(v, "lower") and hasattr(v, "trace")


def entry_points() -> dict[str, list]:
    """Every module-level jitted function of the imported jaxrank modules, by the name it is
    defined under (``module.attribute``), with each ``(module, attribute)`` that holds it: a
    function imported into another module is wrapped there too, so every call is seen. Found,
    not listed: a function moved to another module is still measured."""
    found: dict[int, tuple[object, list]] = {}
    for mod_name, mod in sorted(sys.modules.items()):
        if mod is None or not (mod_name == "jaxrank" or mod_name.startswith("jaxrank.")):
            continue
        for attr, v in list(vars(mod).items()):
            if _is_jitted(v):
                found.setdefault(id(v), (v, []))[1].append((mod, attr))
    out = {}
    for fn, holders in found.values():
        # named where it is defined (two jitted variants of one function keep their own names)
        home = [h for h in holders if h[0].__name__ == getattr(fn, "__module__", None)]
        mod, attr = (home or holders)[0]
        out[f"{mod.__name__}.{attr}"] = [fn, holders]
    return out


def _signature(args, kwargs) -> tuple:
    leaves, tree = jax.tree.flatten((args, kwargs))
    # arrays by shape and dtype; Python values (static options such as path="warm") by value
    sig = tuple((np.shape(v), str(v.dtype)) if hasattr(v, "dtype") else repr(v) for v in leaves)
    return (str(tree), sig)


def record(configs: dict) -> tuple[dict, dict]:
    """First-call seconds of ``configs`` and their distinct calls of the entry points, in order."""
    calls, saved, first, now = {}, [], {}, ["?"]
    for name, (fn, holders) in entry_points().items():

        def wrapper(*args, __fn=fn, __name=name, **kwargs):
            # a call while another program traces is part of that program, not one of its own
            if not any(isinstance(v, jax.core.Tracer) for v in jax.tree.leaves((args, kwargs))):
                key = (__name, _signature(args, kwargs))
                calls.setdefault(key, (__fn, args, kwargs, now[0]))
            return __fn(*args, **kwargs)

        for mod, attr in holders:
            saved.append((mod, attr, fn))
            setattr(mod, attr, wrapper)
    try:
        for now[0], run in configs.items():
            first[now[0]] = C.time_first(run)[1]
    finally:
        for mod, attr, fn in saved:
            setattr(mod, attr, fn)
    return first, calls


def _data(m, seed):
    X, y = jaxrank.datasets.make_rare_class(m, 0.1, 0.75, seed=seed)
    return (X - X.mean(0)) / X.std(0), y


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
    first, calls = record(configs)
    X2, y2 = _data(args.m2, 1)
    n = []  # the XLA compilations of a fit at m2 (after m)
    listen = lambda event, duration, **kw: n.append(event == BACKEND_COMPILE)
    jax.monitoring.register_event_duration_secs_listener(listen)
    jaxrank.fit_rankrc(X2, y2, lams).decision_function(X2)
    jax.monitoring.unregister_event_duration_listener(listen)
    second = sum(n)
    jax.clear_caches()
    rows = []
    for (entry, _), (fn, a, kw, config) in calls.items():
        lowered, t_lower = C.time_first(lambda fn=fn, a=a, kw=kw: fn.lower(*a, **kw))
        row = dict(entry=entry, config=config, lower_s=t_lower)
        row["compile_s"] = C.time_first(lowered.compile)[1]
        rows.append({**row, "hlo_chars": len(lowered.as_text())})
    result = dict(bench="compile_times", jax_version=jax.__version__, jaxrank_file=jaxrank.__file__)
    result.update(m=args.m, m2=args.m2, first_call_s=first, programs_second_size=second, rows=rows)
    totals = {f"total_{k}": sum(r[k] for r in rows) for k in ("lower_s", "compile_s")}
    result.update(totals, env=C.env_info())
    print(f"{'entry point':44} {'config':15} {'lower s':>8} {'compile s':>10} {'HLO chars':>10}")
    for entry, config, lower, comp, hlo in (r.values() for r in rows):
        print(f"{entry:44} {config:15} {lower:8.3f} {comp:10.3f} {hlo:10}")
    print(f"{'total':60s} {result['total_lower_s']:8.3f} {result['total_compile_s']:10.3f}")
    print(f"programs compiled by a fit at m = {args.m2} after m = {args.m}: {second}")
    print(f"wrote {C.write_json(args.out, result)}")


if __name__ == "__main__":
    main()
