"""Run in a subprocess by tests/test_multidevice.py: 4 CPU devices, sharded vs 1-device fits."""

import json
import os
import sys

os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
).strip()

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

jax.config.update("jax_enable_x64", True)
import jaxrank  # noqa: E402

assert len(jax.devices()) == 4, jax.devices()
mesh = jax.sharding.Mesh(np.asarray(jax.devices()), ("rows",))
shard = lambda a: jax.device_put(a, NamedSharding(mesh, P("rows", None)))
out = {}
X, y = jaxrank.datasets.make_rare_class(600, 0.05, 0.75, seed=0)
lams = np.array([1e-1, 1e-3])
for path in ("batch", "warm"):
    ref = jaxrank.fit_rankrc(X, y, lams, tol=1e-9, path=path)
    got = jaxrank.fit_rankrc(shard(X), y, lams, tol=1e-9, path=path)
    out[f"rankrc_{path}"] = {
        "ref": np.asarray(ref.info.objective).tolist(),
        "got": np.asarray(got.info.objective).tolist(),
        "scores_diff": float(np.max(np.abs(got.decision_function(X) - ref.decision_function(X)))),
    }
Xl, lv = jaxrank.multilevel.make_ordinal(400, key=jax.random.key(1))
ref = jaxrank.fit_multilevel(Xl, lv, 1e-2, tol=1e-9)
got = jaxrank.fit_multilevel(shard(Xl), lv, 1e-2, tol=1e-9)
out["multilevel"] = {
    "ref": [float(ref.info.objective)],
    "got": [float(got.info.objective)],
    "scores_diff": float(np.max(np.abs(got.decision_function(Xl) - ref.decision_function(Xl)))),
}
K = jaxrank.kernels.sharded_block(jaxrank.Gaussian(1.0), shard(X), X[:8], mesh, "rows")
out["block_devices"] = len(K.sharding.device_set)
# scoring follows committed input: a model scores X where X lives (one device or row-sharded)
m1 = jaxrank.fit_rankrc(X, y, 1e-2)
ref = np.asarray(m1.decision_function(X))
on2 = m1.decision_function(jax.device_put(X, jax.devices()[2]))
sharded = m1.decision_function(shard(X))
out["placement"] = {
    "devices": sorted(str(d) for d in on2.devices()),
    "want": [str(jax.devices()[2])],
    "sharded_devices": len(sharded.devices()),
    "diff": float(
        max(np.max(np.abs(np.asarray(on2) - ref)), np.max(np.abs(np.asarray(sharded) - ref)))
    ),
}
json.dump(out, sys.stdout)
