"""Ranking and imbalanced-classification metrics: AUC, ROC curve, multi-level AUC, AM, QM, F1.

Every metric is a pure function. :func:`auc`, :func:`mauc`, :func:`am`, :func:`qm` and :func:`f1`
are written in JAX: they are vectorised over leading axes of the scores (a ``(L, n)`` block of
scores for a grid of ``L`` regularisation values gives ``(L,)`` metrics), and :func:`auc`,
:func:`am`, :func:`qm`, :func:`f1` can be called under :func:`jax.jit` and :func:`jax.vmap`
(:func:`mauc` too, with its integer ``levels`` concrete, e.g. closed over). :func:`roc_curve` is
numpy, like :func:`sklearn.metrics.roc_curve`.

Labels follow the library contract: ``y`` takes two values and the rare (positive) class is the one
labelled ``+1``, ``1`` or ``True``; everything else is the negative (majority) class.

Input checks (length mismatch, labels that are not two-valued, one class only, NaN or inf scores)
raise ``ValueError`` when the inputs are concrete. Inside :func:`jax.jit` or :func:`jax.vmap` the
traced values cannot be inspected: the checks on them are skipped, and a NaN score or a row with
one class only silently gives a meaningless number (NaN for an empty class). Check the data once
outside the traced function, e.g. by calling the metric eagerly on it.

AUC is computed in O(n log n) by sorting and binary search (``jnp.sort`` + ``jnp.searchsorted``);
the ``m+ x m-`` pair matrix is never formed. Pair counts are accumulated exactly in int32 blocks
and only the final division happens in the scores' floating dtype.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank._validation import check_binary_labels

__all__ = ["am", "auc", "f1", "mauc", "qm", "roc_curve"]

_INT32_MAX = 2**31 - 1


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _is_concrete(x) -> bool:
    """True when ``x`` holds values (not a tracer inside ``jit``/``vmap``/``grad``)."""
    return not isinstance(x, jax.core.Tracer)


def _default_float():
    """The default floating dtype: float64 when x64 is enabled, else float32."""
    return jax.dtypes.canonicalize_dtype(jnp.float64)


def _shape(x) -> tuple[int, ...]:
    return tuple(np.shape(x))


def _check_scores(scores, name: str) -> None:
    """Value checks on concrete scores: numeric, at least 1-D, non-empty, finite."""
    arr = np.asarray(scores)
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}.")
    if arr.ndim == 0:
        raise ValueError(f"{name} must have at least one axis (..., n), got a scalar.")
    if arr.shape[-1] == 0:
        raise ValueError(f"{name} is empty: shape {arr.shape}.")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        bad = int(np.sum(~np.isfinite(arr)))
        raise ValueError(
            f"{name} contains {bad} NaN or infinite value(s); metrics need finite scores."
        )


def _as_float_scores(scores) -> jax.Array:
    """Scores as a JAX floating array (integer and boolean scores go to the default float)."""
    s = jnp.asarray(scores)
    if not jnp.issubdtype(s.dtype, jnp.floating):
        s = s.astype(_default_float())
    return s


def _positive_mask(y, name: str = "y") -> jax.Array:
    """Boolean mask of the positive (rare) class; checks two-valuedness when ``y`` is concrete."""
    if _is_concrete(y):
        arr = np.asarray(y)
        if arr.ndim == 0:
            raise ValueError(f"{name} must have at least one axis (n,), got a scalar.")
        # a host array: jnp.asarray would run a staging program per shape and process
        return check_binary_labels(arr.reshape(-1), name=name).reshape(arr.shape)
    y = jnp.asarray(y)
    return y if y.dtype == jnp.bool_ else y == 1


def _host_or_jax(a, dtype=None):
    """``a`` for a jitted kernel: JAX arrays and tracers as JAX arrays, anything else as a numpy
    array (``jnp.asarray`` of a host array runs a staging program per shape, traced, lowered and
    loaded in every new process)."""
    if isinstance(a, jax.Array):
        return a if dtype is None else a.astype(dtype)
    return np.asarray(a, dtype)


def _check_lengths(named_shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    """Same length along the last axis and broadcastable leading axes; returns the full shape."""
    lengths = {k: s[-1] for k, s in named_shapes.items() if len(s) > 0}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{k} has {v}" for k, v in lengths.items())
        raise ValueError(f"length mismatch along the last (sample) axis: {shown}.")
    try:
        return tuple(np.broadcast_shapes(*named_shapes.values()))
    except ValueError as err:
        shown = ", ".join(f"{k} {s}" for k, s in named_shapes.items())
        raise ValueError(f"shapes do not broadcast: {shown}.") from err


def _check_both_classes(pos: jax.Array, keep: jax.Array | None, what: str) -> None:
    """Raise when a (concrete) row has no positive or no negative entry left."""
    if not (_is_concrete(pos) and (keep is None or _is_concrete(keep))):
        return
    p = np.asarray(pos)
    k = np.ones_like(p) if keep is None else np.asarray(keep)
    p, k = np.broadcast_arrays(p, k)
    n_pos = np.sum(p & k, axis=-1)
    n_neg = np.sum(~p & k, axis=-1)
    if np.any(n_pos == 0) or np.any(n_neg == 0):
        which = "positive" if np.any(n_pos == 0) else "negative"
        raise ValueError(
            f"one class only: some row of {what} has no {which} entry"
            + (" left after the `where` mask" if keep is not None else "")
            + "; the metric needs both classes."
        )


def _exact_count_sum(c: jax.Array, bound: int, dtype, limit: int = _INT32_MAX) -> jax.Array:
    """Sum int32 counts over the last axis exactly, returning ``dtype``.

    ``bound`` bounds the total of any ``k`` entries by ``k * bound`` (and the whole row by
    ``n * bound``). When the row total fits int32 it is summed in int32; otherwise the row is cut
    into blocks whose int32 sums cannot overflow and only the block sums are added in ``dtype``.
    """
    n = c.shape[-1]
    if n * bound <= limit:
        return jnp.sum(c, axis=-1, dtype=jnp.int32).astype(dtype)
    block = max(1, limit // max(bound, 1))
    n_blocks = -(-n // block)
    pad = [(0, 0)] * (c.ndim - 1) + [(0, n_blocks * block - n)]
    c = jnp.pad(c, pad).reshape(*c.shape[:-1], n_blocks, block)
    partial_sums = jnp.sum(c, axis=-1, dtype=jnp.int32)
    return jnp.sum(partial_sums.astype(dtype), axis=-1)


def _pair_credit_row(s: jax.Array, pos: jax.Array, neg: jax.Array, half: bool) -> jax.Array:
    """Per-entry credit in half units for ``i`` in ``pos`` (0 elsewhere); ``s`` is ``(n,)``.

    ``half=True``: ``#{j in neg: s_j < s_i} + #{j in neg: s_j <= s_i}`` (``2 [>] + [==]``, ties
    worth 1/2); ``half=False``: ``2 #{j in neg: s_j < s_i}`` (strict). The negatives are sorted
    once (other entries become ``+inf``, which no finite score reaches) and each entry finds its
    place by binary search. ``#{neg <= s_i}`` is read off the mirrored array ``a = -flip(sorted)``
    (ascending, ``n - m_-`` leading ``-inf``): ``#{a < -s_i} = (n - m_-) + #{neg > s_i}``, so
    ``#{neg <= s_i} = n - #{a < -s_i}``. Both searches go through one batched ``searchsorted``.
    """
    n = s.shape[-1]
    inf = jnp.asarray(jnp.inf, dtype=s.dtype)
    neg_sorted = jnp.sort(jnp.where(neg, s, inf))
    if half:
        table = jnp.stack([neg_sorted, -neg_sorted[::-1]])
        queries = jnp.stack([s, -s])
        found = jax.vmap(partial(jnp.searchsorted, side="left"))(table, queries)
        found = found.astype(jnp.int32)
        credit = found[0] + (n - found[1])
    else:
        credit = 2 * jnp.searchsorted(neg_sorted, s, side="left").astype(jnp.int32)
    return jnp.where(pos, credit, 0)


@partial(jax.jit, static_argnames=("half",))
def _twice_correct_pairs(s: jax.Array, pos: jax.Array, neg: jax.Array, half: bool) -> jax.Array:
    """``2 * sum_{i in pos, j in neg} ([s_i > s_j] + 0.5 [s_i == s_j])`` per row, in ``s.dtype``.

    ``s``, ``pos``, ``neg`` have the same shape ``(..., n)``; the result has shape ``(...)``.
    With ``half=False`` ties count 0.
    """
    batch, n = s.shape[:-1], s.shape[-1]
    rows = math.prod(batch)
    credit = jax.vmap(partial(_pair_credit_row, half=half))(
        s.reshape(rows, n), pos.reshape(rows, n), neg.reshape(rows, n)
    )
    # k positives can collect at most 2 * (#negatives) <= 2n half-units each.
    return _exact_count_sum(credit, 2 * n, s.dtype).reshape(batch)


def _count(mask: jax.Array, dtype) -> jax.Array:
    """Number of True entries along the last axis, counted in int32, returned in ``dtype``."""
    return jnp.sum(mask, axis=-1, dtype=jnp.int32).astype(dtype)


# --------------------------------------------------------------------------------------------
# AUC
# --------------------------------------------------------------------------------------------


def auc(y, scores, *, where=None) -> jax.Array:
    r"""Area under the ROC curve as the Mann-Whitney statistic, ties counting 1/2.

    RankRC eq. (2) of seed 000, with tied pairs credited one half:

    .. math::

      \mathrm{AUC} = \frac{1}{m_+ m_-} \sum_{i: y_i = +1} \sum_{j: y_j \neq +1}
        \Big( \mathbb{I}[s_i > s_j] + \tfrac12 \mathbb{I}[s_i = s_j] \Big),

    which equals the trapezoidal area under :func:`roc_curve` and
    :func:`sklearn.metrics.roc_auc_score`. Computed in :math:`O(n \log n)` per row: the negatives'
    scores are sorted once and each positive finds its rank with ``jnp.searchsorted``; the
    :math:`m_+ \times m_-` pair matrix is never formed. Counts are exact integers (int32 blocks);
    only the final division is done in the scores' floating dtype (the default float for integer
    scores).

    Args:
      y: two-valued labels broadcastable to ``scores``, usually shape ``(n,)``. The positive (rare)
        class is ``+1``, ``1`` or ``True``; any other value is negative (``{+1, -1}``,
        ``{1, 0}`` and booleans all work).
      scores: real scores of shape ``(..., n)``, higher meaning "more likely positive". They must
        be finite: NaN or inf raises ``ValueError`` for concrete inputs, but inside ``jit`` /
        ``vmap`` nothing is checked and the result is meaningless, so check outside.
      where: optional boolean mask broadcastable to ``scores``; entries with ``False`` are left out
        of both classes.

    Returns:
      AUC of shape ``scores.shape[:-1]`` (broadcast with the leading axes of ``y`` and ``where``),
      in the scores' floating dtype. A row with no positive or no negative gives NaN when traced
      (``ValueError`` when concrete).

    Raises:
      ValueError: for concrete inputs: lengths differ, ``y`` is not two-valued or has no positive
        label, a row has one class only, ``scores`` holds NaN/inf or is not numeric.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank import metrics
      >>> y = jnp.array([1, -1, 1, -1, -1])
      >>> float(metrics.auc(y, jnp.array([0.9, 0.1, 0.4, 0.4, 0.2])))
      0.9166666...
      >>> metrics.auc(y, jnp.ones((3, 5))).shape  # three score vectors, e.g. one per lambda
      (3,)
    """
    shapes = {"y": _shape(y), "scores": _shape(scores)}
    if where is not None:
        shapes["where"] = _shape(where)
    if len(shapes["scores"]) == 0:
        raise ValueError("scores must have at least one axis (..., n), got a scalar.")
    full = _check_lengths(shapes)
    if _is_concrete(scores):
        _check_scores(scores, "scores")
    pos = _positive_mask(y)
    keep = None
    if where is not None:
        if _is_concrete(where) and np.asarray(where).dtype != np.bool_:
            raise ValueError(f"where must be a boolean mask, got dtype {np.asarray(where).dtype}.")
        keep = _host_or_jax(where, jnp.bool_)
    _check_both_classes(pos, keep, "y")

    return _auc_kernel(_host_or_jax(scores), pos, keep, full)


@partial(jax.jit, static_argnames=("full",))
def _auc_kernel(scores, pos, keep, full):
    """The numerics of :func:`auc` as one compiled function (checks done by the caller)."""
    s = jnp.broadcast_to(_as_float_scores(scores), full)
    pos = jnp.broadcast_to(pos, full)
    neg = ~pos
    if keep is not None:
        keep = jnp.broadcast_to(keep, full)
        pos = pos & keep
        neg = neg & keep
    twice = _twice_correct_pairs(s, pos, neg, half=True)
    pairs = _count(pos, s.dtype) * _count(neg, s.dtype)
    return twice / (2 * pairs)


# --------------------------------------------------------------------------------------------
# ROC curve (numpy)
# --------------------------------------------------------------------------------------------


def roc_curve(y, scores) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""ROC curve: false and true positive rates at every distinct score threshold (numpy).

    For a threshold :math:`t`, entries with :math:`s_i \ge t` are predicted positive and

    .. math::

      \mathrm{TPR}(t) = \frac{\#\{i \in +: s_i \ge t\}}{m_+}, \qquad
      \mathrm{FPR}(t) = \frac{\#\{j \in -: s_j \ge t\}}{m_-}.

    Thresholds are the distinct scores in decreasing order preceded by ``+inf`` (where both
    rates are 0), as :func:`sklearn.metrics.roc_curve` with ``drop_intermediate=False``; the
    trapezoidal area under the curve equals :func:`auc`.

    Args:
      y: two-valued labels of shape ``(n,)``; the positive class is ``+1``, ``1`` or ``True``.
      scores: finite real scores of shape ``(n,)``.

    Returns:
      ``(fpr, tpr, thresholds)``: float64 arrays of shape ``(k + 1,)`` for ``k`` distinct scores;
      ``thresholds`` decreasing with ``thresholds[0] = inf``; ``fpr`` and ``tpr`` non-decreasing
      from 0 to 1.

    Raises:
      ValueError: lengths differ, ``y`` is not two-valued or has one class only, scores are not
        1-D or hold NaN/inf.

    Example:
      >>> from jaxrank import metrics
      >>> fpr, tpr, thr = metrics.roc_curve([1, -1, 1, -1], [0.8, 0.3, 0.3, 0.1])
      >>> fpr.tolist(), tpr.tolist(), thr.tolist()
      ([0.0, 0.0, 0.5, 1.0], [0.0, 0.5, 1.0, 1.0], [inf, 0.8, 0.3, 0.1])
    """
    _check_scores(scores, "scores")
    s = np.asarray(scores)
    if s.ndim != 1:
        raise ValueError(f"scores must be 1-D for roc_curve, got shape {s.shape}.")
    pos = check_binary_labels(y)
    if pos.shape[0] != s.shape[0]:
        raise ValueError(f"length mismatch: y has {pos.shape[0]} entries, scores has {s.shape[0]}.")
    s = s.astype(np.float64)
    order = np.argsort(-s, kind="stable")
    s_sorted, p_sorted = s[order], pos[order]
    last_of_run = np.r_[np.flatnonzero(np.diff(s_sorted)), s.shape[0] - 1]
    tps = np.cumsum(p_sorted, dtype=np.int64)[last_of_run]
    fps = (last_of_run + 1) - tps
    tps = np.r_[0, tps]
    fps = np.r_[0, fps]
    thresholds = np.r_[np.inf, s_sorted[last_of_run]]
    return fps / fps[-1], tps / tps[-1], thresholds


