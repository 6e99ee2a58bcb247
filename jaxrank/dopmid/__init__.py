r"""DOPMID: the 1-slack structural SVM that optimises AM or QM directly (seed 004).

Seed 004 (Cheng, Yang, Zhang 2015) trains a classifier by the 1-slack structural SVM of Joachims
(2005) with the loss :math:`\Delta = 1 - \mathrm{AM}` (seed eq. 8) or :math:`1 - \mathrm{QM}`
(eq. 9) of a labelling :math:`\bar y` of the training rows (seed OP1; Joachims 2005 OP 2):

.. math::

  \min_{w,\ \xi \ge 0}\ \tfrac12 \|w\|^2 + C' \xi \quad\text{s.t.}\quad
  \forall \bar y:\ w^\top[\Psi(X, y) - \Psi(X, \bar y)] \ge \Delta(\bar y, y) - \xi,
  \qquad \Psi(X, \bar y) = \sum_i c_i\, \bar y_i\, \phi(x_i),

with :math:`\phi(x) = x` (the seed's linear setting), ``(x, b)`` with a bias feature, or a kernel
feature map, and :math:`C' = nC` on scikit-learn SVC's scale of C (``C_scale="svc"``, the
default). :func:`fit_dopmid` solves it by cutting planes (seed Algorithm 1) with OCAS's line
search (``jaxrank/dopmid/_loop.py``), each working-set QP by an interior-point method
(:func:`solve_qp`) and each most violated labelling exactly
(:func:`most_violated`), until the duality gap is at most
:math:`C'\varepsilon`. :class:`DOPMIDModel` predicts :math:`\operatorname{sign}(w^\top\phi(x))`
and is saved by :mod:`jaxrank.io`.

The formulation (reconstructed: the seed's text lost its formulas), the feature maps, the scale
of C, the bias, the certificate and status, and the measurements behind the defaults:
docs/design.md §11.

Example:
  >>> import jaxrank
  >>> from jaxrank.dopmid import fit_dopmid
  >>> X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
  >>> X = (X - X.mean(0)) / X.std(0)
  >>> model = fit_dopmid(X, y, 1.0, measure="qm")  # C = 1 on SVC's scale
  >>> float(jaxrank.metrics.qm(y, model.predict(X))) > 0.5  # training QM
  True
"""

from jaxrank.dopmid._fit import DOPMIDModel, fit_dopmid
from jaxrank.dopmid._loop import DOPMIDInfo
from jaxrank.dopmid._oracle import MostViolated, most_violated, structured_loss
from jaxrank.dopmid._qp import QPResult, solve_qp

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
