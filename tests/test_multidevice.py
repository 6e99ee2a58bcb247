"""Data-parallel fits: ``X`` sharded by rows over 4 CPU devices equals the 1-device fit.

The devices are made with ``--xla_force_host_platform_device_count=4``, which must be set before
JAX starts, so the comparison runs in a subprocess (``tests/_scripts/multidevice_fit.py``).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).parent / "_scripts" / "multidevice_fit.py"


@pytest.fixture(scope="module")
def result():
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT)], capture_output=True, text=True, env=env, timeout=1800
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize("case", ["rankrc_batch", "rankrc_warm", "multilevel"])
def test_four_device_fit_equals_one_device(result, case):
    r = result[case]
    np.testing.assert_allclose(r["got"], r["ref"], rtol=1e-6)
    assert r["scores_diff"] < 1e-6


def test_block_is_split_over_the_devices(result):
    assert result["block_devices"] == 4


def test_scores_follow_committed_input(result):
    r = result["placement"]
    assert r["devices"] == r["want"]
    assert r["sharded_devices"] == 4
    assert r["diff"] < 1e-10
