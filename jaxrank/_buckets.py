"""Shape buckets: the size ladder that every dynamic size of a compiled program is padded to.

A compiled XLA program is specialised to its array shapes, so every new row count, basis size or
λ count would compile the solver again (seconds on a 2-core CPU, against a fraction of a second
for the fit itself at m ≈ 10³). The fits therefore pad each such size ``n`` up to the next rung
of a fixed ladder, and mask the padding so that it changes nothing (rows enter no pair, basis
columns get a zero kernel column and a zero coefficient, extra λ duplicate a real one):

    bucket(n) = ⌈n / q⌉ · q,   q = min(2^(e−3), 1024),   2^(e−1) < n ≤ 2^e,  q ≥ 8

i.e. four rungs per octave (…, 512, 640, 768, 896, 1024, 1280, …: at most 25 % padding, 12 %
on average) while a rung is at most 1024 apart, then steps of 1024 (…, 8192, 9216, …: at most
12.5 % at 8192, 1 % at 10⁵, 0.1 % at 10⁶, where a fit takes seconds and its own compilation is
small beside it). Why four rungs per octave, measured: docs/design.md §12.

λ counts go to powers of two (1, 2, 4, 8, 16, 32, …); the extra members repeat the largest λ
(the fastest to converge) and are dropped from the result.

The ladder is device-independent. :func:`disabled` turns it off (every size exact, the
pre-bucket behaviour), for the tests that compare both.
"""

from __future__ import annotations

import contextlib
import threading

import jax
import numpy as np

__all__ = [
    "at_least", "bucket", "bucket_lams", "bucket_pow2", "carried", "disabled", "enabled",
    "features", "floors", "put", "rung", "snapshot", "thread_setting",
]  # fmt: skip

#: Largest distance between two rungs of the ladder.
MAX_QUANTUM = 1024
#: Smallest distance between two rungs (and the smallest bucket).
MIN_QUANTUM = 8
#: Rungs per octave below ``8 · MAX_QUANTUM`` is ``2**RUNG_BITS``.
RUNG_BITS = 2

_state = threading.local()


def enabled() -> bool:
    """Whether sizes are bucketed (the default; off inside :func:`disabled`)."""
    return not getattr(_state, "off", False)


@contextlib.contextmanager
def thread_setting(state: threading.local, name: str, value):
    """Within this context ``state.<name>`` is ``value`` on the calling thread (a per-thread
    switch: this module's :func:`disabled`); the old
    value (``False`` if unset) comes back after it."""
    old = getattr(state, name, False)
    setattr(state, name, value)
    try:
        yield
    finally:
        setattr(state, name, old)


def disabled():
    """Within this context every size is exact (no padding): the computation before buckets.

    Private switch for tests and benchmarks that compare the padded fits with the unpadded ones.
    """
    return thread_setting(_state, "off", True)


@contextlib.contextmanager
def at_least(*, groups: tuple[int, ...] | None = None, basis: int | None = None,
             lams: int | None = None):  # fmt: skip
    """Within this context the fits pad to at least these sizes (when buckets are enabled).

    Cross-validation fits subsets of one data set: with the sizes of the whole set as floors,
    every fold and the final refit share one compiled program (``groups``: rows per group of
    the layout, e.g. ``(bucket(m+), bucket(m−))``; ``basis``: the basis size; ``lams``: the λ
    count). A floor that does not apply (another number of groups) is ignored.
    """
    old = getattr(_state, "floors", None)
    _state.floors = dict(groups=groups, basis=basis, lams=lams)
    try:
        yield
    finally:
        _state.floors = old


def snapshot() -> tuple:
    """This thread's bucket state (:func:`disabled`, the floors of :func:`at_least`), to carry
    into a worker thread with :func:`carried` (the state is per thread)."""
    return getattr(_state, "off", False), getattr(_state, "floors", None)


@contextlib.contextmanager
def carried(state: tuple):
    """Within this context the calling thread has the bucket state ``state`` of
    :func:`snapshot` (taken on another thread), so its fits pad as that thread's would.

    Example:
      >>> import concurrent.futures
      >>> from jaxrank import _buckets
      >>> def floors_in(state):
      ...     with _buckets.carried(state):
      ...         return _buckets.floors()["basis"]
      >>> with _buckets.at_least(basis=64), concurrent.futures.ThreadPoolExecutor(1) as pool:
      ...     pool.submit(floors_in, _buckets.snapshot()).result()
      64
    """
    old = snapshot()
    _state.off, _state.floors = state
    try:
        yield
    finally:
        _state.off, _state.floors = old