# --------------------------------------------------------------------------------------------
# multi-level AUC
# --------------------------------------------------------------------------------------------


def mauc(levels, scores, *, ties: Literal["strict", "half"] = "strict") -> jax.Array:
    r"""Multi-level AUC (MAUC) of seed 003: the fraction of correctly ranked cross-level pairs.

    Tayal, Coleman & Li (seed 003), Sec. 5, the display defining MAUC right after eq. (48), with
    ordinal levels :math:`r = 0, \dots, R` (higher = rarer / more important) and :math:`m_r`
    entries at level :math:`r`:

    .. math::

      \mathrm{MAUC} = \frac{1}{\sum_{r<s} m_r m_s} \sum_{r=1}^{R} \sum_{i: y_i = r}
        \sum_{j: y_j < y_i} \mathbb{I}[s_i > s_j].

    Every pair from two different levels counts once, so this is the average over level pairs
    :math:`r < s` of the biclass AUC of level :math:`s` against level :math:`r`, weighted by
    :math:`m_r m_s` (not an unweighted mean over level pairs). The paper's indicator is strict,
    so tied cross-level pairs earn nothing (``ties="strict"``, the default); ``ties="half"``
    credits them 1/2, and then two levels give exactly :func:`auc`. It is the same loss
    structure as the multi-level RankRC objective, eqs. (47)-(48): "level r vs all lower levels".
    Computed from one sort per score vector plus a prefix count per level,
    :math:`O(n \log n + R\, n)`, without forming any pair matrix.

    Args:
      levels: integer ordinal labels of shape ``(n,)`` (any integers, or integral floats; only
        their order matters), at least two distinct values. Must be concrete (not traced): the
        number of levels fixes the computation.
      scores: finite real scores of shape ``(..., n)``; may be traced (``jit`` over the scores
        with ``levels`` closed over works).
      ties: ``"strict"`` (paper, ties count 0) or ``"half"`` (ties count 1/2).

    Returns:
      MAUC of shape ``scores.shape[:-1]`` in the scores' floating dtype.

    Raises:
      ValueError: lengths differ, ``levels`` is not 1-D, not integral, has NaN or fewer than two
        distinct values, ``scores`` holds NaN/inf, or ``ties`` is unknown.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank import metrics
      >>> levels = jnp.array([0, 0, 0, 1, 1, 2])
      >>> float(metrics.mauc(levels, jnp.array([0.1, 0.3, 0.2, 0.5, 0.25, 0.9])))
      0.9090909...
    """
    if ties not in ("strict", "half"):
        raise ValueError(f"ties must be 'strict' or 'half', got {ties!r}.")
    if not _is_concrete(levels):
        raise ValueError("levels must be concrete (not traced); close over them instead.")
    lv = np.asarray(levels)
    if lv.ndim != 1:
        raise ValueError(f"levels must be 1-D, got shape {lv.shape}.")
    if lv.dtype.kind not in "iuf":
        raise ValueError(f"levels must be integer ordinal labels, got dtype {lv.dtype}.")
    if lv.dtype.kind == "f":
        if not np.all(np.isfinite(lv)):
            raise ValueError("levels contain NaN or infinite values.")
        if not np.all(lv == np.round(lv)):
            raise ValueError("levels must be integer ordinal labels; got non-integral values.")
    if len(_shape(scores)) == 0:
        raise ValueError("scores must have at least one axis (..., n), got a scalar.")
    _check_lengths({"levels": lv.shape, "scores": _shape(scores)})
    if _is_concrete(scores):
        _check_scores(scores, "scores")
    uniq, index = np.unique(lv, return_inverse=True)
    if uniq.size < 2:
        raise ValueError(
            f"levels has one level only ({uniq[0]!r}); MAUC needs at least two ordinal levels."
        )
    index = jnp.asarray(index.reshape(lv.shape), dtype=jnp.int32)
    return _mauc_kernel(jnp.asarray(scores), index, n_levels=int(uniq.size), half=ties == "half")


