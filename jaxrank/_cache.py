"""JAX's persistent compilation cache for jaxrank's user-facing entry points (issue 16, item 2;
issue 28, item 3).

Every jitted program jaxrank runs is compiled by XLA the first time a process sees its shapes:
the 16-λ ``fit_rankrc`` at m = 1000 spends ~5-9 s compiling on a 2-core CPU against ~0.1 s of
work. JAX can keep compiled executables on disk and load them in a later process
(``jax_compilation_cache_dir``), so a second process loads instead of compiling.

``import jaxrank`` changes no JAX option (a library must not: the user's own programs share
JAX's global config). The cache is switched on where a user who does not write JAX meets
jaxrank: the command line (``jaxrank fit`` / ``score`` ...) and the scikit-learn estimators'
``fit`` call :func:`enable_default_cache` once per process, which — only when the user has
configured no cache and has not opted out — sets:

- ``jax_compilation_cache_dir``: :func:`default_cache_dir` (``$XDG_CACHE_HOME/jaxrank/jax``, by
  default ``~/.cache/jaxrank/jax``).
- ``jax_persistent_cache_min_compile_time_secs``: :data:`MIN_COMPILE_TIME_SECS`, only while it is
  at JAX's own default (1 s) and ``$JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` is unset: a
  threshold the user chose is never lowered. JAX's 1 s caches only the solver and none of the
  ~70 small programs around it. Measured on the 16-λ fit at m = 1000: a program compiled in
  5-10 ms loads from the cache in 1-9 ms, so caching pays from ~10 ms up; the second process's
  compile time is 0.55 s with every program cached, 0.58 s from 10 ms, 1.6 s from 50 ms and
  2.5 s at JAX's 1 s. (``jax_persistent_cache_min_entry_size_bytes`` is already 0 in JAX.)

A directory the user configured — ``jax.config.update("jax_compilation_cache_dir", ...)`` or
``$JAX_COMPILATION_CACHE_DIR`` (JAX reads it itself) — is theirs: nothing is changed then.
Researchers calling :func:`jaxrank.fit_rankrc` from their own JAX code get whatever cache they
set up, and :func:`set_compilation_cache` points JAX at a directory on request.

Opt-out: ``JAXRANK_NO_COMPILATION_CACHE=1`` in the environment (the entry points then change no
JAX config), or :func:`set_compilation_cache` with ``None``; the same function points the cache
elsewhere. Nothing is written into the package or the working directory.

A directory that cannot be used — not creatable, not writable, or on a file system with less
than :data:`MIN_FREE_BYTES` free — is found by a probe (create it, write and delete one empty
file) and degrades to no caching with one :class:`CompilationCacheWarning`, never an error. The
probe matters: pointed at a read-only directory, JAX itself would warn once per program it
failed to write. (A disk that fills up after the probe still gets JAX's own warning per failed
write; nothing fails.)

The cache is trusted code: JAX loads executables from it, so it must not be writable by other
users (the default directory is created with mode 0700).

Long sessions: every XLA:CPU executable keeps memory mappings until its jit cache entry is
dropped; :func:`bound_compiled_programs` drops jaxrank's own jitted programs (never the user's:
no ``jax.clear_caches()``) when the process nears the kernel's mapping limit.
"""

from __future__ import annotations

import gc
import os
import sys
import tempfile
import warnings
from pathlib import Path

import jax

__all__ = [
    "DISABLE_ENV",
    "MAX_MAPS",
    "MIN_COMPILE_TIME_SECS",
    "MIN_FREE_BYTES",
    "CompilationCacheWarning",
    "bound_compiled_programs",
    "compilation_cache_dir",
    "default_cache_dir",
    "enable_default_cache",
    "map_count",
    "set_compilation_cache",
]

DISABLE_ENV = "JAXRANK_NO_COMPILATION_CACHE"
"""Environment variable: set to anything but ``""``/``0``/``false``/``no``, ``import jaxrank``
leaves JAX's compilation-cache config alone."""

MIN_COMPILE_TIME_SECS = 0.01
"""Programs that compile faster than this are not written to the cache (measured break-even:
loading a small entry costs 1-9 ms)."""

MIN_FREE_BYTES = 64 * 2**20
"""A cache directory on a file system with less free space than this counts as full (entries
are ~5 KB to ~1 MB; this leaves room for hundreds of programs without taking the last bytes)."""

