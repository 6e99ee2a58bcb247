"""The matrix-product precision of every kernel block, objective and solver product.

On GPU and TPU a float32 ``matmul`` defaults to reduced-precision passes (TF32, bfloat16);
jaxrank's products are checked against float64 oracles to ~1e-10 and its solver's certificates
(gradient norm, duality gap) need the full product, so every ``matmul``/``einsum``/``dot`` in the
package asks for ``HIGHEST``. On CPU it is the default and costs nothing.

Example:
  >>> import jax.numpy as jnp
  >>> from jaxrank._precision import HIGHEST
  >>> jnp.matmul(jnp.ones((2, 3)), jnp.ones(3), precision=HIGHEST).tolist()
  [3.0, 3.0]
"""

import jax

__all__ = ["HIGHEST"]

#: ``precision=`` of every matrix product in jaxrank.
HIGHEST = jax.lax.Precision.HIGHEST
