"""Stochastic RankRC: minibatches of majority rows, ``K_{++}`` in memory, an optax optimizer.

Seed 000, Sec. 7 (Conclusion, extension 3, "Stochastic learning"): when the ``m × m+`` kernel block
``K_{·+}`` does not fit in memory, store only ``K_{++}`` (``m+ × m+``) and cycle through the
majority rows, "in each iteration [using] the full set of minority examples and a single (or
small subset) of majority samples", with an adaptive learning rate. The objective is RankRC's
(seed 000 eq. 13), with ``f = K_{·+} β``::

    F(β) = 1/(m+ m−) Σ_{i∈+} Σ_{j∈−} ℓ_ε(f_i − f_j) + (λ/2) βᵀ K_{++} β

For a batch ``B`` of majority rows (all positives always in), the kernel rows ``K_{B+}`` are
computed on the fly and the batch objective is::

    F_B(β) = 1/(m+ |B|) Σ_{i∈+} Σ_{j∈B} ℓ_ε(f_i − f_j) + (λ/2) βᵀ K_{++} β

whose gradient ``∇F_B = K_{++}(s g_+ + λβ) + s g_B K_{B+}`` (``s = 1/(m+ |B|)``, ``g`` the score
gradients of :func:`jaxrank.pairwise.value_and_grad`, sort-based) is an unbiased estimate of
``∇F``: each epoch draws a uniform permutation of the majority rows and cuts it into batches, so a
batch is a uniformly random subset; with equal batch sizes the mean of an epoch's batch gradients
at a fixed β *is* ``∇F`` exactly.

Whitened coordinates. Plain gradient steps in β are hopeless: ``K_{++}`` of a Gaussian kernel has
eigenvalues spread over many decades. The optimizer works on the coordinates of the linearisation
of seed 000 Sec. 5.1, eq. (14)-(15): ``w = Λ^{1/2} Uᵀ β`` with ``K_{++} = U Λ Uᵀ``, eigenvalues
below ``rcond · λ_max`` dropped (:func:`whitening`). Then ``f(x) = φ(x)ᵀ w`` with features
``φ(x) = Λ^{-1/2} Uᵀ k(X_+, x)`` (``||φ(x)||² ≤ k(x, x)``), the regulariser is exactly
``(λ/2)||w||²`` and the loss gradient is bounded by 2 whatever the kernel's conditioning. The
objective is always evaluated exactly in β (``β = U Λ^{-1/2} w``).

Optimizer. Any optax transformation on ``w``; the default is ``optax.adam(1.0)``
(:func:`default_optimizer`), and its schedule is *reduce on plateau* driven by the exact objective:
after each epoch that ends above the best objective so far, the updates are scaled by ``decay``
(0.5). Smaller λ converge slowly (the whitened problem's condition number is about 1/λ). How
close to the batch optimum it stops, measured: docs/design.md §12.

Stopping. After every epoch the full objective and gradient are evaluated exactly in one streaming
pass over the majority rows in chunks (the per-negative score gradients depend only on that
negative's score and the sorted positives, so the pairwise sums split over chunks). The fit stops
when the best objective has not dropped by more than ``tol·|F|`` for ``patience`` epochs (a
plateau) or at the epoch cap (``MAX_ITER``, with a warning); it returns the iterate with the
lowest full objective seen. A plateau is not an optimality certificate, so the status is
``CONVERGED`` only when the exact gradient at the returned β also satisfies::

    ||∇F(β)||_∞ ≤ grad_tol · ||∇F(0)||_∞

(``∇F(0)``, the gradient of the all-tied model, is the problem's gradient scale: the loss
part of every coordinate is bounded by ``max k``, and ``∇F(0)`` does not depend on λ); a
plateau above it is ``PRECISION``: the stochastic iterate stopped improving before the gradient
certificate held (with a warning). Where the plateau stops against that certificate, measured:
docs/design.md §12.

Memory: ``X`` (``m·d``), ``K_{++}`` and its inverse factor (``2 m+²``) and one batch of kernel
rows (``batch_size · m+``; the evaluation streams in chunks of the same size): never
``O(m·m+)``.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxrank import kernels as _kernels
from jaxrank import pairwise
from jaxrank._fitting import choose_dtype
from jaxrank._precision import HIGHEST as _HI
from jaxrank._validation import (
    check_cast,
    check_eps_dtype,
    check_fit_result,
    check_in_dtype,
    check_key,
    check_lam,
    check_lam_dtype,
    check_positive,
    check_X_y,
)
from jaxrank.losses import smoothed_hinge
from jaxrank.model import RankModel, warn_stopped
from jaxrank.solver import SolverInfo, Status

__all__ = [
    "StochasticHistory",
    "batch_objective",
    "default_optimizer",
    "fit_rankrc_stochastic",
    "full_objective",
    "whitening",
]


class StochasticHistory(NamedTuple):
    """Progress of a stochastic fit, one entry per epoch (``NaN`` after the fit stopped).

    Attributes:
      objective: ``(epochs,)`` exact full objective ``F(β)`` after each epoch.
      grad_norm: ``(epochs,)`` exact ``||∇_β F(β)||_∞`` after each epoch.
      epochs: ``()`` number of epochs run.

    Example:
      >>> import jax
      >>> import jax.numpy as jnp
      >>> import jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
      >>> model, history = jaxrank.fit_rankrc_stochastic(
      ...     X, y, 1e-2, batch_size=90, key=jax.random.key(0), tol=1e-6, patience=5,
      ...     return_history=True)
      >>> int(jnp.isfinite(history.objective).sum()) == int(history.epochs)  # then NaN
      True
    """

    objective: jax.Array
    grad_norm: jax.Array
    epochs: jax.Array


def default_optimizer(learning_rate: float = 1.0) -> optax.GradientTransformation:
    """The default optimizer: ``optax.adam(learning_rate)`` on the whitened coefficients.

    Its schedule is the fit's reduce-on-plateau rule (``decay`` in
    :func:`fit_rankrc_stochastic`): the updates are multiplied by ``decay`` after every epoch
    whose exact full objective is not below the best so far, so a too large first step costs a
    few epochs, not divergence. In whitened coordinates the loss gradient is bounded by 2 and the
    solution's coordinates are O(1)-O(10) for the λ RankRC is used with, whatever the kernel
    and the data scale, so one default serves all problems (measured against 0.1:
    docs/design.md §12).

    Args:
      learning_rate: Adam's step size.

    Returns:
      An ``optax.GradientTransformation`` (the same object for the same ``learning_rate``, so
      repeated fits reuse the compiled solver: the optimizer is static).

    Example:
      >>> default_optimizer() is default_optimizer(1.0)
      True
    """
    return _default_optimizer(float(learning_rate))


@functools.lru_cache(maxsize=32)
def _default_optimizer(learning_rate: float) -> optax.GradientTransformation:
    return optax.adam(learning_rate)


def _batch_terms(beta, Kpp, Kb, valid, lam, loss, scale):
    """Value and β-gradient of one batch's objective with batch kernel rows ``Kb``."""
    dt = beta.dtype
    fp = jnp.matmul(Kpp, beta, precision=_HI)
    fb = jnp.matmul(Kb, beta, precision=_HI)
    # Padding rows get a score below every positive by more than 1: all their pairs lie in the
    # zero piece of ℓ, so they add nothing to the value or the gradients.
    fb = jnp.where(valid, fb, jnp.min(fp) - 2)
    value, gp, gb, _ = pairwise.value_and_grad(fp, fb, loss)
    gb = jnp.where(valid, gb, jnp.zeros((), dt))
    F = value * scale + 0.5 * lam * jnp.vdot(beta, fp)
    grad = jnp.matmul(Kpp, scale * gp + lam * beta, precision=_HI)
    grad = grad + scale * jnp.matmul(gb, Kb, precision=_HI)
    return F, grad