@partial(jax.jit, static_argnames=("n_levels", "half"))
def _mauc_kernel(scores, index, n_levels, half):
    """Numerics of :func:`mauc`; ``index`` ``(n,)`` holds level ranks ``0 .. n_levels - 1``.

    One sort per row for all levels: with the scores sorted (level ranks as payload), entry ``i``'s
    tie group is ``[lo_i, hi_i)`` in sorted order (``lo_i = #{s < s_i}``, ``hi_i = #{s <= s_i}``,
    one batched binary search as in :func:`_pair_credit_row`). For each level ``r`` a prefix count
    ``cum`` of "level below r" in sorted order gives ``#{j below r: s_j < s_i} = cum[lo_i]`` and
    ``#{j below r: s_j <= s_i} = cum[hi_i]``. Cost ``O(n log n + R n)`` per row.
    """
    s = _as_float_scores(scores)
    batch, n = s.shape[:-1], s.shape[-1]
    dtype = s.dtype

    def row(srow):
        s_sorted, level_sorted = jax.lax.sort((srow, index), num_keys=1)
        table = jnp.stack([s_sorted, -s_sorted[::-1]])
        found = jax.vmap(partial(jnp.searchsorted, side="left"))(table, jnp.stack([srow, -srow]))
        found = found.astype(jnp.int32)
        lo, hi = found[0], n - found[1]

        def level(r, total):
            below = (level_sorted < r).astype(jnp.int32)
            cum = jnp.concatenate([jnp.zeros(1, jnp.int32), jnp.cumsum(below, dtype=jnp.int32)])
            credit = cum[lo] + cum[hi] if half else 2 * cum[lo]
            credit = jnp.where(index == r, credit, 0)
            return total + _exact_count_sum(credit, 2 * n, dtype)

        return jax.lax.fori_loop(1, n_levels, level, jnp.zeros((), dtype))

    total = jax.vmap(row)(s.reshape(math.prod(batch), n)).reshape(batch)
    pairs = jnp.zeros((), dtype)
    for r in range(1, n_levels):  # cheap scalar counts; unrolled
        pairs = pairs + _count(index == r, dtype) * _count(index < r, dtype)
    return total / (2 * pairs)


