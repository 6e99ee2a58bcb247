"""Scalar surrogate losses of the pairwise margin ``z = f_i − f_j`` and their piece boundaries.

Every loss used by the Newton solver is a *piecewise quadratic* with three pieces::

    ℓ(z) = c − z          for z < lo       (linear piece, slope −1)
    ℓ(z) = q (1 − z)²     for lo ≤ z < 1   (quadratic piece)
    ℓ(z) = 0              for z ≥ 1

The sorted-window operators of :mod:`jaxrank.pairwise` only need ``(lo, q, c)``, so a loss is
described by a :class:`PiecewiseQuadratic` whose fields are dynamic (ε can change without
recompiling).

- Smoothed hinge ℓ_ε of seed 000 (Sec. 3, Fig. 2): ``lo = 1 − 2ε``, ``q = 1/(4ε)``,
  ``c = 1 − ε`` (continuous with continuous slope at ``lo``).
- Squared hinge ``max(0, 1 − z)²`` of seed 001 (eq. 2.4): ``lo = −∞``, ``q = 1``.
- Hinge ``max(0, 1 − z)`` (for reporting the ranking loss R̂_h of seed 000 Fig. 5):
  ``lo = 1``, ``c = 1`` (no quadratic piece; not twice differentiable, so not for the solver).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = [
    "PiecewiseQuadratic",
    "get_loss",
    "hinge",
    "piecewise_loss",
    "smoothed_hinge",
    "squared_hinge",
]


class PiecewiseQuadratic(NamedTuple):
    """Pieces of ``ℓ(z)``: linear ``c − z`` below ``lo``, ``q(1 − z)²`` on ``[lo, 1)``, 0 above.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.losses import PiecewiseQuadratic, piecewise_loss
      >>> sh = PiecewiseQuadratic(lo=0.0, q=0.5, c=0.5)  # the smoothed hinge at ε = 0.5
      >>> piecewise_loss(sh, jnp.array([-1.0, 0.0, 0.5, 2.0]))
      Array([1.5  , 0.5  , 0.125, 0.   ], dtype=float32)
    """

    lo: jax.Array | float
    q: jax.Array | float
    c: jax.Array | float


def smoothed_hinge(eps: float = 0.5) -> PiecewiseQuadratic:
    """The ε-smoothed hinge ℓ_ε of seed 000 (Sec. 3): linear below ``1 − 2ε``, zero above 1.

    Example:
      >>> float(piecewise_loss(smoothed_hinge(0.5), 0.5))  # (1 − 0.5)² / (4·0.5)
      0.125
    """
    return PiecewiseQuadratic(lo=1.0 - 2.0 * eps, q=1.0 / (4.0 * eps), c=1.0 - eps)


def squared_hinge() -> PiecewiseQuadratic:
    """``max(0, 1 − z)²`` (seed 001, eq. 2.4).

    Example:
      >>> from jaxrank.losses import squared_hinge
      >>> squared_hinge()  # no linear piece: q(1 − z)² for every z < 1
      PiecewiseQuadratic(lo=-inf, q=1.0, c=0.0)
    """
    return PiecewiseQuadratic(lo=-jnp.inf, q=1.0, c=0.0)


def hinge() -> PiecewiseQuadratic:
    """``max(0, 1 − z)`` — for reporting only (the solver needs a second derivative).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.losses import hinge, piecewise_loss
      >>> piecewise_loss(hinge(), jnp.array([-1.0, 0.5, 2.0]))
      Array([2. , 0.5, 0. ], dtype=float32)
    """
    return PiecewiseQuadratic(lo=1.0, q=0.0, c=1.0)


def get_loss(name: str, eps: float = 0.5) -> PiecewiseQuadratic:
    """Loss by name: ``"smoothed_hinge"`` (with ``eps``), ``"squared_hinge"`` or ``"hinge"``.

    Example:
      >>> from jaxrank.losses import get_loss
      >>> get_loss("smoothed_hinge", eps=0.5)
      PiecewiseQuadratic(lo=0.0, q=0.5, c=0.5)
      >>> get_loss("squared_hinge")
      PiecewiseQuadratic(lo=-inf, q=1.0, c=0.0)
    """
    if name == "smoothed_hinge":
        if not (eps > 0):
            raise ValueError(f"eps must be > 0 for the smoothed hinge, got {eps!r}.")
        return smoothed_hinge(eps)
    if name == "squared_hinge":
        return squared_hinge()
    if name == "hinge":
        return hinge()
    raise ValueError(f"unknown loss {name!r}; use 'smoothed_hinge', 'squared_hinge' or 'hinge'.")


def piecewise_loss(loss: PiecewiseQuadratic, z: jax.Array) -> jax.Array:
    """Evaluate ``ℓ(z)`` elementwise (the pair-loop definition; the oracle for the windows).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.losses import piecewise_loss, squared_hinge
      >>> piecewise_loss(squared_hinge(), jnp.array([-1.0, 0.5, 2.0]))
      Array([4.  , 0.25, 0.  ], dtype=float32)
    """
    z = jnp.asarray(z)
    lo = jnp.asarray(loss.lo, z.dtype)
    lin = jnp.asarray(loss.c, z.dtype) - z
    quad = jnp.asarray(loss.q, z.dtype) * (1 - z) ** 2
    return jnp.where(z < lo, lin, jnp.where(z < 1, quad, jnp.zeros_like(z)))
