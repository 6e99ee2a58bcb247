"""Every ```python block of README.md and of the documentation pages (``docs/*.md``) runs as
written, alone, in a fresh interpreter.

Each block is a separate script: nothing defined in one block is available to the next, as for
a reader who copies one block. The interpreter is ``sys.executable`` (this environment, so
jaxrank and the test extra are importable) run from an empty folder, with the ``JAX_*``
variables removed (this test session's x64 and strict promotion are not the user's). The blocks
run on four CPU devices (``--xla_force_host_platform_device_count=4``), so the sharding block
really shards; the others do not notice.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
TIMEOUT = 600  # seconds per block; each takes ~5-20 s on an idle 2-core machine (compile-bound)
DEVICES = 4


def python_blocks(text: str) -> list[tuple[int, str]]:
    """``(line number of the opening fence, code)`` of every fenced ```python block."""
    blocks = []
    for m in re.finditer(r"^```python[ \t]*\n(.*?)^```[ \t]*$", text, re.M | re.S):
        blocks.append((text.count("\n", 0, m.start()) + 1, m.group(1)))
    return blocks


BLOCKS = python_blocks(README.read_text(encoding="utf-8"))
PAGE_BLOCKS = [
    (page.relative_to(ROOT).as_posix(), line, code)
    for page in PAGES
    for line, code in python_blocks(page.read_text(encoding="utf-8"))
]


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    flags = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={DEVICES}"
    env["XLA_FLAGS"] = flags.strip()  # the last occurrence of a flag wins
    env["JAX_PLATFORMS"] = "cpu"
    return env


def test_blocks_found():
    # the README's two quickstarts (scikit-learn, fit_rankrc); several devices in docs/scaling.md
    assert len(BLOCKS) >= 2
    assert any("jaxrank.sklearn" in code for _, code in BLOCKS)
    assert any("fit_rankrc" in code for _, code in BLOCKS)
    assert any("NamedSharding" in code for page, _, code in PAGE_BLOCKS if page.startswith("docs/"))


def test_extractor():
    text = "x\n```python\na = 1\n```\n```bash\nls\n```\n```python\nb = 2\nc = 3\n```\n"
    assert python_blocks(text) == [(2, "a = 1\n"), (8, "b = 2\nc = 3\n")]


@pytest.mark.parametrize(
    "page,line,code",
    # a subprocess each (8-30 s): in the slow run, to keep the default run in its budget
    [pytest.param(page, line, code, marks=pytest.mark.slow) for page, line, code in PAGE_BLOCKS],
    ids=[f"{page}:{line}" for page, line, _ in PAGE_BLOCKS],
)
def test_block_runs_alone(page, line, code, tmp_path):
    script = tmp_path / f"block_{line}.py"
    # an epilogue (after the block, so it changes nothing in it): the device count it ran with
    script.write_text(code + "\nimport jax as _jax\n\nprint('DEVICES', _jax.device_count())\n")
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=_env(), capture_output=True, text=True,
        timeout=TIMEOUT,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{page} block at line {line} fails alone:\n{out[-4000:]}"
    assert f"DEVICES {DEVICES}" in proc.stdout, out[-4000:]
    # a block a user copies should not greet them with a warning (non-convergence included)
    assert "Warning" not in proc.stderr, f"{page} block at line {line} warns:\n{out[-4000:]}"
