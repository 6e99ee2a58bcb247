"""Cholesky, symmetric eigensolves and triangular solves that stay safe when batched on a CPU.

Why: on XLA:CPU a *batched* LAPACK call (a factorisation under ``jax.vmap``: ``potrf``,
``syevd``, ``trsm`` with a leading batch axis) spreads its batch over the runtime's intra-op
thread pool and blocks its own pool thread until the pieces finish. When every pool thread is
blocked that way — two such calls at once, from two Python threads (the threaded search of
:mod:`jaxrank._cv`) or from two independent operations of one program (XLA:CPU runs independent
operations concurrently) — the pieces never get a thread and the process hangs for good, every
thread asleep in a futex (measured: docs/design.md §12). Unbatched calls (one matrix per call)
do not enter the pool and never hung.

So each function here is the :mod:`jax.numpy` / :mod:`jax.scipy` one, wrapped in a
:func:`jax.custom_batching.custom_vmap` whose rule, on CPU, loops over the batch
(:func:`jax.lax.map`: one unbatched LAPACK call per member; nested vmaps nest the loops) and on
any other platform keeps the native batched call (GPU solvers batch safely and fast)
(:func:`jax.lax.platform_dependent`). Values are the same as the plain functions' bit for bit
(the same LAPACK routine on each matrix). Derivatives use the plain functions' JVP rules
(:func:`jax.custom_jvp` around the wrapper), so ``jax.jvp``/``jax.grad`` work as before; a
derivative taken *under* ``vmap`` batches the plain rule (jaxrank's solvers never differentiate
through a factorisation: the fit's derivatives are implicit, :mod:`jaxrank.core`).

Example:
  >>> import jax, jax.numpy as jnp
  >>> from jaxrank import _linalg
  >>> A = jnp.eye(3)[None] * jnp.arange(1.0, 5.0)[:, None, None]  # 4 SPD matrices
  >>> bool(jnp.allclose(jax.vmap(_linalg.cholesky)(A), jnp.linalg.cholesky(A)))
  True
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


def _safe(plain):
    """``plain`` (arrays in, a pytree of arrays out) as a CPU-safe batched op (module doc)."""

    inner = jax.custom_batching.custom_vmap(plain)

    @inner.def_vmap
    def _rule(axis_size, in_batched, *args):
        args = tuple(
            a if b else jnp.broadcast_to(a, (axis_size, *jnp.shape(a)))
            for a, b in zip(args, in_batched, strict=True)
        )
        # the loop calls `op` (not `plain`) so a further vmap around it loops again
        loop = lambda *xs: jax.lax.map(lambda t: op(*t), xs)
        out = jax.lax.platform_dependent(*args, cpu=loop, default=jax.vmap(plain))
        return out, jax.tree.map(lambda _: True, out)

    op = jax.custom_jvp(inner)

    @op.defjvp
    def _jvp(primals, tangents):
        return jax.jvp(plain, primals, tangents)

    return op


@functools.cache
def _cholesky():
    return _safe(lambda a: jnp.linalg.cholesky(a))


@functools.cache
def _eigh():
    return _safe(lambda a: tuple(jnp.linalg.eigh(a)))


@functools.cache
def _eigvalsh():
    return _safe(lambda a: jnp.linalg.eigvalsh(a))


@functools.cache
def _solve_triangular(lower: bool, trans: int | str):
    return _safe(lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=lower, trans=trans))


def cholesky(a: jax.Array) -> jax.Array:
    """:func:`jax.numpy.linalg.cholesky` of one ``(n, n)`` matrix (lower factor; NaN where
    ``a`` is not positive definite), safe under ``vmap`` on CPU."""
    return _cholesky()(jnp.asarray(a))


def eigh(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """:func:`jax.numpy.linalg.eigh` of one symmetric ``(n, n)`` matrix: ``(w, v)``, ascending
    eigenvalues and eigenvectors in columns; safe under ``vmap`` on CPU."""
    return _eigh()(jnp.asarray(a))


def eigvalsh(a: jax.Array) -> jax.Array:
    """:func:`jax.numpy.linalg.eigvalsh` of one symmetric ``(n, n)`` matrix, safe under
    ``vmap`` on CPU."""
    return _eigvalsh()(jnp.asarray(a))


def solve_triangular(a: jax.Array, b: jax.Array, *, lower: bool = False, trans=0) -> jax.Array:
    """:func:`jax.scipy.linalg.solve_triangular` of one ``(n, n)`` triangular ``a`` and ``b`` of
    shape ``(n,)`` or ``(n, k)``, safe under ``vmap`` on CPU."""
    return _solve_triangular(bool(lower), trans)(jnp.asarray(a), jnp.asarray(b))


def cho_solve(chol: jax.Array, b: jax.Array) -> jax.Array:
    """``A⁻¹ b`` from the lower Cholesky factor ``chol`` of ``A`` (as
    :func:`jax.scipy.linalg.cho_solve` with ``lower=True``), safe under ``vmap`` on CPU."""
    y = solve_triangular(chol, b, lower=True)
    return solve_triangular(chol, y, lower=True, trans="T")
