"""Counting what JAX traces and compiles inside a block (shared by the no-recompile tests)."""

import contextlib

import jax
from jax._src import dispatch


@contextlib.contextmanager
def count_compiles():
    """Counts every jaxpr trace and XLA compilation in the block (``out["traces"]``,
    ``out["compiles"]``). A trace happens for every new jit cache entry, also when the
    persistent compilation cache then supplies the executable, so ``traces == 0`` means
    nothing new was built at all."""
    out = {"traces": 0, "compiles": 0}

    def listen(event, duration, **kwargs):
        if event == dispatch.JAXPR_TRACE_EVENT:
            out["traces"] += 1
        elif event == dispatch.BACKEND_COMPILE_EVENT:
            out["compiles"] += 1

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        yield out
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
