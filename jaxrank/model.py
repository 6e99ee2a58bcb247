"""The fitted kernel ranker :class:`RankModel` and its file format entry.

``f(x) = Σ_r coef_r k(basis_r, x)``, one coefficient vector per λ of a grid; it is registered
with :mod:`jaxrank.io` (``save``/``load``) here, as every other model type registers itself.
"""

from __future__ import annotations

import dataclasses
import operator
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _flax, io
from jaxrank import kernels as _kernels
from jaxrank._validation import check_cast, check_X
from jaxrank.solver import SolverInfo, stopped_message

__all__ = [
    "ConvergenceWarning",
    "RankModel",
    "rank_model_from_arrays",
    "rank_model_to_arrays",
    "score_input",
    "warn_stopped",
]


class ConvergenceWarning(UserWarning):
    """The solver stopped before reaching the gradient tolerance for some λ.

    Example:
      >>> import warnings
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> with warnings.catch_warnings(record=True) as caught:
      ...     warnings.simplefilter("always")
      ...     model = jaxrank.fit_rankrc(X, y, 2.0**-8, max_iter=1)  # too few steps
      >>> [w.category.__name__ for w in caught]
      ['ConvergenceWarning']
      >>> jaxrank.Status(int(model.info.status)).name
      'MAX_ITER'
    """


def warn_stopped(
    status, iterations, name: str, values, detail: str, numbers, *, head: str, stacklevel: int,
    remedies=None,
) -> None:  # fmt: skip
    """Warn (:class:`ConvergenceWarning`) when some entries of a fit's ``status`` stopped before
    convergence (any status but ``CONVERGED``): every fitter's one warning, its text
    :func:`jaxrank.solver.stopped_message` (the status table's messages; ``remedies``, the
    fitter's own words for a status). ``stacklevel`` as in :func:`warnings.warn`, counted from
    this function.
    """
    text = stopped_message(
        status, iterations, name, values, detail, numbers, head=head, remedies=remedies
    )
    if text is not None:
        warnings.warn(text, ConvergenceWarning, stacklevel=stacklevel)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class RankModel:
    """A fitted kernel ranker ``f(x) = Σ_r coef_r k(basis_r, x)`` (one per λ of a grid).

    Attributes:
      basis: ``(n_basis, d)`` basis rows ``x_r``.
      coef: ``(n_basis,)`` for a scalar λ, ``(L, n_basis)`` for a grid of L values.
      lam: ``()`` or ``(L,)``.
      kernel: the resolved kernel (e.g. ``model.kernel.sigma2``).
      info: :class:`~jaxrank.solver.SolverInfo`, each field ``()`` or ``(L,)``.
      basis_index: ``(n_basis,)`` rows of the training ``X`` used as basis.
      loss: name of the loss (static).
      eps: ε of the smoothed hinge.

    Example:
      >>> import numpy as np
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
      >>> model = jaxrank.fit_rankrc(X, y, np.array([1.0, 0.25]))
      >>> model.coef.shape, model.decision_function(X).shape  # (L, n_basis), (L, n)
      ((2, 30), (2, 300))
      >>> model.select(1).decision_function(X[:3]).shape
      (3,)
    """

    basis: jax.Array
    coef: jax.Array
    lam: jax.Array
    kernel: Any
    info: SolverInfo
    basis_index: jax.Array
    loss: str = dataclasses.field(default="smoothed_hinge", metadata=dict(static=True))
    eps: Any = 0.5

    def __post_init__(self):
        _flax.register(self)  # flax.serialization support when flax is imported (no-op else)

    @property
    def n_basis(self) -> int:
        return int(self.basis.shape[0])

    def decision_function(self, X) -> jax.Array:
        """Scores ``f(x) = Σ_r coef_r k(basis_r, x)``, streamed over row chunks of ``X``.

        A pure function of the model and ``X`` for JAX input: ``jax.jit``, ``jax.vmap`` and
        ``jax.grad`` (with respect to ``X`` or the model's leaves) apply, and the scores are
        computed where a committed ``X`` lives. numpy input is checked (finite values, a
        range the model's dtype holds) and padded to a shape bucket on the host.

        Args:
          X: ``(n, d)`` rows.

        Returns:
          ``(n,)`` for a scalar λ, ``(L, n)`` for a grid.

        Example:
          >>> import jax, jaxrank
          >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
          >>> model = jaxrank.fit_rankrc(X, y, 2.0**-6)
          >>> score = jax.jit(lambda m, X: m.decision_function(X))
          >>> diff = score(model, X) - model.decision_function(X)  # the same up to rounding
          >>> bool(jax.numpy.max(jax.numpy.abs(diff)) < 1e-4)
          True
        """
        X = score_input(X, self.basis.shape[1], self.basis.dtype, self)
        return _kernels.stream_matvec(self.kernel, X, self.basis, self.coef)

    def select(self, i: int) -> RankModel:
        """The model of the ``i``-th λ of a grid, as a scalar-λ model."""
        if self.coef.ndim == 1:
            raise ValueError("select() needs a model fitted on a λ grid.")
        i = operator.index(i)
        n = self.coef.shape[0]
        if not -n <= i < n:
            raise IndexError(f"λ index {i} out of range for a grid of {n} values.")
        return dataclasses.replace(
            self,
            coef=self.coef[i],
            lam=self.lam[i],
            info=jax.tree.map(lambda a: a[i], self.info),
        )

    def save(self, path) -> None:
        """Write the model to ``path`` as a checksummed ``.npz`` (:func:`jaxrank.io.save`)."""
        io.save(self, path)