# --------------------------------------------------------------------------------------------
# hard-prediction metrics: AM, QM, F1
# --------------------------------------------------------------------------------------------


def _confusion_metric(y, pred, name: str) -> jax.Array:
    """Check ``y`` and ``pred``, then compute the hard-prediction metric ``name``."""
    shapes = {"y": _shape(y), "pred": _shape(pred)}
    if len(shapes["pred"]) == 0:
        raise ValueError(f"{name}: pred must have at least one axis (..., n), got a scalar.")
    full = _check_lengths(shapes)
    if _is_concrete(pred):
        _check_scores(pred, "pred")
        arr = np.asarray(pred)
        if arr.dtype.kind in "iu" and not np.all(np.isin(arr, (-1, 0, 1))):
            raise ValueError(
                "pred holds integers other than -1, 0, +1; pass hard predictions in {+1, -1}, "
                "{1, 0} or booleans, or real scores (thresholded at 0)."
            )
    pos = _positive_mask(y)
    _check_both_classes(pos, None, "y")
    tp, fn, tn, fp = _confusion_counts(pos, jnp.asarray(pred), full)
    return _from_counts(tp, fn, tn, fp, name)


@partial(jax.jit, static_argnames=("full",))
def _confusion_counts(pos, pred, full):
    """``(tp, fn, tn, fp)`` over the last axis: int32 counts returned in the float dtype."""
    dtype = pred.dtype if jnp.issubdtype(pred.dtype, jnp.floating) else _default_float()
    hat = jnp.broadcast_to(pred if pred.dtype == jnp.bool_ else pred > 0, full)
    pos = jnp.broadcast_to(pos, full)
    tp = _count(pos & hat, dtype)
    fn = _count(pos & ~hat, dtype)
    tn = _count(~pos & ~hat, dtype)
    fp = _count(~pos & hat, dtype)
    return tp, fn, tn, fp


