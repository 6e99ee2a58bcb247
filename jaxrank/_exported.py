"""Compiled fits a later process reuses without tracing or lowering them: ``jax.export``.

JAX's persistent compilation cache (:mod:`jaxrank._cache`) keeps executables, but a new process
still traces the Python function and lowers it to StableHLO before it can look one up: for the
16-λ fit at m = 1000 that was 437 ms of a 620 ms second-process fit (issue 16). :func:`call`
runs a jitted function through a ``jax.export`` program stored beside that cache (in its
subdirectory ``jaxrank-exported``), keyed by the function, its static options, the argument
shapes, dtypes and tree, the JAX version, the platform and a hash of jaxrank's own source (a
program stored by other code is never used): a later process deserialises it
(milliseconds), and the executable it compiles to comes from the persistent cache.

Used only where it can help and is safe: with the persistent cache on (a directory to store
into), single-device arguments, and ``flatbuffers`` installed (``jax.export``'s serialisation
needs it); otherwise the function is called directly. ``JAXRANK_NO_EXPORT=1`` turns it off.

A stored program is sealed (:func:`jaxrank._cache.seal`: a SHA-256 of the serialised bytes) and
written to a temporary name, checked and renamed (:func:`jaxrank._cache.write_sealed`). Its
checksum is verified before it is deserialised: a damaged file (issue 43: one flipped byte made
every later fit fail with ``Failed to deserialize StableHLO``, until a person deleted the
directory) is removed and the program exported again, with at most one warning per process
(:func:`jaxrank._cache.discard_damaged`). A sealed program that still fails to deserialise (from
another JAX) is exported again too.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from pathlib import Path

import jax
import numpy as np

from jaxrank._cache import discard_damaged, unseal, write_sealed

__all__ = ["DISABLE_ENV", "call", "directory"]

#: Environment variable that turns the exported programs off (``1``).
DISABLE_ENV = "JAXRANK_NO_EXPORT"

_LOADED: dict[str, object] = {}
# one lock per key: the threaded search (jaxrank._cv) calls the same fit from several threads at
# once, and without it each thread exported and compiled its own copy of the program (measured:
# 6 compiles of 2 programs, 41 s of compilation in a 26 s RankRCClassifierCV on segment0)
_KEY_LOCKS: dict[str, threading.Lock] = {}
_KEY_LOCKS_GUARD = threading.Lock()


def _key_lock(key: str) -> threading.Lock:
    with _KEY_LOCKS_GUARD:
        return _KEY_LOCKS.setdefault(key, threading.Lock())


@functools.cache
def _serialisable() -> bool:
    try:
        import flatbuffers  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def _code_version() -> str:
    # the package's own source: a stored program is only valid for the code that traced it
    # (subpackages included: jaxrank.mibc/, jaxrank.cli/, ... hold code too)
    h = hashlib.sha256()
    root = Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def directory() -> Path | None:
    """Where exported programs are stored: ``<compilation cache>/jaxrank-exported``, or
    ``None`` (no persistent cache, ``JAXRANK_NO_EXPORT=1`` or no ``flatbuffers``)."""
    if os.environ.get(DISABLE_ENV, "") not in ("", "0") or not _serialisable():
        return None
    cache = jax.config.jax_compilation_cache_dir
    return None if not cache else Path(cache) / "jaxrank-exported"


def call(name: str, fn, args: tuple, static: tuple = (), compiler_options: dict | None = None):
    """``jax.tree.leaves(fn(*args))`` through a stored ``jax.export`` program when possible.

    Args:
      name: a stable name of ``fn`` (part of the key).
      fn: a function of array pytrees (its static options bound, e.g. by ``functools.partial``;
        their values go in ``static``).
      args: its arguments (pytrees of arrays and Python scalars, on one device).
      static: hashable values the program depends on beyond the arguments' shapes and dtypes.
      compiler_options: XLA options the stored program is compiled with (``fn`` itself, when
        it runs directly, compiles with its own).

    Returns:
      The output's leaves, in ``jax.tree.leaves`` order.
    """
    leaves, tree = jax.tree.flatten(args)
    where = directory()
    multi = any(len(getattr(a, "sharding", None).device_set) > 1 for a in leaves
                if hasattr(a, "sharding"))  # fmt: skip
    if where is None or multi:
        return jax.tree.leaves(fn(*args))
    avals = [_aval(a) for a in leaves]  # without tracing: a warm call traces nothing
    sig = [(a.shape, str(a.dtype), bool(getattr(a, "weak_type", False))) for a in avals]
    backend = jax.default_backend()
    options = tuple(sorted((compiler_options or {}).items()))
    text = repr((name, static, options, str(tree), sig, jax.__version__, backend, _code_version()))
    key = hashlib.sha256(text.encode()).hexdigest()[:40]
    run = _LOADED.get(key)
    if run is not None:
        return run(*leaves)
    with _key_lock(key):
        run = _LOADED.get(key)
        if run is not None:  # made by another thread while this one waited
            return run(*leaves)
        exp = _load(where / f"{key}.jaxexport")
        if exp is None:

            def flat(*xs):
                return jax.tree.leaves(fn(*jax.tree.unflatten(tree, xs)))

            flat.__name__ = name
            exp = jax.export.export(jax.jit(flat))(*avals)
            _store(where / f"{key}.jaxexport", exp.serialize())

        def stored(*xs, exp=exp):
            return exp.call(*xs)

        stored.__name__ = name  # the compiled module's name: jit_<name>, as the jitted function's
        run = jax.jit(stored, compiler_options=dict(options) or None)
        out = run(*leaves)  # compiles (or loads) it once, while the other threads wait
        _LOADED[key] = run
        return out


def _aval(x) -> jax.ShapeDtypeStruct:
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        weak = bool(getattr(x, "weak_type", False))
        return jax.ShapeDtypeStruct(np.shape(x), x.dtype, weak_type=weak)
    # a Python scalar: weakly typed, in JAX's default dtype for its kind
    dt = jax.dtypes.canonicalize_dtype(np.result_type(type(x)))
    return jax.ShapeDtypeStruct((), dt, weak_type=not isinstance(x, bool))


def _load(path: Path):
    """The stored program at ``path``, or ``None`` (absent, damaged: removed, or unreadable by
    this JAX): then it is exported again."""
    try:
        blob = path.read_bytes()
    except OSError:  # absent or unreadable
        return None
    payload = unseal(blob)
    if payload is None:  # never hand damaged bytes to the deserialiser
        discard_damaged(path, "exported program")
        return None
    try:
        return jax.export.deserialize(bytearray(payload))
    except Exception:  # intact, but from a JAX that reads it differently: export again
        return None


def _store(path: Path, blob: bytes) -> None:
    # sealed, through a checked temporary file; a read-only or full directory stores nothing
    write_sealed(path, blob)
