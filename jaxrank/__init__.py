"""jaxrank: nonlinear (kernel) rankers that maximise AUC on rare-class data, in JAX.

RankRC (Tayal, Coleman & Li, TKDE 2015) and its family — RankSVM, random, Nyström and greedy
sparse bases, multi-level RankRC, the p-norm push and L1 variants, stochastic RankRC — solved by a
JAX-native trust-region Newton-CG whose pairwise loss, gradient and Hessian-vector products cost
O(m log m + m·|R|); and the other systems of the source papers: MIBC (moment-based one-class)
and DOPMID (AM/QM structural SVM).

Example:
  >>> import jaxrank
  >>> X, y = jaxrank.datasets.make_rare_class(500, 0.1, 0.75, seed=0)
  >>> model = jaxrank.fit_rankrc(X, y, 2.0**-8)
  >>> scores = model.decision_function(X)

Importing jaxrank changes no JAX option. The command line and the scikit-learn estimators switch
on JAX's persistent compilation cache (a per-user directory, ``~/.cache/jaxrank/jax`` by
default) when the user has configured none, unless ``JAXRANK_NO_COMPILATION_CACHE=1`` is set:
see :func:`set_compilation_cache` and ``jaxrank/_cache.py`` for exactly which options that sets.
"""

from jaxrank import (
    bases,
    bounds,
    datasets,
    dopmid,
    greedy,
    io,
    kernels,
    l1,
    losses,
    metrics,
    mibc,
    multilevel,
    nystrom,
    pairwise,
    push,
    ranking,
    select,
    solver,
    stochastic,
    tune,
)
from jaxrank._cache import (
    CompilationCacheWarning,
    compilation_cache_dir,
    set_compilation_cache,
)
from jaxrank._params import combine, partition
from jaxrank._validation import PrecisionWarning
from jaxrank._version import __version__ as __version__
from jaxrank.dopmid import fit_dopmid
from jaxrank.fit import ConvergenceWarning, RankModel, fit, fit_rankrc, fit_ranksvm
from jaxrank.greedy import fit_greedy
from jaxrank.io import load
from jaxrank.kernels import ARDGaussian, Gaussian, Linear, MemoryBudgetError, Polynomial
from jaxrank.l1 import fit_l1
from jaxrank.mibc import fit_mibc
from jaxrank.multilevel import fit_multilevel
from jaxrank.nystrom import nystrom_features
from jaxrank.push import fit_push
from jaxrank.ranking import pairwise_auc, pairwise_loss
from jaxrank.select import SelectionResult, select_lambda
from jaxrank.solver import SolverInfo, Status
from jaxrank.stochastic import fit_rankrc_stochastic

__all__ = [
    "ARDGaussian",
    "CompilationCacheWarning",
    "ConvergenceWarning",
    "Gaussian",
    "Linear",
    "MemoryBudgetError",
    "Polynomial",
    "PrecisionWarning",
    "RankModel",
    "SelectionResult",
    "SolverInfo",
    "Status",
    "bases",
    "bounds",
    "combine",
    "compilation_cache_dir",
    "datasets",
    "dopmid",
    "fit",
    "fit_dopmid",
    "fit_greedy",
    "fit_l1",
    "fit_mibc",
    "fit_multilevel",
    "fit_push",
    "fit_rankrc",
    "fit_rankrc_stochastic",
    "fit_ranksvm",
    "greedy",
    "io",
    "kernels",
    "l1",
    "load",
    "losses",
    "metrics",
    "mibc",
    "multilevel",
    "nystrom",
    "nystrom_features",
    "pairwise",
    "pairwise_auc",
    "pairwise_loss",
    "partition",
    "push",
    "ranking",
    "select",
    "select_lambda",
    "set_compilation_cache",
    "solver",
    "stochastic",
    "tune",
]


def __getattr__(name):
    # jaxrank.sklearn needs scikit-learn (an optional dependency): imported on first use.
    if name == "sklearn":
        import importlib

        return importlib.import_module("jaxrank.sklearn")
    raise AttributeError(f"module 'jaxrank' has no attribute {name!r}")
