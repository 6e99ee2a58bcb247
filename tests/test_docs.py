"""The documentation site (``docs/``) and the references between the repository's files.

- The site builds with warnings as errors, with the one command the README and ``docs/conf.py``
  give (``python -m sphinx -W --keep-going -b html docs docs/_build/html``), here into a
  temporary folder. The build needs the ``docs`` extra (the ``test`` extra installs it, so CI
  builds the site); without Sphinx the build tests skip and say so.
- Every public name (``jaxrank.__all__``, the public modules' ``__all__``, the scikit-learn
  estimators, the command line: ``docs/_apigen.py``) has an entry in the built site's inventory,
  and every public function and class shows a ``>>>`` example in its own docstring (run as a
  doctest by ``tests/test_doctests.py``).
- No tracked text file points outside the repository (the shared design notes, a sibling
  folder) or names a relative ``.md`` / ``.py`` / ``.ipynb`` path that the repository lacks.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import posixpath
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BUILD_TIMEOUT = 300  # seconds; a clean build takes ~15-25 s on an idle 2-core machine


@functools.cache
def _apigen():
    spec = importlib.util.spec_from_file_location("_apigen", DOCS / "_apigen.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_apigen"] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


# References between files
# --------------------------------------------------------------------------------------------

# Spelled in pieces so that this file does not match itself.
OUTSIDE = (
    re.compile(r"\.\./" + "shared"),
    re.compile("/work/" + "shared"),
    re.compile(r"\bDESIGN" + r"(\.md)?\s*(§|Sec\.)"),
    re.compile(r"\bDESIGN" + r"\.md\b"),
)
# a relative path to a Markdown, Python or notebook file, in prose, code or a Markdown link
PATH = re.compile(r"(?<![\w/.\-~$])((?:\.\.?/)*(?:[\w.\-]+/)*[\w\-]+\.(?:md|py|ipynb))(?![\w/])")
USER_FILES = {"script.py", "my_script.py"}  # the user's file in a usage line, not ours
TEXT_SUFFIXES = {".py", ".md", ".ipynb", ".toml", ".txt", ".cfg", ".yml", ".yaml", ".rst", ""}


def repository_files(root: Path = ROOT) -> list[str]:
    """Tracked files and untracked ones git does not ignore (so a new file is checked too)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=root, capture_output=True, text=True, check=True, timeout=60,
        ).stdout  # fmt: skip
        return sorted({f for f in out.splitlines() if (root / f).is_file()})
    except (OSError, subprocess.SubprocessError):  # not a git checkout: every file but builds
        skip = {".git", "_build", "api", "tutorials", "__pycache__", ".hypothesis"}
        return sorted(
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and not skip & set(p.relative_to(root).parts)
        )


def dangling_references(text: str, where: str, files: set[str]) -> list[str]:
    """The relative paths in ``text`` (a file at ``where``) that name no file in ``files``.

    A path resolves against the file's own folder or the repository root; a bare name (no
    folder) against any file of that name. Not references: a path joined in code
    (``tmp_path / "x.py"``: a file a test writes), a placeholder (``bench/NAME.py``) and the
    user's own script in a usage line (:data:`USER_FILES`: ``python -m jaxrank.launch -n 4
    script.py``).
    """
    names = {posixpath.basename(f) for f in files}
    folder = posixpath.dirname(where)
    bad = []
    for m in PATH.finditer(text):
        ref = m.group(1)
        if re.search(r"/\s*[\"']$", text[max(0, m.start() - 4) : m.start()]):
            continue
        if any(part.isupper() for part in re.split(r"[/.]", ref)) or ref in USER_FILES:
            continue
        if "/" not in ref:
            ok = ref in names
        else:
            ok = any(
                posixpath.normpath(posixpath.join(base, ref)) in files for base in (folder, "")
            )
        if not ok:
            bad.append(f"{where}:{text.count(chr(10), 0, m.start()) + 1}: {ref}")
    return bad


def outside_references(text: str, where: str) -> list[str]:
    return [
        f"{where}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}"
        for pattern in OUTSIDE
        for m in pattern.finditer(text)
    ]


def _texts():
    for name in repository_files():
        if Path(name).suffix not in TEXT_SUFFIXES:
            continue
        try:
            yield name, (ROOT / name).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue


