"""Run by tests/test_distributed.py under ``python -m jaxrank.launch -n P``.

``kill OUT``: prints ``fit started`` and runs a long fit (the test kills one process then);
process 0 would write ``OUT/model.npz`` after the fit. ``loop OUT``: the same with short fits
on 600 rows, back to back (the fault tests of issue 43: a process stopped, killed, or raising
inside the solve through ``JAXRANK_TEST_FAULT``); a persistent compilation cache in
``$JAXRANK_TEST_CACHE`` when set. ``mismatch WHAT,...``: for each WHAT the
last process passes a different λ grid / feature count / dtype / kernel / bad labels; every
process prints ``refused WHAT: <error>`` (or ``accepted WHAT``).
"""

import os
import sys
import time
import warnings

import jax

import jaxrank.distributed as dist

dist.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import jaxrank  # noqa: E402

warnings.simplefilter("ignore", jaxrank.ConvergenceWarning)  # the loops stop early on purpose

mode, arg = sys.argv[1], sys.argv[2]
P, me = jax.process_count(), jax.process_index()
last = me == P - 1
if mode == "kill":
    X, y = jaxrank.datasets.make_rare_class(4000, 0.05, 0.75, seed=1)
    mine = slice(me * 4000 // P, (me + 1) * 4000 // P)
    lams = 2.0 ** -np.arange(0, 16)
    dist.fit(X[mine], y[mine], lams, tol=1e-12, max_iter=1)  # compiles the program
    print(f"fit started {time.time():.3f}", file=sys.stderr, flush=True)
    # fits back to back until the test kills a process: every survivor is inside a fit then
    for _ in range(1000):
        model = dist.fit(X[mine], y[mine], lams, tol=1e-12, max_iter=500)
    if me == 0:
        model.save(os.path.join(arg, "model.npz"))
    sys.exit(0)

if mode == "loop":
    if os.environ.get("JAXRANK_TEST_CACHE"):
        jaxrank.set_compilation_cache(os.environ["JAXRANK_TEST_CACHE"])
    X, y = jaxrank.datasets.make_rare_class(600, 0.1, 0.75, seed=1)
    mine = slice(me * 600 // P, (me + 1) * 600 // P)
    lams = [1.0, 1e-2]
    dist.fit(X[mine], y[mine], lams, max_iter=1)  # compiles (or loads) the programs
    print(f"fit started {time.time():.3f}", file=sys.stderr, flush=True)
    for _ in range(100_000):  # until the test's fault ends the job
        model = dist.fit(X[mine], y[mine], lams, tol=1e-12, max_iter=50)
    if me == 0:
        model.save(os.path.join(arg, "model.npz"))
    sys.exit(0)

X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=1)
mine = slice(me * 100, (me + 1) * 100)
for what in arg.split(","):
    Xm, ym, lams, kw = X[mine], y[mine], [1e-1, 1e-2], {}
    if last and what == "lams":
        lams = [1e-1, 1e-3]
    elif last and what == "features":
        Xm = Xm[:, :4]
    elif last and what == "dtype":
        Xm = Xm.astype(np.float32)
    elif last and what == "kernel":
        kw = dict(kernel=jaxrank.kernels.gaussian(2.0))
    elif last and what == "labels":
        ym = np.full(ym.shape, 7)
    try:
        dist.fit(Xm, ym, lams, **kw)
    except dist.InputMismatchError as err:
        print(f"refused {what}: {err}", file=sys.stderr, flush=True)
        continue
    print(f"accepted {what}", file=sys.stderr, flush=True)
