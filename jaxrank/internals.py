"""Internal knobs and building blocks under public names, for measuring jaxrank (``bench/``).

The benchmarks time and tune parts of jaxrank that its user-facing API hides: the search engine
and the rules of :class:`~jaxrank.sklearn.RankRCClassifierCV`'s cross-validated search, the
float64 polish of float32 fits, the shape buckets, the compiled objective alone, the stored
``jax.export`` programs. This module names them, so that no code outside the package uses a
private module (``tests/test_architecture.py`` checks ``bench/``). No stability promise: a name
here follows the internals it names, and the API reference does not list it.

- The engine of the CV search is a parameter: ``RankRCClassifierCV(search_engine="core")``,
  ``cv_search(..., engine="core")``. :func:`cv_search`, :func:`refit_basis`, :func:`choose_cell` and
  :data:`CV_RULES` are the search's table, basis refit and cell rules
  (``bench/keel_wide_tune.py`` re-tunes the defaults with them).
- :func:`polish_after`: the Newton steps after which a float32 fit is finished in float64, within
  a ``with`` block; :data:`POLISH_AFTER` is the default.
- :func:`exported_calls`: a hook that sees every call of a stored compiled program.
- :func:`standardise`: the command line's standardiser (one rule for constant columns: centred
  only), for the benches that standardise on a training split.
- :func:`bucket`: the size ladder every dynamic size is padded to;
  :func:`enable_default_cache`: the persistent compilation cache as the CLI and the estimators
  switch it on.
- :func:`objective_value`, :func:`objective_hvp` and their ``_batched`` forms: the objective of
  :func:`jaxrank.objective.objective_closures` compiled alone (value, gradient and windows;
  Hessian-vector product), as the solver calls it.
- :func:`check_X`, :func:`check_lam` and :class:`LevelsLayout`: the input checks and the
  multi-level row layout of :func:`jaxrank.fit.fit_rows`, to fit the multi-level objective over
  any basis (``bench/fig5_multilevel.py``); :class:`ProcessRows`: a process's rows of a
  multi-process fit and their kernel block (``bench/multiprocess.py``).
"""

from __future__ import annotations

import contextlib
import functools

import jax

from jaxrank import (
    _buckets,
    _cache,
    _cv,
    _exported,
    _validation,
    distributed,
    multilevel,
)
from jaxrank._fitting import _polish
from jaxrank.cli import _common as _cli_common
from jaxrank.objective import objective_closures

__all__ = [
    "CV_RULES",
    "POLISH_AFTER",
    "LevelsLayout",
    "ProcessRows",
    "bucket",
    "check_X",
    "check_lam",
    "choose_cell",
    "cv_search",
    "enable_default_cache",
    "exported_calls",
    "objective_hvp",
    "objective_hvp_batched",
    "objective_value",
    "objective_value_batched",
    "polish_after",
    "refit_basis",
    "standardise",
]

bucket = _buckets.bucket
standardise = _cli_common.standardise
enable_default_cache = _cache.enable_default_cache
cv_search = _cv.cv_search
refit_basis = _cv.refit_basis
choose_cell = _cv.choose
CV_RULES = _cv.RULES
POLISH_AFTER = _polish.POLISH_AFTER
check_X = _validation.check_X
check_lam = _validation.check_lam
LevelsLayout = multilevel.LevelsLayout
ProcessRows = distributed.ProcessRows


@contextlib.contextmanager
def polish_after(steps: int):
    """Within the block, float32 fits still above the tolerance after ``steps`` Newton steps are
    finished in float64 (a number above ``max_iter``: never, the float32 solver alone). Yields
    the default it replaced."""
    saved = _polish.POLISH_AFTER
    _polish.POLISH_AFTER = int(steps)
    try:
        yield saved
    finally:
        _polish.POLISH_AFTER = saved


@contextlib.contextmanager
def exported_calls(hook):
    """Within the block, every call of a stored compiled program (``name, fn, args, static``)
    goes through ``hook(call, name, fn, args, static)``, where ``call`` is the real call; the
    hook returns its result."""
    call = _exported.call

    def through(name, fn, args, static=(), **kw):
        return hook(lambda n, f, a, s=(): call(n, f, a, s, **kw), name, fn, args, static)

    _exported.call = through
    try:
        yield
    finally:
        _exported.call = call


_OBJ_STATIC = ("n_pos", "n_neg", "block")


def _closures(K, Krr, lam, loss, n_pos, n_neg, block):
    return objective_closures(K, Krr, lam, loss, n_pos, n_neg, block)


@functools.partial(jax.jit, static_argnames=_OBJ_STATIC)
def objective_value(K, Krr, lam, beta, loss, n_pos, n_neg, block=None):
    """``(F, ∇F, windows)`` at β of :func:`~jaxrank.objective.objective_closures`, one compiled
    program (rows of ``K`` ordered [positives; negatives; padding])."""
    return _closures(K, Krr, lam, loss, n_pos, n_neg, block)[0](beta)


@functools.partial(jax.jit, static_argnames=_OBJ_STATIC)
def objective_hvp(K, Krr, lam, windows, v, loss, n_pos, n_neg, block=None):
    """The Hessian-vector product on the windows of :func:`objective_value`, compiled."""
    return _closures(K, Krr, lam, loss, n_pos, n_neg, block)[1](windows, v)


@functools.partial(jax.jit, static_argnames=_OBJ_STATIC)
def objective_value_batched(K, Krr, lams, betas, loss, n_pos, n_neg, block=None):
    """:func:`objective_value` vmapped over λ and β, as the batched λ grid runs it."""
    f = lambda lam, b: _closures(K, Krr, lam, loss, n_pos, n_neg, block)[0](b)
    return jax.vmap(f)(lams, betas)


@functools.partial(jax.jit, static_argnames=_OBJ_STATIC)
def objective_hvp_batched(K, Krr, lams, windows, vs, loss, n_pos, n_neg, block=None):
    """:func:`objective_hvp` vmapped over λ, windows and v."""
    f = lambda lam, w, v: _closures(K, Krr, lam, loss, n_pos, n_neg, block)[1](w, v)
    return jax.vmap(f)(lams, windows, vs)