MAX_MAPS = 30_000
"""Memory mappings of the process above which :func:`bound_compiled_programs` drops JAX's
in-memory compiled programs. Every XLA:CPU executable keeps memory mappings for its compiled
kernels until its jit cache entry is dropped (the RankRC solver, ~180 kernels, several hundred);
at Linux's default ``vm.max_map_count`` (65530) the next compilation aborts the process inside
LLVM ("Unable to allocate section memory"). Seen in ``bench/keel_wide.py`` after 47 data sets in
one process, and in the test suite after ~800 s."""

#: Check the mapping count on every this many calls of :func:`bound_compiled_programs` (reading
#: ``/proc/self/maps`` costs ~1 ms per 10 000 mappings).
_CHECK_EVERY = 8
_calls = 0

JAX_DEFAULT_MIN_TIME = 1.0  # JAX's own jax_persistent_cache_min_compile_time_secs

_DIR_ENV = "JAX_COMPILATION_CACHE_DIR"
_MIN_TIME_ENV = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"


class CompilationCacheWarning(UserWarning):
    """The persistent compilation cache directory cannot be used; jaxrank compiles without it.

    Example:
      >>> import warnings
      >>> import jaxrank
      >>> issubclass(jaxrank.CompilationCacheWarning, Warning)
      True
      >>> with warnings.catch_warnings():  # e.g. where the cache cannot be written anyway
      ...     warnings.simplefilter("ignore", jaxrank.CompilationCacheWarning)
    """


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() not in ("", "0", "false", "no", "off")


def default_cache_dir() -> Path:
    """The per-user default: ``$XDG_CACHE_HOME/jaxrank/jax``, else ``~/.cache/jaxrank/jax``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jaxrank" / "jax"


def compilation_cache_dir() -> Path | None:
    """The directory JAX's persistent compilation cache uses now, ``None`` when it is off.

    Example:
      >>> import jaxrank
      >>> path = jaxrank.compilation_cache_dir()  # a pathlib.Path, or None when the cache is off
      >>> path is None or path.name != ""
      True
    """
    if not jax.config.jax_enable_compilation_cache:
        return None
    path = jax.config.jax_compilation_cache_dir
    return None if path is None else Path(path)


def _free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _unusable(path: Path) -> str | None:
    """Why ``path`` cannot hold the cache (``None`` when it can): creates the directory, refuses
    one not owned by this user or writable by group or others (JAX loads and runs executables
    from it: another local user could plant code), writes and deletes one empty file in it (as
    root a chmod-ed directory is still writable, and then JAX's writes succeed too, so the
    probe, not ``os.access``, is the test), checks free space."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = path.stat()
        getuid = getattr(os, "getuid", None)  # POSIX only
        if getuid is not None and st.st_uid != getuid():
            return f"owned by uid {st.st_uid}, not by this user (uid {getuid()})"
        if getuid is not None and st.st_mode & 0o022:
            return (
                f"writable by {'others' if st.st_mode & 0o002 else 'its group'} (mode "
                f"{st.st_mode & 0o777:04o}): JAX runs what it loads from there; chmod go-w it"
            )
        fd, probe = tempfile.mkstemp(prefix=".jaxrank-probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    try:
        free = _free_bytes(path)
    except (OSError, AttributeError):  # statvfs missing (Windows) or refused: assume room
        return None
    if free < MIN_FREE_BYTES:
        return f"only {free / 2**20:.1f} MiB free (fewer than {MIN_FREE_BYTES / 2**20:.0f} MiB)"
    return None


def _drop_initialized_cache() -> None:
    # JAX opens the cache directory once, on the first compilation; a process that already
    # compiled must forget it for a new directory (or none) to take effect.
    from jax.experimental.compilation_cache import compilation_cache as cc

    cc.reset_cache()


def _use(path: Path | None, *, source: str) -> Path | None:
    """Point JAX's cache at ``path`` (``None``: off), or off with one warning if unusable."""
    if path is not None:
        why = _unusable(path)
        if why is not None:
            warnings.warn(
                f"jaxrank: persistent compilation cache {source} {str(path)!r} cannot be used "
                f"({why}); compiling without it. Set {DISABLE_ENV}=1 or call "
                "jaxrank.set_compilation_cache(path) to silence this.",
                CompilationCacheWarning,
                stacklevel=3,
            )
            path = None
    jax.config.update("jax_compilation_cache_dir", None if path is None else str(path))
    at_default = jax.config.jax_persistent_cache_min_compile_time_secs == JAX_DEFAULT_MIN_TIME
    if path is not None and _MIN_TIME_ENV not in os.environ and at_default:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_TIME_SECS)
    _drop_initialized_cache()
    return path