def _full_terms(beta, Xp, Xn, Kpp, lam, loss, kernel, chunk):
    """Exact ``F(β)`` and ``∇_β F`` in one pass over the negatives in chunks of ``chunk`` rows."""
    dt = beta.dtype
    n_pos, n_neg = Xp.shape[0], Xn.shape[0]
    n_chunks = -(-n_neg // chunk)
    idx = jnp.arange(n_chunks * chunk, dtype=jnp.int32).reshape(n_chunks, chunk)
    fp = jnp.matmul(Kpp, beta, precision=_HI)
    low = jnp.min(fp) - 2

    def body(carry, ix):
        value, gp, gn = carry
        valid = ix < n_neg
        Kc = kernel(Xn[jnp.minimum(ix, n_neg - 1)], Xp)
        fc = jnp.where(valid, jnp.matmul(Kc, beta, precision=_HI), low)
        v, gpc, gc, _ = pairwise.value_and_grad(fp, fc, loss)
        gc = jnp.where(valid, gc, jnp.zeros((), dt))
        return (value + v, gp + gpc, gn + jnp.matmul(gc, Kc, precision=_HI)), None

    zero = jnp.zeros((n_pos,), dt)
    (value, gp, gn), _ = jax.lax.scan(body, (jnp.zeros((), dt), zero, zero), idx)
    scale = jnp.asarray(1.0 / (n_pos * n_neg), dt)
    F = value * scale + 0.5 * lam * jnp.vdot(beta, fp)
    grad = jnp.matmul(Kpp, scale * gp + lam * beta, precision=_HI) + scale * gn
    return F, grad


@functools.partial(jax.jit, static_argnums=(1, 2, 3))
def _batch_index(key, n_neg: int, n_batches: int, size: int) -> jax.Array:
    """``(n_batches, size)`` rows of a uniform permutation of the negatives; ``n_neg`` pads.

    The at most ``n_batches − 1`` padding slots go one per batch, so sizes differ by at most 1.
    """
    perm = jax.random.permutation(key, n_neg).astype(jnp.int32)
    pad = n_batches * size - n_neg
    flat = jnp.concatenate([perm, jnp.full((pad,), n_neg, jnp.int32)])
    return flat.reshape(size, n_batches).T


class _State(NamedTuple):
    w: jax.Array
    scale: jax.Array
    opt_state: Any
    best_w: jax.Array
    best_F: jax.Array
    best_g: jax.Array
    ref_F: jax.Array
    since: jax.Array
    epoch: jax.Array
    hist_F: jax.Array
    hist_g: jax.Array
    status: jax.Array


@functools.partial(
    jax.jit,
    static_argnames=("optimizer", "n_batches", "size", "chunk", "epochs", "patience"),
)
def _run(Xp, Xn, Kpp, Tt, lam, loss, kernel, w0, key, tol, decay, *, optimizer, n_batches, size,
         chunk, epochs, patience):  # fmt: skip
    dt = w0.dtype
    n_pos, n_neg = Xp.shape[0], Xn.shape[0]
    to_beta = lambda w: jnp.matmul(w, Tt, precision=_HI)  # β = T w
    to_w_grad = lambda g: jnp.matmul(Tt, g, precision=_HI)  # ∇_w = Tᵀ ∇_β

    def step(carry, ix):
        w, opt_state, lr = carry
        valid = ix < n_neg
        Kb = kernel(Xn[jnp.minimum(ix, n_neg - 1)], Xp)
        scale = 1 / (n_pos * jnp.sum(valid).astype(dt))
        _, g = _batch_terms(to_beta(w), Kpp, Kb, valid, lam, loss, scale)
        # optax mixes Python floats with int32 step counts (Adam's bias correction), which
        # strict dtype promotion refuses: its update is traced under standard promotion.
        with jax.numpy_dtype_promotion("standard"):
            updates, opt_state = optimizer.update(to_w_grad(g), opt_state, w)
        w = optax.apply_updates(w, jax.tree.map(lambda u: lr * u, updates))
        return (w, opt_state, lr), None

    def epoch(st: _State) -> _State:
        ix = _batch_index(jax.random.fold_in(key, st.epoch), n_neg, n_batches, size)
        (w, opt_state, _), _ = jax.lax.scan(step, (st.w, st.opt_state, st.scale), ix)
        F, g = _full_terms(to_beta(w), Xp, Xn, Kpp, lam, loss, kernel, chunk)
        gmax = jnp.max(jnp.abs(g))
        better = F < st.best_F
        # "Stopped decreasing": no drop of more than tol·|F| below the reference for
        # `patience` epochs; the reference moves only on such a drop.
        drop = F < st.ref_F - tol * jnp.abs(st.ref_F)
        since = jnp.where(drop, 0, st.since + 1)
        # Reduce on plateau: an epoch that ends above the best objective means the steps are
        # dominated by minibatch noise (or overshoot); shrink them.
        scale = jnp.where(better, st.scale, st.scale * decay)
        e = st.epoch + 1
        finite = jnp.isfinite(F) & jnp.all(jnp.isfinite(w))
        status = jnp.select(
            [~finite, since >= patience, e >= epochs],
            [Status.NONFINITE, Status.CONVERGED, Status.MAX_ITER],
            Status.RUNNING,
        ).astype(jnp.int32)
        return _State(
            w=w, scale=scale, opt_state=opt_state,
            best_w=jnp.where(better, w, st.best_w), best_F=jnp.where(better, F, st.best_F),
            best_g=jnp.where(better, gmax, st.best_g), ref_F=jnp.where(drop, F, st.ref_F),
            since=since, epoch=e, hist_F=st.hist_F.at[st.epoch].set(F),
            hist_g=st.hist_g.at[st.epoch].set(gmax), status=status,
        )  # fmt: skip

    with jax.numpy_dtype_promotion("standard"):
        opt_state0 = optimizer.init(w0)
    F0, g0 = _full_terms(to_beta(w0), Xp, Xn, Kpp, lam, loss, kernel, chunk)
    nan = jnp.full((epochs,), jnp.nan, dt)
    init = _State(
        w=w0, scale=jnp.ones((), dt), opt_state=opt_state0, best_w=w0, best_F=F0,
        best_g=jnp.max(jnp.abs(g0)), ref_F=F0, since=jnp.zeros((), jnp.int32),
        epoch=jnp.zeros((), jnp.int32), hist_F=nan, hist_g=nan,
        status=jnp.asarray(Status.RUNNING, jnp.int32),
    )  # fmt: skip
    out = jax.lax.while_loop(lambda st: st.status == Status.RUNNING, epoch, init)
    # The gradient scale of the certificate: ∇F at β = 0 (every score tied), independent of
    # λ and of `init`. One more streaming pass.
    _, gz = _full_terms(jnp.zeros_like(to_beta(w0)), Xp, Xn, Kpp, lam, loss, kernel, chunk)
    return to_beta(out.best_w), out, jnp.max(jnp.abs(gz))


def full_objective(beta, X, y, lam, *, kernel=None, eps: float = 0.5, chunk: int | None = None):
    """Exact RankRC objective and gradient (seed 000 eq. 13) without forming ``K_{·+}``.

    One streaming pass over the majority rows in chunks: memory ``O(m+² + chunk·m+)``.

    Args:
      beta: ``(m+,)`` coefficients on the positives, in their order in ``X``.
      X: ``(m, d)`` rows; y: two-valued labels (rare class ``+1``/``1``/``True``).
      lam: λ > 0.
      kernel: as in :func:`jaxrank.fit`; default Gaussian with the paper's σ² on ``X``.
      eps: ε of the smoothed hinge.
      chunk: rows per chunk (default: about 32 MiB of kernel rows).

    Returns:
      ``(F, grad)``: ``()`` and ``(m+,)`` in the dtype of ``beta``.

    Example:
      >>> import jax.numpy as jnp, jaxrank
      >>> X, y = jaxrank.datasets.make_rare_class(200, 0.1, 0.75, seed=0)
      >>> F, g = full_objective(jnp.zeros(20), X, y, 1e-2)
      >>> round(float(F), 6)  # every pair at margin 0: ℓ_0.5(0) = (1 − 0)²/(4·0.5)
      0.5
    """
    X, pos = check_X_y(X, y)
    lams, scalar = check_lam(lam)
    if not scalar:
        raise ValueError("full_objective takes a scalar lam.")
    beta = jnp.asarray(beta)
    dt = beta.dtype
    kernel = _kernels.resolve_kernel(kernel, X)
    Xp = jnp.asarray(X[pos], dt)
    Xn = jnp.asarray(X[~pos], dt)
    if beta.shape != (Xp.shape[0],):
        raise ValueError(f"beta must have shape ({Xp.shape[0]},), got {beta.shape}.")
    if chunk is None:
        chunk = _kernels.chunk_rows(Xn.shape[0], Xp.shape[0], dt.itemsize)[0]
    chunk = _check_int(chunk, "chunk")
    loss = jax.tree.map(lambda v: jnp.asarray(v, dt), smoothed_hinge(check_positive(eps, "eps")))
    return _full_jit(beta, Xp, Xn, kernel(Xp, Xp), jnp.asarray(lams[0], dt), loss, kernel, chunk)


@functools.partial(jax.jit, static_argnames=("chunk",))
def _full_jit(beta, Xp, Xn, Kpp, lam, loss, kernel, chunk):
    return _full_terms(beta, Xp, Xn, Kpp, lam, loss, kernel, chunk)


def batch_objective(beta, Kpp, Kb, lam, *, eps: float = 0.5):
    """One minibatch's objective ``F_B`` and its β-gradient (the estimate the optimizer uses).

    ``F_B(β) = 1/(m+ |B|) Σ_{i∈+} Σ_{j∈B} ℓ_ε(f_i − f_j) + (λ/2) βᵀ K_{++} β`` with
    ``f_+ = K_{++} β`` and ``f_B = K_{B+} β``. The mean over the batches of a partition of the
    majority rows into equal-sized batches is exactly ``(F, ∇F)`` (seed 000 eq. 13).

    Args:
      beta: ``(m+,)``; Kpp: ``(m+, m+)``; Kb: ``(|B|, m+)`` kernel rows of the batch; lam: λ.
      eps: ε of the smoothed hinge.

    Returns:
      ``(F_B, grad)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.stochastic import batch_objective
      >>> Kpp, Kb = jnp.eye(2), jnp.zeros((3, 2))  # 2 positives, a batch of 3 negatives
      >>> F, grad = batch_objective(jnp.zeros(2), Kpp, Kb, 0.1)
      >>> float(F), grad.shape  # every margin 0: ℓ(0) = 1 − ε
      (0.5, (2,))
    """
    beta = jnp.asarray(beta)
    dt = beta.dtype
    Kb = jnp.asarray(Kb, dt)
    loss = jax.tree.map(lambda v: jnp.asarray(v, dt), smoothed_hinge(check_positive(eps, "eps")))
    scale = jnp.asarray(1.0 / (Kpp.shape[0] * Kb.shape[0]), dt)
    valid = jnp.ones((Kb.shape[0],), bool)
    Kpp = jnp.asarray(Kpp, dt)
    return _batch_jit(beta, Kpp, Kb, valid, jnp.asarray(lam, dt), loss, scale)


_batch_jit = jax.jit(_batch_terms)


def whitening(Kpp, rcond: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Whitened coordinates of seed 000 Sec. 5.1, eq. (14), with the pseudo-inverse.

    With ``K_{++} = U Λ Uᵀ`` (eigenvalues ascending) and ``U_r, Λ_r`` the eigenpairs with
    ``λ_k > rcond · λ_max``: ``w = Λ_r^{1/2} U_rᵀ β`` and ``β = U_r Λ_r^{-1/2} w``. Then
    ``βᵀ K_{++} β = ||w||²`` and the scores are ``f(x) = φ(x)ᵀ w`` with
    ``φ(x) = Λ_r^{-1/2} U_rᵀ k(X_+, x)``, so the problem is a linear ranking problem in ``w``
    with a ridge penalty (eq. 15).

    Dropping the small eigenvalues is what makes first-order steps safe: a kernel matrix computed
    in finite precision has eigenvalues down to ``−m+ · eps · λ_max``, along which ``βᵀK_{++}β``
    is negative and the objective unbounded below (a float32 fit at m+ = 1000 diverged along
    them with a Cholesky factor of ``K_{++} + δI``). The eigendecomposition runs in float64 on
    the host (``O(m+³)``, once).

    Args:
      Kpp: ``(m+, m+)`` symmetric kernel matrix of the positives.
      rcond: relative cut-off; default ``m+ · eps`` of ``Kpp``'s dtype.

    Returns:
      ``(T, forward)``, float64 arrays of shapes ``(m+, r)`` and ``(r, m+)``:
      ``β = T w`` and ``w = forward β``.

    Example:
      >>> import numpy as np
      >>> T, fwd = whitening(np.diag([4.0, 1.0, 0.0]))
      >>> T.shape, np.allclose(T.T @ np.diag([4.0, 1.0, 0.0]) @ T, np.eye(2))
      ((3, 2), True)
    """
    K = np.asarray(Kpp)
    eps = np.finfo(K.dtype if K.dtype.kind == "f" else np.float64).eps
    K = K.astype(np.float64)
    if not np.all(np.isfinite(K)):  # a raw LinAlgError from eigh would name no cause
        raise ValueError(
            f"K_{{++}} holds {int(np.sum(~np.isfinite(K)))} NaN or infinite value(s): the kernel "
            "overflowed or underflowed in this dtype; check X's scale and the kernel's "
            "parameters (or pass dtype=np.float64)."
        )
    if rcond is None:
        rcond = K.shape[0] * eps
    evals, U = np.linalg.eigh((K + K.T) / 2)
    keep = evals > rcond * max(evals[-1], 0.0)
    if not keep.any():
        raise ValueError("K_{++} has no positive eigenvalue: the positives' kernel matrix is zero.")
    root = np.sqrt(evals[keep])
    return U[:, keep] / root, (U[:, keep] * root).T


def _check_int(value, name: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
        raise ValueError(f"{name} must be an integer ≥ {low}, got {value!r}.")
    return int(value)


def fit_rankrc_stochastic(
    X,
    y,
    lam,
    *,
    batch_size: int,
    key: jax.Array,
    optimizer: optax.GradientTransformation | None = None,
    learning_rate: float = 1.0,
    decay: float = 0.5,
    epochs: int = 100,
    tol: float = 1e-4,
    patience: int = 3,
    grad_tol: float = 1e-2,
    kernel=None,
    eps: float = 0.5,
    whiten: bool = True,
    rcond: float | None = None,
    dtype=None,
    init=None,
    return_history: bool = False,
) -> RankModel | tuple[RankModel, StochasticHistory]:
    """Stochastic RankRC (seed 000 Sec. 7, extension 3): majority minibatches, ``K_{++}`` only.

    Minimises seed 000 eq. (13)::

        F(β) = 1/(m+ m−) Σ_{i∈+} Σ_{j∈−} ℓ_ε(f_i − f_j) + (λ/2) βᵀ K_{++} β,   f = K_{·+} β

    by an optax optimizer on unbiased minibatch gradients: each step takes all m+ positives and
    ``batch_size`` majority rows, whose kernel rows ``K_{B+}`` are computed on the fly (see the
    module notes). One epoch is one pass over a fresh permutation of the majority rows
    (``lax.scan``), followed by an exact streaming evaluation of ``F`` and ``∇F``.

    Args:
      X: ``(m, d)`` training rows, taken as given (no standardisation).
      y: two-valued labels; the rare class is ``+1``, ``1`` or ``True``.
      lam: λ > 0 (a scalar: the stochastic solver fits one λ).
      batch_size: majority rows per step. The m− rows are cut into ``ceil(m−/batch_size)``
        batches of equal size up to one row.
      key: ``jax.random.key`` for the per-epoch permutations (the fit is deterministic given it:
        epoch ``e`` uses ``jax.random.fold_in(key, e)``).
      optimizer: an ``optax.GradientTransformation`` acting on the whitened coefficients ``w``
        (on β when ``whiten=False``); default :func:`default_optimizer` (``optax.adam``).
        Static: a new optimizer object recompiles the solver.
      learning_rate: step size of the default optimizer (ignored with ``optimizer=``).
      decay: reduce on plateau: after each epoch whose full objective is not below the best so
        far, the optimizer's updates are multiplied by ``decay`` from then on (compounding);
        ``1.0`` turns it off. In ``(0, 1]``.
      epochs: the epoch cap.
      tol: stop when the full objective has not dropped by more than ``tol·|F|`` below the last
        such drop for ``patience`` consecutive epochs ("stopped decreasing").
      patience: see ``tol``.
      grad_tol: the optimality certificate a plateau must satisfy to be ``CONVERGED``:
        ``||∇F(β)||_∞ ≤ grad_tol · ||∇F(0)||_∞`` at the returned β, with both gradients exact
        (streamed). The default 1e-2 (a hundredfold reduction of the first-order residual) is
        within reach of the default optimizer on the data measured in docs/design.md §12, but not
        always with the default ``tol``/``patience``; minibatch noise limits what SGD reaches
        (measured: 0.26-0.49 % of ``||∇F(0)||_∞`` at batches of 95), so much smaller values
        need larger batches or a batch solver (:func:`jaxrank.fit_rankrc`).
      kernel: a kernel object or name; default Gaussian with σ² from
        :func:`~jaxrank.kernels.sigma2_heuristic` on ``X``.
      eps: ε of the smoothed hinge (paper default 0.5).
      whiten: optimise the whitened ``w = Λ^{1/2} Uᵀ β`` of seed 000 eq. (14) (default; see
        :func:`whitening`); ``False``: optimise β itself.
      rcond: eigenvalues of ``K_{++}`` at or below ``rcond · λ_max`` are dropped from the
        whitening (default ``m+ · eps`` of the dtype, numpy's rank tolerance). ``init`` is
        projected onto the kept eigenvectors.
      dtype: ``float32`` or ``float64``; default float64 when ``X`` is float64 and x64 is on.
      init: optional starting ``β`` of shape ``(m+,)``.
      return_history: also return a :class:`StochasticHistory`.

    Returns:
      A :class:`~jaxrank.model.RankModel` over the rare-class basis (as :func:`jaxrank.fit_rankrc`)
      whose ``info`` is a :class:`~jaxrank.solver.SolverInfo`: ``objective`` and ``grad_norm``
      are the exact ``F`` and ``||∇F||_∞`` at the returned β (the best epoch's iterate),
      ``iterations`` the optimizer steps taken, ``cg_iterations`` 0 (there is no CG; the
      epochs run are ``history.epochs``), ``status`` ``CONVERGED`` (the objective stopped
      decreasing *and* ``grad_norm ≤ grad_tol · ||∇F(0)||_∞``), ``PRECISION`` (the objective
      stopped decreasing but the gradient certificate does not hold: the stochastic iterate
      stopped improving before the certificate held), ``MAX_ITER`` (epoch cap) or
      ``NONFINITE`` (an epoch ended non-finite; the best finite iterate is returned). With
      ``return_history``: ``(model, history)``.

    Raises:
      ValueError: on bad input (as :func:`jaxrank.fit`, plus a λ grid, a bad ``batch_size``,
        ``epochs``, ``patience``, ``grad_tol`` or ``init``, or a missing ``key``).

    Warns:
      ConvergenceWarning: whenever the status is not ``CONVERGED``: the epoch cap was hit
        (``MAX_ITER``), the plateau failed the gradient certificate (``PRECISION``) or the fit
        diverged (``NONFINITE``).

    Example:
      >>> import jax, jaxrank
      >>> from jaxrank.stochastic import fit_rankrc_stochastic
      >>> X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
      >>> model = fit_rankrc_stochastic(X, y, 1e-2, batch_size=90, key=jax.random.key(0),
      ...                               tol=1e-6, patience=5)  # defaults: PRECISION here
      >>> model.info.status == jaxrank.Status.CONVERGED
      Array(True, dtype=bool)
      >>> model.coef.shape, model.decision_function(X).shape
      ((30,), (300,))
    """
    X, pos = check_X_y(X, y)
    lams, scalar = check_lam(lam)
    if not scalar:
        raise ValueError(
            f"lam must be a scalar for the stochastic solver, got a grid of {lams.size} values; "
            "fit one λ per call."
        )
    key = check_key(key)
    n_pos = int(pos.sum())
    n_neg = int(pos.size - n_pos)
    batch_size = _check_int(batch_size, "batch_size")
    epochs = _check_int(epochs, "epochs")
    patience = _check_int(patience, "patience")
    tol = check_positive(tol, "tol")
    grad_tol = check_positive(grad_tol, "grad_tol")
    eps = check_positive(eps, "eps")
    learning_rate = check_positive(learning_rate, "learning_rate")
    decay = check_positive(decay, "decay")
    if decay > 1:
        raise ValueError(f"decay must be in (0, 1], got {decay!r}.")
    if optimizer is not None and not isinstance(optimizer, optax.GradientTransformation):
        raise ValueError(f"optimizer must be an optax.GradientTransformation, got {optimizer!r}.")
    dt = choose_dtype(X, dtype)
    check_cast(X, dt)
    check_lam_dtype(lams, dt)  # as fit_rows: a λ this dtype cannot solve is refused up front
    check_eps_dtype(eps, dt)
    check_in_dtype(learning_rate, "learning_rate", dt)
    kernel = _kernels.resolve_kernel(kernel, X, dtype=dt)

    n_batches = -(-n_neg // min(batch_size, n_neg))
    size = -(-n_neg // n_batches)
    if optimizer is None:
        optimizer = default_optimizer(learning_rate)
    chunk = size  # the exact evaluation streams in batch-sized chunks: memory O(size·m+)

    Xp = jnp.asarray(X[pos], dt)
    Xn = jnp.asarray(X[~pos], dt)
    Kpp = kernel(Xp, Xp)
    if rcond is not None:
        rcond = check_positive(rcond, "rcond")
    if whiten:
        T, forward = whitening(Kpp, rcond)
    else:
        T, forward = np.eye(n_pos), np.eye(n_pos)
    if init is None:
        beta0 = np.zeros((n_pos,), dt)
    else:
        beta0 = np.asarray(init, dt)
        if beta0.shape != (n_pos,):
            raise ValueError(f"init must have shape ({n_pos},), got {beta0.shape}.")
        if not np.all(np.isfinite(beta0)):
            raise ValueError("init contains NaN or infinite values.")
    w0 = jnp.asarray(forward @ beta0.astype(np.float64), dt)

    loss = jax.tree.map(lambda v: jnp.asarray(v, dt), smoothed_hinge(eps))
    beta, st, g_scale = _run(
        Xp, Xn, Kpp, jnp.asarray(T.T, dt), jnp.asarray(lams[0], dt), loss, kernel, w0, key,
        jnp.asarray(tol, dt), jnp.asarray(decay, dt), optimizer=optimizer,
        n_batches=n_batches, size=size, chunk=chunk, epochs=epochs, patience=patience,
    )  # fmt: skip
    n_epochs = int(st.epoch)
    status = Status(int(st.status))
    bound = grad_tol * float(g_scale)
    if status == Status.CONVERGED and not float(st.best_g) <= bound:
        # A plateau of the objective is not an optimality certificate: the gradient is.
        status = Status.PRECISION
    info = SolverInfo(
        objective=st.best_F,
        grad_norm=st.best_g,
        iterations=jnp.asarray(n_epochs * n_batches, jnp.int32),
        cg_iterations=jnp.zeros((), jnp.int32),
        status=jnp.asarray(int(status), jnp.int32),
    )
    check_fit_result(
        np.asarray(beta), int(status), "λ", lams[:1], who="fit_rankrc_stochastic", dtype=dt,
        causes=["the learning rate", "X's scale or the kernel's parameters for this dtype"],
    )  # fmt: skip
    warn_stopped(
        int(status), n_epochs * n_batches, "λ", lams[:1], "||grad||_∞=", float(st.best_g),
        head=f"stochastic RankRC stopped after {n_epochs} epochs: F={float(st.best_F):.6g}, "
        f"certificate ||grad||_∞ ≤ grad_tol·||∇F(0)||_∞ = {bound:.2e}",
        remedies={
            Status.PRECISION: "the objective stopped decreasing before the gradient certificate "
            "held: lower tol, raise patience or batch_size",
            Status.MAX_ITER: "raise epochs (or the learning rate)",
            Status.NONFINITE: "lower the learning rate, check the data and λ",
        },
        stacklevel=3,  # the caller of fit_rankrc_stochastic
    )  # fmt: skip
    model = RankModel(
        basis=Xp,
        coef=beta,
        lam=jnp.asarray(lams[0], dt),
        kernel=kernel,
        info=info,
        basis_index=jnp.asarray(np.flatnonzero(pos).astype(np.int32)),
        loss="smoothed_hinge",
        eps=float(eps),
    )
    if not return_history:
        return model
    return model, StochasticHistory(objective=st.hist_F, grad_norm=st.hist_g, epochs=st.epoch)
