r"""DOPMID: the 1-slack structural SVM that optimises AM or QM directly (seed 004).

Seed 004 (*Direct Optimization of Performance Measure for Imbalanced Dataset*; Cheng, Yang,
Zhang, Math. Probl. Eng. 2015) trains a linear classifier by the 1-slack structural SVM of
Joachims (2005, *A Support Vector Method for Multivariate Performance Measures*, ICML) with a
loss built from the AM or the QM measure. The seed's text lost every formula in extraction; the
formulation below is reconstructed from Joachims (2005) and the 1-slack cutting-plane method of
Joachims, Finley & Yu (2009, *Cutting-plane training of structural SVMs*, MLJ 77), using what the
seed says in words. The seed's equation numbers are cited where its text names them.

**Joint feature map** (seed eq. 7, 21; Joachims 2005 Sec. 3). For a labelling
:math:`\bar y \in \{-1, +1\}^n` of the training rows :math:`x_1, \dots, x_n`,

.. math::

  \Psi(X, \bar y) = \sum_i c_i\, \bar y_i\, \phi(x_i), \qquad
  c_i \propto 1 \;(\texttt{feature\_map="sum"}) \quad\text{or}\quad
  c_i \propto 1 / n_{y_i} \;(\texttt{feature\_map="balanced"}, \text{the default}),

with :math:`\phi(x) = x` (linear, the seed's setting), :math:`(x, b)` with a constant bias
feature ``bias`` = b > 0, or a kernel feature map. ``"sum"`` is Joachims' map, the seed's
setting. ``"balanced"`` averages each class separately (:math:`n_+, n_-` rows); it is an
extension, not the seed's text, and the default since issue 17: measured on a 75/25 split
(standardised, C from 0.01 to 10), test AM of ``"balanced"`` / ``"sum"`` without a bias was
0.71 / 0.73-0.75 on satimage, 0.73-0.74 / 0.72-0.79 on yeast4, 0.57-0.77 / 0.63-0.73 on
abalone19 and 0.58-0.59 / 0.56-0.58 on ``make_rare_class(4000, 0.1, 0.75)``; with ``bias=1``
``"balanced"`` gave 0.74-0.75, 0.77-0.80, 0.69-0.74, 0.58-0.59 and ``"sum"`` 0.50 on all four
(see *Bias*). ``"balanced"`` is also the one whose C means what scikit-learn's does (*Scale of
C*). The constants :math:`c_i` are fixed by ``C_scale`` (below). The prediction
:math:`\arg\max_{\bar y} w^\top \Psi(X, \bar y)` is :math:`\bar y_i = \operatorname{sign}(w^\top
\phi(x_i))` for either map (``predict``).

**Loss** (seed eq. 8, 9). With :math:`FN(\bar y)` positives labelled :math:`-1` and
:math:`FP(\bar y)` negatives labelled :math:`+1`,

.. math::

  \Delta_{AM}(\bar y, y) = 1 - \mathrm{AM}(\bar y)
    = \tfrac12\Big(\frac{FN}{n_+} + \frac{FP}{n_-}\Big), \qquad
  \Delta_{QM}(\bar y, y) = 1 - \mathrm{QM}(\bar y)
    = \sqrt{\tfrac12\Big(\big(\tfrac{FN}{n_+}\big)^2 + \big(\tfrac{FP}{n_-}\big)^2\Big)},

AM and QM as in :func:`jaxrank.metrics.am` / :func:`jaxrank.metrics.qm`. Both vanish at
:math:`\bar y = y` and are positive elsewhere (the seed's conditions eq. 6). With this (standard)
QM, :math:`\Delta_{QM} \ge \Delta_{AM}` by the power-mean inequality; the seed's Lemma 1 states an
inequality between the two losses whose formulas were lost, so it cannot be checked here.

**1-slack QP** (seed OP1; Joachims 2005 OP 2):

.. math::

  \min_{w,\ \xi \ge 0}\ \tfrac12 \|w\|^2 + C \xi \quad\text{s.t.}\quad
  \forall \bar y:\ w^\top[\Psi(X, y) - \Psi(X, \bar y)] \ge \Delta(\bar y, y) - \xi .

Equivalently :math:`\min_w \tfrac12\|w\|^2 + C \max_{\bar y} H_w(\bar y)` with the violation
:math:`H_w(\bar y) = \Delta(\bar y, y) - w^\top g(\bar y)`,
:math:`g(\bar y) = \Psi(X, y) - \Psi(X, \bar y) = \sum_i u_i \phi(x_i)`,
:math:`u_i = c_i (y_i - \bar y_i) \in \{0, \pm 2 c_i\}` (:math:`H_w(y) = 0`).

**Cutting planes** (seed Algorithm 1; Joachims 2005 Alg. 1; JFY 2009 Alg. 4). Start with the
working set :math:`\mathcal W = \{y\}` (the plane :math:`g = 0, \Delta = 0`, i.e.
:math:`\xi \ge 0`) and :math:`w = 0`. Repeat: find the most violated labelling
:math:`\hat y = \arg\max_{\bar y} H_w(\bar y)` (seed OP2); with
:math:`\xi = \max_{\bar y \in \mathcal W} H_w(\bar y)`, stop if
:math:`H_w(\hat y) \le \xi + \varepsilon` (``tol``); otherwise add :math:`\hat y` to
:math:`\mathcal W` and re-solve the QP over :math:`\mathcal W` in its dual (C here is the
slack's weight, :math:`nC` on the default scale: *Scale of C* below)

.. math::

  \max_{\alpha \ge 0,\ \sum_c \alpha_c = C}\ \sum_c \alpha_c \Delta_c
    - \tfrac12 \sum_{c, c'} \alpha_c \alpha_{c'} G_{cc'}, \qquad
  G_{cc'} = g_c^\top g_{c'} = u_c^\top K u_{c'}, \qquad w = \sum_c \alpha_c g_c,

a QP over a simplex of size :math:`|\mathcal W|` (:func:`solve_qp`). At the stop,
:math:`\tfrac12\|w\|^2 + C\max_{\bar y} H_w(\bar y)` is within :math:`C\varepsilon` of the
optimum (the duality gap ``info.gap``; *Certificate and status* below). JFY (2009) bound the
number of iterations by :math:`O(C R^2 / \varepsilon)`, :math:`R = \max \|g(\bar y)\|`. Planes whose
multiplier stayed 0 for ``prune_after`` consecutive QPs are dropped (common practice in 1-slack
solvers; not in the seed): removing a plane with :math:`\alpha_c = 0` leaves the current QP
solution optimal, so the dual still increases at every iteration and the bound still holds.

**Most violated labelling.** :math:`\Delta` depends on :math:`\bar y` only through
:math:`(FN, FP)`, and :math:`-w^\top g(\bar y) = -2\sum_{i \in +, \bar y_i = -1} c_i s_i +
2\sum_{j \in -, \bar y_j = +1} c_j s_j` with scores :math:`s = w^\top\phi(x)`. For a given
:math:`(FN, FP) = (k, l)` the best labelling therefore flips the :math:`k` lowest-scored
positives and the :math:`l` highest-scored negatives (Joachims 2005, Alg. 2; exchange argument).

- AM (seed Sec. 3.3.1): :math:`\Delta_{AM}` is linear in :math:`(k, l)`, so :math:`H` splits
  over rows: flip positive :math:`i` iff :math:`\tfrac1{2n_+} - 2 c_i s_i > 0` and negative
  :math:`j` iff :math:`\tfrac1{2n_-} + 2 c_j s_j > 0` — the seed's sorting argument
  (Hardy-Littlewood-Pólya) reduced to thresholds, exact, :math:`O(n)`.
- QM (seed Sec. 3.3.2, Algorithm 2): the square root couples :math:`k` and :math:`l`. The seed's
  "greedy" search starts from the perfect labelling :math:`\bar y = y`, flips positives one at a
  time in increasing score order and, for each number :math:`k` of flipped positives, negatives
  one at a time in decreasing score order, keeping the best :math:`H`. Every :math:`(k, l)` is
  visited, so by the exchange argument the search is **exact** (tests check it against all
  :math:`2^n` labellings), in :math:`O(n \log n + n_+ n_-)` as the seed states: one sort, prefix
  sums of the sorted scores, and a :math:`(n_+ + 1) \times (n_- + 1)` table evaluated in blocks of
  about :math:`2^{20}` entries.

**Bias.** The seed fits :math:`w` without a bias ("it can be incorporated in a straightforward
way"); ``bias=b > 0`` appends a constant feature :math:`b` (regularised, like SVM-perf's ``-b``
and :class:`sklearn.svm.LinearSVC`). Caution with ``feature_map="sum"``: for AM it is an
*unweighted* hinge with class-dependent margins (*Scale of C*), and on strongly imbalanced data
whose rare class is not linearly separable its minimiser with a bias puts every row in the
majority class (test AM = 1/2 on satimage, yeast4, abalone19 and ``make_rare_class`` for every
C tried; a warning says so); without a bias the decision boundary passes through the origin and
the model is useful on standardised data. ``"balanced"`` weights the classes equally and works
with or without a bias.

**Scale of C** (``C_scale``). With ``C_scale="svc"`` (the default) the weights are
:math:`c_i = 1/(2n)` (``"sum"``) or :math:`c_i = 1/(4 n_{y_i})` (``"balanced"``) and the slack is
weighted by :math:`nC`:

.. math::

  \min_w \tfrac12\|w\|^2 + nC \max_{\bar y} H_w(\bar y).

For AM, :math:`\max_{\bar y} H_w` splits over rows (*Most violated labelling*) and this is
exactly scikit-learn's linear SVC objective :math:`\tfrac12\|w\|^2 + C\sum_i \kappa_i
\max(0, m_i - y_i w^\top\phi(x_i))`, a **sum** over samples times C: ``"balanced"`` gives
``class_weight="balanced"`` (:math:`\kappa_i = n/(2n_{y_i})`, margin :math:`m_i = 1`);
``"sum"`` an unweighted hinge (:math:`\kappa_i = 1`) with class-dependent margins
:math:`m_i = n/(2n_{y_i})` (1 for balanced classes). So C means the same at every n and is
useful from about 0.01 to 100 on standardised rows, like SVC's; QM has no row-wise form but the
same scale. ``C_scale="paper"`` takes the seed's constants, :math:`c_i = 1` (``"sum"``) or
:math:`1/n_{y_i}` (``"balanced"``), with C on :math:`\xi` itself: the same problem as ``"svc"``
with :math:`C_{svc} = 4n\,C_{paper}` (``"sum"``) or :math:`16 C_{paper}/n` (``"balanced"``),
its :math:`w` being :math:`\kappa w_{svc}` with :math:`\kappa = 1/(2n)` or :math:`1/4` and its
objective :math:`\kappa^2` times; it is solved in the ``"svc"`` form and converted (its
:math:`\|\Psi\| \propto n` made the working-set QP fail in float32: issue 17, where C = 1 to
100 returned :math:`w = 0` labelled CONVERGED). The seed's exact setting is
``feature_map="sum", C_scale="paper"``.

**Certificate and status.** ``tol`` = :math:`\varepsilon` is on the loss scale
(:math:`\Delta \in [0, 1]`). With :math:`\bar\xi = \sum_c (\alpha_c / C')\, H_w(\bar y_c)`
(:math:`C' = nC` the slack's weight, :math:`\sum_c \alpha_c = C'`), the primal value
:math:`P = \tfrac12\|w\|^2 + C' \max_{\bar y} H_w` and the dual value
:math:`D = \tfrac12\|w\|^2 + C'\bar\xi = \sum_c \alpha_c \Delta_c - \tfrac12\|w\|^2` (a lower
bound on the optimum for any feasible :math:`\alpha`) differ by
:math:`P - D = C'(\max_{\bar y} H_w - \bar\xi)`. ``CONVERGED`` means
:math:`P - D \le C'\varepsilon`, computed from that difference of two :math:`O(1)` numbers
(``info.gap``): the returned :math:`w` is within :math:`C'\varepsilon` of the optimum, i.e.
within :math:`\varepsilon` relative to :math:`P(0) = C'`. The seed's rule
:math:`H_w(\hat y) \le \xi + \varepsilon` (:math:`\xi` the working set's largest violation)
is the same when the working-set QP is solved exactly; when the most violated labelling is
already in the working set but the gap is still open, the QP could not be solved accurately
enough in the dtype: status ``PRECISION`` and a warning. A model whose training scores are all
equal (:math:`w = 0`, or a constant classifier) is refused with a ``ValueError``; one that puts
every training row in one class (training AM = 1/2) warns.

The QP (:func:`solve_qp`) is solved by a primal-dual interior-point method (Mehrotra
predictor-corrector) in ``lax.while_loop``, followed by an active-set polish: the KKT system on
the estimated support is solved exactly; of the two points the one with the smaller
Frank-Wolfe gap (a certified bound on its suboptimality, :math:`\max_c \xi_c -
\sum_c (\alpha_c/C')\,\xi_c` in the plane violations :math:`\xi_c`) is kept, which gives the
solution to rounding (tests compare with scipy and with enumeration of supports). The QP is
scaled so that its multipliers are O(1) whether or not C binds (:func:`solve_qp`).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import kernels as _kernels
from jaxrank._validation import (
    check_binary_labels,
    check_cast,
    check_positive,
    check_X,
    check_X_y,
)
from jaxrank.fit import ConvergenceWarning, _choose_dtype
from jaxrank.solver import Status

__all__ = [
    "DOPMIDInfo",
    "DOPMIDModel",
    "MostViolated",
    "QPResult",
    "fit_dopmid",
    "most_violated",
    "solve_qp",
    "structured_loss",
]

_HI = jax.lax.Precision.HIGHEST
_MEASURES = ("am", "qm")
_FEATURE_MAPS = ("sum", "balanced")
_SCALES = ("svc", "paper")
# Entries of the (n+ + 1) x (n- + 1) QM search table evaluated per block.
_QM_BLOCK = 2**20
# Working-set buffers are powers of two of at least _MIN_PLANES slots (one compilation of the
# loop per size); a fit starts with _INITIAL_PLANES slots.
_MIN_PLANES = 64
_INITIAL_PLANES = 64


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


def _check_measure(measure) -> str:
    if measure not in _MEASURES:
        raise ValueError(f"measure must be 'am' or 'qm', got {measure!r}.")
    return measure


def _check_feature_map(feature_map) -> str:
    if feature_map not in _FEATURE_MAPS:
        raise ValueError(f"feature_map must be 'sum' or 'balanced', got {feature_map!r}.")
    return feature_map


def structured_loss(y, ybar, *, measure: str = "am") -> jax.Array:
    r"""The DOPMID loss :math:`\Delta(\bar y, y)`: ``1 − AM(ȳ)`` or ``1 − QM(ȳ)``.

    Seed 004 eq. (8) (AM) and eq. (9) (QM), reconstructed as in the module notes.

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
    measure = _check_measure(measure)
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
    """

    labels: jax.Array
    violation: jax.Array
    loss: jax.Array


def _check_scale(C_scale) -> str:
    if C_scale not in _SCALES:
        raise ValueError(f"C_scale must be 'svc' or 'paper', got {C_scale!r}.")
    return C_scale


def _class_weights(feature_map: str, C_scale: str, n_pos: int, n_neg: int) -> tuple[float, float]:
    """``(c_+, c_-)``: the per-row weights of Ψ for each class (module notes, *Scale of C*)."""
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
    ``P(k) + N(l) + Δ(k, l)`` is scanned in blocks of rows ``k`` of about ``_QM_BLOCK``
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
    rows = max(1, min(n + 1, _QM_BLOCK // (n + 1)))
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


def _most_violated(s, pos, n_pos, n_neg, cp, cn, measure: str, method: str):
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
    flip, _, loss, viol = _most_violated(s, pos, n_pos, n_neg, cp, cn, measure, method)
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
    ``(FN, FP)`` pair, exact, :math:`O(n \log n + n_+ n_-)`); see the module notes.

    Args:
      scores: ``(n,)`` finite scores ``s_i = w·φ(x_i)``.
      y: ``(n,)`` two-valued labels (positive ``+1``, ``1`` or ``True``).
      measure: ``"am"`` or ``"qm"``.
      feature_map: ``"balanced"`` (``c_i ∝ 1 / n_{y_i}``) or ``"sum"`` (``c_i ∝ 1``).
      C_scale: ``"svc"`` (``c_i = 1/(4 n_{y_i})`` or ``1/(2n)``, as :func:`fit_dopmid` by
        default) or ``"paper"`` (``c_i = 1/n_{y_i}`` or ``1``); module notes, *Scale of C*.
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
    measure = _check_measure(measure)
    feature_map = _check_feature_map(feature_map)
    C_scale = _check_scale(C_scale)
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
    cp, cn = _class_weights(feature_map, C_scale, n_pos, n_neg)
    labels, viol, loss = _most_violated_jit(
        s,
        jnp.asarray(pos),
        jnp.asarray(cp, s.dtype),
        jnp.asarray(cn, s.dtype),
        measure=measure,
        method=method,
    )
    return MostViolated(labels, viol, loss)


# --------------------------------------------------------------------------------------------
# the working-set QP
# --------------------------------------------------------------------------------------------


class QPResult(NamedTuple):
    """Solution of the working-set dual QP (see :func:`solve_qp`).

    Attributes:
      alpha: ``(K,)`` multipliers, ``α ≥ 0``, ``Σ α = C`` (0 on entries outside ``mask``).
      dual: the dual value ``Σ α_c Δ_c − ½ αᵀGα`` (= the primal value of the working-set QP).
      iterations: interior-point iterations.
      converged: the interior-point residuals reached the tolerance.
      polished: the active-set polish was accepted (the solution is exact to rounding).
    """

    alpha: jax.Array
    dual: jax.Array
    iterations: jax.Array
    converged: jax.Array
    polished: jax.Array


def _dot(a, b):
    """Matrix / vector product at full precision (no TF32 on GPUs)."""
    return jnp.matmul(a, b, precision=_HI)


def _max_step(v, dv):
    """Largest ``t ≤ 1`` with ``v + t dv ≥ 0`` (``v > 0``)."""
    neg = dv < 0
    ratio = jnp.where(neg, -v / jnp.where(neg, dv, -jnp.ones_like(dv)), jnp.inf)
    return jnp.minimum(jnp.min(ratio), 1.0)


def _qp(G, delta, C, live, max_iter: int):
    """Interior point + polish for ``max Δᵀα − ½αᵀGα`` over ``α ≥ 0, Σα = C`` (``live`` only).

    Returns ``(QPResult, active)`` with ``active`` the planes in the solution's support.

    Solved in scaled variables ``α = sγ``, ``s = min(C, Δ_max / G_max)``: as
    ``min ½γᵀQγ − bᵀγ`` over ``γ ≥ 0, Σγ = T = C/s ≥ 1`` with ``Q = sG/N``, ``b = Δ/N`` and
    ``N = max(s G_max, Δ_max)``, so that ``max |Q|, max |b| ≤ 1`` with one of them 1. Without
    ``s``, a large ``C G`` (large C, or the ``"paper"`` scale's ``||Ψ|| ∝ n``) shrinks the
    planes' share of the simplex below the interior point's absolute tolerance and the QP
    returns ``α ≈ (C, 0, …)``, i.e. ``w ≈ 0`` (issue 17); with it the multipliers of the real
    planes are O(1) and the plane of ``ȳ = y`` (``g = 0``) takes up the rest of the mass.

    Entries outside ``live`` are padding: they get ``Q_ii = 1, b_i = −1`` and no share of the
    simplex, a decoupled problem whose solution is 0, so one compiled solver serves every
    working-set size up to ``K``.
    """
    dt = G.dtype
    K = G.shape[0]
    eps = jnp.finfo(dt).eps
    fw_tol = 100 * eps  # on the Frank-Wolfe gap relative to T (fw_gap below)
    livef = live.astype(dt)
    both = live[:, None] & live[None, :]
    g_max = jnp.max(jnp.where(live, jnp.abs(jnp.diag(G)), 0))  # = max |G_cc'| (G is PSD)
    d_max = jnp.max(jnp.where(live, jnp.abs(delta), 0))
    ratio = d_max / jnp.where(g_max > 0, g_max, 1)
    s = jnp.where((g_max > 0) & (d_max > 0), jnp.minimum(C, ratio), C)
    T = C / s
    norm = jnp.maximum(s * g_max, d_max)
    norm = jnp.where(norm > 0, norm, 1)
    Q = jnp.where(both, (s / norm) * G, 0) + jnp.diag(1 - livef)
    b = jnp.where(live, delta / norm, -1)
    m = livef
    eye = jnp.eye(K, dtype=dt)
    jitter = 10 * eps * (1 + jnp.max(jnp.abs(jnp.diag(Q))))

    def residuals(beta, z, nu):
        rd = _dot(Q, beta) - b - nu * m - z
        rp = _dot(m, beta) - T
        mu = _dot(beta, z) / K
        return rd, rp, mu

    def feasible(v):
        """``v`` clipped to ``≥ 0`` and rescaled to the mass ``T``: a point of the simplex."""
        v = jnp.where(live & jnp.isfinite(v), jnp.maximum(v, 0), 0)
        return T * v / jnp.maximum(_dot(m, v), jnp.finfo(dt).tiny)

    def fw_gap(v):
        """Frank-Wolfe gap over ``T`` of a feasible ``v``: ``Σ_c v_c (∇_c − min ∇)/T``, an upper
        bound on ``(f(v) − f*)/T``. ``−∇ = b − Qv`` are the planes' violations ξ_c (scaled),
        so this is ``max_c ξ_c − Σ_c (v_c/T) ξ_c``: exactly what the cutting-plane certificate
        needs (the slack against the multiplier-weighted slack), a sum of terms ≥ 0."""
        grad = _dot(Q, v) - b
        low = jnp.min(jnp.where(live, grad, jnp.inf))
        return _dot(v, jnp.where(live, grad - low, 0)) / T

    def body(state):
        beta, z, nu, it, _, best, best_z, best_fw, stall = state
        rd, rp, mu = residuals(beta, z, nu)
        chol = jnp.linalg.cholesky(Q + jnp.diag(z / beta) + jitter * eye)

        def solve(r):
            return jax.scipy.linalg.cho_solve((chol, True), r)

        Mm = solve(m)
        mMm = _dot(m, Mm)

        def direction(rc):
            Mr = solve(-rd + rc / beta)
            dnu = (-rp - _dot(m, Mr)) / mMm
            db = Mr + Mm * dnu
            dz = (rc - z * db) / beta
            return db, dnu, dz

        db, _, dz = direction(-beta * z)
        t = jnp.minimum(_max_step(beta, db), _max_step(z, dz))
        mu_aff = _dot(beta + t * db, z + t * dz) / K
        sigma = (mu_aff / mu) ** 3
        db, dnu, dz = direction(-beta * z - db * dz + sigma * mu)
        t = 0.99 * jnp.minimum(_max_step(beta, db), _max_step(z, dz))
        beta, z, nu = beta + t * db, z + t * dz, nu + t * dnu
        bad = ~(jnp.all(jnp.isfinite(beta)) & jnp.all(jnp.isfinite(z)) & jnp.isfinite(nu))
        fw = jnp.where(bad, jnp.inf, fw_gap(feasible(beta)))
        better = fw < best_fw
        return (
            beta,
            z,
            nu,
            it + 1,
            bad,
            jnp.where(better, feasible(beta), best),
            jnp.where(better, z, best_z),
            jnp.where(better, fw, best_fw),
            jnp.where(better, 0, stall + 1),
        )

    def cond(state):
        *_, it, bad, _, _, best_fw, stall = state
        # the certified gap stopped shrinking for 8 iterations: the rounding floor of the dtype
        return (it < max_iter) & ~bad & (best_fw > fw_tol) & (stall < 8)

    k = jnp.sum(m)
    beta0 = jnp.where(live, T / k, 1).astype(dt)
    state = (
        beta0,
        jnp.ones(K, dt),
        jnp.zeros((), dt),
        jnp.zeros((), jnp.int32),
        jnp.zeros((), bool),
        feasible(beta0),
        jnp.ones(K, dt),
        fw_gap(feasible(beta0)),
        jnp.zeros((), jnp.int32),
    )
    *_, iters, _, beta_ip, z_ip, fw_ip, _ = jax.lax.while_loop(cond, body, state)

    # Polish (primal-dual active set, started from the interior point's support guess by strict
    # complementarity): on a support S solve the KKT system of the face
    #   Q_SS β_S − ν 1 = b_S,  1ᵀβ_S = T,  β_i = 0 off S
    # by proximal-point steps  (Q_SS + δI) β⁺ − ν⁺ 1 = b_S + δ β  anchored at the interior point:
    # Q_SS is often singular (more planes than features), and the anchored steps converge to the
    # face's solution nearest the interior point instead of amplifying the null space. Then
    # S ← {i ∈ S: β_i > 0} ∪ {i ∉ S: z_i < 0} until the KKT conditions hold.
    ptol = 1e4 * eps
    prox = 0.1 * jnp.sqrt(eps)

    def face(S, beta_start):
        Sf = S.astype(dt)
        Qs = jnp.where(S[:, None] & S[None, :], Q, 0) + jnp.diag(prox * Sf + (1 - Sf))
        chol = jnp.linalg.cholesky(Qs)

        def solve(r):
            return jax.scipy.linalg.cho_solve((chol, True), r)

        y1 = solve(Sf)
        s1 = _dot(Sf, y1)

        # In residual form, so that the accuracy is set by the residual, not by cond(Q_SS + δI).
        def step(_, carry):
            beta, nu = carry
            dx = solve(jnp.where(S, b + nu - _dot(Q, beta), 0))
            dnu = (T - _dot(Sf, beta) - _dot(Sf, dx)) / s1
            return jnp.where(S, beta + dx + dnu * y1, 0), nu + dnu

        beta0 = jnp.where(S, beta_start, 0)
        nu0 = _dot(Sf, _dot(Q, beta0) - b) / jnp.maximum(jnp.sum(Sf), 1)
        beta, nu = jax.lax.fori_loop(0, 12, step, (beta0, nu0))
        Qb = _dot(Q, beta)
        z = Qb - b - nu
        # Qβ carries a rounding error relative to its own size, which grows with the mass T
        # when C binds (every plane then holds O(T) of it)
        ztol = ptol * (1 + jnp.max(jnp.where(live, jnp.abs(Qb), 0)))
        ok = (
            jnp.all(jnp.isfinite(beta))
            & jnp.isfinite(nu)
            & jnp.all(jnp.where(S, beta >= -ptol * T, True))
            & jnp.all(jnp.where(live & ~S, z >= -ztol, True))
            & jnp.all(jnp.where(S, jnp.abs(z) <= ztol, True))
        )
        return beta, z, ok

    def round_(carry):
        S, beta, _, _, r = carry
        beta, z, ok = face(S, beta)
        S_next = jnp.where(ok, S, live & jnp.where(S, beta > 0, z < 0))
        return S_next, beta, z, ok, r + 1

    S0 = live & (beta_ip > z_ip)
    carry = (S0, beta_ip, jnp.zeros(K, dt), jnp.zeros((), bool), jnp.zeros((), jnp.int32))
    S, beta, _, polish_ok, _ = jax.lax.while_loop(
        lambda c: ~c[3] & (c[4] < 4) & jnp.any(c[0]), round_, carry
    )
    beta_pol = feasible(jnp.where(S, beta, 0))
    fw_pol = fw_gap(beta_pol)
    # Keep whichever point has the smaller certified gap; a polish that met the KKT conditions
    # is the exact face solution (exact zeros off the support), so it is preferred while its
    # gap is at the rounding level (the interior point's can be smaller still: its multipliers
    # off the support are tiny but positive).
    use_pol = (fw_pol <= fw_ip) | (polish_ok & (fw_pol <= 10 * fw_tol))
    beta = jnp.where(use_pol, beta_pol, beta_ip)
    fw = jnp.minimum(fw_pol, fw_ip)
    # Which planes carry weight: the polished support, else strict complementarity.
    active = live & jnp.where(use_pol, beta_pol > 0, beta_ip > z_ip)
    alpha = jnp.where(live, s * beta, 0)
    Galpha = _dot(jnp.where(both, G, 0), alpha)
    dual = _dot(jnp.where(live, delta, 0), alpha) - 0.5 * _dot(alpha, Galpha)
    converged = fw <= 1e3 * eps
    return QPResult(alpha, dual, iters, converged, use_pol & polish_ok), active


@partial(jax.jit, static_argnames=("max_iter",))
def _qp_jit(G, delta, C, live, *, max_iter):
    return _qp(G, delta, C, live, max_iter)[0]


def solve_qp(G, delta, C, *, mask=None, max_iter: int = 100) -> QPResult:
    r"""Solve the working-set dual of the 1-slack QP: a QP over a scaled simplex.

    .. math::

      \max_{\alpha}\ \Delta^\top \alpha - \tfrac12 \alpha^\top G \alpha
      \quad\text{s.t.}\quad \alpha \ge 0,\ \textstyle\sum_c \alpha_c = C

    (the dual of seed OP1 restricted to the working set; Joachims 2005, JFY 2009 eq. 9, with the
    plane :math:`g = 0` of :math:`\bar y = y` making :math:`\sum \alpha = C` an equality). ``G``
    may be singular (more planes than features). Solved in the variables :math:`\alpha / s`,
    :math:`s = \min(C, \Delta_{max}/G_{max})`, so that the multipliers are O(1) whether or not
    C binds; the result is the interior point or its polish, whichever has the smaller
    Frank-Wolfe gap :math:`\max_c \xi_c - \sum_c (\alpha_c/C)\xi_c`,
    :math:`\xi = \Delta - G\alpha` (``converged``: at most 1000 ε). Solved by a Mehrotra
    predictor-corrector interior-point method followed by an exact active-set polish (module
    notes); jit-able, ``C`` and the data dynamic.

    Args:
      G: ``(K, K)`` symmetric positive semi-definite Gram matrix of the planes.
      delta: ``(K,)`` losses :math:`\Delta_c`.
      C: the regularisation constant, > 0.
      mask: optional ``(K,)`` bool; entries with ``False`` are left out (``α = 0``).
      max_iter: cap on interior-point iterations (static).

    Returns:
      :class:`QPResult`.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.dopmid import solve_qp
      >>> r = solve_qp(jnp.array([[0.0, 0.0], [0.0, 4.0]]), jnp.array([0.0, 1.0]), 1.0)
      >>> [round(float(a), 6) for a in r.alpha]  # max α₁ − 2 α₁², α₀ + α₁ = 1
      [0.75, 0.25]
    """
    G = jnp.asarray(G)
    if not jnp.issubdtype(G.dtype, jnp.floating):
        G = G.astype(jax.dtypes.canonicalize_dtype(jnp.float64))
    if G.ndim != 2 or G.shape[0] != G.shape[1] or G.shape[0] == 0:
        raise ValueError(f"G must be a non-empty square matrix, got shape {G.shape}.")
    K = G.shape[0]
    delta = jnp.asarray(delta, G.dtype)
    if delta.shape != (K,):
        raise ValueError(f"delta must have shape ({K},), got {delta.shape}.")
    C = check_positive(C, "C")
    live = jnp.ones(K, bool) if mask is None else jnp.asarray(mask, bool)
    if live.shape != (K,) or not bool(jnp.any(live)):
        raise ValueError(f"mask must be a ({K},) boolean array with at least one True entry.")
    return _qp_jit(G, delta, jnp.asarray(C, G.dtype), live, max_iter=int(max_iter))


# --------------------------------------------------------------------------------------------
# the cutting-plane loop
# --------------------------------------------------------------------------------------------


class DOPMIDInfo(NamedTuple):
    """What happened in a DOPMID fit.

    Attributes:
      iterations: cutting-plane iterations (planes added; QPs solved).
      n_planes: cutting planes in the final working set (after pruning; the plane of
        ``ȳ = y`` is not counted).
      violation: ``max_ȳ H_w(ȳ)`` at the final ``w`` (the last most-violated constraint).
      slack: ``ξ = max_{ȳ ∈ W} H_w(ȳ)`` over the working set.
      objective: the primal value ``P = ½||w||² + C'·violation`` of the full 1-slack problem
        (``C' = nC`` on the ``"svc"`` scale: for AM this is scikit-learn's SVC objective;
        on the ``"paper"`` scale ``C' = C`` with the paper's ``w``).
      dual: ``D = Σ_c α_c Δ_c − ½||w||²`` at the final multipliers, a lower bound on the
        optimum.
      status: a :class:`~jaxrank.solver.Status` code. ``CONVERGED``: ``gap ≤ C'·tol``, i.e. the
        model is within ``C'·tol`` of the optimum; ``MAX_ITER``; ``PRECISION``: the most
        violated labelling is already in the working set but the gap is open (the working-set
        QP cannot be solved that accurately in this dtype), or the QP value stopped
        increasing; ``NONFINITE``.
      gap: ``P − D = C'(violation − Σ_c (α_c/C') H_w(ȳ_c))``, computed without cancellation.
    """

    iterations: jax.Array
    n_planes: jax.Array
    violation: jax.Array
    slack: jax.Array
    objective: jax.Array
    dual: jax.Array
    status: jax.Array
    gap: jax.Array


class _Config(NamedTuple):
    """Static (hashable) part of a fit: sizes and choices that fix the compiled loop."""

    measure: str
    method: str
    linear: bool
    qp_max_iter: int


class _State(NamedTuple):
    U: jax.Array  # (Kb, n) plane coefficients u_c = c ∘ (y − ȳ_c); row 0 is ȳ = y
    G: jax.Array  # (Kb, Kb) u_cᵀ K u_c'
    delta: jax.Array  # (Kb,)
    live: jax.Array  # (Kb,) bool
    idle: jax.Array  # (Kb,) int32: consecutive QPs with α_c = 0
    alpha: jax.Array  # (Kb,)
    dual: jax.Array
    slack: jax.Array
    mean_slack: jax.Array  # Σ_c (α_c/C) H_w(ȳ_c)
    violation: jax.Array
    iterations: jax.Array
    stall: jax.Array
    status: jax.Array
    resize: jax.Array  # bool: leave the loop to grow or shrink the buffer


def _apply(F, bias2, v, linear: bool):
    """``K̃ v`` with ``K̃ = ΦΦᵀ``: ``X (Xᵀ v) + b² Σv`` (linear) or ``(K + b²) v`` (kernel)."""
    if linear:
        return jnp.matmul(F, jnp.matmul(v, F, precision=_HI), precision=_HI) + bias2 * jnp.sum(v)
    return jnp.matmul(F, v, precision=_HI) + bias2 * jnp.sum(v)


@partial(jax.jit, static_argnames=("cfg",))
def _run(state, F, bias2, pos, cp, cn, C, tol, max_iter, prune_after, *, cfg):
    """Cutting-plane iterations in one working-set buffer until a stop or a resize."""
    dt = F.dtype
    Kb = state.G.shape[0]
    eps = jnp.finfo(dt).eps
    ids = jnp.arange(Kb, dtype=jnp.int32)
    n_pos = jnp.sum(pos, dtype=jnp.int32).astype(dt)
    n_neg = jnp.sum(~pos, dtype=jnp.int32).astype(dt)

    def body(st: _State) -> _State:
        beta = jnp.matmul(st.alpha, st.U, precision=_HI)
        s = _apply(F, bias2, beta, cfg.linear)
        _, u, loss, viol = _most_violated(s, pos, n_pos, n_neg, cp, cn, cfg.measure, cfg.method)
        Galpha = jnp.matmul(st.G, st.alpha, precision=_HI)
        xi = jnp.where(st.live, st.delta - Galpha, 0)  # H_w(ȳ_c) of each plane
        slack = jnp.max(jnp.where(st.live, xi, -jnp.inf))
        # Σ_c (α_c/C) H_w(ȳ_c) = (Σ α_c Δ_c − αᵀGα)/C: with it the duality gap of the full
        # problem is C·(viol − mean_slack), a difference of two O(1) numbers (no cancellation
        # of ½||w||² terms). It equals viol − slack only when the working-set QP is solved
        # exactly; the stopping rule of the seed (viol ≤ slack + ε) alone would accept an
        # inaccurate QP (issue 17: C = 100 in float32 stopped at w = 0, gap 100 against 0).
        mean_slack = jnp.dot(st.alpha, xi, precision=_HI) / C
        gap = viol - mean_slack
        n_live = jnp.sum(st.live, dtype=jnp.int32)
        status = jnp.select(
            [
                ~jnp.isfinite(viol) | ~jnp.isfinite(slack) | ~jnp.isfinite(gap),
                gap <= tol,
                # the most violated plane is already in the working set, yet the gap is open:
                # the QP over it is not solved to the accuracy the stopping rule needs
                viol <= slack + tol,
                st.iterations >= max_iter,
            ],
            [Status.NONFINITE, Status.CONVERGED, Status.PRECISION, Status.MAX_ITER],
            Status.RUNNING,
        ).astype(jnp.int32)
        full = n_live >= Kb
        st = st._replace(violation=viol, slack=slack, mean_slack=mean_slack, status=status)

        def add(st: _State) -> _State:
            slot = jnp.argmin(st.live).astype(jnp.int32)  # first free slot
            U = st.U.at[slot].set(u)
            live = st.live.at[slot].set(True)
            h = _apply(F, bias2, u, cfg.linear)
            row = jnp.where(live, jnp.matmul(U, h, precision=_HI), 0)
            G = st.G.at[slot, :].set(row).at[:, slot].set(row)
            delta = st.delta.at[slot].set(loss)
            qp, active = _qp(G, delta, C, live, cfg.qp_max_iter)
            # Adding a violated plane raises the QP value unless the QP lost its precision.
            gain = qp.dual - st.dual
            stall = jnp.where(gain <= 10 * eps * jnp.abs(qp.dual), st.stall + 1, 0)
            idle = jnp.where(active | ~live, 0, st.idle + 1)
            drop = live & (idle >= prune_after) & (ids != 0) & (ids != slot)
            live = live & ~drop
            keep = live[:, None] & live[None, :]
            status = jnp.where(
                ~jnp.all(jnp.isfinite(qp.alpha)),
                Status.NONFINITE,
                jnp.where(stall >= 5, Status.PRECISION, Status.RUNNING),
            ).astype(jnp.int32)
            n_live = jnp.sum(live, dtype=jnp.int32)
            # Shrink well below the size that _buffer_size would pick, so sizes do not bounce.
            shrink = (8 * n_live <= Kb) & (Kb > _MIN_PLANES)
            return st._replace(
                U=jnp.where(live[:, None], U, 0),
                G=jnp.where(keep, G, 0),
                delta=jnp.where(live, delta, 0),
                live=live,
                idle=jnp.where(live, idle, 0),
                alpha=jnp.where(live, qp.alpha, 0),
                dual=qp.dual,
                iterations=st.iterations + 1,
                stall=stall,
                status=status,
                resize=shrink,
            )

        go = (status == Status.RUNNING) & ~full
        st = jax.lax.cond(go, add, lambda st: st, st)
        return st._replace(resize=st.resize | ((status == Status.RUNNING) & full))

    def cond(st: _State):
        return (st.status == Status.RUNNING) & ~st.resize

    return jax.lax.while_loop(cond, body, state._replace(resize=jnp.zeros((), bool)))


def _initial_state(n: int, Kb: int, C: float, dt) -> _State:
    live = jnp.zeros(Kb, bool).at[0].set(True)
    zero = jnp.zeros((), dt)
    return _State(
        U=jnp.zeros((Kb, n), dt),
        G=jnp.zeros((Kb, Kb), dt),
        delta=jnp.zeros(Kb, dt),
        live=live,
        idle=jnp.zeros(Kb, jnp.int32),
        alpha=jnp.zeros(Kb, dt).at[0].set(C),
        dual=zero,
        slack=zero,
        mean_slack=zero,
        violation=zero,
        iterations=jnp.zeros((), jnp.int32),
        stall=jnp.zeros((), jnp.int32),
        status=jnp.asarray(Status.RUNNING, jnp.int32),
        resize=jnp.zeros((), bool),
    )


def _resized(st: _State, Kb: int) -> _State:
    """The live planes (in order, the plane of ``ȳ = y`` first) in a buffer of ``Kb`` slots."""
    idx = np.flatnonzero(np.asarray(st.live))
    k = idx.size
    j = jnp.asarray(idx)

    def vec(a):
        return jnp.zeros((Kb, *a.shape[1:]), a.dtype).at[:k].set(a[j])

    G = jnp.zeros((Kb, Kb), st.G.dtype).at[:k, :k].set(st.G[j][:, j])
    return st._replace(
        U=vec(st.U),
        G=G,
        delta=vec(st.delta),
        live=jnp.arange(Kb) < k,
        idle=vec(st.idle),
        alpha=vec(st.alpha),
    )


def _buffer_size(n_live: int) -> int:
    """Slots for ``n_live`` planes: a power of two, at least ``2 n_live`` and ``_MIN_PLANES``."""
    return max(_MIN_PLANES, 1 << math.ceil(math.log2(2 * max(n_live, 1))))


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

    def decision_function(self, X) -> jax.Array:
        """Scores ``f(x)`` of shape ``(n,)``; the structural prediction is their sign.

        Args:
          X: ``(n, d)`` rows, preprocessed as the training rows were.
        """
        X = check_X(X)
        d = self.coef.shape[0] if self.basis is None else self.basis.shape[1]
        if X.shape[1] != d:
            raise ValueError(f"X has {X.shape[1]} features, the model was fitted on {d}.")
        Xd = jnp.asarray(X, self.coef.dtype)
        if self.basis is None:
            f = jnp.matmul(Xd, self.coef, precision=_HI)
        else:
            f = _kernels.stream_matvec(self.kernel, Xd, self.basis, self.coef)
        return f + self.intercept

    def predict(self, X) -> jax.Array:
        """``argmax_ȳ w·Ψ(X, ȳ)``: ``+1`` where ``f(x) > 0``, else ``-1`` (int32, ``(n,)``)."""
        return jnp.where(self.decision_function(X) > 0, 1, -1).astype(jnp.int32)


def _check_int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}.")
    return int(value)


def _resolve(kernel, X):
    """``None`` for the explicit linear map, else a resolved kernel."""
    if kernel is None or kernel == "linear" or isinstance(kernel, _kernels.Linear):
        return None
    return _kernels.resolve_kernel(kernel, X)


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
    dtype=None,
    memory_budget: int | None = None,
) -> DOPMIDModel:
    r"""Fit DOPMID: the 1-slack structural SVM for AM or QM by cutting planes (seed 004).

    Solves (module notes; seed OP1 with the loss eq. 8 or 9, Joachims 2005 OP 2)

    .. math::

      \min_{w,\ \xi \ge 0}\ \tfrac12\|w\|^2 + nC\xi \quad\text{s.t.}\quad
      w^\top[\Psi(X, y) - \Psi(X, \bar y)] \ge \Delta(\bar y, y) - \xi \quad \forall \bar y,

    :math:`\Psi(X, \bar y) = \sum_i c_i \bar y_i \phi(x_i)` with :math:`c_i = 1/(4n_{y_i})`
    (``"balanced"``) or :math:`1/(2n)` (``"sum"``), by the cutting-plane algorithm (seed
    Algorithm 1) until the duality gap is at most :math:`nC\varepsilon` (``tol``). For AM this is
    the linear SVC :math:`\min_w \tfrac12\|w\|^2 + C\sum_i \kappa_i\max(0, m_i - y_i
    w^\top\phi(x_i))`, a sum over samples times C: ``class_weight="balanced"`` for
    ``"balanced"`` (:math:`\kappa_i = n/(2n_{y_i})`, :math:`m_i = 1`), unweighted with margins
    :math:`m_i = n/(2n_{y_i})` for ``"sum"`` (module notes, *Scale of C*).

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
        in the seed). See the module notes before combining ``b > 0`` with ``"sum"``.
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
    measure = _check_measure(measure)
    feature_map = _check_feature_map(feature_map)
    C_scale = _check_scale(C_scale)
    C = check_positive(C, "C")
    tol = check_positive(tol, "tol")
    if isinstance(bias, bool) or not np.isfinite(float(bias)) or float(bias) < 0:
        raise ValueError(f"bias must be a finite number >= 0, got {bias!r}.")
    bias = float(bias)
    max_iter = _check_int(max_iter, "max_iter", 1)
    qp_max_iter = _check_int(qp_max_iter, "qp_max_iter", 1)
    prune = 2**30 if prune_after is None else _check_int(prune_after, "prune_after", 1)
    dt = _choose_dtype(X, dtype)
    check_cast(X, dt)  # values whose squares overflow the dtype: a clear error, not inf scores
    kern = _resolve(kernel, X)
    n = X.shape[0]
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    # Solved on the "svc" scale whatever C_scale is: the "paper" problem is the same up to
    # w_paper = κ·w_svc and a factor κ² on its objective (module notes, *Scale of C*), and
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
    if kern is None:
        F = Xd
    else:
        _kernels.check_memory(n * n * dt.itemsize, memory_budget, f"the kernel matrix ({n} x {n})")
        F = _kernels.kernel_block(kern, Xd, Xd)
    cfg = _Config(
        measure=measure,
        method="threshold" if measure == "am" else "table",
        linear=kern is None,
        qp_max_iter=qp_max_iter,
    )
    cp, cn = _class_weights(feature_map, "svc", n_pos, n_neg)
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
    state = _initial_state(n, _INITIAL_PLANES, C_xi, dt)
    while True:
        state = _run(state, *args, cfg=cfg)
        if int(state.status) != Status.RUNNING:
            break
        state = _resized(state, _buffer_size(int(jnp.sum(state.live))))

    beta = jnp.matmul(state.alpha, state.U, precision=_HI)
    w2 = _dot(state.alpha, _dot(state.G, state.alpha))
    viol = jnp.maximum(state.violation, 0)
    gap = viol - state.mean_slack
    info = DOPMIDInfo(
        iterations=state.iterations,
        n_planes=jnp.sum(state.live, dtype=jnp.int32) - 1,
        violation=state.violation,
        slack=state.slack,
        objective=kappa**2 * (0.5 * w2 + C_xi * viol),
        dual=kappa**2 * (0.5 * w2 + C_xi * state.mean_slack),
        status=state.status,
        gap=kappa**2 * C_xi * gap,
    )
    _check_degenerate(_apply(F, args[1], beta, kern is None), info, feature_map, bias)
    _warn_status(info, tol, kappa**2 * C_xi, dt)
    beta = kappa * beta
    intercept = jnp.asarray(bias * bias, dt) * jnp.sum(beta)
    if kern is None:
        coef, basis = jnp.matmul(beta, Xd, precision=_HI), None
    else:
        coef, basis = beta, Xd
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


def _warn_status(info: DOPMIDInfo, tol: float, C_xi: float, dt) -> None:
    status = int(info.status)
    if status == Status.CONVERGED:
        return
    name = Status(status).name
    head = (
        f"DOPMID stopped with status {name} after {int(info.iterations)} cutting-plane "
        f"iterations: duality gap {float(info.gap):.3g} > C·tol = {C_xi * tol:.3g} (max "
        f"violation {float(info.violation):.3g}, working-set slack {float(info.slack):.3g}). "
    )
    if status == Status.MAX_ITER:
        fix = "Raise max_iter (or tol)."
    elif status == Status.PRECISION:
        fix = (
            f"The working-set QP cannot be solved to that accuracy in {np.dtype(dt).name}"
            + ("; fit in float64 (dtype=np.float64 with x64 on)" if dt != np.float64 else "")
            + " or raise tol."
        )
    else:
        fix = "Check the data (standardise it) and C."
    warnings.warn(head + fix, ConvergenceWarning, stacklevel=3)
