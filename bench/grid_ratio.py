"""Issue-2 check: the 16-λ grid solved batched vs the same λ fitted one at a time (same run).

Usage: python bench/grid_ratio.py M RHO REPEATS  (e.g. 100000 0.01 2); JSON to bench/out/.
"""

import json
import sys
import time
import warnings
from pathlib import Path

import jax
import numpy as np

import jaxrank

m = int(sys.argv[1])
rho = float(sys.argv[2])
X, y = jaxrank.datasets.make_rare_class(m, rho, 0.75, d=40, seed=0)
lams = 2.0 ** np.arange(-20, 11, 2)


def batch():
    mdl = jaxrank.fit_rankrc(X, y, lams)
    jax.block_until_ready(mdl.coef)
    return mdl


def seq():
    out = []
    for lam in lams:
        mdl = jaxrank.fit_rankrc(X, y, lam)
        jax.block_until_ready(mdl.coef)
        out.append(mdl)
    return out


warnings.simplefilter("ignore")
res = {"m": m, "rho": rho, "device": str(jax.devices()[0]), "jax": jax.__version__}
t = time.perf_counter()
batch()
res["batch_first"] = time.perf_counter() - t
t = time.perf_counter()
jaxrank.fit_rankrc(X, y, lams[0])
res["seq_compile_one"] = time.perf_counter() - t
tb, ts = [], []
for _r in range(int(sys.argv[3]) if len(sys.argv) > 3 else 1):
    t = time.perf_counter()
    mb = batch()
    tb.append(time.perf_counter() - t)
    t = time.perf_counter()
    ms = seq()
    ts.append(time.perf_counter() - t)
res.update(batch=tb, seq=ts, ratio=[b / s for b, s in zip(tb, ts, strict=True)])
res["batch_info"] = {
    k: np.asarray(getattr(mb.info, k)).tolist() for k in ("iterations", "cg_iterations", "status")
}
res["seq_info"] = {
    k: [int(getattr(x.info, k)) for x in ms] for k in ("iterations", "cg_iterations", "status")
}
res["obj_rel_diff"] = float(
    np.max(
        np.abs(np.asarray(mb.info.objective) / np.array([float(x.info.objective) for x in ms]) - 1)
    )
)
print(json.dumps(res))
json.dump(res, open(Path(__file__).parent / "out" / f"grid_{m}.json", "w"), indent=1)