@partial(jax.jit, static_argnames=("name",))
def _from_counts(tp, fn, tn, fp, name):
    """AM, QM or F1 from the confusion counts."""
    if name == "f1":
        denom = 2 * tp + fp + fn
        safe = jnp.where(denom > 0, denom, 1)
        return jnp.where(denom > 0, 2 * tp / safe, jnp.zeros_like(tp))
    tpr, tnr = tp / (tp + fn), tn / (tn + fp)
    if name == "am":
        return (tpr + tnr) / 2
    return 1 - jnp.sqrt(((1 - tpr) ** 2 + (1 - tnr) ** 2) / 2)


_PRED_DOC = """pred: predictions of shape ``(..., n)``: hard labels in ``{+1, -1}``, ``{1, 0}`` or
        booleans, or real scores; an entry is predicted positive iff ``pred > 0`` (or ``True``),
        so real scores are thresholded at 0 (a score of exactly 0 is negative)."""


def am(y, pred) -> jax.Array:
    r"""Arithmetic mean (AM) of the true positive and true negative rates (balanced accuracy).

    Seed 004 (DOPMID), Sec. 2.2, the AM measure of its ref. [23], which its AM loss eq. (8) is
    built on:

    .. math::

      \mathrm{AM} = \frac{\mathrm{TPR} + \mathrm{TNR}}{2}, \quad
      \mathrm{TPR} = \frac{TP}{m_+}, \quad \mathrm{TNR} = \frac{TN}{m_-}.

    (The seed's text lost its formulas in extraction; this is the standard definition the paper
    names in words, "the arithmetic mean of the true positive and true negative rates".) Equals
    :func:`sklearn.metrics.balanced_accuracy_score` for two classes.

    Args:
      y: two-valued labels broadcastable to ``pred``; positive class ``+1``, ``1`` or ``True``.
      {pred}

    Returns:
      AM of shape ``pred.shape[:-1]``, in ``pred``'s floating dtype (default float otherwise).

    Raises:
      ValueError: for concrete inputs: lengths differ, ``y`` not two-valued or one class only,
        ``pred`` holds NaN/inf or integers outside ``{-1, 0, 1}``.

    Example:
      >>> from jaxrank import metrics
      >>> float(metrics.am([1, 1, -1, -1, -1], [1, -1, -1, -1, 1]))
      0.5833333...
    """
    return _confusion_metric(y, pred, "am")


