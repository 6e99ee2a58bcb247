"""Test configuration: float64 and strict dtype promotion for every test.

x64 is switched on here, never by the library on import (DEVELOPERS.md): the oracles compare to
1e-10, which needs float64, and strict promotion catches silent float32/float64 mixing.
"""

import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
