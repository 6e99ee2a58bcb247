"""Test configuration: float64 and strict dtype promotion for every test.

x64 is switched on here, never by the library on import (DEVELOPERS.md): the oracles compare to
1e-10, which needs float64, and strict promotion catches silent float32/float64 mixing.
"""

import gc

import jax
import pytest

from jaxrank._cache import map_count

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")

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
