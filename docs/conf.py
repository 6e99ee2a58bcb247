"""Sphinx configuration of the jaxrank documentation site.

Build (warnings are errors)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

Markdown pages and the notebooks go through myst-nb (the notebooks are rendered, never executed
here: ``tests/test_notebooks.py`` runs them); the API reference is generated from the code at
every build by ``docs/_apigen.py`` into ``docs/api/`` (untracked), and autodoc with napoleon reads
the Google-style docstrings.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT), str(DOCS)]
# Building the reference imports jaxrank; a docs build should leave no compilation cache behind.
os.environ.setdefault("JAXRANK_NO_COMPILATION_CACHE", "1")

import _apigen  # noqa: E402

import jaxrank  # noqa: E402

project = "jaxrank"
author = "the jaxrank authors"
copyright = "the jaxrank authors"
release = jaxrank.__version__
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
root_doc = "index"

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
nb_execution_mode = "off"  # the test suite executes the notebooks

autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "description"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True  # "Attributes:" as fields: a NamedTuple's members are documented once

html_theme = "furo"
html_title = f"jaxrank {release}"
html_static_path: list[str] = []


def _copy_notebooks(docs: Path) -> None:
    """notebooks/*.ipynb into docs/tutorials/ (untracked), rewritten only when changed."""
    target = docs / "tutorials"
    target.mkdir(exist_ok=True)
    sources = {p.name: p for p in sorted((ROOT / "notebooks").glob("*.ipynb"))}
    for stale in target.glob("*.ipynb"):
        if stale.name not in sources:
            stale.unlink()
    for name, src in sources.items():
        dst = target / name
        if not dst.exists() or dst.read_bytes() != src.read_bytes():
            shutil.copyfile(src, dst)


# ``|R|``, ``|ℓ'|``: the docstrings' plain-text notation for sizes and absolute values, which
# reStructuredText would read as an undefined substitution. Escaped outside literals.
_BARS = re.compile(r"(?<![\\|\w`])\|([^|\s`][^|`]*?)\|(?![\w|`])")
_LITERAL = re.compile(r"(``.+?``|`[^`]+`)")


def _escape_bars(app, what, name, obj, options, lines) -> None:
    block = None  # indentation of the paragraph that opened a literal block (``::``)
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if block is not None:
            if not line.strip() or indent > block:
                continue
            block = None
        if line.rstrip().endswith("::"):
            block = indent
        parts = _LITERAL.split(line)
        lines[i] = "".join(p if k % 2 else _BARS.sub(r"\\|\1\\|", p) for k, p in enumerate(parts))


def _skip_foreign(app, what, name, obj, skip, options):
    # members inherited from scikit-learn (set_fit_request, ...) are its to document, not ours
    module = getattr(obj, "__module__", None) or ""
    if callable(obj) and module and not module.startswith("jaxrank"):
        return True
    return None


def _results_for_site(app, relative_path, parent_docname, content) -> None:
    """RESULTS.md (included by reproducing.md) as a page of the site: its HTML anchors become
    MyST targets and its links to the committed JSON become downloads."""
    if Path(relative_path).name != "RESULTS.md":
        return
    text = re.sub(r'<a id="([\w-]+)"></a>', r"(\1)=", content[0])
    text = re.sub(
        r"\[`?([^]`]*?)`?\]\((bench/results/[^)]+?\.json)\)", r"{download}`\1 <../\2>`", text
    )
    content[0] = re.sub(r"\[`?([^]`]*?)`?\]\((bench/results/)\)", r"`\2`", text)


def _generate(app) -> None:
    _apigen.generate(DOCS)
    _copy_notebooks(DOCS)


def setup(app):
    app.connect("builder-inited", _generate)
    app.connect("autodoc-process-docstring", _escape_bars)
    app.connect("autodoc-skip-member", _skip_foreign)
    app.connect("include-read", _results_for_site)
    return {"parallel_read_safe": True}
