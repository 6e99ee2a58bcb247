"""Every docstring example in ``jaxrank`` runs and prints what it shows (issue 5: "API docstrings
with runnable examples checked by doctest"). One test per module, so a failure names it."""

import doctest
import importlib
import pkgutil
import warnings

import jax
import pytest

import jaxrank

# subpackages included (a family's face re-exports from its private modules, where the
# examples live); a subpackage that cannot be imported (jaxrank.sklearn without scikit-learn)
# is left out with its modules
MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(jaxrank.__path__, "jaxrank.")
    if not m.name.endswith(".__main__")  # python -m jaxrank, python -m jaxrank.cli
)
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def test_every_public_module_has_examples():
    # the modules a user calls directly must show how
    documented = {name for name in MODULES if _examples(name)}
    missing = {f"jaxrank.{n}" for n in ("fit", "kernels", "losses", "metrics", "select")}
    assert missing <= documented, missing - documented


def _examples(name):
    module = importlib.import_module(name)
    return [t for t in doctest.DocTestFinder().find(module) if t.examples]


@pytest.mark.parametrize("name", ["jaxrank", *MODULES])
def test_docstring_examples(name):
    tests = _examples(name)
    if not tests:
        pytest.skip(f"{name} has no examples")
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    # as a user runs them: float32 by default, standard promotion (the suite's x64 and strict
    # promotion are for the oracles)
    with warnings.catch_warnings(), jax.enable_x64(False), jax.numpy_dtype_promotion("standard"):
        warnings.simplefilter("ignore")  # e.g. ConvergenceWarning of a deliberately tiny fit
        for test in tests:
            runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
