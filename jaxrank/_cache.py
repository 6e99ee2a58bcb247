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
  ~70 small programs around it (the break-even, measured: docs/design.md §12).
  (``jax_persistent_cache_min_entry_size_bytes`` is already 0 in JAX.)

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

Damaged entries (issue 43): JAX's own file cache trusts what it reads (a damaged entry that still
decompresses is handed to the deserialiser; one that does not warns once per entry in every later
process, and is never rewritten, because JAX does not overwrite an existing entry). In a directory
jaxrank points the cache at (:func:`set_compilation_cache`, :func:`enable_default_cache`) every
entry is *sealed* instead: a magic tag and a SHA-256 of the bytes JAX deserialises, before them
(:func:`seal`). An entry whose checksum does not match — a flipped byte, a truncated, random or
empty file — is removed and reported as a miss, so JAX recompiles and writes it again; the process
warns once (:func:`discard_damaged`), whatever the number of damaged entries. Writes go to a
temporary name in the same directory, are read back and checked, then renamed over the entry
(:func:`write_sealed`): two processes writing one entry each rename a complete one, and a writer
killed mid-write leaves only a temporary file that nothing reads (removed a day later). The stored
``jax.export`` programs (:mod:`jaxrank._exported`) use the same seal in any directory. A directory
the user configured keeps JAX's own format and behaviour.

Multi-process runs (``jax.distributed``): nothing is loaded from a sealed cache there
(:func:`_multi_process`): a stored multi-process program, loaded, hung in its first collective.

Long sessions: every XLA:CPU executable keeps memory mappings until its jit cache entry is
dropped; :func:`bound_compiled_programs` drops jaxrank's own jitted programs (never the user's:
no ``jax.clear_caches()``) when the process nears the kernel's mapping limit.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import os
import sys
import tempfile
import threading
import time
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
    "discard_damaged",
    "enable_default_cache",
    "map_count",
    "seal",
    "set_compilation_cache",
    "unseal",
    "write_sealed",
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

#: The first bytes of a sealed file; the SHA-256 of the payload follows, then the payload.
SEAL_MAGIC = b"jaxrank-seal-1\n"
_DIGEST_BYTES = 32
#: Name suffix of a sealed JAX cache entry's key: JAX's own entries (``<key>-cache``) in the same
#: directory, written by an older jaxrank or by plain JAX, are neither read nor overwritten.
_SEALED_KEY_SUFFIX = "-sealed"
#: Temporary files of writes that never finished (a killed writer) are removed after this long:
#: long enough that no live writer still owns one.
_STALE_TMP_SECONDS = 86_400
_TMP_SUFFIX = ".tmp"

_logger = logging.getLogger(__name__)


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


# ---- sealed files: checksummed, written whole or not at all ------------------------------------


def seal(payload: bytes) -> bytes:
    """``payload`` behind :data:`SEAL_MAGIC` and its SHA-256, as stored on disk.

    Example:
      >>> unseal(seal(b"program")) == b"program"
      True
    """
    return SEAL_MAGIC + hashlib.sha256(payload).digest() + bytes(payload)


def unseal(blob: bytes | None) -> bytes | None:
    """The payload of a sealed file, ``None`` unless its tag and checksum match (a flipped byte,
    a truncated, random or empty file, or a file written without a seal).

    Example:
      >>> blob = bytearray(seal(b"program"))
      >>> blob[-1] ^= 1
      >>> unseal(bytes(blob)) is None, unseal(b"") is None
      (True, True)
    """
    head = len(SEAL_MAGIC) + _DIGEST_BYTES
    if blob is None or len(blob) < head or not blob.startswith(SEAL_MAGIC):
        return None
    payload = bytes(blob[head:])
    if hashlib.sha256(payload).digest() != bytes(blob[len(SEAL_MAGIC) : head]):
        return None
    return payload


def write_sealed(path: Path, payload: bytes) -> bool:
    """Store ``seal(payload)`` at ``path``: written to a temporary name in the same directory,
    read back and checked, then renamed over ``path`` (atomic: a reader sees the old file or the
    new one, concurrent writers each rename a complete file, and a writer killed mid-write leaves
    a temporary file that nothing reads). No ``fsync``: a file the system lost part of later
    fails its checksum on the next read and costs a recompile.

    Returns:
      whether the file is in place (``False`` for a read-only or full directory: nothing raised).
    """
    blob = seal(payload)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_TMP_SUFFIX, dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        if unseal(Path(tmp).read_bytes()) != payload:  # a short write or a failing disk
            return False
        os.replace(tmp, path)
        tmp = None
        return True
    except OSError:
        return False
    finally:
        if tmp is not None:
            _remove(Path(tmp))


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:  # gone already (another process removed it), or a read-only directory
        pass


_damage_lock = threading.Lock()
_damage_warned = False


