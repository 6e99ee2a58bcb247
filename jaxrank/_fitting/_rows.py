"""Row-fitting (:func:`fit_rows`, the engine behind every fit), the biclass row layout
(:class:`Biclass`, :func:`biclass_rows`) and the biclass fit :func:`fit_biclass`."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import _buckets, _cache, _exported
from jaxrank import kernels as _kernels
from jaxrank._fitting import _block, _polish
from jaxrank._fitting._block import (
    fit_block,
    fit_block_low_effort,
    grid_stages,
    keep_transpose,
    low_effort_options,
)
from jaxrank._fitting._options import check_fit_options, check_max_kernel_bytes
from jaxrank._fitting._polish import polish_float64
from jaxrank._fitting._precondition import resolve_precondition
from jaxrank._hostblas import one_blas_thread as _one_blas_thread
from jaxrank._validation import (
    check_eps_dtype,
    check_fit_result,
    check_lam_dtype,
)
from jaxrank.bases import resolve_basis
from jaxrank.losses import get_loss
from jaxrank.model import RankModel, warn_stopped
from jaxrank.objective import objective_closures, pair_curvature
from jaxrank.solver import SolverInfo, Status


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Biclass:
    """Row layout [positives; negatives; padding] of the biclass objective.

    A layout gives the solver ``closures`` and, for the spectral preconditioner, the row
    ``groups``, the group ``pairs`` the loss compares, and the mean ``curvature`` of a step.

    A pytree: the class counts ``n_pos``, ``n_neg`` are its leaves (dynamic: traced inside the
    solver, so one compiled program serves every count), the rows each class occupies,
    ``size_pos`` ≥ ``n_pos`` and ``size_neg`` ≥ ``n_neg``, are static (shape buckets; the
    counts themselves when not given).
    """

    n_pos: Any
    n_neg: Any
    size_pos: int | None = dataclasses.field(default=None, metadata=dict(static=True))
    size_neg: int | None = dataclasses.field(default=None, metadata=dict(static=True))
    #: 1/(m+ m−), formed on the host in float64 (traced, it would be formed in the fit's dtype)
    inv_pairs: Any = None

    def __post_init__(self):
        if self.inv_pairs is None:
            object.__setattr__(self, "inv_pairs", 1.0 / (int(self.n_pos) * int(self.n_neg)))
        if self.size_pos is None:
            object.__setattr__(self, "size_pos", int(self.n_pos))
        if self.size_neg is None:
            object.__setattr__(self, "size_neg", int(self.n_neg))

    @property
    def groups(self) -> tuple[int, ...]:
        return (self.n_pos, self.n_neg)

    @property
    def sizes(self) -> tuple[int, ...]:
        return (self.size_pos, self.size_neg)

    def padded(self, sizes) -> Biclass:
        """This layout (or a subclass's, e.g. the push's) with the classes padded to ``sizes``
        rows."""
        size_pos, size_neg = (int(v) for v in sizes)
        return dataclasses.replace(self, size_pos=size_pos, size_neg=size_neg)

    pairs = ((0, 1),)

    def closures(self, K, Krr, lam, loss, block, jacobi):
        return objective_closures(K, Krr, lam, loss, self.n_pos, self.n_neg, block, jacobi,
                                  sizes=self.sizes, inv_pairs=self.inv_pairs)  # fmt: skip

    def curvature(self, lin, loss):
        return pair_curvature(lin[0], loss, 1 / jnp.asarray(self.inv_pairs, lin[0].sp.dtype))


def biclass_rows(X, pos, basis, *, key, n_basis, layout=Biclass):
    """``(order, idx, layout)`` for :func:`fit_rows` over the biclass rows [positives;
    negatives]: the basis ``basis`` resolved on them (:func:`~jaxrank.bases.resolve_basis`) and
    ``layout(n_pos, n_neg)`` (:class:`Biclass` or a subclass), as :func:`jaxrank.fit` and
    :func:`jaxrank.push.fit_push` fit."""
    idx = resolve_basis(basis, pos, key=key, n_basis=n_basis, X=X)
    n_pos = int(pos.sum())
    order = np.concatenate([np.flatnonzero(pos), np.flatnonzero(~pos)])
    return order, idx, layout(n_pos, int(pos.size - n_pos))


def fit_biclass(
    X,
    pos,
    lams,
    scalar,
    *,
    basis,
    key,
    n_basis,
    kernel,
    init,
    layout=Biclass,
    mesh=None,
    no_jacobi: str | None = None,
    polish: bool = True,
    **options,
) -> RankModel:
    """The R-subset fit over the biclass rows that :func:`jaxrank.fit` (the L2 penalty) and
    :func:`jaxrank.push.fit_push` share, from the validated ``X``, ``pos`` (rare-class mask)
    and λ grid (``lams``, ``scalar``: from ``check_lam``): the fit options checked
    (:func:`check_fit_options` with ``options``, its keyword arguments, and ``no_jacobi``), the
    basis resolved and the rows laid out by ``layout`` (:func:`biclass_rows`), ``kernel``
    resolved on ``X``, then :func:`fit_rows` (with ``init``, ``mesh`` and ``polish``)."""
    options = check_fit_options(X, no_jacobi=no_jacobi, **options)._asdict()
    order, idx, layout = biclass_rows(X, pos, basis, key=key, n_basis=n_basis, layout=layout)
    kernel = _kernels.resolve_kernel(kernel, X)
    return fit_rows(X, order, idx, lams, scalar, layout, kernel=kernel, init=init, mesh=mesh,
                    polish=polish, **options)  # fmt: skip


def _fit_block_args(K, B, kernel, nb, lams, beta0, loss, tol, depth, layout, max_iter, max_cg,
                    low_effort=False, **static):  # fmt: skip
    # fit_block with every traced argument positional (jaxrank._exported flattens them); traced
    # for an export, fit_block: XLA options belong to the outermost jit (the stored program's)
    traced = any(isinstance(a, jax.core.Tracer) for a in jax.tree.leaves((K, B)))
    run = fit_block_low_effort if low_effort and not traced else fit_block
    return run(K, B, kernel, nb, lams, beta0, loss, tol, depth, layout=layout,
               max_iter=max_iter, max_cg=max_cg, **static)  # fmt: skip


def fit_rows(
    X, order, idx, lams, scalar, layout, *, kernel, dtype, loss, eps, tol, max_iter, max_cg,
    path, chains, precondition, memory_budget, init=None, max_kernel_bytes=None, mesh=None,
    process_rows=None, polish: bool = True,
) -> RankModel:  # fmt: skip
    """The engine behind every fit: kernel block over the reordered rows, solve, model.

    Every size that enters the compiled solver is padded to a shape bucket
    (:mod:`jaxrank._buckets`), so a new data set of a similar size reuses the compiled program:
    each row group of the layout (the classes, or the levels) to its bucket, the basis to its
    bucket (padded basis rows get zero kernel columns, an identity block in ``K_RR`` with no
    coupling, and keep a zero coefficient), and, for small problems, the λ count to a power of
    two (extra members repeat a real λ and are dropped). The host-side preparation (row order,
    ``K_RR``'s positive-definiteness shift, preconditioners) runs in numpy on the real sizes,
    so no small program compiles per size either.

    Args:
      X: ``(m, d)`` validated rows; ``order``: the row order the ``layout`` expects (the real
        rows of each group, consecutively);
      idx: basis row indices into ``X``; ``lams``/``scalar``: from ``check_lam``;
      layout: a pytree whose ``closures(K, Krr, lam, loss, block, jacobi)`` gives ``(fun, hvp)``
        for one λ, with host-side ``groups`` (real rows per group), ``sizes`` (rows per group
        in the block) and ``padded(sizes)`` (the layout with groups padded to ``sizes`` rows;
        the real counts become traced leaves); the other arguments as in :func:`fit`, already
        validated. Floors from :func:`jaxrank._buckets.at_least` apply.
      mesh: ``(mesh, axis)`` from :func:`~jaxrank.kernels.row_mesh`: build the block split by
        rows over the devices of ``mesh[axis]`` (data-parallel fit); ``None``: one device.
      process_rows: rows held by several processes (:mod:`jaxrank.distributed`): ``X`` is then
        only read for its shape and ``process_rows(kernel, dtype, order, slots, idx, m_rows,
        nb_pad, block, streamed)`` gives the block (rows ``order`` at ``slots``; stored or
        streamed, split over ``mesh``) and the basis rows.
      polish: finish a float32 fit's λ still above the tolerance after :data:`POLISH_AFTER`
        Newton steps in float64 (:func:`polish_float64`; the default). ``False``: such a fit
        stops after its float32 stage, statuses as that stage left them (MAX_ITER or PRECISION
        for a stalled λ, never a claim the float64 gradient did not check): the cells of a
        cross-validated search (:mod:`jaxrank._cv`), judged by their held-out AUC, not by their
        statuses, where a stalled λ is at float32's noise floor and the polish would be one more
        compiled program per data set (``bench/keel_wide.py``: ~1 s each, on the first split of
        most sets). The refit, whose status the estimator reports, is polished.
    """
    # a long session compiles a program per new bucket: keep the process's mappings bounded
    _cache.bound_compiled_programs()
    dt = np.dtype(dtype)
    check_lam_dtype(lams, dt)  # before any allocation: λ this dtype cannot solve
    if loss == "smoothed_hinge":
        check_eps_dtype(eps, dt)
    _kernels.check_kernel(kernel, X, dt)
    lossfn = get_loss(loss, eps)
    nb = idx.size
    m, d = X.shape
    counts = [int(c) for c in layout.groups]
    floors = _buckets.floors()
    sizes = [_buckets.bucket(c) for c in counts]
    if floors.get("groups") is not None and len(floors["groups"]) == len(sizes):
        sizes = [max(a, int(b)) for a, b in zip(sizes, floors["groups"], strict=True)]
    layout = layout.padded(sizes)
    sizes = [int(v) for v in layout.sizes]  # a layout may keep its exact sizes
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    m_rows = int(sum(sizes))
    nb_pad = max(_buckets.bucket(nb), int(floors.get("basis") or 0))
    block = _kernels.product_block(m_rows)
    rows, n_chunks = _kernels.chunk_rows(m_rows, nb_pad, dt.itemsize, block)
    small = 2 * nb_pad * nb_pad * dt.itemsize  # K_RR and the preconditioner
    block_bytes = rows * n_chunks * nb_pad * dt.itemsize
    limit = check_max_kernel_bytes(max_kernel_bytes, memory_budget)
    n_dev = 1 if mesh is None else mesh[0].shape[mesh[1]]
    streamed = block_bytes / n_dev > limit
    if streamed and mesh is not None and process_rows is None:
        raise ValueError(
            "a kernel block split over devices must fit their memory: the block per device "
            f"({block_bytes / n_dev / 2**30:.2f} GiB) exceeds max_kernel_bytes."
        )
    if streamed:
        if precondition == "jacobi":
            raise ValueError(
                "precondition='jacobi' needs the stored kernel block; the block "
                f"({block_bytes / 2**30:.2f} GiB) exceeds max_kernel_bytes: use 'auto'."
            )
        # rows, a few chunks of kernel temporaries and (spectral) the strided moment rows
        need = rows * n_chunks * d * dt.itemsize + small + 4 * rows * nb_pad * dt.itemsize
        _kernels.check_memory(need, memory_budget, f"the streamed kernel block ({m} x {nb})")
    else:
        _kernels.check_memory(
            block_bytes // n_dev + small, memory_budget, f"the kernel block ({m} x {nb})"
        )

    # Rows [group 0 (real, then padding up to its size); group 1; ...; padding], and the basis
    # [real rows; padding], built on the host (no per-size device programs). Padding rows are
    # copies of a real row, not zeros: the Gaussian kernel centres on the mean basis row, which
    # zero rows would pull away from data far from the origin (cancellation at X + 1e8).
    order = np.asarray(order)
    slots = np.concatenate(
        [s0 + np.arange(c, dtype=np.int64) for s0, c in zip(starts, counts, strict=True)]
    )
    if process_rows is not None:  # rows spread over processes: the block split over them
        K, Bn = process_rows(kernel, dt, order, slots, idx, m_rows, nb_pad, block, streamed)
        Bp = np.empty((nb_pad, d), dt)
        Bp[:] = Bn[0]
        Bp[:nb] = Bn
    else:
        Xn = np.asarray(X, dt)
        Xo = np.empty((m_rows if mesh is not None else rows * n_chunks, d), dt)
        Xo[:] = Xn[order[0]]
        Xo[slots] = Xn[order]
        Bn = Xn[idx]
        Bp = np.empty((nb_pad, d), dt)
        Bp[:] = Bn[0]
        Bp[:nb] = Bn
        if streamed:
            K = _kernels.streamed_block(kernel, Xo, Bp, multiple=block, n_basis=nb)
        elif mesh is not None:
            K = _kernels.sharded_block(kernel, Xo, Bp, *mesh, multiple=block, n_basis=nb)
        else:
            # the block is built inside the fit's program (fit_block with `rows`): one
            # program per fit, and no eager op before it
            K = None
    L = lams.size
    chains = 1 if path == "batch" else min(int(chains), L)
    # λ count bucket: only where compilation dominates (a large block runs its exact grid; its
    # staged solver would spend real work on the repeated members)
    L_pad = L
    if block_bytes < _block.STAGED_MIN_BYTES:
        L_pad = max(_buckets.bucket_lams(L), int(floors.get("lams") or 0))
        if path == "batch" and block_bytes < _block.SHARED_GRID_MAX_BYTES and _buckets.enabled():
            L_pad = max(L_pad, _block.SHARED_GRID_LAMS)  # one program for a single λ and grids
    L_pad = -(-L_pad // chains) * chains
    dual = (
        not streamed
        and mesh is None
        and keep_transpose(
            jax.devices()[0] if K is None else K,
            L_pad if path == "batch" else chains,
            block_bytes,
            limit,
            memory_budget,
        )
    )
    if dual and K is not None:
        K = _kernels.dual_block(K)
    precondition = resolve_precondition(precondition, layout, nb, streamed=streamed)
    # the gradient's rounding floor (fit_block) depends on the two-level product's shape
    depth = math.sqrt(block) + math.sqrt(rows * n_chunks / block)

    if path == "warm":
        sort = np.argsort(-lams, kind="stable")
        # pad with the smallest λ to whole steps of `chains` (and the bucket); each copy starts
        # at that λ's solution, so it costs one evaluation; the copies are dropped below
        sort = np.concatenate([sort, np.full(L_pad - L, sort[-1])])
    else:
        # pad with the largest λ (the first to converge); dropped below
        sort = np.concatenate([np.arange(L), np.full(L_pad - L, int(np.argmax(lams)))])
    beta0 = np.zeros((sort.size, nb_pad), dt)
    if init is not None:
        init = np.asarray(init)
        if init.shape not in ((nb,), (L, nb)):
            raise ValueError(f"init must have shape ({nb},) or ({L}, {nb}), got {init.shape}.")
        if init.dtype.kind not in "biuf":
            raise ValueError(f"init must be numeric, got dtype {init.dtype}.")
        with np.errstate(over="ignore"):
            init = init.astype(dt)
        if not np.all(np.isfinite(init)):  # NaN given, or beyond the dtype (1e39 in float32)
            raise ValueError(
                f"init holds {int(np.sum(~np.isfinite(init)))} NaN or infinite value(s) in "
                f"{dt.name}; a start must be finite (omit init to start from 0)."
            )
        beta0[:, :nb] = init[sort] if init.ndim == 2 else init
    put = _buckets.put
    # float32 solves still above the tolerance after POLISH_AFTER Newton steps go on in float64
    # (polish_float64, which needs the spectral model and room for a float64 block): the
    # float32 stage is then capped where, on ill-conditioned problems, it stops making progress
    budget = _kernels.default_memory_budget() if memory_budget is None else int(memory_budget)
    can_polish = (
        dt == np.float32 and precondition == "spectral" and not streamed and mesh is None
        and process_rows is None and int(max_iter) > _polish.POLISH_AFTER
        and 2 * block_bytes <= min(limit, budget)
    )  # fmt: skip
    # XLA:CPU runs the fit's small factorisations through the host LAPACK (OpenBLAS): pinned to
    # one thread, as its worker threads would otherwise compete with them (jaxrank._hostblas;
    # measured: eigh of 104 x 104 inside the fit 2 ms pinned, up to 180 ms not)
    static = dict(block=block, path=path, chains=chains, precondition=precondition,
                  stages=grid_stages(L_pad, block_bytes) if path == "batch" else None)  # fmt: skip
    if K is None:  # fit_block builds the block from the padded rows
        K = put(Xo)
        static.update(rows=rows, dual=dual)
        del Xo
    args = (
        K, put(Bp), kernel, np.int32(nb), put(lams[sort], dt), put(beta0),
        jax.tree.map(lambda v: put(v, dt), lossfn), put(tol, dt), put(depth, dt), layout,
        _polish.POLISH_AFTER if can_polish else int(max_iter), int(max_cg),
    )  # fmt: skip
    # a small block on CPU: a fit that compiles for seconds and runs for milliseconds
    low = block_bytes <= _block.LOW_EFFORT_MAX_BYTES and jax.default_backend() == "cpu"
    options = low_effort_options() if low else {}
    with _one_blas_thread():
        # through a stored jax.export program: a later process skips tracing and lowering
        out = _exported.call(
            "fit_block", functools.partial(_fit_block_args, low_effort=low, **static), args,
            tuple(sorted(static.items())), compiler_options=options,
        )  # fmt: skip
        betas, info, floor = out[0], SolverInfo(*out[1:6]), float(out[6])
    # back on the host: the real λ in their order, the real basis columns
    unsort = np.argsort(sort[:L])
    betas = np.asarray(betas)[unsort, :nb]
    info = jax.tree.map(lambda a: np.asarray(a)[unsort], info)
    if can_polish and polish and np.any(info.status != Status.CONVERGED):
        del K, args  # the float64 block takes their place
        betas, info = polish_float64(
            betas, info, X, order, slots, idx, lams, layout, kernel=kernel, lossfn=lossfn,
            tol=tol, floor=floor, block=block, m_rows=m_rows, nb_pad=nb_pad,
            max_iter=int(max_iter), max_cg=int(max_cg), block_bytes=block_bytes, limit=limit,
            memory_budget=memory_budget,
        )  # fmt: skip
    check_fit_result(
        betas,
        info.status,
        "λ",
        lams,
        who="the fit",
        dtype=dt,
        causes=lambda: fit_causes(X, kernel, eps),
    )
    # Every status but CONVERGED warns: reaching the dtype's gradient floor is CONVERGED
    # (jaxrank.solver, "Stopping and rounding"), so PRECISION is a stall above it.
    warn_stopped(
        info.status, info.iterations, "λ", lams, "||grad||_∞=", info.grad_norm,
        head=f"solver stopped before ||grad||_∞ ≤ {max(tol, floor):.2e} (max of tol and the "
        "dtype's gradient floor)",
        remedies={Status.NONFINITE: "check the data's scale and λ"},
        stacklevel=3,  # the caller of fit_rows
    )  # fmt: skip

    if scalar:
        betas = betas[0]
        info = jax.tree.map(lambda a: a[0], info)
    return RankModel(
        basis=put(Bn),
        coef=put(betas),
        lam=put(lams[0] if scalar else lams, dt),
        kernel=kernel,
        info=jax.tree.map(put, info),
        basis_index=put(idx, np.int32),
        loss=loss,
        eps=float(eps),
    )


def fit_causes(X, kernel, eps) -> list[str]:
    """The likely causes of a NaN or zero R-subset fit, in the fit's terms, for
    :func:`~jaxrank._validation.check_fit_result`."""
    causes = []
    if eps is not None and float(eps) > 1:
        causes.append(f"eps = {float(eps):.3g}: the smoothed hinge's slope is at most 1/(2ε)")
    Xa = np.asarray(X, np.float64)
    centre = float(np.max(np.abs(Xa.mean(axis=0))))
    spread = float(np.max(Xa.std(axis=0)))
    if spread == 0:
        causes.append("every row of X is equal: there is nothing to rank")
    elif centre > 1e4 * spread:
        causes.append(
            f"X is far from the origin relative to its spread (column means up to {centre:.3g}, "
            f"standard deviations up to {spread:.3g}): centre X (e.g. StandardScaler)"
        )
    if isinstance(kernel, _kernels.Gaussian):
        causes.append(f"σ² = {float(np.max(kernel.sigma2)):.3g} against X's scale")
    causes.append("λ, the data's scale or the dtype (try dtype=np.float64)")
    return causes