def set_compilation_cache(path: str | os.PathLike | None) -> Path | None:
    """Point JAX's persistent compilation cache at ``path``, or switch it off with ``None``.

    Compiled programs are written to ``path`` and loaded from it by later processes (and by this
    one after ``jax.clear_caches()``). Programs compiling in under :data:`MIN_COMPILE_TIME_SECS`
    are not written unless ``$JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` says otherwise. This
    sets JAX's global config, so it applies to every jitted function in the process, not only
    jaxrank's.

    Args:
      path: the cache directory (created if missing; use one only you can write to: JAX runs
        what it loads from there), or ``None`` for no persistent cache.

    Returns:
      The directory now in use, or ``None`` when caching is off — also when ``path`` cannot be
      used (not creatable, not writable, file system full), which warns once with a
      :class:`CompilationCacheWarning` instead of raising.

    Example:
      >>> import tempfile
      >>> import jaxrank
      >>> before = jaxrank.compilation_cache_dir()
      >>> jaxrank.set_compilation_cache(tempfile.mkdtemp()).is_dir()
      True
      >>> jaxrank.set_compilation_cache(None)  # off
      >>> _ = jaxrank.set_compilation_cache(before)  # as it was
    """
    p = None if path is None else Path(os.fspath(path)).expanduser()
    return _use(p, source="directory")


_enabled_once = False


def enable_default_cache() -> Path | None:
    """Switch on jaxrank's default persistent cache for this process, once, unless the user
    configured a cache or opted out (module notes). Called by the CLI and the scikit-learn
    estimators' ``fit``, never on import.

    Returns:
      The directory in use afterwards, ``None`` when caching is off.
    """
    global _enabled_once
    if _enabled_once:
        return compilation_cache_dir()
    _enabled_once = True
    if _truthy(os.environ.get(DISABLE_ENV)) or not jax.config.jax_enable_compilation_cache:
        return compilation_cache_dir()
    if jax.config.jax_compilation_cache_dir is not None:
        return compilation_cache_dir()  # the user's (config or $JAX_COMPILATION_CACHE_DIR)
    return _use(default_cache_dir(), source="directory")


def map_count() -> int | None:
    """Number of memory mappings of this process (``None`` where ``/proc`` does not exist)."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return None


def _own_jitted():
    # jaxrank's module-level jitted functions (the programs a fit compiles), and those held in
    # module-level dicts: the stored jax.export programs of jaxrank._exported, one per shape,
    # would otherwise keep their executables (and mappings) for the life of the process
    seen = set()
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == "jaxrank" or name.startswith("jaxrank.")):
            continue
        for top in list(vars(mod).values()):
            for value in list(top.values()) if isinstance(top, dict) else (top,):
                if id(value) in seen or not hasattr(value, "lower"):
                    continue
                if callable(getattr(value, "clear_cache", None)):
                    seen.add(id(value))
                    yield value


def bound_compiled_programs(max_maps: int = MAX_MAPS, *, every: int = _CHECK_EVERY) -> bool:
    """Drop jaxrank's in-memory compiled programs when the process holds too many memory mappings.

    Called by every fit (:func:`jaxrank._fitting.fit_rows`) before it compiles or runs anything, so
    a long session — hundreds of data sets or shapes in one process — never reaches the kernel's
    limit (:data:`MAX_MAPS`). The count is read on every ``every``-th call only. Only jaxrank's
    own jitted functions are cleared (``f.clear_cache()``), never the caller's programs
    (``jax.clear_caches()`` would drop those too); they are recompiled, or loaded from the
    persistent cache, when next called. Measured: four 4-λ fits of new sizes took the process
    from 437 to 3017 mappings; clearing jaxrank's 46 jitted functions brought it back to 575
    (``jax.clear_caches()``: 516).

    Returns:
      whether the caches were dropped.
    """
    global _calls
    _calls += 1
    if _calls % max(int(every), 1):
        return False
    n = map_count()
    if n is None or n <= max_maps:
        return False
    for f in _own_jitted():
        f.clear_cache()
    gc.collect()
    return True
