"""Run by tests/test_distributed.py under ``python -m jaxrank.launch -n P``: multi-process fits
against the one-process fit on the same rows (process 0 fits those alone, on its own device).

Writes ``<out>/result.json`` from process 0. Arguments: the output directory, the cases
(comma-separated).
"""

import json
import sys

import jax

import jaxrank.distributed as dist

dist.initialize()
jax.config.update("jax_enable_x64", True)

import os  # noqa: E402

import numpy as np  # noqa: E402

import jaxrank  # noqa: E402

if os.environ.get("JAXRANK_TEST_CACHE"):
    # one persistent cache for the test's launches: a later launch loads the programs an earlier
    # one compiled (the one-process fits and the references)
    jaxrank.set_compilation_cache(os.environ["JAXRANK_TEST_CACHE"])

out_dir = sys.argv[1]
wanted = sys.argv[2].split(",")
P, me = jax.process_count(), jax.process_index()
X, y = jaxrank.datasets.make_rare_class(700, 0.06, 0.75, seed=3)
# uneven pieces, one of them without a rare row when P > 2
cuts = np.linspace(0, X.shape[0], P + 1).astype(int)
cuts[1:-1] += 37
if P > 2:
    cuts[2] = cuts[1] + 20
    y = y.copy()
    y[cuts[1] : cuts[2]] = -1
mine = slice(cuts[me], cuts[me + 1])
lams = np.array([1e-1, 1e-2, 1e-3])
opts = dict(tol=1e-10, max_iter=200)
cases = {
    "rare_batch": dict(lam=lams),
    "rare_warm": dict(lam=lams, path="warm"),
    "scalar": dict(lam=1e-2),
    "random": dict(lam=lams, basis="random", key=jax.random.key(5), n_basis=60),
    "streamed": dict(lam=lams, max_kernel_bytes=1),
    "float32": dict(lam=1e-2, dtype=np.float32, tol=1e-5),
    # the ARD kernel (σ² from every process's rescaled rows), and the binary-aware kernel on
    # rows with a dummy column (its two values found over every process)
    "ard": dict(lam=lams, kernel=jaxrank.kernels.ard(None, [1.0, 0.3, 2.0, 0.0, 1.2])),
    "binary": dict(lam=lams, X=np.c_[X, 3.0 * (X[:, 0] > 0.4) - 1.0], kernel="binary"),
}
res = {}
for name, kw in cases.items():
    if name not in wanted:
        continue
    kw = dict(opts, **kw)
    lam = kw.pop("lam")
    Xc = kw.pop("X", X)
    got = dist.fit(Xc[mine], y[mine], lam, **kw)
    row = {"got": np.atleast_1d(np.asarray(got.info.objective)).tolist()}
    if me == 0:
        ref = jaxrank.fit(Xc, y, lam, **kw)
        row["ref"] = np.atleast_1d(np.asarray(ref.info.objective)).tolist()
        row["coef_diff"] = float(np.max(np.abs(np.asarray(got.coef) - np.asarray(ref.coef))))
        row["sigma2"] = [float(got.kernel.sigma2), float(ref.kernel.sigma2)]
        row["kernel"] = [type(got.kernel).__name__, type(ref.kernel).__name__]
        row["status"] = np.atleast_1d(np.asarray(got.info.status)).tolist()
    res[name] = row
# the standard form: global arrays from equal pieces, through jaxrank.fit
if "global_arrays" in wanted:
    eq = np.linspace(0, 600, P + 1).astype(int)
    Xg, yg = dist.global_rows(X[eq[me] : eq[me + 1]], y[eq[me] : eq[me + 1]])
    got = jaxrank.fit(Xg, yg, lams, **opts)
    if me == 0:
        ref = jaxrank.fit(X[:600], y[:600], lams, **opts)
        res["global_arrays"] = {
            "got": np.asarray(got.info.objective).tolist(),
            "ref": np.asarray(ref.info.objective).tolist(),
        }
# the search in both layouts: row-sharded fits under every (σ², fold) cell ("search"), and the
# cells dealt out to the processes, each holding every row ("search_cells")
layouts = {"search_cells": "cells", "search": "rows"}
if any(name in wanted for name in layouts):
    from jaxrank import distributed_search, select

    skw = dict(folds=2, key=jax.random.key(2), sigma2_grid=[1.0, 4.0], tol=1e-10)
    ref = None
    for name, layout in layouts.items():
        if name not in wanted:
            continue
        got = distributed_search.select_lambda(X[mine], y[mine], lams, layout=layout, **skw)
        if me == 0:
            # after the cells search, whose one-process fits on process 0 compiled its programs
            ref = select.select_lambda(X, y, lams, **skw) if ref is None else ref
            res[name] = {
                "got": got.cv_auc.ravel().tolist(),
                "ref": ref.cv_auc.ravel().tolist(),
                "pick": [
                    np.atleast_1d(got.best_index).tolist(),
                    np.atleast_1d(ref.best_index).tolist(),
                ],
                "refit": [float(got.model.info.objective), float(ref.model.info.objective)],
                "fold_equal": bool(np.array_equal(got.fold, ref.fold)),
            }
if me == 0:
    with open(f"{out_dir}/result.json", "w") as f:
        json.dump(res, f)
