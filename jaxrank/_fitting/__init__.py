"""Shared fitting internals, below every fitter: the biclass row layout, the compiled solver
call, the dtype choice, the preconditioners and row-fitting (:func:`fit_rows`).

:func:`jaxrank.fit` and the other systems' fitters (greedy, L1, push, multi-level, stochastic,
MIBC, DOPMID) build on these; nothing here imports a fitter.
Data flow: ``X, y`` → validation → rows reordered as [positives; negatives] → kernel block
``K_{·R}`` (built once, in row chunks) → for each Newton step: scores ``f = K β`` (one product),
sorted windows (:mod:`jaxrank.pairwise`), gradient ``g_f @ K`` (one product) → truncated CG with
Hessian-vector products ``K v`` and ``h @ K`` reusing the windows → :class:`RankModel`.

A λ grid is solved by ``jax.vmap`` of the single-λ solver with the kernel block unbatched, so
each CG step is one matrix-matrix product for the whole grid (docs/design.md §4), or, with
``path="warm"``, as a ``lax.scan`` from large to small λ, each solve warm-started at the
previous solution (seed 000, footnote 2).

CG is preconditioned (``precondition="spectral"``, the default up to 2048 basis functions) by
a model of the Hessian itself::

    M(λ, c) = λ (K_RR + δI) + c G,   G = mean over pairs (i, j) of (k_i − k_j)(k_i − k_j)ᵀ

where ``k_i`` are rows of ``K_{·R}``: ``G`` is the data Hessian if every pair were on the
quadratic piece of ℓ (= ``C_+ + C_− + (μ_+ − μ_−)(μ_+ − μ_−)ᵀ``, within-class covariances of the
kernel features plus the mean difference), and ``c = ℓ''·(fraction of pairs on the quadratic
piece)`` is read off each Newton step's windows for free. ``G`` is formed once per fit (one
``Kᵀ K`` over at most 16384 rows per class, strided), and one generalized eigendecomposition
``G = (K_RR + δI)^{1/2} Q Λ Qᵀ (K_RR + δI)^{1/2}`` makes ``M(λ, c)⁻¹ = Pᵀ diag(1/(λ + cΛ)) P``
with ``P = Qᵀ L⁻¹`` available for every λ of a grid and every Newton step at the cost of two
small products. The trust region is then ``||s||_M``. Measured (m = 5000, ρ = 2 %, 16-λ grid,
float64): 60 Newton / 127 CG steps against 112 / 1433 with ``M = K_RR + δI``
(``"cholesky"``: the RKHS norm, eigenvalues of ``M⁻¹H`` bounded below by λ but spread by the
data term) — the smallest λ, which dominated, now needs 6 / 24 instead of 24 / 504. The paper's
diagonal preconditioner (seed 000, footnote 2) is ``"jacobi"``; ``"none"`` turns it off.

A float32 fit with the spectral preconditioner stops its float32 solve after
:data:`POLISH_AFTER` Newton steps; the λ still above the tolerance then are finished in float64
and rounded back to float32 in the Hessian model's metric (:func:`polish_float64`: small λ on
low-dimensional data, whose large coefficients make float32 scores too noisy to converge).
"""

# The modules below hold the code, one idea each: the options (_options), the preconditioners
# (_precondition), the compiled block fit (_block), the float64 polish (_polish) and row-fitting
# (_rows). A knob is set on the module that defines it, which every reader reads it from:
# _polish.POLISH_AFTER; _block.LOW_EFFORT_MAX_BYTES, STAGED_MIN_BYTES, SHARED_GRID_MAX_BYTES,
# SHARED_GRID_LAMS, DUAL_MIN_COLUMNS (the names here are copies).
from jaxrank._fitting._block import (
    DUAL_MIN_COLUMNS,
    LOW_EFFORT_MAX_BYTES,
    LOW_EFFORT_OPTIONS,
    SHARED_GRID_LAMS,
    SHARED_GRID_MAX_BYTES,
    STAGED_MIN_BYTES,
    fit_block,
    fit_block_low_effort,
    grid_stages,
    keep_transpose,
    low_effort_options,
    pad_square,
    prepare_basis,
    solve,
)
from jaxrank._fitting._options import (
    FIT_OPTIONS,
    FitOptions,
    check_fit_options,
    check_max_kernel_bytes,
    check_solver_options,
    choose_dtype,
)
from jaxrank._fitting._polish import (
    POLISH_AFTER,
    POLISH_GRAM_ROWS,
    POLISH_LOW_EFFORT,
    polish_block,
    polish_float64,
    round_float32,
)
from jaxrank._fitting._precondition import (
    PSD_CHECK_MAX_BASIS,
    SPECTRAL_MAX_BASIS,
    basis_gram,
    cholesky_precond,
    gram,
    gram_shift,
    inverse_factor,
    psd_gram,
    psd_shift,
    resolve_precondition,
    spectral_precond,
)
from jaxrank._fitting._rows import Biclass, biclass_rows, fit_biclass, fit_causes, fit_rows

__all__ = [
    "DUAL_MIN_COLUMNS", "FIT_OPTIONS", "LOW_EFFORT_MAX_BYTES", "LOW_EFFORT_OPTIONS",
    "POLISH_AFTER", "POLISH_GRAM_ROWS", "POLISH_LOW_EFFORT", "PSD_CHECK_MAX_BASIS",
    "SHARED_GRID_LAMS", "SHARED_GRID_MAX_BYTES", "SPECTRAL_MAX_BASIS", "STAGED_MIN_BYTES",
    "Biclass", "FitOptions", "basis_gram", "biclass_rows", "check_fit_options",
    "check_max_kernel_bytes", "check_solver_options", "cholesky_precond", "choose_dtype",
    "fit_biclass", "fit_block", "fit_block_low_effort", "fit_causes", "fit_rows", "gram",
    "gram_shift", "grid_stages", "inverse_factor", "keep_transpose", "low_effort_options",
    "pad_square", "polish_block", "polish_float64", "prepare_basis", "psd_gram", "psd_shift",
    "resolve_precondition", "round_float32", "solve", "spectral_precond",
]  # fmt: skip