def test_scanners_find_what_they_look_for():
    # the example paths are spelled in pieces, so that this file does not fail its own scan
    md, py = ".md", ".py"
    files = {"README.md", "docs/design.md", "jaxrank/fit.py", "bench/core.py"}
    text = (
        f"see [d](design{md}) and [gone](old{md}), `jaxrank/fit.py`, ../README.md\n"
        f"`jaxrank/nothere{py}`, (tmp_path / 'probe{py}'), bench/NAME{py}, README.md\n"
    )
    assert dangling_references(text, "docs/index.md", files) == [
        f"docs/index.md:1: old{md}",
        f"docs/index.md:2: jaxrank/nothere{py}",
    ]
    shared = "../" + "shared"
    text = f"x\nSee `{shared}/x{md}` and DESIGN{' §'}3, DESIGN{md} Sec. 7.\n"
    found = outside_references(text, f"a{py}")
    assert len(found) == 4 and all(f.startswith(f"a{py}:2:") for f in found)


def test_nothing_points_outside_the_repository():
    bad = [b for name, text in _texts() for b in outside_references(text, name)]
    assert not bad, "references to files outside the repository:\n" + "\n".join(bad)


def test_relative_paths_name_files_of_the_repository():
    files = set(repository_files())
    bad = [b for name, text in _texts() for b in dangling_references(text, name, files)]
    assert not bad, "paths to files the repository does not hold:\n" + "\n".join(bad)


# Public names: reference entries and examples
# --------------------------------------------------------------------------------------------


def _entries():
    pytest.importorskip("sklearn", reason="jaxrank.sklearn needs scikit-learn (the test extra)")
    return [e for page in _apigen().surface() for e in page.entries]


def test_every_public_function_and_class_has_an_example():
    gen = _apigen()
    missing = sorted(
        e.qualname
        for e in _entries()
        if e.kind in ("function", "class", "exception")
        and e.canonical is None
        and not gen.has_example(e.obj)
    )
    assert not missing, "public names without a >>> example in their docstring:\n" + "\n".join(
        missing
    )


def test_doctests_cover_every_public_module():
    import test_doctests

    public = set(_apigen().public_modules())
    assert public <= set(test_doctests.MODULES), public - set(test_doctests.MODULES)


# The build
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    missing = [m for m in ("sphinx", "furo", "myst_nb") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(
            f"the docs build needs {', '.join(missing)}: pip install -e '.[docs]' (the test "
            "extra installs it)"
        )
    out = tmp_path_factory.mktemp("site")
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-q"]
    cmd += ["-d", str(out / "doctrees"), str(DOCS), str(out / "html")]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT)  # fmt: skip
    seconds = time.perf_counter() - start
    print(f"docs build: {seconds:.1f} s")
    return proc, out / "html", seconds


@pytest.mark.slow
def test_site_builds_without_warnings(site):
    proc, html, _ = site
    assert proc.returncode == 0, f"docs build failed:\n{proc.stdout[-3000:]}{proc.stderr[-6000:]}"
    assert not proc.stderr.strip(), proc.stderr[-6000:]
    for page in ("index", "design", "api/index", "api/jaxrank", "api/jaxrank.cli"):
        assert (html / f"{page}.html").is_file(), page


@pytest.mark.slow
def test_every_public_name_has_a_reference_entry(site):
    from sphinx.util.inventory import InventoryFile

    proc, html, _ = site
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(html / "objects.inv", "rb") as f:
        inventory = InventoryFile.load(f, "", posixpath.join)
    known = {name for kind, names in inventory.items() if kind.startswith("py:") for name in names}
    pages = _apigen().surface()
    wanted = {e.qualname for page in pages for e in page.entries if e.kind != "module"}
    wanted |= {page.module for page in pages}
    assert wanted - known == set(), sorted(wanted - known)
    cli = (html / "api" / "jaxrank.cli.html").read_text(encoding="utf-8")
    for command in ("demo", "fit", "predict", "bench"):
        assert f"usage: jaxrank {command}" in cli, command  # its --help, as printed


@pytest.mark.slow
def test_math_is_rendered(site):
    _, html, _ = site
    design = (html / "design.html").read_text(encoding="utf-8")
    assert design.count('class="math') >= 8  # the objective, the windows, the trust region
    assert "mathjax" in design.lower()
