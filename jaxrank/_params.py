"""A fitted model split into its trainable float parameters and the rest, for optax and
``jax.grad`` (:func:`partition`, :func:`combine`).

A model is a pytree whose leaves include integers (``basis_index``, ``info.iterations``,
``info.cg_iterations``, ``info.status``) and fit records that scoring never reads (``lam``,
``eps``, ``info.objective``, ``info.grad_norm``). ``jax.grad`` with respect to the whole model
needs ``allow_int=True`` and optax would step every float leaf. :func:`partition` returns two
pytrees of the model's own type, in the way of equinox's ``partition``: ``params`` holds the
floating leaves of the trainable fields (by default ``coef``, ``basis`` and the kernel's
parameters) with ``None`` elsewhere, ``static`` holds every other leaf with ``None`` where
``params`` has one. ``None`` is an empty pytree, so ``jax.grad``, ``optax`` (``init``,
``update``, ``apply_updates``) and ``jax.tree.map`` see only the parameters; :func:`combine`
puts the two back together. The model's own pytree is unchanged (saving, loading,
``jax.export``, flax and orbax are unaffected).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["combine", "partition"]

TRAINABLE = ("coef", "basis", "kernel")


def partition(model, fields: Sequence[str] = TRAINABLE) -> tuple[Any, Any]:
    """Split a fitted model into ``(params, static)``: the floating leaves of ``fields``, and
    the rest.

    Args:
      model: a fitted model (a dataclass pytree: :class:`~jaxrank.RankModel`, ``L1Model``, ...).
      fields: the fields whose floating-point leaves are trained (default ``("coef", "basis",
        "kernel")``: the coefficients, the basis rows and the kernel parameters such as σ²;
        ``("coef",)`` keeps the basis and kernel fixed). Integer leaves are never parameters.

    Returns:
      ``(params, static)``, two pytrees of the model's type with ``None`` in place of the
      other's leaves; ``combine(params, static)`` is the model again.

    Raises:
      ValueError: a name in ``fields`` that is not a field of the model.

    Example:
      >>> import jax, jax.numpy as jnp, optax
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> model = jaxrank.fit_rankrc(X, y, 2.0**-6)
      >>> params, static = jaxrank.partition(model)
      >>> [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(params)]
      ['.basis', '.coef', '.kernel.sigma2']
      >>> loss = lambda p: jaxrank.pairwise_loss(
      ...     jaxrank.combine(p, static).decision_function(jnp.asarray(X)), y)
      >>> opt = optax.adam(1e-3)
      >>> state = opt.init(params)
      >>> updates, state = opt.update(jax.grad(loss)(params), state)
      >>> params = optax.apply_updates(params, updates)
      >>> bool(loss(params) < loss(jaxrank.partition(model)[0]))
      True
    """
    if not dataclasses.is_dataclass(model) or isinstance(model, type):
        raise TypeError(f"partition takes a fitted model (a dataclass), got {type(model)!r}.")
    names = {f.name for f in dataclasses.fields(model)}
    unknown = [f for f in fields if f not in names]
    if isinstance(fields, str) or unknown:
        raise ValueError(
            f"fields must name fields of {type(model).__name__} ({sorted(names)}), got {fields!r}."
        )
    leaves, treedef = jax.tree_util.tree_flatten_with_path(model)
    keep = [_trainable(path, leaf, set(fields)) for path, leaf in leaves]
    params = [leaf if k else None for (_, leaf), k in zip(leaves, keep, strict=True)]
    static = [None if k else leaf for (_, leaf), k in zip(leaves, keep, strict=True)]
    return treedef.unflatten(params), treedef.unflatten(static)


def combine(params, static):
    """The model of ``params`` and ``static`` from :func:`partition` (each leaf from the one
    that holds it).

    Example:
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> model = jaxrank.fit_rankrc(X, y, 2.0**-6)
      >>> params, static = jaxrank.partition(model, fields=("coef",))
      >>> again = jaxrank.combine(params, static)
      >>> bool((again.decision_function(X) == model.decision_function(X)).all())
      True
    """
    return jax.tree.map(
        lambda p, s: s if p is None else p, params, static, is_leaf=lambda x: x is None
    )


def _trainable(path, leaf, fields) -> bool:
    top = path[0]
    if not (isinstance(top, jax.tree_util.GetAttrKey) and top.name in fields):
        return False
    dtype = getattr(leaf, "dtype", None)
    if dtype is None:
        return isinstance(leaf, float | np.floating)
    return bool(jnp.issubdtype(dtype, jnp.inexact))
