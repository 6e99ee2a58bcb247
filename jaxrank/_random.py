"""Explicit-key random draws on the host: the key rule and fixed-block draw streams.

Shared by the data generators (:mod:`jaxrank.datasets`) and the multi-level data
(:mod:`jaxrank.multilevel`): every draw comes from a ``jax.random.key`` (or an integer seed,
never both), in fixed-size blocks so one compiled kernel per draw kind serves every size.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _buckets
from jaxrank._validation import check_int

__all__ = [
    "fold_in",
    "key_bits",
    "permutation",
    "random_permutation",
    "resolve_key",
    "split",
    "standard_normal",
    "uniform01",
]


def resolve_key(key, seed) -> jax.Array:
    """Return a PRNG key from exactly one of ``key`` / ``seed``."""
    if key is None and seed is None:
        raise ValueError(
            "randomness is explicit in jaxrank: pass key=jax.random.key(...) or an integer seed=."
        )
    if key is not None and seed is not None:
        raise ValueError("pass exactly one of key= and seed=, not both.")
    if seed is not None:
        return jax.random.key(check_int(seed, "seed", -(2**63)))
    if isinstance(key, int | np.integer):
        raise ValueError(
            f"key must be a jax.random.key, got the integer {key!r}; pass seed={key!r} instead."
        )
    if not isinstance(key, jax.Array):
        raise ValueError(f"key must be a jax.random.key, got {type(key).__name__}.")
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise ValueError(f"key must be a single key (shape ()), got shape {key.shape}.")
        return key
    if key.shape == (2,) and key.dtype == jnp.uint32:  # legacy jax.random.PRNGKey
        return jax.random.wrap_key_data(key)
    raise ValueError(
        f"key must be a jax.random.key, got an array of dtype {key.dtype} and shape {key.shape}."
    )


# Host-side key arithmetic as one compiled program each. Called eagerly, jax.random.split
# followed by unpacking, fold_in with a Python int, bits and permutation each run several tiny
# programs (threefry2x32, unstack, dynamic_slice, squeeze, iota, convert_element_type, ...);
# every one is traced, lowered and loaded in each new process (~10-20 ms apiece on CPU). Jitted
# whole they are one program per call kind and the same bits.


@functools.partial(jax.jit, static_argnums=1)
def _split(key: jax.Array, n: int) -> tuple:
    return tuple(jax.random.split(key, n))


def split(key: jax.Array, n: int = 2) -> tuple:
    """``tuple(jax.random.split(key, n))``, the same keys, as one compiled program."""
    return _split(key, int(n))


@jax.jit
def _fold_in(key: jax.Array, data: jax.Array) -> jax.Array:
    return jax.random.fold_in(key, data)


def fold_in(key: jax.Array, data: int) -> jax.Array:
    """``jax.random.fold_in(key, data)`` for a host integer ``0 <= data < 2**32``, the same key,
    as one compiled program."""
    return _fold_in(key, np.uint32(data))


@functools.partial(jax.jit, static_argnums=1)
def _bits32(key: jax.Array, n: int) -> jax.Array:
    return jax.random.bits(key, (n,), jnp.uint32)


def key_bits(key: jax.Array, n: int) -> np.ndarray:
    """``jax.random.bits(key, (n,), uint32)`` as a numpy array, one compiled program per ``n``."""
    return np.asarray(_bits32(key, int(n)))


@functools.partial(jax.jit, static_argnums=1)
def _permutation(key: jax.Array, n: int) -> jax.Array:
    return jax.random.permutation(key, n)


@functools.partial(jax.jit, static_argnums=(1, 2))
def _permutation_padded(key: jax.Array, size: int, rounds: int, n: jax.Array) -> jax.Array:
    # jax.random.permutation's shuffle (jax._src.random: `rounds` stable sorts by fresh 32-bit
    # keys) over `size` >= n slots: the keys of the slots from n on are the largest uint32, so
    # the stable sort keeps the padding after every real element, at the same slots each round
    x = jnp.arange(size, dtype=jnp.int32)
    real = x < n
    top = jnp.uint32(np.iinfo(np.uint32).max)
    for _ in range(rounds):
        key, sub = jax.random.split(key)
        bits = jnp.where(real, jax.random.bits(sub, (size,), jnp.uint32), top)
        x = jax.lax.sort_key_val(bits, x, is_stable=True)[1]
    return x


def permutation(key: jax.Array, n: int) -> np.ndarray:
    """``jax.random.permutation(key, n)`` as a numpy array: the same permutation, one compiled
    program per rung of the size ladder (:func:`jaxrank._buckets.rung`).

    With JAX's partitionable threefry (``jax_threefry_partitionable``, the default) the bits of
    a larger shape begin with those of a smaller one, so the shuffle runs over ``rung(n)`` slots
    with the padding's sort keys at the top and gives ``jax.random.permutation``'s result (the
    round count from ``n``, as JAX takes it). Without it: one program per ``n``.

    Example:
      >>> import jax, numpy as np
      >>> k = jax.random.key(3)
      >>> bool(np.array_equal(permutation(k, 50), jax.random.permutation(k, 50)))
      True
    """
    n = int(n)
    if not jax.config.jax_threefry_partitionable or n < 1:
        return np.asarray(_permutation(key, n))
    # jax.random's own round count (its _shuffle): 3 log n / log(2³² − 1)
    rounds = int(np.ceil(3 * np.log(max(1, n)) / np.log(np.iinfo(np.uint32).max)))
    out = _permutation_padded(key, _buckets.rung(n), rounds, np.int32(n))
    # jax.random.permutation's dtype: the default integer (int64 under x64)
    return np.asarray(out)[:n].astype(jax.dtypes.canonicalize_dtype(np.int64))


_BLOCK = 1 << 16
"""Values per ``jax.random`` call in the draw streams below."""


@jax.jit
def _uniform_block(key: jax.Array, block: jax.Array) -> jax.Array:
    return jax.random.uniform(jax.random.fold_in(key, block), (_BLOCK,), dtype=jnp.float32)


@jax.jit
def _normal_block(key: jax.Array, block: jax.Array) -> jax.Array:
    return jax.random.normal(jax.random.fold_in(key, block), (_BLOCK,), dtype=jnp.float32)


@jax.jit
def _bits_block(key: jax.Array, block: jax.Array) -> jax.Array:
    return jax.random.bits(jax.random.fold_in(key, block), (_BLOCK,), dtype=jnp.uint32)


def _stream(block_fn, key: jax.Array, n: int, dtype) -> np.ndarray:
    """The first ``n`` values of the stream ``block_fn(key, 0), block_fn(key, 1), ...``.

    Fixed-size blocks keep one compiled kernel per draw kind for every ``n`` (a new shape would
    cost a fresh XLA compile, ~0.2 s on CPU, per call with a new ``m`` or ``d``).
    """
    n_blocks = max(1, -(-n // _BLOCK))
    parts = [np.asarray(block_fn(key, np.uint32(b))) for b in range(n_blocks)]
    return np.concatenate(parts)[:n].astype(dtype)


def uniform01(key: jax.Array, n: int) -> np.ndarray:
    """``n`` iid uniform [0, 1) values drawn in float32 with ``jax.random``, as float64 numpy."""
    return _stream(_uniform_block, key, n, np.float64)


def standard_normal(key: jax.Array, n: int) -> np.ndarray:
    """``n`` iid standard normal values drawn in float32 with ``jax.random``, as float64 numpy."""
    return _stream(_normal_block, key, n, np.float64)


def random_permutation(key: jax.Array, n: int) -> np.ndarray:
    """Uniform random permutation of ``range(n)``: a stable argsort of 64 random bits per item."""
    bits = _stream(_bits_block, key, 2 * n, np.uint32)
    sort_key = (bits[:n].astype(np.uint64) << np.uint64(32)) | bits[n:].astype(np.uint64)
    return np.argsort(sort_key, kind="stable")
