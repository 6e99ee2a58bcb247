"""A fit leaves the user's environment as it was (issue 41 item 12): importing threadpoolctl (the
host-BLAS pin of a fit) set KMP_DUPLICATE_LIB_OK=True in os.environ. A fresh process, so that
nothing has imported threadpoolctl (or scikit-learn, which sets it too) before the fit. What JAX
itself sets (TF_CPP_MIN_LOG_LEVEL on import, TPU_SKIP_MDS_QUERY at backend start) is taken as the
starting point."""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import os, sys
    import jax
    jax.numpy.zeros(1).block_until_ready()
    # JAX's own: TF_CPP_MIN_LOG_LEVEL at its import, TPU_SKIP_MDS_QUERY at backend start
    before = dict(os.environ)
    import numpy as np
    import jaxrank
    X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
    jaxrank.fit_rankrc(X, y, np.array([1.0, 2.0**-6]))
    jaxrank.fit(X, y, 2.0**-6)
    assert "threadpoolctl" in sys.modules  # the fit pinned the host BLAS through it
    after = dict(os.environ)
    changed = {k: (before.get(k), after.get(k)) for k in set(before) | set(after)
               if before.get(k) != after.get(k)}
    assert not changed, changed
    print("ok")
    """
)


def _run(env_extra=None):
    import os

    env = {k: v for k, v in os.environ.items() if k != "KMP_DUPLICATE_LIB_OK"}
    env.update(env_extra or {})
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().endswith("ok")


@pytest.mark.slow  # a fresh process
def test_a_fit_leaves_os_environ_unchanged():
    _run()


@pytest.mark.slow  # a fresh process
def test_a_value_the_user_set_is_kept():
    _run({"KMP_DUPLICATE_LIB_OK": "FALSE"})