def score_input(X, d: int, dtype, model) -> Any:
    """``X`` checked for scoring with a model over ``d`` features in ``dtype``.

    numpy and other host input: :func:`~jaxrank._validation.check_X` and
    :func:`~jaxrank._validation.check_cast`, returned as a host array (padded to a shape bucket
    by the scorer). JAX input (or a model whose leaves are traced): only the shape is checked
    under a transformation, finiteness too for a concrete device array; returned as a JAX
    array in ``dtype``, on its own device.
    """
    traced = isinstance(X, jax.core.Tracer) or any(
        isinstance(v, jax.core.Tracer) for v in jax.tree.leaves(model)
    )
    if not (traced or isinstance(X, jax.Array)):
        X = check_X(X)
        _check_features(X.shape, d)
        check_cast(X, dtype, underflow=False)  # scoring: rows may sit close together
        return np.asarray(X, dtype)
    X = jnp.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n, d), got shape {X.shape}.")
    _check_features(X.shape, d)
    if not jnp.issubdtype(X.dtype, jnp.floating) and not jnp.issubdtype(X.dtype, jnp.integer):
        raise ValueError(f"X must hold real numbers, got dtype {X.dtype}.")
    if not isinstance(X, jax.core.Tracer):
        # a concrete X closed over by a traced model (jax.jit of a training step): checked
        # now, on its device, not staged into the trace (a TracerBoolConversionError before)
        with jax.ensure_compile_time_eval():
            finite = bool(jnp.all(jnp.isfinite(X)))
        if not finite:
            raise ValueError("X contains NaN or infinite values.")
    return X.astype(dtype)


def _check_features(shape, d: int) -> None:
    if shape[1] != d:
        raise ValueError(f"X has {shape[1]} features, the model was fitted on {d}.")


def rank_model_to_arrays(model: RankModel) -> dict[str, Any]:
    """The fields :func:`jaxrank.io.save` writes for a :class:`RankModel` (``info.*``: the fields
    of the model's own ``info``, e.g. :class:`~jaxrank.l1.L1Info` for an ``L1Model``)."""
    fields = {
        "basis": model.basis,
        "coef": model.coef,
        "lam": model.lam,
        "basis_index": model.basis_index,
        "kernel": model.kernel,
        "loss": model.loss,
        "eps": model.eps,
    }
    for f in model.info._fields:
        fields[f"info.{f}"] = getattr(model.info, f)
    return fields


def rank_model_from_arrays(fields: dict[str, Any]) -> RankModel:
    """The :class:`RankModel` of fields read by :func:`jaxrank.io.load`, checked."""
    info = SolverInfo(**{f: fields[f"info.{f}"] for f in SolverInfo._fields})
    model = RankModel(
        basis=fields["basis"],
        coef=fields["coef"],
        lam=fields["lam"],
        kernel=fields["kernel"],
        info=info,
        basis_index=fields["basis_index"],
        loss=fields["loss"],
        eps=fields["eps"],
    )
    io.check_fitted_fields(model, type(model).__name__)
    return model


io.register_model("RankModel", RankModel, rank_model_to_arrays, rank_model_from_arrays)