def qm(y, pred) -> jax.Array:
    r"""Quadratic-mean (QM) measure of the true positive and true negative rates.

    Seed 004 (DOPMID), Sec. 2.2, the QM measure of its ref. [24], which its QM loss eq. (9) is
    built on: one minus the quadratic mean (root mean square) of the two error rates,

    .. math::

      \mathrm{QM} = 1 - \sqrt{\frac{(1 - \mathrm{TPR})^2 + (1 - \mathrm{TNR})^2}{2}}.

    The seed's text lost its formulas in extraction; this is the QM of the imbalanced-learning
    literature it cites (e.g. Menon et al. 2013; Narasimhan et al. 2015 "Q-mean"), 1 for a
    perfect classifier and 0 when both rates are 0. By the power-mean inequality
    :math:`\mathrm{QM} \le \mathrm{AM}`, with equality iff TPR = TNR: QM punishes an unbalanced
    pair of rates more than AM.

    Args:
      y: two-valued labels broadcastable to ``pred``; positive class ``+1``, ``1`` or ``True``.
      {pred}

    Returns:
      QM of shape ``pred.shape[:-1]``, in ``pred``'s floating dtype (default float otherwise).

    Raises:
      ValueError: as :func:`am`.

    Example:
      >>> from jaxrank import metrics
      >>> float(metrics.qm([1, 1, -1, -1], [1, -1, -1, -1]))  # TPR = 1/2, TNR = 1
      0.64644...
    """
    return _confusion_metric(y, pred, "qm")