def discard_damaged(path: Path, what: str) -> None:
    """Remove the damaged file ``path`` (it is made again) and warn about it once per process: a
    damaged cache costs recompiles and one :class:`CompilationCacheWarning`, never a failed fit.
    Later damaged files of the same process are logged (``jaxrank._cache`` logger, INFO).

    Args:
      path: the file whose seal did not match.
      what: what it held, for the message (``"compiled program"``, ``"exported program"``).
    """
    global _damage_warned
    _remove(path)
    with _damage_lock:
        first, _damage_warned = not _damage_warned, True
    if not first:
        _logger.info("jaxrank: damaged %s %s removed; recompiling it", what, path)
        return
    warnings.warn(
        f"jaxrank: the persistent compilation cache held a damaged {what} ({str(path)!r}: its "
        "checksum does not match); removed, recompiling. Other damaged entries of this process "
        "are replaced without a warning.",
        CompilationCacheWarning,
        stacklevel=2,
    )


def _sweep_stale_temporaries(path: Path, age: float = _STALE_TMP_SECONDS) -> None:
    # temporary files of writers killed mid-write: never read, removed once surely abandoned
    cutoff = time.time() - age
    for sub in (path, path / "jaxrank-exported"):
        try:
            stale = [t for t in sub.glob(f".*{_TMP_SUFFIX}") if t.stat().st_mtime < cutoff]
        except OSError:
            continue
        for t in stale:
            _remove(t)


def _sealed_file_cache(path: Path):
    """JAX's file cache (``jax._src.lru_cache.LRUCache``: the same layout, eviction and locking)
    whose entries are sealed (module notes)."""
    from jax._src.lru_cache import LRUCache  # JAX's file cache; no public hook replaces it

    class SealedFileCache(LRUCache):
        def get(self, key: str) -> bytes | None:
            if _multi_process():
                return None  # compiles instead: see _multi_process
            sealed_key = key + _SEALED_KEY_SUFFIX
            blob = super().get(sealed_key)
            payload = unseal(blob)
            if blob is not None and payload is None:
                discard_damaged(self.path / f"{sealed_key}-cache", "compiled program")
            return payload

        def put(self, key: str, value: bytes) -> None:
            sealed_key = key + _SEALED_KEY_SUFFIX
            target = self.path / f"{sealed_key}-cache"
            if self.eviction_enabled:
                if len(value) > self.max_size:
                    return
                self.lock.acquire(timeout=self.lock_timeout_secs)
            try:
                if unseal(_read(target)) is not None:
                    return  # already stored (by another process): entries are never rewritten
                self._evict_if_needed(additional_size=len(value))
                if write_sealed(target, value) and self.eviction_enabled:
                    stamp = time.time_ns().to_bytes(8, "little")
                    (self.path / f"{sealed_key}-atime").write_bytes(stamp)
            finally:
                if self.eviction_enabled:
                    self.lock.release()

    return SealedFileCache(str(path), max_size=jax.config.jax_compilation_cache_max_size)


def _multi_process() -> bool:
    """Whether this process is one of a multi-process JAX run (``jax.distributed``).

    There, nothing is loaded from the cache: every process compiles what it runs, as with an
    empty cache. Measured (JAX 0.10, CPU, gloo): the row-sharded search of
    ``tests/test_distributed.py`` at P = 2 ran in 28 s with an empty cache and hung in its first
    fit's collective, in both processes, when run again with the cache it had filled — whether
    both processes loaded the programs or only process 0 (JAX writes entries only from process
    0). With no loads it ran in 37 s. Entries are still written (JAX's rule), for the programs a
    one-process run shares."""
    try:
        from jax._src import distributed

        if distributed.global_state.client is None:
            return False
    except (ImportError, AttributeError):
        pass
    return jax.process_count() > 1


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:
        return None


def _install_sealed_cache(path: Path) -> bool:
    """Make JAX's persistent cache in ``path`` the sealed one (JAX opens its cache lazily, on
    the first compilation; this opens it now, sealed). Returns whether it was installed (JAX's
    internals moved: then JAX's own cache is used, unsealed)."""
    try:
        from jax._src import compilation_cache as jcc  # JAX's cache holder: private, no API

        cache = _sealed_file_cache(path)
        if jax.config.jax_compilation_cache_check_contents:
            cache = jcc.VerificationCache(cache)
        with jcc._cache_initialized_mutex:
            jcc._cache, jcc._cache_initialized = cache, True
    except (ImportError, AttributeError, TypeError, RuntimeError, OSError) as exc:
        _logger.info("jaxrank: JAX's own (unsealed) compilation cache in use: %s", exc)
        return False
    _sweep_stale_temporaries(path)
    return True


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
    if path is not None and jax.config.jax_enable_compilation_cache:
        _install_sealed_cache(path)
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
