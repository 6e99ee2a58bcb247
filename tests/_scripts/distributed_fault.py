"""Run by tests/test_distributed.py under ``python -m jaxrank.launch -n P``.

``kill OUT``: the last process kills itself (SIGKILL) a few seconds into a fit; process 0 would
write ``OUT/model.npz`` after the fit. ``mismatch WHAT``: the last process passes a different
λ grid / feature count / dtype / kernel; every process prints the error and exits 3.
"""

import os
import signal
import sys
import threading
import time

import jax

import jaxrank.distributed as dist

dist.initialize()
jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

import jaxrank  # noqa: E402

mode, arg = sys.argv[1], sys.argv[2]
P, me = jax.process_count(), jax.process_index()
last = me == P - 1
if mode == "kill":
    X, y = jaxrank.datasets.make_rare_class(6000, 0.05, 0.75, seed=1)
    mine = slice(me * 6000 // P, (me + 1) * 6000 // P)
    # a first fit compiles everything; the second is the one interrupted
    dist.fit(X[mine], y[mine], [1e-2], tol=1e-9)
    if last:
        threading.Thread(
            target=lambda: (time.sleep(1.0), os.kill(os.getpid(), signal.SIGKILL)), daemon=True
        ).start()
    print(f"fit started {time.time():.3f}", file=sys.stderr, flush=True)
    model = dist.fit(X[mine], y[mine], 2.0 ** -np.arange(0, 24), tol=1e-12, max_iter=500)
    if me == 0:
        model.save(os.path.join(arg, "model.npz"))
    sys.exit(0)

X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=1)
mine = slice(me * 100, (me + 1) * 100)
Xm, ym, lams, kw = X[mine], y[mine], [1e-1, 1e-2], {}
if last and arg == "lams":
    lams = [1e-1, 1e-3]
elif last and arg == "features":
    Xm = Xm[:, :4]
elif last and arg == "dtype":
    Xm = Xm.astype(np.float32)
elif last and arg == "kernel":
    kw = dict(kernel=jaxrank.kernels.gaussian(2.0))
try:
    dist.fit(Xm, ym, lams, **kw)
except dist.InputMismatchError as err:
    print(f"refused: {err}", file=sys.stderr, flush=True)
    sys.exit(3)
sys.exit(0)
