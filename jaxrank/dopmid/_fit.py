"""DOPMID's model and fit: :class:`DOPMIDModel` and :func:`fit_dopmid` (import them from
:mod:`jaxrank.dopmid`, whose docstring gives the method: seed 004's 1-slack structural SVM)."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _flax
from jaxrank import io as _io
from jaxrank import kernels as _kernels
from jaxrank._fitting import choose_dtype
from jaxrank._precision import HIGHEST as _HI
from jaxrank._validation import (
    check_cast,
    check_positive,
    check_X_y,
)
from jaxrank.dopmid._loop import (
    DOPMIDInfo,
    LoopConfig,
    buffer_size,
    initial_state,
    resized,
    run_loop,
)
from jaxrank.dopmid._oracle import (
    check_feature_map,
    check_measure,
    check_scale,
    class_weights,
)
from jaxrank.model import score_input, warn_stopped
from jaxrank.solver import Status

__all__ = ["DOPMIDModel", "fit_dopmid"]  # the rest of the family's face: its __init__


# A fit starts with _INITIAL_PLANES working-set slots.
_INITIAL_PLANES = 64


# --------------------------------------------------------------------------------------------
# model and fit
# --------------------------------------------------------------------------------------------


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class DOPMIDModel:
    """A fitted DOPMID classifier ``f(x) = w·φ(x)`` (seed 004).

    Linear (``kernel is None``): ``f(x) = coef·x + intercept``. Kernel:
    ``f(x) = Σ_i coef_i k(basis_i, x) + intercept``. ``intercept = b²·Σ_i β_i`` comes from the
    regularised bias feature ``b`` (0 without one), ``β = Σ_c α_c u_c`` the expansion of ``w``
    over the training rows.

    Attributes:
      coef: ``(d,)`` weights (linear) or ``(n,)`` expansion coefficients (kernel).
      intercept: ``()`` constant term.
      basis: ``None`` (linear) or ``(n, d)`` training rows (kernel).
      kernel: ``None`` (linear) or the resolved kernel.
      C: the regularisation constant.
      info: :class:`DOPMIDInfo`.
      measure: ``"am"`` or ``"qm"`` (static).
      feature_map: ``"balanced"`` or ``"sum"`` (static).
      C_scale: ``"svc"`` or ``"paper"`` (static): how ``C`` and ``coef`` are scaled.

    Example:
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> model = jaxrank.fit_dopmid(X, y, 1.0, measure="am")
      >>> model.decision_function(X).shape, sorted(set(model.predict(X).tolist()))
      ((200,), [-1, 1])
    """

    coef: jax.Array
    intercept: jax.Array
    basis: Any
    kernel: Any
    C: jax.Array
    info: DOPMIDInfo
    measure: str = dataclasses.field(default="am", metadata=dict(static=True))
    feature_map: str = dataclasses.field(default="balanced", metadata=dict(static=True))
    C_scale: str = dataclasses.field(default="svc", metadata=dict(static=True))

    def __post_init__(self):
        _flax.register(self)  # flax.serialization support when flax is imported (no-op else)

    def decision_function(self, X) -> jax.Array:
        """Scores ``f(x)`` of shape ``(n,)``; the structural prediction is their sign.

        Args:
          X: ``(n, d)`` rows, preprocessed as the training rows were.
        """
        d = self.coef.shape[0] if self.basis is None else self.basis.shape[1]
        Xd = jnp.asarray(score_input(X, d, self.coef.dtype, self))
        if self.basis is None:
            f = jnp.matmul(Xd, self.coef, precision=_HI)
        else:
            f = _kernels.stream_matvec(self.kernel, Xd, self.basis, self.coef)
        return f + self.intercept

    def predict(self, X) -> jax.Array:
        """``argmax_ȳ w·Ψ(X, ȳ)``: ``+1`` where ``f(x) > 0``, else ``-1`` (int32, ``(n,)``)."""
        return jnp.where(self.decision_function(X) > 0, 1, -1).astype(jnp.int32)

    def save(self, path) -> None:
        """Write the model to ``path`` as a checksummed ``.npz`` (:func:`jaxrank.io.save`).

        :func:`jaxrank.load` reads it back bit for bit and refuses a file whose fields a fit
        could not have produced (docs/design.md §11, *Saving*).

        Example:
          >>> import os, tempfile, jaxrank
          >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
          >>> X = (X - X.mean(0)) / X.std(0)
          >>> model = jaxrank.fit_dopmid(X, y, 1.0)
          >>> path = os.path.join(tempfile.mkdtemp(), "dopmid.npz")
          >>> model.save(path)
          >>> same = jaxrank.load(path)
          >>> bool((same.decision_function(X) == model.decision_function(X)).all())
          True
        """
        _io.save(self, path)


# named by its public path, as before the move into this module: pickles and jax.export's
# serialised name stay jaxrank.dopmid.DOPMIDModel; doctest and the API reference find it there
DOPMIDModel.__module__ = "jaxrank.dopmid"


def _check_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def _resolve(kernel, X, dt):
    """``None`` for the explicit linear map, else a resolved kernel."""
    if kernel is None or kernel == "linear" or isinstance(kernel, _kernels.Linear):
        return None
    return _kernels.resolve_kernel(kernel, X, dtype=dt)


def fit_dopmid(
    X,
    y,
    C=1.0,
    *,
    measure: str = "am",
    kernel=None,
    bias: float = 0.0,
    feature_map: str = "balanced",
    C_scale: str = "svc",
    tol: float = 1e-3,
    max_iter: int = 1000,
    prune_after: int | None = 50,
    qp_max_iter: int = 100,
    line_search: bool = True,
    dtype=None,
    memory_budget: int | None = None,
) -> DOPMIDModel:
    r"""Fit DOPMID: the 1-slack structural SVM for AM or QM by cutting planes (seed 004).

    Solves (docs/design.md §11; seed OP1 with the loss eq. 8 or 9, Joachims 2005 OP 2)

    .. math::

      \min_{w,\ \xi \ge 0}\ \tfrac12\|w\|^2 + nC\xi \quad\text{s.t.}\quad
      w^\top[\Psi(X, y) - \Psi(X, \bar y)] \ge \Delta(\bar y, y) - \xi \quad \forall \bar y,

    :math:`\Psi(X, \bar y) = \sum_i c_i \bar y_i \phi(x_i)` with :math:`c_i = 1/(4n_{y_i})`
    (``"balanced"``) or :math:`1/(2n)` (``"sum"``), by the cutting-plane algorithm (seed
    Algorithm 1) until the duality gap is at most :math:`nC\varepsilon` (``tol``). For AM this is
    the linear SVC :math:`\min_w \tfrac12\|w\|^2 + C\sum_i \kappa_i\max(0, m_i - y_i
    w^\top\phi(x_i))`, a sum over samples times C: ``class_weight="balanced"`` for
    ``"balanced"`` (:math:`\kappa_i = n/(2n_{y_i})`, :math:`m_i = 1`), unweighted with margins
    :math:`m_i = n/(2n_{y_i})` for ``"sum"`` (docs/design.md §11, *Scale of C*).

    Args:
      X: ``(n, d)`` training rows, taken as given (standardise first; without a bias the
        decision boundary passes through the origin).
      y: two-valued labels; the rare class is ``+1``, ``1`` or ``True``.
      C: regularisation constant > 0 (default 1). With ``C_scale="svc"`` it is scikit-learn
        SVC's C: the loss term is a sum over the n samples times C, so its meaning does not
        depend on n; useful from about 0.01 to 100 on standardised rows (measured: test AM
        flat within ±0.02 over 0.01-100 on satimage). With ``C_scale="paper"`` it multiplies
        the single slack of the seed's formulation.
      measure: ``"am"`` (loss ``1 − AM``) or ``"qm"`` (loss ``1 − QM``).
      kernel: ``None`` (linear, ``φ(x) = x``: the seed's setting) or a jaxrank kernel / name
        (``"gaussian"``, ``"polynomial"``): the ``n × n`` kernel matrix is formed (refused above
        the memory budget). A linear kernel object means ``None``.
      bias: value ``b ≥ 0`` of a constant, regularised feature appended to ``φ`` (0: no bias, as
        in the seed). See docs/design.md §11 (*Bias*) before combining ``b > 0`` with ``"sum"``.
      feature_map: ``"balanced"`` (default: each class averaged, ``c_i ∝ 1/n_{y_i}``) or
        ``"sum"`` (Joachims' and the seed's, ``c_i ∝ 1``).
      C_scale: ``"svc"`` (default) or ``"paper"``: the seed's constants ``c_i = 1`` /
        ``1/n_{y_i}`` and ``C`` on ``ξ``, the same model as ``"svc"`` with ``C_svc = 4n·C``
        (``"sum"``) or ``16C/n`` (``"balanced"``) and ``coef`` scaled by ``1/(2n)`` or
        ``1/4``. The seed's exact setting is ``feature_map="sum", C_scale="paper"``.
      tol: ε on the loss scale (the seed's 0.001): stop when ``P − D ≤ C'ε``, ``C'`` the
        slack's weight (``nC``, or ``C`` with ``"paper"``), i.e. within ε of the optimum
        relative to ``P(0) = C'``.
      max_iter: cap on cutting-plane iterations (dynamic: changing it does not recompile).
      prune_after: drop a plane whose multiplier was 0 in this many consecutive QPs (``None``:
        never).
      qp_max_iter: cap on interior-point iterations per QP.
      line_search: ``True`` (default): OCAS, the model moved by a line search on the full
        objective and planes cut beside it (docs/design.md §11, *Line search*); ``False``: the plain
        cutting planes of seed Algorithm 1, many more iterations at large C.
      dtype: ``float32`` or ``float64``; default float64 when ``X`` is float64 and x64 is on.
      memory_budget: bytes the kernel matrix may take (kernel only; default as in
        :func:`jaxrank.fit`).

    Returns:
      A :class:`DOPMIDModel`; ``model.info`` holds iterations, planes, the final violation and
      slack, primal and dual values, their gap and the status.

    Raises:
      ValueError: bad input (NaN/inf, one class, labels not two-valued, length mismatch,
        ``C ≤ 0``, unknown ``measure`` / ``feature_map`` / ``C_scale``, ``bias < 0``, bad
        integers); values whose squares overflow the dtype (``X * 1e20`` in float32) or a
        ``C·n`` beyond its range; a degenerate result: every training score equal (``w = 0``
        or a constant classifier), which ranks nothing.

    Warns:
      ConvergenceWarning: the certificate was not reached (status in ``model.info.status``:
        ``MAX_ITER``, ``PRECISION`` — not reachable in this dtype, e.g. float32 at a huge C —
        or ``NONFINITE``).
      UserWarning: every training row is predicted in one class (training AM = 1/2).

    Example:
      >>> import jaxrank
      >>> from jaxrank.dopmid import fit_dopmid
      >>> X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
      >>> X = (X - X.mean(0)) / X.std(0)
      >>> model = fit_dopmid(X, y, 1.0, measure="qm")
      >>> int(model.info.status)  # Status.CONVERGED: gap <= n·C·tol
      0
      >>> bool(model.info.gap <= 300 * 1.0 * 1e-3)
      True
      >>> model.predict(X).shape
      (300,)
    """
    X, pos = check_X_y(X, y)
    measure = check_measure(measure)
    feature_map = check_feature_map(feature_map)
    C_scale = check_scale(C_scale)
    C = check_positive(C, "C")
    tol = check_positive(tol, "tol")
    if isinstance(bias, bool) or not np.isfinite(float(bias)) or float(bias) < 0:
        raise ValueError(f"bias must be a finite number >= 0, got {bias!r}.")
    bias = float(bias)
    max_iter = _check_int(max_iter, "max_iter", 1)
    qp_max_iter = _check_int(qp_max_iter, "qp_max_iter", 1)
    prune = 2**30 if prune_after is None else _check_int(prune_after, "prune_after", 1)
    if not isinstance(line_search, bool | np.bool_):
        raise ValueError(f"line_search must be True or False, got {line_search!r}.")
    dt = choose_dtype(X, dtype)
    check_cast(X, dt)  # values whose squares overflow the dtype: a clear error, not inf scores
    kern = _resolve(kernel, X, dt)
    n = X.shape[0]
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    # Solved on the "svc" scale whatever C_scale is: the "paper" problem is the same up to
    # w_paper = κ·w_svc and a factor κ² on its objective (docs/design.md §11, *Scale of C*), and
    # its ||Ψ|| ∝ n makes the working-set QP needlessly ill-scaled (PRECISION in float32).
    if C_scale == "svc":
        C_svc, kappa = C, 1.0
    elif feature_map == "sum":
        C_svc, kappa = 4.0 * n * C, 0.5 / n
    else:
        C_svc, kappa = 16.0 * C / n, 0.25
    C_xi = n * C_svc  # the constant multiplying the single slack ξ
    if not C_xi < float(np.finfo(dt).max) / 4:
        raise ValueError(
            f"C = {C:.3g} is beyond the range of {dt} (C·n = {C_xi:.3g}); use a smaller C."
        )

    Xd = jnp.asarray(X, dt)
    if kern is None:  # Φ = [X, b]: the model is w itself (_loop's notes)
        F = jnp.concatenate([Xd, jnp.full((n, 1), bias, dt)], axis=1) if bias > 0 else Xd
    else:
        _kernels.check_memory(n * n * dt.itemsize, memory_budget, f"the kernel matrix ({n} x {n})")
        F = _kernels.kernel_block(kern, Xd, Xd)
    cfg = LoopConfig(
        measure=measure,
        method="threshold" if measure == "am" else "table",
        linear=kern is None,
        qp_max_iter=qp_max_iter,
        line_search=bool(line_search),
    )
    cp, cn = class_weights(feature_map, "svc", n_pos, n_neg)
    args = (
        F,
        jnp.asarray(bias * bias, dt),
        jnp.asarray(pos),
        jnp.asarray(cp, dt),
        jnp.asarray(cn, dt),
        jnp.asarray(C_xi, dt),
        jnp.asarray(tol, dt),
        jnp.asarray(max_iter, jnp.int32),
        jnp.asarray(prune, jnp.int32),
    )
    state = initial_state(n, F.shape[1], _INITIAL_PLANES, C_xi, dt)
    while True:
        state = run_loop(state, *args, cfg=cfg)
        if int(state.status) != Status.RUNNING:
            break
        state = resized(state, buffer_size(int(jnp.sum(state.live))))

    # the model: the best point (line search) or the QP's solution
    objective = kappa**2 * (0.5 * state.norm2 + C_xi * state.violation)
    gap = kappa**2 * C_xi * state.gap
    info = DOPMIDInfo(
        iterations=state.iterations,
        n_planes=jnp.sum(state.live, dtype=jnp.int32) - 1,
        violation=state.violation,
        slack=state.slack,
        objective=objective,
        dual=objective - gap,
        status=state.status,
        gap=gap,
    )
    _check_degenerate(state.scores, info, feature_map, bias)
    warn_stopped(
        info.status, info.iterations, "C", C, "duality gap ", info.gap, stacklevel=3,
        head=f"DOPMID stopped above the duality-gap tolerance C·tol = {kappa**2 * C_xi * tol:.3g} "
        f"(max violation {float(info.violation):.3g}, working-set slack {float(info.slack):.3g})",
        remedies={Status.NONFINITE: "check the data (standardise it) and C"},
    )  # fmt: skip
    w = kappa * state.w
    if kern is None:
        coef, basis = w[: X.shape[1]], None
        intercept = bias * w[-1] if bias > 0 else jnp.zeros((), dt)
    else:
        coef, basis = w, Xd
        intercept = jnp.asarray(bias * bias, dt) * jnp.sum(w)
    return DOPMIDModel(
        coef=coef,
        intercept=intercept,
        basis=basis,
        kernel=kern,
        C=jnp.asarray(C, dt),
        info=info,
        measure=measure,
        feature_map=feature_map,
        C_scale=C_scale,
    )


def _check_degenerate(scores, info: DOPMIDInfo, feature_map: str, bias: float) -> None:
    """Refuse a model whose training scores are all equal (``w = 0`` or a constant classifier);
    warn when it puts every training row in one class.

    Such a model ranks nothing and predicts one class; returning it as a fit (issue 17: all-zero
    models labelled CONVERGED) would hide either a solver failure or an optimum that is the
    constant classifier (``feature_map="sum"`` with a bias on strongly imbalanced data).
    """
    s = np.asarray(scores, np.float64)
    if not np.all(np.isfinite(s)):  # issue 31: a NaN model is refused, not returned
        raise ValueError(
            f"DOPMID reached {Status(int(info.status)).name}: {int(np.sum(~np.isfinite(s)))} of "
            f"{s.size} training scores are NaN or infinite; likely cause: C or X's scale for "
            "this dtype (standardise X, or fit in float64)."
        )
    spread = float(np.ptp(s)) if np.all(np.isfinite(s)) else np.inf
    size = float(np.max(np.abs(s))) if np.all(np.isfinite(s)) else 0.0
    if spread > 16 * np.finfo(np.asarray(scores).dtype).eps * size:
        if np.all(s > 0) or np.all(s <= 0):
            warnings.warn(
                f"DOPMID predicts every one of the {s.size} training rows "
                + ("positive" if s[0] > 0 else "negative")
                + " (training AM = 1/2); the scores still rank"
                + (
                    ". With feature_map='sum' and a bias this is the optimum on imbalanced "
                    "data: use feature_map='balanced'."
                    if feature_map == "sum" and bias > 0
                    else "; try another C, a bias, or feature_map='balanced'."
                ),
                UserWarning,
                stacklevel=3,
            )
        return
    status = Status(int(info.status)).name
    if int(info.status) == Status.CONVERGED:
        why = "the optimum of this problem is a constant classifier" + (
            " (feature_map='sum' with a bias on imbalanced data: try feature_map='balanced' "
            "or bias=0)"
            if feature_map == "sum" and bias > 0
            else " (the class means of the feature map coincide)"
        )
    else:
        why = f"the solver stopped with status {status} before moving away from w = 0"
    raise ValueError(
        f"DOPMID's model is degenerate: all {s.size} training scores are equal "
        f"({s[0]:.3g}), so it ranks nothing; {why}. Check the data (standardised?) and C."
    )


# --------------------------------------------------------------------------------------------
# Saving and loading (jaxrank.io): DOPMID models join its registry
# --------------------------------------------------------------------------------------------


def _to_arrays(model: DOPMIDModel) -> dict[str, Any]:
    fields = {
        "coef": model.coef,
        "intercept": model.intercept,
        "basis": model.basis,
        "kernel": model.kernel,
        "C": model.C,
        "measure": model.measure,
        "feature_map": model.feature_map,
        "C_scale": model.C_scale,
    }
    for f in DOPMIDInfo._fields:
        fields[f"info.{f}"] = getattr(model.info, f)
    return fields


def _from_arrays(fields: dict[str, Any]) -> DOPMIDModel:
    model = DOPMIDModel(
        coef=fields["coef"],
        intercept=fields["intercept"],
        basis=fields["basis"],
        kernel=fields["kernel"],
        C=fields["C"],
        info=DOPMIDInfo(**{f: fields[f"info.{f}"] for f in DOPMIDInfo._fields}),
        measure=check_measure(fields["measure"]),
        feature_map=check_feature_map(fields["feature_map"]),
        C_scale=check_scale(fields["C_scale"]),
    )
    _check_loaded(model)
    return model


def _check_loaded(model: DOPMIDModel) -> None:
    """Every field as :func:`fit_dopmid` leaves it: one float dtype (``coef``'s); linear
    (``basis`` and ``kernel`` None, ``coef`` ``(d,)``) or kernel (a jaxrank kernel, ``basis``
    ``(n, d)`` finite, ``coef`` ``(n,)``); scalars ``intercept``, ``C`` (finite, > 0) and
    ``info``; status codes of a finished fit, counts ``0 ≤ n_planes ≤ iterations``; numbers
    finite unless the status is ``NONFINITE``; and, linear, ``½||coef||² ≤ objective``
    (``objective = ½||w||² + C'·violation`` with ``violation ≥ 0``: a larger ``coef`` was not
    fitted, e.g. 1e38 whose scores overflow)."""
    fp = _io.float_problems
    problems = [
        f"{f} has shape {np.shape(v)}, expected ()"
        for f, v in (("intercept", model.intercept), ("C", model.C), *_info_items(model))
        if np.shape(v) != ()
    ]
    if np.ndim(model.coef) != 1 or np.size(model.coef) == 0:
        problems.append(f"coef has shape {np.shape(model.coef)}, expected (d,) or (n,)")
    if np.asarray(model.coef).dtype.kind != "f":
        problems.append(f"coef must be a float array, got dtype {np.asarray(model.coef).dtype}")
    problems += _io.status_problems(model.info.status)
    if problems:  # the checks below need one float dtype, the shapes and a status
        raise ValueError("invalid DOPMIDModel: " + "; ".join(problems) + ".")
    dt = np.asarray(model.coef).dtype
    # a fit that ended NONFINITE may hold NaN; any other status promises numbers
    fine = int(np.asarray(model.info.status)) != Status.NONFINITE
    problems += fp(model.C, "C", dtype=dt, lo=0.0, open_lo=True)
    for f in ("iterations", "n_planes"):
        problems += _io.count_problems(getattr(model.info, f), f"info.{f}")
    if not problems and int(model.info.n_planes) > int(model.info.iterations):
        problems.append(
            f"info.n_planes {int(model.info.n_planes)} exceeds info.iterations "
            f"{int(model.info.iterations)}"
        )
    for f, v in (("coef", model.coef), ("intercept", model.intercept), *_info_items(model)):
        if f in ("info.iterations", "info.n_planes", "info.status"):
            continue
        if fine:
            problems += fp(v, f, dtype=dt, lo=0.0 if f == "info.objective" else None)
        elif np.asarray(v).dtype != dt:
            problems.append(f"{f} must be a {dt} float array, got dtype {np.asarray(v).dtype}")
    if model.basis is None:
        if model.kernel is not None:
            problems.append("a linear model (basis None) has no kernel")
        elif fine and not problems:
            half = 0.5 * float(np.sum(np.square(np.asarray(model.coef, np.float64))))
            bound = float(model.info.objective) * (1 + 1e3 * float(np.finfo(dt).eps))
            if not half <= bound:
                problems.append(
                    f"½||coef||² = {half:.6g} exceeds info.objective = "
                    f"{float(model.info.objective):.6g}, which a fit bounds it by"
                )
    else:
        problems += fp(model.basis, "basis", dtype=dt)
        b = np.shape(model.basis)
        if len(b) != 2 or min(b) < 1 or np.shape(model.coef) != (b[0],):
            problems.append(f"basis {b} and coef {np.shape(model.coef)} disagree")
        if not isinstance(model.kernel, _kernels.Gaussian | _kernels.Polynomial | _kernels.Linear):
            problems.append(f"kernel {type(model.kernel).__name__} is not a jaxrank kernel")
    if problems:
        raise ValueError("invalid DOPMIDModel: " + "; ".join(problems) + ".")


def _info_items(model: DOPMIDModel):
    return [(f"info.{f}", getattr(model.info, f)) for f in DOPMIDInfo._fields]


_io.register_model("DOPMIDModel", DOPMIDModel, _to_arrays, _from_arrays)
# its info by name: the annotation does not resolve while jaxrank.dopmid, the module the class
# names, is still importing
_io.register_export(DOPMIDInfo)
