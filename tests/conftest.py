"""Test configuration: float64 and strict dtype promotion for every test.

x64 is switched on here, never by the library on import (CONTRIBUTING.md): the oracles compare to
1e-10, which needs float64, and strict promotion catches silent float32/float64 mixing.

The test process compiles with XLA's backend optimisation level 0 (:data:`TEST_XLA_FLAG`). The
suite runs thousands of small programs once each, so it is bound by compilation, not by running
them: on ``tests/test_buckets.py`` + ``tests/test_fit.py`` (one process, empty cache, 2 cores)
86 s at the default level against 66 s at level 0. The level changes how fast the compiled code
runs and, in the last bits, its rounding (no fused multiply-adds at level 0: a float32 doctest
agreed to 8.4e-7 relative at the default level and 1.05e-6 at level 0), not what it computes:
the oracle tests pass at both. The subprocesses that run the scale and latency benches
(``tests/_bench.py``, ``user_level=True``) strip the flag again: they run as a user runs them, and
so test the default level; the other benches' smoke runs keep it. A level set by the user in
``XLA_FLAGS`` is kept.

The test processes use jaxrank's default persistent compilation cache (``~/.cache/jaxrank/jax``,
unless the user configured one or set ``JAXRANK_NO_COMPILATION_CACHE=1``) from the start: the
first run on a machine compiles everything (24 min on 2 cores), later runs load. Programs
compiled at level 0 have keys of their own (XLA's flags are part of the key), so they never stand
in for a user's.
"""

import gc
import os

from _bench import TEST_XLA_FLAG

if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    # before jax is imported: XLA reads its flags once, when the backend starts
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {TEST_XLA_FLAG}".strip()

import jax
import pytest

from jaxrank._cache import enable_default_cache, map_count

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
# The persistent compilation cache from the first test on, as the estimators and the CLI switch it
# on for a user (the same directory, the same opt-outs), so a later run loads what this one
# compiled; before, each worker only cached once some test had fit an estimator. Programs that
# hold a host callback are never stored (JAX's rule).
enable_default_cache()

# Every compiled XLA:CPU executable keeps ~3 memory mappings until its jit cache entry is
# dropped. The suite compiles thousands of programs in one process; at Linux's default
# vm.max_map_count (65530) the next compile crashes inside XLA (SIGSEGV / SIGABRT, seen after
# ~800 s of the suite). Dropping the caches after a test module whenever the count gets high keeps
# the process far below the limit (one module adds at most ~10 000); never inside a module, whose
# no-recompile checks rely on the compilations of its earlier tests and fixtures.
_MAX_MAPS = 10_000


@pytest.fixture(autouse=True, scope="module")
def _bounded_compile_cache():
    yield
    n = map_count()
    if n is not None and n > _MAX_MAPS:
        jax.clear_caches()
        gc.collect()
