"""jaxrank: nonlinear (kernel) rankers that maximise AUC on rare-class data, in JAX.

RankRC (Tayal, Coleman & Li, TKDE 2015) and its family — RankSVM, random and Nyström subset
bases — solved by a JAX-native trust-region Newton-CG whose pairwise loss, gradient and
Hessian-vector products cost O(m log m + m·|R|).

Example:
  >>> import jaxrank
  >>> X, y = jaxrank.datasets.make_rare_class(500, 0.1, 0.75, seed=0)
  >>> model = jaxrank.fit_rankrc(X, y, 2.0**-8)
  >>> scores = model.decision_function(X)
"""

from jaxrank import bases, datasets, kernels, losses, metrics, multilevel, pairwise, select, solver
from jaxrank.fit import ConvergenceWarning, RankModel, fit, fit_rankrc, fit_ranksvm
from jaxrank.kernels import Gaussian, Linear, MemoryBudgetError, Polynomial
from jaxrank.multilevel import fit_multilevel
from jaxrank.select import SelectionResult, select_lambda
from jaxrank.solver import SolverInfo, Status

__version__ = "0.1.0"

__all__ = [
    "ConvergenceWarning",
    "Gaussian",
    "Linear",
    "MemoryBudgetError",
    "Polynomial",
    "RankModel",
    "SelectionResult",
    "SolverInfo",
    "Status",
    "bases",
    "datasets",
    "fit",
    "fit_multilevel",
    "fit_rankrc",
    "fit_ranksvm",
    "kernels",
    "losses",
    "metrics",
    "multilevel",
    "pairwise",
    "select",
    "select_lambda",
    "solver",
]


def __getattr__(name):
    # jaxrank.sklearn needs scikit-learn (an optional dependency): imported on first use.
    if name == "sklearn":
        import importlib

        return importlib.import_module("jaxrank.sklearn")
    raise AttributeError(f"module 'jaxrank' has no attribute {name!r}")
