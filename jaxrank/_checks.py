"""Run-time checks of traced values: the opt-in ``throw=True`` of :func:`jaxrank.pairwise_loss`,
:func:`jaxrank.pairwise_auc` and :func:`jaxrank.core.fit_core`, and the implicit solve's
convergence check (:class:`jaxrank.core.ImplicitSolve`).

A traced value cannot be refused when the program is traced, and ``jax.experimental.checkify``
needs the caller to wrap the whole function. :func:`raise_if` passes an array through a host
callback that raises when a flag is set, so the program itself stops at run time, under
``jit``, ``vmap`` and ``grad`` alike, with no wrapping (the mechanism of equinox's
``error_if``). JAX raises it as an error whose message ends with ``"ValueError: <message>"``
(``jax.errors.JaxRuntimeError``, a ``RuntimeError``, in or out of ``jit``; catch both
``ValueError`` and ``RuntimeError`` to be safe) and logs the callback's traceback.

Only a call that asks for a check holds a callback: the default programs are unchanged (and
``jax.export`` still serialises them; a program with a check cannot be exported).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["raise_if"]


def raise_if(x, pred, message):
    """``x`` unchanged; raises ``ValueError(message)`` when the program runs with any entry of
    ``pred`` true. The derivative of ``x`` passes through (the check is on the primal value).

    ``pred`` and ``message`` may be tuples of the same length (several checks in one callback):
    the error then names every message whose flag is set, joined by ``"; "``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> f = jax.jit(lambda x: raise_if(x, x < 0, "x must be >= 0") * 2)
      >>> f(jnp.ones(2)).tolist()
      [2.0, 2.0]
      >>> try:
      ...     f(-jnp.ones(2))
      ... except (ValueError, RuntimeError) as err:
      ...     print(str(err).splitlines()[-1])
      ValueError: x must be >= 0
    """
    if isinstance(message, str):
        pred, message = (pred,), (message,)
    flags = jnp.stack([jnp.any(jnp.asarray(p)) for p in pred])
    return _raise_if(jnp.asarray(x), flags, tuple(message))


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _raise_if(x, pred, message):
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    # vmap: the flags of every member arrive at once; one of them set stops the whole call
    return jax.pure_callback(
        functools.partial(_host_check, message), out, x, pred, vmap_method="broadcast_all"
    )


@_raise_if.defjvp
def _raise_if_jvp(message, primals, tangents):
    x, pred = primals
    return _raise_if(x, pred, message), tangents[0]


def _host_check(messages, x, flags):
    # flags: (k,) or, under vmap, (..., k)
    hit = np.asarray(flags).reshape(-1, len(messages)).any(axis=0)
    if hit.any():
        raise ValueError("; ".join(m for m, h in zip(messages, hit, strict=True) if h))
    return np.asarray(x)