def floors() -> dict:
    """The floors of the innermost :func:`at_least` (empty outside one or when disabled)."""
    f = getattr(_state, "floors", None)
    return dict(f) if f is not None and enabled() else {}


def bucket(n: int) -> int:
    """The rung of the size ladder at or above ``n`` (``n`` itself when buckets are disabled).

    Example:
      >>> [bucket(n) for n in (1, 9, 100, 110, 130, 900, 1000, 1100, 5000, 100_000)]
      [8, 16, 112, 112, 160, 1024, 1024, 1280, 5120, 100352]
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"a bucketed size must be >= 1, got {n}.")
    return rung(n) if enabled() else n


def rung(n: int) -> int:
    """The rung of the ladder at or above ``n >= 1``, whether or not buckets are enabled (for
    random draws whose values must not depend on the switch)."""
    e = (int(n) - 1).bit_length()  # 2^(e-1) < n <= 2^e
    q = min(max(2 ** (e - 1 - RUNG_BITS), MIN_QUANTUM), MAX_QUANTUM)
    return -(-int(n) // q) * q


def bucket_pow2(n: int) -> int:
    """``n`` padded to a power of two (``n`` itself when buckets are disabled): the coarse
    ladder of a cross-validated search on small data (:func:`jaxrank._cv.search_floors`), where
    one compilation costs more than doubling the rows.

    Example:
      >>> [bucket_pow2(n) for n in (1, 3, 58, 64, 65, 194)]
      [1, 4, 64, 64, 128, 256]
    """
    n = int(n)
    if n < 1:
        raise ValueError(f"a bucketed size must be >= 1, got {n}.")
    return 1 << (n - 1).bit_length() if enabled() else n


def features(A: np.ndarray, dtype=None) -> np.ndarray:
    """The rows ``A`` (``(n, d)``, host) with zero columns appended up to ``bucket(d)``, in
    ``dtype``: one program per rung of feature counts for a computation that reads rows only
    through distances and dot products, which zero columns leave as they are
    (:func:`jaxrank.bases.kmeanspp`: ``bench/keel_wide.py`` meets 19 feature counts over its
    101 sets and 6 rungs).

    Only the rounding of a sum over features may differ (8 terms, one of them 0, against 7).
    The fits do not pad their features for that reason: padded, their kernel blocks moved 4 of
    101 picks of a ``RankRCClassifierCV`` search by rounding (glass2 −3 AUC points on one
    split) for 3 % less time on ``bench/keel_wide.py``'s first splits, where each set's row
    counts mostly compile their own fit anyway.

    Example:
      >>> features(np.ones((2, 3))).shape, features(np.ones((1, 7))).tolist()
      ((2, 8), [[1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]])
    """
    A = np.asarray(A, dtype)
    width = bucket(A.shape[1]) if A.shape[1] else 0
    if width == A.shape[1]:
        return A
    out = np.zeros((A.shape[0], width), A.dtype)
    out[:, : A.shape[1]] = A
    return out


def bucket_lams(n: int, multiple: int = 1) -> int:
    """The λ count ``n`` padded to a power of two (then to a multiple of ``multiple``).

    Example:
      >>> [bucket_lams(n) for n in (1, 2, 3, 5, 16, 17)]
      [1, 2, 4, 8, 16, 32]
    """
    if int(n) < 1:
        raise ValueError(f"a λ count must be >= 1, got {int(n)}.")
    return -(-bucket_pow2(n) // multiple) * multiple


def put(a, dtype=None) -> jax.Array:
    """A host array on the default device, without compiling anything.

    ``jnp.asarray`` of a numpy array compiles a small copy program per shape (JAX 0.10: a
    ``jit(stage)``; with a dtype change, a ``convert_element_type``): the exact sizes the buckets
    keep out of the solver would come back through these. ``jax.device_put`` of an array cast
    on the host compiles nothing.
    """
    a = np.asarray(a) if dtype is None else np.asarray(a, dtype)
    return jax.device_put(a)
