"""DOPMID's structural loss and most violated labelling, by sorting (AM) or a table (QM)
(seed 004; the reconstruction of its formulas: docs/design.md §11).

:mod:`jaxrank.dopmid` re-exports :func:`structured_loss`,
:class:`MostViolated` and :func:`most_violated`.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._precision import HIGHEST as _HI
from jaxrank._validation import (
    check_binary_labels,
)

__all__ = [
    "FEATURE_MAPS",
    "MEASURES",
    "SCALES",
    "MostViolated",
    "check_feature_map",
    "check_measure",
    "check_scale",
    "class_weights",
    "most_violated",
    "most_violated_core",
    "structured_loss",
]


MEASURES = ("am", "qm")
FEATURE_MAPS = ("sum", "balanced")
SCALES = ("svc", "paper")
# Entries of the (n+ + 1) x (n- + 1) QM search table evaluated per block.
QM_BLOCK = 2**20


# --------------------------------------------------------------------------------------------
# loss and most violated labelling
# --------------------------------------------------------------------------------------------


def _loss_from_counts(fn, fp, n_pos, n_neg, measure: str):
    """Δ(ȳ, y) of seed eq. (8) / (9) from the error counts (arrays of a floating dtype)."""
    a = fn / n_pos
    b = fp / n_neg
    if measure == "am":
        return (a + b) / 2
    return jnp.sqrt((a * a + b * b) / 2)


def check_measure(measure) -> str:
    if measure not in MEASURES:
        raise ValueError(f"measure must be 'am' or 'qm', got {measure!r}.")
    return measure


def check_feature_map(feature_map) -> str:
    if feature_map not in FEATURE_MAPS:
        raise ValueError(f"feature_map must be 'sum' or 'balanced', got {feature_map!r}.")
    return feature_map


def structured_loss(y, ybar, *, measure: str = "am") -> jax.Array:
    r"""The DOPMID loss :math:`\Delta(\bar y, y)`: ``1 − AM(ȳ)`` or ``1 − QM(ȳ)``.

    Seed 004 eq. (8) (AM) and eq. (9) (QM), reconstructed as in docs/design.md §11.

    Args:
      y: ``(n,)`` true two-valued labels (positive class ``+1``, ``1`` or ``True``).
      ybar: ``(n,)`` a labelling; an entry is positive iff ``ybar > 0`` (or ``True``).
      measure: ``"am"`` or ``"qm"``.

    Returns:
      The scalar loss in ``[0, 1]`` (the default float dtype).

    Example:
      >>> from jaxrank.dopmid import structured_loss
      >>> float(structured_loss([1, 1, -1, -1], [1, -1, -1, 1]))  # FN/n+ = FP/n- = 1/2
      0.5
    """
    measure = check_measure(measure)
    pos = check_binary_labels(y)
    yb = np.asarray(ybar)
    if yb.shape != pos.shape:
        raise ValueError(f"y and ybar have different shapes: {pos.shape} and {yb.shape}.")
    hat = yb.astype(bool) if yb.dtype == np.bool_ else yb > 0
    dt = jax.dtypes.canonicalize_dtype(jnp.float64)
    fn = jnp.asarray(np.sum(pos & ~hat), dt)
    fp = jnp.asarray(np.sum(~pos & hat), dt)
    return _loss_from_counts(fn, fp, int(pos.sum()), int((~pos).sum()), measure)


class MostViolated(NamedTuple):
    """The most violated labelling of seed OP2 for scores ``s``.

    Attributes:
      labels: ``(n,)`` int32 labelling ``ȳ`` in ``{+1, -1}``.
      violation: ``H(ȳ) = Δ(ȳ, y) − Σ_i u_i s_i`` (``≥ 0``; 0 at ``ȳ = y``).
      loss: ``Δ(ȳ, y)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.dopmid import most_violated
      >>> y = jnp.array([1, -1, -1, -1])
      >>> mv = most_violated(jnp.array([0.5, 0.2, -1.0, 0.9]), y, measure="am")
      >>> mv.labels.shape, bool(mv.violation >= 0)
      ((4,), True)
    """

    labels: jax.Array
    violation: jax.Array
    loss: jax.Array


# named by its public path (pickles, jax.export's serialised name, doctest, the API reference)
MostViolated.__module__ = "jaxrank.dopmid"


def check_scale(C_scale) -> str:
    if C_scale not in SCALES:
        raise ValueError(f"C_scale must be 'svc' or 'paper', got {C_scale!r}.")
    return C_scale


def class_weights(feature_map: str, C_scale: str, n_pos: int, n_neg: int) -> tuple[float, float]:
    """``(c_+, c_-)``: the per-row weights of Ψ for each class (docs/design.md §11,
    *Scale of C*)."""
    n = n_pos + n_neg
    if C_scale == "paper":
        return (1.0, 1.0) if feature_map == "sum" else (1.0 / n_pos, 1.0 / n_neg)
    if feature_map == "sum":
        return 0.5 / n, 0.5 / n
    return 0.25 / n_pos, 0.25 / n_neg


def _flip_am(s, pos, n_pos, n_neg, cp, cn):
    """AM: the violation separates over rows; flip every row with a positive gain."""
    gain = jnp.where(pos, 0.5 / n_pos - 2 * cp * s, 0.5 / n_neg + 2 * cn * s)
    return gain > 0


def _flip_table(s, pos, n_pos, n_neg, cp, cn, measure):
    """Exact search over ``(k, l)`` = (#flipped positives, #flipped negatives); any measure.

    For each ``k`` the ``k`` lowest-scored positives are flipped, for each ``l`` the ``l``
    highest-scored negatives (seed Algorithm 2 / Joachims 2005 Alg. 2). The table
    ``P(k) + N(l) + Δ(k, l)`` is scanned in blocks of rows ``k`` of about ``QM_BLOCK``
    entries; the class sizes are dynamic (only ``n`` fixes shapes), so the table is
    ``(n_+ + 1) × (n + 1)`` with the columns beyond ``n_-`` masked.
    """
    dt = s.dtype
    n = s.shape[0]
    big = jnp.asarray(jnp.inf, dt)
    order_pos = jnp.argsort(jnp.where(pos, s, big), stable=True)  # positives ascending first
    order_neg = jnp.argsort(jnp.where(pos, big, -s), stable=True)  # negatives descending first
    idx = jnp.arange(n, dtype=jnp.int32)
    kp = jnp.sum(pos, dtype=jnp.int32)
    kn = n - kp
    sp = jnp.where(idx < kp, s[order_pos], 0)
    sn = jnp.where(idx < kn, s[order_neg], 0)
    zero = jnp.zeros(1, dt)
    P = jnp.concatenate([zero, -2 * cp * jnp.cumsum(sp)])  # (n + 1,), valid up to n+
    N = jnp.concatenate([zero, 2 * cn * jnp.cumsum(sn)])  # (n + 1,), valid up to n-
    cols = jnp.arange(n + 1, dtype=jnp.int32)
    ls = cols.astype(dt)
    rows = max(1, min(n + 1, QM_BLOCK // (n + 1)))
    n_blocks = (kp + rows) // rows  # ceil((n+ + 1) / rows)

    def block(b, carry):
        best, bk, bl = carry
        kk = b * rows + jnp.arange(rows, dtype=jnp.int32)
        kc = jnp.minimum(kk, kp)
        loss = _loss_from_counts(kc.astype(dt)[:, None], ls[None, :], n_pos, n_neg, measure)
        vals = P[kc][:, None] + N[None, :] + loss
        vals = jnp.where((kk[:, None] <= kp) & (cols[None, :] <= kn), vals, -big)
        flat = jnp.argmax(vals).astype(jnp.int32)
        r, c = flat // (n + 1), flat % (n + 1)
        v = vals[r, c]
        better = v > best
        return (
            jnp.where(better, v, best),
            jnp.where(better, kk[r], bk),
            jnp.where(better, c, bl),
        )

    init = (-big, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32))
    _, k_best, l_best = jax.lax.fori_loop(0, n_blocks, block, init)
    rank_pos = jnp.zeros(n, jnp.int32).at[order_pos].set(idx)
    rank_neg = jnp.zeros(n, jnp.int32).at[order_neg].set(idx)
    return jnp.where(pos, rank_pos < k_best, rank_neg < l_best)


def most_violated_core(s, pos, n_pos, n_neg, cp, cn, measure: str, method: str):
    """``(flip, u, loss, violation)`` for scores ``s``; ``u = c ∘ (y − ȳ)``.

    ``n_pos``, ``n_neg``, ``cp``, ``cn`` are scalars of ``s``'s dtype (dynamic).
    """
    dt = s.dtype
    if method == "threshold":
        flip = _flip_am(s, pos, n_pos, n_neg, cp, cn)
    else:
        flip = _flip_table(s, pos, n_pos, n_neg, cp, cn, measure)
    fn = jnp.sum(flip & pos, dtype=jnp.int32).astype(dt)
    fp = jnp.sum(flip & ~pos, dtype=jnp.int32).astype(dt)
    loss = _loss_from_counts(fn, fp, n_pos, n_neg, measure)
    u = jnp.where(flip, jnp.where(pos, 2 * cp, -2 * cn), jnp.zeros((), dt)).astype(dt)
    return flip, u, loss, loss - jnp.dot(u, s, precision=_HI)


@partial(jax.jit, static_argnames=("measure", "method"))
def _most_violated_jit(s, pos, cp, cn, *, measure, method):
    dt = s.dtype
    n_pos = jnp.sum(pos, dtype=jnp.int32).astype(dt)
    n_neg = jnp.sum(~pos, dtype=jnp.int32).astype(dt)
    flip, _, loss, viol = most_violated_core(s, pos, n_pos, n_neg, cp, cn, measure, method)
    labels = jnp.where(flip, jnp.where(pos, -1, 1), jnp.where(pos, 1, -1)).astype(jnp.int32)
    return labels, viol, loss


def most_violated(
    scores,
    y,
    *,
    measure: str = "am",
    feature_map: str = "balanced",
    C_scale: str = "svc",
    method: str | None = None,
) -> MostViolated:
    r"""The most violated labelling :math:`\arg\max_{\bar y} \Delta(\bar y, y) - w^\top g(\bar y)`.

    :math:`g(\bar y) = \Psi(X, y) - \Psi(X, \bar y)`, so :math:`w^\top g(\bar y) = \sum_i c_i
    (y_i - \bar y_i) s_i`.

    Seed 004 OP2, Sec. 3.3. For AM by per-row thresholds (the seed's sorting argument, exact,
    :math:`O(n)`), for QM by the seed's Algorithm 2 (incremental flips in score order over every
    ``(FN, FP)`` pair, exact, :math:`O(n \log n + n_+ n_-)`); see docs/design.md §11.

    Args:
      scores: ``(n,)`` finite scores ``s_i = w·φ(x_i)``.
      y: ``(n,)`` two-valued labels (positive ``+1``, ``1`` or ``True``).
      measure: ``"am"`` or ``"qm"``.
      feature_map: ``"balanced"`` (``c_i ∝ 1 / n_{y_i}``) or ``"sum"`` (``c_i ∝ 1``).
      C_scale: ``"svc"`` (``c_i = 1/(4 n_{y_i})`` or ``1/(2n)``, as :func:`fit_dopmid` by
        default) or ``"paper"`` (``c_i = 1/n_{y_i}`` or ``1``); docs/design.md §11, *Scale of C*.
      method: ``"threshold"`` (AM only) or ``"table"`` (any measure); default: ``"threshold"``
        for AM, ``"table"`` for QM.

    Returns:
      :class:`MostViolated` (labels, violation, loss).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.dopmid import most_violated
      >>> s = jnp.array([0.5, -0.1, 0.2, -0.3])
      >>> r = most_violated(s, [1, 1, -1, -1], measure="qm", feature_map="sum", C_scale="paper")
      >>> r.labels.tolist()  # flip the low positive and the high negative
      [1, -1, 1, -1]
      >>> round(float(r.violation), 6)  # Δ = 1/2, plus 2·0.1 + 2·0.2
      1.1
    """
    measure = check_measure(measure)
    feature_map = check_feature_map(feature_map)
    C_scale = check_scale(C_scale)
    if method is None:
        method = "threshold" if measure == "am" else "table"
    if method not in ("threshold", "table"):
        raise ValueError(f"method must be 'threshold' or 'table', got {method!r}.")
    if method == "threshold" and measure != "am":
        raise ValueError("method='threshold' is exact for AM only; use 'table' for QM.")
    pos = check_binary_labels(y)
    s = np.asarray(scores)
    if s.ndim != 1 or s.shape[0] != pos.shape[0]:
        raise ValueError(f"scores must have shape ({pos.shape[0]},), got {s.shape}.")
    if s.dtype.kind not in "fiu" or not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite real numbers.")
    s = jnp.asarray(s)
    if not jnp.issubdtype(s.dtype, jnp.floating):
        s = s.astype(jax.dtypes.canonicalize_dtype(jnp.float64))
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    cp, cn = class_weights(feature_map, C_scale, n_pos, n_neg)
    labels, viol, loss = _most_violated_jit(
        s,
        jnp.asarray(pos),
        jnp.asarray(cp, s.dtype),
        jnp.asarray(cn, s.dtype),
        measure=measure,
        method=method,
    )
    return MostViolated(labels, viol, loss)
