"""The API reference, generated from the code at every build (``docs/conf.py`` runs it).

The public surface is read, never listed by hand: the names of ``jaxrank.__all__``, every module
among them, and :data:`EXTRA_MODULES` (public modules that ``import jaxrank`` does not import).
Each module's public names are its ``__all__`` (or, without one, the functions and classes it
defines under names without a leading underscore). A name added to ``jaxrank.__all__`` or to a
public module's ``__all__`` appears in the reference at the next build, with no edit here; a new
public module needs one line only if it is not in ``jaxrank.__all__``.

Every function or class is documented once, at its first public name (top level first, then the
modules in order); its other public names become short alias entries pointing there, so that
every qualified public name (``jaxrank.fit``, ``jaxrank.kernels.gaussian``, ...) has an entry
in the site's inventory. ``tests/test_docs.py`` builds the site and checks exactly that, and
that every function and class shows a runnable ``>>>`` example.
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import inspect
import io
import os
import re
import types
from dataclasses import dataclass, field
from pathlib import Path

#: Public modules outside ``jaxrank.__all__``: the scikit-learn estimators (imported on first
#: use, they need scikit-learn) and the command line.
EXTRA_MODULES = (
    "jaxrank.sklearn",
    "jaxrank.cli",
    "jaxrank.distributed",
    "jaxrank.distributed_search",
    "jaxrank.launch",
)

OUT = "api"  # the generated pages: docs/api/ (not tracked, rebuilt every time)


@dataclass
class Entry:
    """One public name: ``qualname`` (``module.name``) bound to ``obj``."""

    module: str
    name: str
    obj: object
    canonical: str | None = None  # set for an alias: where the object is documented

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def kind(self) -> str:
        return kind_of(self.obj)


@dataclass
class Page:
    module: str
    entries: list[Entry] = field(default_factory=list)


def kind_of(obj) -> str:
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        return "exception"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "data"


def public_names(module: types.ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            n
            for n, o in vars(module).items()
            if not n.startswith("_")
            and (inspect.isfunction(o) or inspect.isclass(o))
            and o.__module__ == module.__name__
        ]
    return list(names)


def public_modules() -> list[str]:
    import jaxrank

    mods = [
        getattr(jaxrank, n).__name__
        for n in jaxrank.__all__
        if inspect.ismodule(getattr(jaxrank, n))
    ]
    return mods + [m for m in EXTRA_MODULES if m not in mods]


def surface() -> list[Page]:
    """Every public name, page by page: ``jaxrank`` first, then each public module."""
    import jaxrank

    pages = [Page("jaxrank")]
    for name in jaxrank.__all__:
        pages[0].entries.append(Entry("jaxrank", name, getattr(jaxrank, name)))
    for modname in public_modules():
        module = importlib.import_module(modname)
        page = Page(modname)
        for name in public_names(module):
            page.entries.append(Entry(modname, name, getattr(module, name)))
        pages.append(page)
    home: dict[int, str] = {}
    for page in pages:
        for e in page.entries:
            if e.kind in ("data", "module"):
                continue  # constants are documented where they are named; modules have pages
            key = id(e.obj)
            if key in home:
                e.canonical = home[key]
            else:
                home[key] = e.qualname
    return pages


def has_example(obj) -> bool:
    """A ``>>>`` example in the object's own docstring (what tests/test_doctests.py runs)."""
    return ">>>" in (inspect.getdoc(obj) or "")


# Rendering (reStructuredText: autodoc's directives)
# --------------------------------------------------------------------------------------------

_SECTIONS = (
    ("function", "Functions"),
    ("class", "Classes"),
    ("exception", "Exceptions and warnings"),
    ("data", "Constants"),
)


def _title(text: str, char: str) -> str:
    return f"{text}\n{char * len(text)}\n"


def _directive(e: Entry) -> str:
    if e.canonical is not None:
        return (
            f".. py:data:: {e.name}\n   :module: {e.module}\n   :no-typesetting:\n\n"
            f"``{e.qualname}``: the same object as :py:obj:`{e.canonical}`.\n"
        )
    if e.kind == "function":
        return f".. autofunction:: {e.qualname}\n"
    if e.kind == "exception":
        return f".. autoexception:: {e.qualname}\n"
    if e.kind == "data":
        return f".. autodata:: {e.qualname}\n"
    opts = "   :members:\n"
    if isinstance(e.obj, type) and issubclass(e.obj, enum.Enum):
        opts += "   :undoc-members:\n"
    return f".. autoclass:: {e.qualname}\n{opts}"


def render_page(page: Page) -> str:
    out = [".. Generated by docs/_apigen.py from the code: do not edit.\n\n"]
    out.append(_title(f"``{page.module}``", "="))
    out.append(f"\n.. automodule:: {page.module}\n   :no-members:\n\n")
    modules = [e.obj.__name__ for e in page.entries if e.kind == "module"]
    if page.module == "jaxrank":
        modules += [m for m in EXTRA_MODULES if m not in modules]
    if modules:
        out.append(_title("Modules", "-") + "\n")
        out += [f"- :doc:`{m}`\n" for m in modules]
        out.append("\n")
    for kind, title in _SECTIONS:
        here = [e for e in page.entries if e.kind == kind]
        if not here:
            continue
        out.append(_title(title, "-") + "\n")
        for e in sorted(here, key=lambda e: (e.canonical is not None, e.name.lower())):
            out.append(_directive(e) + "\n")
    if page.module == "jaxrank.cli":
        out.append(cli_help())
    return "".join(out)


def render_index(pages: list[Page]) -> str:
    lines = [
        ".. Generated by docs/_apigen.py from the code: do not edit.\n\n",
        _title("API reference", "="),
        "\nGenerated from the docstrings: the top-level names of ``jaxrank`` first, then one page"
        " per public module. Every example (``>>>``) on these pages runs as a doctest in the"
        " test suite (``tests/test_doctests.py``).\n\n",
        ".. toctree::\n   :maxdepth: 1\n\n",
    ]
    lines += [f"   {p.module}\n" for p in pages]
    return "".join(lines)


def cli_help() -> str:
    """``jaxrank --help`` and each command's ``--help``, as the command line prints them."""
    from jaxrank import cli

    def run(*argv) -> str:
        buf = io.StringIO()
        old = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = "100"
        try:
            with contextlib.redirect_stdout(buf):
                cli.main([*argv, "--help"])
        finally:
            if old is None:
                del os.environ["COLUMNS"]
            else:
                os.environ["COLUMNS"] = old
        return buf.getvalue()

    top = run()
    commands = re.findall(r"^ {4}(\w+) {2,}", top.split("COMMAND", 2)[-1], re.M)
    out = [_title("Command line", "-"), "\n"]
    for argv in [(), *((c,) for c in commands)]:
        text = top if not argv else run(*argv)
        out.append(f"``jaxrank {' '.join(argv)} --help``".replace("  ", " ") + ":\n\n")
        out.append(".. code-block:: text\n\n")
        out += [f"   {line}".rstrip() + "\n" for line in text.splitlines()]
        out.append("\n")
    return "".join(out)


def generate(docs: Path) -> list[Page]:
    """Write docs/api/*.rst (only files whose text changed: Sphinx then rereads only those)."""
    pages = surface()
    target = docs / OUT
    target.mkdir(exist_ok=True)
    wanted = {"index.rst": render_index(pages)}
    wanted.update({f"{p.module}.rst": render_page(p) for p in pages})
    for stale in target.glob("*.rst"):
        if stale.name not in wanted:
            stale.unlink()
    for name, text in wanted.items():
        path = target / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    return pages
