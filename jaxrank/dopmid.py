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

**Line search** (``line_search=True``, the default since issue 31; not in the seed). The plain
loop above zigzags at large C: its model :math:`w^c` is the working set's optimum, which jumps
between cutting planes far from the true optimum. OCAS (Franc & Sonnenburg 2009, *Optimized
cutting plane algorithm for large-scale risk minimization*, JMLR 10, Alg. 2) keeps the best
point :math:`w^b` instead, moved at every iteration to the minimum of the full objective on the
line towards :math:`w^c`, and cuts the next plane at :math:`0.9\,w^b + 0.1\,w^c` (at
:math:`w^c` when that plane adds too little); the working-set QP and the certificate (below,
with the model :math:`w = w^b`) are unchanged. Measured on satimage (4,826 rows, linear, AM,
float32; ``bench/dopmid_satimage.py``, RESULTS.md §9): from C = 0.01 to 100 it needs 11-99
planes and under 2 s a fit once compiled, every C ``CONVERGED``; the plain loop needs 36-700
planes and up to 64 s and ends ``PRECISION`` at C = 10 and 100 (before issue 31, from C = 3).
A linear model is held as :math:`w` itself, not as its expansion over the rows, which cancels
:math:`4\cdot 10^5`-fold at C = 100 (:mod:`jaxrank.dopmid_loop`).

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
within :math:`\varepsilon` relative to :math:`P(0) = C'`. (With the line search, :math:`P` is
at the model :math:`w^b` and :math:`D` at the QP's :math:`w^c = \sum_c \alpha_c g_c`:
:math:`P - D = C'(\max_{\bar y} H_{w^b} - \sum_c (\alpha_c/C')\Delta_c) + \tfrac12(\|w^b\|^2
+ \|w^c\|^2)`.) The seed's rule
:math:`H_w(\hat y) \le \xi + \varepsilon` (:math:`\xi` the working set's largest violation)
is the same when the working-set QP is solved exactly; when the most violated labelling is
already in the working set (with the line search: OCAS's plane adds less than
:math:`0.1\varepsilon` and the plain one at :math:`w^c` less than :math:`\varepsilon`, where an
exact QP guarantees more) but the gap is still open, the QP could not be solved accurately
enough in the dtype: status ``PRECISION`` and a warning. A
model whose training scores are all equal (:math:`w = 0`, or a constant classifier) is refused
with a ``ValueError``; one that puts every training row in one class (training AM = 1/2)
warns.

The QP (:func:`solve_qp`) is solved by a primal-dual interior-point method (Mehrotra
predictor-corrector) in ``lax.while_loop``, followed by an active-set polish: the KKT system on
the estimated support is solved exactly; of the two points the one with the smaller
Frank-Wolfe gap (a certified bound on its suboptimality, :math:`\max_c \xi_c -
\sum_c (\alpha_c/C')\,\xi_c` in the plane violations :math:`\xi_c`) is kept, which gives the
solution to rounding (tests compare with scipy and with enumeration of supports). The QP is
scaled so that its multipliers are O(1) whether or not C binds (:func:`solve_qp`).

**Saving.** :meth:`DOPMIDModel.save` writes a checksummed ``.npz`` (:mod:`jaxrank.io`) and
:func:`jaxrank.load` reads it back bit for bit. A loaded model is held to what a fit leaves:
one float dtype, a linear (``coef`` ``(d,)``) or kernel (a jaxrank kernel, a finite ``(n, d)``
``basis``, ``coef`` ``(n,)``) layout, ``C`` finite and > 0, status codes of a finished fit,
``n_planes ≤ iterations``, finite numbers unless the status is ``NONFINITE``, and (linear)
``½||coef||² ≤ info.objective``, which every fit satisfies (``objective = ½||w||² +
C'·violation``, ``violation ≥ 0``) and a file with ``coef`` of 1e38 does not.
"""

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
from jaxrank.dopmid_loop import (
    DOPMIDInfo,
    LoopConfig,
    buffer_size,
    initial_state,
    resized,
    run_loop,
)
from jaxrank.dopmid_oracle import (
    MostViolated,
    check_feature_map,
    check_measure,
    check_scale,
    class_weights,
    most_violated,
    structured_loss,
)
from jaxrank.dopmid_qp import QPResult, solve_qp
from jaxrank.model import ConvergenceWarning, score_input
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
        could not have produced (module notes, *Saving*).

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
      line_search: ``True`` (default): OCAS, the model moved by a line search on the full
        objective and planes cut beside it (module notes, *Line search*); ``False``: the plain
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
    if kern is None:  # Φ = [X, b]: the model is w itself (dopmid_loop notes)
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
    _warn_status(info, tol, kappa**2 * C_xi, dt)
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
