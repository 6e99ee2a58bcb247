"""MIBC: the moment-based imbalanced binary classifier (seed 002).

Leclère, Grave & El Ghaoui, *Probabilistic Approach to One-Class Support Vector Machine* (2016).
The large negative class is reduced to its mean ``x̄`` and covariance ``Σ``; the few positives are
kept as examples. The classifier ``wᵀx − b`` that classifies every positive correctly while
maximising the worst-case probability (over all distributions with those two moments) of
classifying a negative correctly is (eq. 1-3, via the Marshall-Olkin / Lanckriet lemma)::

    min_w  wᵀΣw   s.t.  b − x̄ᵀw ≥ 1,   x_iᵀw − b ≥ 0   (i ∈ I+)                    (3)

and, eliminating ``b = x̄ᵀw + 1`` (eq. 4; the paper prints "max", a typo for min)::

    min_w  wᵀΣw   s.t.  (x_i − x̄)ᵀw ≥ 1                                             (4)

The soft-margin version this module solves, MIBC proper (eq. 10; printed "max_{κ,w}", a typo for
``min_{w,ξ}``, with the implicit ``ξ ≥ 0``)::

    min_{w,ξ}  wᵀΣw + 1/(ν m+) Σ_i ξ_i   s.t.  (x_i − x̄)ᵀw ≥ 1 − ξ_i,  ξ_i ≥ 0      (10)

is a linear one-class SVM with margin fixed at 1 on the whitened positives
``x̂_i = W(x_i − x̄)``, ``WᵀW = Σ⁻¹`` (Sec. 2.2; the paper writes ``W = Σ^{-1/2}``; any ``W`` with
``WᵀW = Σ⁻¹`` gives the same inner products and distances, hence the same classifier). Its
Lagrange dual, derived here (``∂/∂w``: ``2Σw = Σ_i β_i z_i``; ``∂/∂ξ``: ``β_i ≤ C``), is a box
QP over the m+ positives only::

    max_β  1ᵀβ − ¼ βᵀQβ   s.t.  0 ≤ β ≤ C = 1/(ν m+),   Q_ij = k(x̂_i, x̂_j)          (D)
    w = ½ Σ⁻¹ Σ_i β_i (x_i − x̄),      f(x) = Σ_i (β_i/2) k(x̂_i, x̂) − 1

with ``k`` the linear kernel for eq. (10) and the kernels of the paper's Fig. 2 table for the
kernelised variants (Sec. 3.3). There is no equality constraint: eq. (10) has no free offset
(the margin is fixed at 1, the offset ``b = x̄ᵀw + 1`` comes from eq. 3). The decision function
``f(x) = wᵀ(x − x̄) − 1`` is ``wᵀx − b``: ``f ≥ 0`` classifies positive, and that threshold is the
one Remark 2's bound on the negative error refers to.

Covariance models of the negatives (``covariance=``):

- ``"full"``: ``Σ̂ = (1/m−) Σ_j (x_j − x̄)(x_j − x̄)ᵀ`` (Sec. 2.3, the biased estimate, so that
  Remark 1 applies), whitened by its Cholesky factor. Forms a ``d × d`` matrix.
- ``"diag"``: ``diag(Σ̂)``, for high-dimensional / sparse data (Sec. 4.2).
- ``"factor"``: ``D + FFᵀ`` of eq. (11) from the top ``k + 1`` singular triplets of the centred
  (and, footnote 1, standardised) negatives, computed by randomized subspace iteration with
  products by the data only; whitened by the Woodbury identity. Never forms a ``d × d`` matrix.

All three take the robust form ``Σ + ρI`` of eq. (7) (spectral-norm uncertainty ρ on Σ).
No ``m− × m−`` (or ``m × m``) matrix is ever formed. The QP is over the m+ positives: with a
dense ``m+ × m+`` Gram matrix for the kernels, and for the linear kernel with ``d < m+`` through
the ``m+ × d`` whitened positives only (Woodbury; :func:`solve_dual`).

Bounds on the negative error (attributes and methods of :class:`MIBCModel`), with
``v = wᵀΣ_m w``: Remark 2, ``P(f(x) ≥ 0) ≤ v/(1 + v)`` for any negative distribution with the
model's moments (``neg_error_bound``); Remark 3, ``1 − Φ(1/√v)`` if it is Gaussian
(``neg_error_bound_gaussian``); eq. (8), the bound under an uncertain mean
(:meth:`MIBCModel.robust_bound`); Remark 1, the same bound at the empirical moments of given
negatives bounds the fraction of them misclassified (:meth:`MIBCModel.chebyshev_bound`).

The sigmoid kernel of Fig. 2 is not offered: it is not positive semidefinite, so (D) would not
be a convex QP.
"""

from jaxrank.mibc._fit import MIBCModel, fit_mibc
from jaxrank.mibc._moments import NegativeMoments, default_rho, negative_moments
from jaxrank.mibc._qp import MIBCInfo, solve_dual

__all__ = [
    "MIBCInfo",
    "MIBCModel",
    "NegativeMoments",
    "default_rho",
    "fit_mibc",
    "negative_moments",
    "solve_dual",
]
