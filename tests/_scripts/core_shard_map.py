"""Run in a subprocess by tests/test_core.py: ``jaxrank.core.fit_core`` under ``shard_map`` over
4 CPU devices (a σ² sweep split over the devices) equals the same sweep on one device."""

import json
import os

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
).strip()

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

jax.config.update("jax_enable_x64", True)
import jaxrank  # noqa: E402
from jaxrank.core import fit_core  # noqa: E402

assert len(jax.devices()) == 4, jax.devices()
mesh = jax.sharding.Mesh(np.asarray(jax.devices()), ("d",))
X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
X, pos = jnp.asarray(X), jnp.asarray(y == 1)
sizes = (int(pos.sum()), int((~pos).sum()))
B = X[np.flatnonzero(y == 1)]
lams = jnp.asarray([1e-3, 1e-1])


def sweep(s2):
    one = lambda s: fit_core(X, pos, lams, B, kernel=jaxrank.kernels.Gaussian(s), tol=1e-11,
                             sizes=sizes).coef  # fmt: skip
    return jax.vmap(one)(s2)


s2 = jnp.asarray([0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
# check_vma=False: the solver's while loops start from constants (zeros, an infinite radius),
# which the varying-axes check would want cast to device-varying first
sharded = jax.jit(
    jax.shard_map(sweep, mesh=mesh, in_specs=P("d"), out_specs=P("d"), check_vma=False)
)(s2)
ref = jax.jit(sweep)(s2)
print(json.dumps({
    "devices": len(sharded.sharding.device_set),
    "spec": str(sharded.sharding.spec),
    "max_diff": float(jnp.max(jnp.abs(sharded - ref))),
    "scale": float(jnp.max(jnp.abs(ref))),
}))  # fmt: skip