def f1(y, pred) -> jax.Array:
    r"""F1 score of the positive (rare) class: the harmonic mean of precision and recall.

    .. math::

      F_1 = \frac{2 P R}{P + R} = \frac{2\, TP}{2\, TP + FP + FN},
      \quad P = \frac{TP}{TP + FP}, \quad R = \frac{TP}{TP + FN},

    defined as 0 when undefined (no true positive, in particular no predicted positive), as
    :func:`sklearn.metrics.f1_score` with ``zero_division=0``. Seed 004 reports it next to AM and
    QM (Sec. 4, ref. [15]).

    Args:
      y: two-valued labels broadcastable to ``pred``; positive class ``+1``, ``1`` or ``True``.
      {pred}

    Returns:
      F1 of shape ``pred.shape[:-1]``, in ``pred``'s floating dtype (default float otherwise).

    Raises:
      ValueError: as :func:`am`.

    Example:
      >>> from jaxrank import metrics
      >>> float(metrics.f1([1, 1, -1, -1], [1, -1, 1, -1]))  # P = R = 1/2
      0.5
    """
    return _confusion_metric(y, pred, "f1")


for _fn in (am, qm, f1):
    _fn.__doc__ = _fn.__doc__.replace("{pred}", _PRED_DOC)
del _fn
