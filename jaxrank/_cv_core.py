"""The cross-validated search as batched calls of the pure core (issue 29, part 2).

:func:`jaxrank._cv.cv_search` and :func:`jaxrank.select_lambda` fill a table of held-out AUC
over folds × σ² × λ (× basis policy). Here that table is a few calls of one compiled program,
not a loop of fits: the data set is padded once, each fold is a row mask over the same padded
arrays (:func:`jaxrank.core.fit_core`'s ``mask``), its basis rows are padded to one size
(``n_basis`` real), and the members (fold, σ²) are a batch axis of ``jax.vmap`` over the core,
whose own batch axis is the λ grid. Each member's held-out rows are scored inside the same
program (``k(X_held, R) β``, then :func:`jaxrank.metrics.auc` with the padding masked), so a
call returns ``(members, L)`` AUC. The pairwise operators fold the member axis and the λ axis
into one native batch (:func:`jaxrank.pairwise.batched`), so each Newton or CG step is one
batched pass over all members.

Per member the objective, the basis, the kernel, λ, ε and the tolerance are those of the fit
the loop ran (:func:`jaxrank.fit` on the fold's training rows): only the row layout of the
kernel block differs (the fold's rows among the set's padding instead of the fold's rows
alone), so the table equals the loop's to the rounding of the solutions (tested to 1e-6 in
float64 at a tight tolerance, ``tests/test_cv_core.py``; float32 fits stopped at the search's
tolerance 1e-4 can differ by a pair flip of one held-out fold).

Memory: a call holds one kernel block per member; the members run in chunks of at most
``budget // block`` (:func:`chunk_size`; the budget is half of
:func:`jaxrank.kernels.default_memory_budget`), every chunk the same size (the last padded with
copies of a real member), so the chunks share one compiled program. A member whose block alone
is beyond the budget (a block :func:`jaxrank.fit` would stream) is left to the loop of fits
(:func:`usable`).

A member that ends NONFINITE (the core's NaN coefficients: no real row of a class, or a diverged
solve) is refitted by :func:`jaxrank.fit`, which raises its own error for it.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _buckets, _exported, metrics
from jaxrank import kernels as _kernels
from jaxrank._fitting import SPECTRAL_MAX_BASIS
from jaxrank._hostblas import one_blas_thread
from jaxrank.core import fit_core

__all__ = ["chunk_size", "fold_table", "masked_folds", "usable"]

#: Options of :func:`jaxrank.fit` this engine runs; any other option (a basis strategy, a
#: kernel other than the Gaussian, a memory limit, ...) keeps the loop of fits.
CORE_OPTIONS = frozenset(
    {"dtype", "tol", "eps", "loss", "max_iter", "max_cg", "path", "chains", "precondition"}
)


def _dtype(fit_kwargs) -> np.dtype:
    dt = fit_kwargs.get("dtype")
    if dt is None:
        return np.dtype(np.float32)
    return np.dtype(dt)


def usable(fit_kwargs: dict, rows: int, n_basis: int) -> bool:
    """Whether the batched engine runs a search with these :func:`jaxrank.fit` options, whose
    largest member has ``rows`` kernel-block rows and ``n_basis`` basis rows."""
    if not set(fit_kwargs) <= CORE_OPTIONS:
        return False
    if fit_kwargs.get("loss", "smoothed_hinge") not in ("smoothed_hinge", "squared_hinge"):
        return False
    if fit_kwargs.get("path", "batch") not in ("batch", "warm"):
        return False
    if fit_kwargs.get("path") == "warm" and int(fit_kwargs.get("chains", 1)) != 1:
        return False
    if fit_kwargs.get("precondition", "auto") not in ("auto", "spectral", "cholesky", "none"):
        return False
    dt = _dtype(fit_kwargs)
    if dt not in (np.float32, np.float64) or (dt == np.float64 and not jax.config.jax_enable_x64):
        return False
    return rows * n_basis * dt.itemsize <= _budget()


def _budget() -> int:
    # half the default budget: the members' blocks plus their temporaries
    return _kernels.default_memory_budget() // 2


def chunk_size(members: int, rows: int, n_basis: int, itemsize: int) -> int:
    """Members per call: all of them, or as many kernel blocks (with the preconditioner's
    ``|R|²`` matrices) as fit in half the memory budget."""
    per = (rows * n_basis + 4 * n_basis * n_basis) * itemsize
    return int(max(1, min(members, _budget() // max(per, 1))))


@functools.partial(
    jax.jit, static_argnames=("sizes", "loss", "max_iter", "max_cg", "precondition", "path")
)  # fmt: skip
def _table(X, pos, keeps, bases, n_basis, Xh, yh, mh, fold_of, s2, lams, eps, tol, *,
           sizes, loss, max_iter, max_cg, precondition, path):  # fmt: skip
    """Held-out AUC ``(c, L)`` of the ``c`` members ``(fold_of[i], s2[i])``."""

    def member(f, sigma2):
        kernel = _kernels.Gaussian(sigma2)
        out = fit_core(
            X, pos, lams, bases[f], mask=keeps[f], n_basis=n_basis[f], kernel=kernel, eps=eps,
            loss=loss, tol=tol, max_iter=max_iter, max_cg=max_cg, sizes=sizes,
            precondition=precondition, path=path,
        )  # fmt: skip
        # padded basis rows have zero coefficients: k(X_held, R) β is the real basis's score
        scores = jnp.matmul(
            out.coef, kernel(Xh[f], bases[f]).T, precision=jax.lax.Precision.HIGHEST
        )
        return metrics.auc(yh[f], scores, where=mh[f]), out.info.status

    return jax.vmap(member)(fold_of, s2)


def fold_table(X, pos, keeps, bases, n_basis, held, members, lams, *, sizes, fit_kwargs,
               chunk: int | None = None):  # fmt: skip
    """Held-out AUC of every member, ``(M, L)`` float64, in calls of one compiled program.

    Args:
      X: ``(m_pad, d)`` the data set's rows, padded (padding rows are in no fold's mask).
      pos: ``(m_pad,)`` rare-class mask.
      keeps: ``(k, m_pad)`` each fold's training rows.
      bases: ``(k, nb_pad, d)`` each fold's basis rows (real first, then copies of a real row);
        ``n_basis``: ``(k,)`` real counts.
      held: ``(Xh, yh, mh)``: ``(k, n_held, d)`` held-out rows (zero-padded), their labels and
        ``(k, n_held)`` mask.
      members: ``[(fold, σ²), ...]`` the table's cells.
      lams: ``(L,)`` λ grid (given order; the warm path runs it from large to small).
      sizes: ``(P, N)`` rows reserved per class (at least every fold's kept counts).
      fit_kwargs: :func:`jaxrank.fit` options among :data:`CORE_OPTIONS`.
      chunk: members per call (default: all), lowered to what memory allows
        (:func:`chunk_size`).

    Returns:
      ``(auc, status)``: ``(M, L)`` float64 AUC and int32 solver statuses.
    """
    dt = _dtype(fit_kwargs)
    path = fit_kwargs.get("path", "batch")
    lams = np.asarray(lams, np.float64)
    order = np.argsort(-lams, kind="stable") if path == "warm" else np.arange(lams.size)
    nb_max = int(np.max(n_basis))
    precondition = fit_kwargs.get("precondition", "auto")
    if precondition == "auto":
        precondition = "spectral" if nb_max <= SPECTRAL_MAX_BASIS else "cholesky"
    static = dict(
        sizes=(int(sizes[0]), int(sizes[1])), loss=fit_kwargs.get("loss", "smoothed_hinge"),
        max_iter=int(fit_kwargs.get("max_iter", 100)), max_cg=int(fit_kwargs.get("max_cg", 25)),
        precondition=precondition, path=path,
    )  # fmt: skip
    put = _buckets.put
    Xh, yh, mh = held
    arrays = (put(X, dt), put(np.asarray(pos, bool)), put(np.asarray(keeps, bool)),
              put(bases, dt), put(np.asarray(n_basis, np.int32)), put(Xh, dt),
              put(np.asarray(yh, bool)), put(np.asarray(mh, bool)))  # fmt: skip
    scalars = (put(lams[order], dt), put(fit_kwargs.get("eps", 0.5), dt),
               put(fit_kwargs.get("tol", 1e-6), dt))  # fmt: skip
    M = len(members)
    rows = sum(static["sizes"])
    c = min(chunk or M, chunk_size(M, rows, bases.shape[1], dt.itemsize))
    n_calls = math.ceil(M / c)
    fold_of = np.array([f for f, _ in members], np.int32)
    s2 = np.array([s for _, s in members], np.float64)
    # whole chunks: the last one padded with copies of the first member (results dropped)
    pad = n_calls * c - M
    fold_of = np.concatenate([fold_of, np.full(pad, fold_of[0], np.int32)])
    s2 = np.concatenate([s2, np.full(pad, s2[0])])
    fn = functools.partial(_table, **static)

    def run(i):
        sl = slice(i * c, (i + 1) * c)
        args = (*arrays, put(fold_of[sl]), put(s2[sl], dt), *scalars)
        auc, status = _exported.call("cv_table", fn, args, tuple(sorted(static.items())))
        return np.asarray(auc, np.float64), np.asarray(status)

    # the host BLAS pin is process-wide: set on this thread, it covers the workers
    # one call after the other: calls of this program from several threads at once hung on
    # XLA:CPU (2 cores; measured, not understood), and each call already batches its members
    with one_blas_thread():
        outs = [run(i) for i in range(n_calls)]
    aucs, stats = zip(*outs, strict=True)
    auc = np.concatenate(aucs)[:M]
    status = np.concatenate(stats)[:M]
    unsort = np.argsort(order)
    return auc[:, unsort], status[:, unsort]


def pad_rows(n: int, coarse: bool) -> int:
    """Rows a padded array of ``n`` rows takes: the power-of-two ladder for a search whose
    programs are shared across data sets (``coarse``), the size ladder otherwise."""
    return _buckets.bucket_pow2(n) if coarse else _buckets.bucket(n)


def masked_folds(X, pos, trains, bases, fit_kwargs):
    """The padded arrays of :func:`fold_table` for folds given as training-row index arrays.

    Args:
      X, pos: the data set's rows and rare-class mask.
      trains: ``k`` int arrays of training rows (any sizes; the rest of the rows is held out).
      bases: ``k`` int arrays of basis rows (indices into ``X``).
      fit_kwargs: the fit options (their dtype sets the padded arrays').

    Returns:
      ``(Xp, posp, keeps, B, n_basis, held, sizes)`` for :func:`fold_table`, or ``None`` where
      the engine does not apply (:func:`usable`). Rows are padded to the bucket floors in force
      (:func:`jaxrank._buckets.floors`, else the size ladder), so data sets of similar sizes
      share the program.
    """
    floors = _buckets.floors()
    m, d = X.shape
    kept = [(int(pos[t].sum()), int((~pos[t]).sum())) for t in trains]
    P, N = (max(c[i] for c in kept) for i in (0, 1))
    groups = floors.get("groups") or (_buckets.bucket(P), _buckets.bucket(N))
    sizes = (max(int(groups[0]), P), max(int(groups[1]), N))
    nb_pad = max(int(floors.get("basis") or 0), _buckets.bucket(max(b.size for b in bases)))
    if not usable(fit_kwargs, sum(sizes), nb_pad):
        return None
    k = len(trains)
    m_pad = max(m, sum(sizes))
    Xp = np.zeros((m_pad, d), X.dtype)
    Xp[:m] = X
    posp = np.zeros(m_pad, bool)
    posp[:m] = pos
    keeps = np.zeros((k, m_pad), bool)
    B = np.empty((k, nb_pad, d), X.dtype)
    n_basis = np.zeros(k, np.int32)
    helds = [np.setdiff1d(np.arange(m), t) for t in trains]
    n_held = _buckets.bucket(max(h.size for h in helds))
    Xh = np.zeros((k, n_held, d), X.dtype)
    yh = np.zeros((k, n_held), bool)
    mh = np.zeros((k, n_held), bool)
    for f in range(k):
        keeps[f, trains[f]] = True
        B[f] = X[bases[f][0]]  # padding rows: copies of a real row (as jaxrank.fit pads)
        B[f, : bases[f].size] = X[bases[f]]
        n_basis[f] = bases[f].size
        h = helds[f]
        Xh[f, : h.size], yh[f, : h.size], mh[f, : h.size] = X[h], pos[h], True
    return Xp, posp, keeps, B, n_basis, (Xh, yh, mh), sizes
