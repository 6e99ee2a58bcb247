"""The hot path: the biclass pairwise loss, its gradient and Hessian-vector product in O(m log m).

For scores ``fp`` of the m+ positives and ``fn`` of the m− negatives, and a piecewise-quadratic
loss ℓ (:mod:`jaxrank.losses`), these functions compute (seed 000 eq. 18-20, in score space)::

    L(f)            = Σ_{i∈+} Σ_{j∈−} ℓ(f_i − f_j)
    ∂L/∂f_i         = Σ_j ℓ'(f_i − f_j)          ∂L/∂f_j = −Σ_i ℓ'(f_i − f_j)
    (∇²L · d)_i     = Σ_{j∈Q(i)} ℓ''·(d_i − d_j)  (∇²L · d)_j = Σ_{i∈Q(j)} ℓ''·(d_j − d_i)

without ever forming the m+ × m− pair matrix. Only the positives are sorted (m+ log m+, the
small side on rare-class data). For each negative ``j`` the positives whose pair with ``j`` is in
the linear piece (``f_i < f_j + lo``) are the sorted positives ``[0, a_j)``, those in the
quadratic piece (``f_j + lo ≤ f_i < f_j + 1``) are ``[a_j, b_j)``; ``a_j`` and ``b_j`` come from
``searchsorted`` (m− log m+). Then

- per negative: window counts and sums over positives are differences of prefix sums of
  ``1, f, f²`` (or of ``d``) over the sorted positives, gathered at ``a_j`` and ``b_j``;
- per positive: window counts and sums over negatives come from a difference array — add a
  negative's value at bin ``a_j``, subtract it at bin ``b_j`` (one ``segment_sum`` of 2m−
  values into m+ + 1 bins) and take a cumulative sum over the m+ bins.

The windows depend only on the current iterate, so :func:`windows` runs once per Newton step and
:func:`hvp` reuses them in every CG step: O(m−) gathers and one scatter per product.

Precision: scores are shifted by the mean positive score first (the loss only sees
differences), and the per-positive difference array only receives negatives whose quadratic
window is non-empty, so float32 sums do not carry the cancellation of m−-long prefix sums of
large values.

The explicit O(m+ m−) pair loop is the test oracle (``tests/test_pairwise.py``), never the
implementation.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrank.losses import PiecewiseQuadratic

__all__ = ["Windows", "hvp", "value_and_grad", "windows"]


class Windows(NamedTuple):
    """Which pairs lie in which piece of ℓ at the current scores (one Newton step's "sort").

    Attributes:
      order: ``(m+,)`` int32, positives in ascending score order.
      sp: ``(m+,)`` sorted positive scores, shifted by their mean.
      fn: ``(m−,)`` negative scores, shifted by the same amount.
      a: ``(m−,)`` int32, sorted positives ``[0, a_j)`` are in negative j's linear piece.
      b: ``(m−,)`` int32, sorted positives ``[a_j, b_j)`` are in its quadratic piece.
      active: ``(m−,)`` bool, ``b_j > a_j`` (the negative has at least one quadratic pair).
      nl: ``(m+,)`` int32, per sorted positive, the number of negatives in its linear piece.
      nq: ``(m+,)`` int32, per sorted positive, the number of negatives in its quadratic piece.
    """

    order: jax.Array
    sp: jax.Array
    fn: jax.Array
    a: jax.Array
    b: jax.Array
    active: jax.Array
    nl: jax.Array
    nq: jax.Array


# Every operator is written once, natively over a leading batch axis ``(B, n)`` with flat
# (offset) indices, so that a λ grid batched by ``jax.vmap`` runs one 1-D gather / scatter over
# all members instead of JAX's generic batched gathers and scatters (3x slower on CPU). The
# public single-problem functions are ``custom_vmap`` wrappers of the batched ones.


def _offsets(B: int, width: int) -> jax.Array:
    return (jnp.arange(B, dtype=jnp.int32) * width)[:, None]


def _flat_take(x: jax.Array, idx: jax.Array) -> jax.Array:
    # x[b, idx[b, j]] for every row b, as one 1-D gather.
    B, n = x.shape
    return x.ravel()[(idx + _offsets(B, n)).ravel()].reshape(idx.shape)


def _searchsorted_rows(sorted_rows: jax.Array, q: jax.Array) -> jax.Array:
    # Per row b: #{k : sorted_rows[b, k] < q[b, j]} (numpy's side="left"), exactly.
    #
    # Bucket first, then bisect inside one bucket. ``bucket`` maps a value to one of ``nk``
    # equal-width cells over the row's range; it is monotone (a float subtraction, a product
    # with a positive scale and a floor never reverse an order), so every sorted value in a
    # lower cell than q is < q and every one in a higher cell is ≥ q: the answer lies in the
    # index range of q's own cell, ``[start[c], start[c + 1]]``. With ~4 cells per sorted
    # value that range holds a few values, so the bisection over it (a while loop until every
    # range is closed) takes a few steps instead of log2(n) over the whole row. Measured on
    # CPU for 16 λ at m = 10⁵ (16 × 99 000 queries into 1000 sorted values): 19-24 ms against
    # 26-28 ms for the full bisection: ~20 %, as the per-step gathers, not the step count, cost.
    B, n = sorted_rows.shape
    dt = sorted_rows.dtype
    nk = 4 * n
    first, last = sorted_rows[:, :1], sorted_rows[:, -1:]
    width = last - first
    scale = jnp.where(width > 0, nk / jnp.where(width > 0, width, 1), 0).astype(dt)
    scale = jnp.where(jnp.isfinite(scale), scale, 0)

    def bucket(v):
        c = jnp.floor((v - first) * scale)
        # NaN (a diverged iterate) goes to cell 0: the answer is then any index, not a crash
        c = jnp.where(jnp.isnan(c), 0, c)
        return jnp.clip(c, 0, nk - 1).astype(jnp.int32)

    cell_off = _offsets(B, nk + 1)
    counts = jax.ops.segment_sum(
        jnp.ones((B * n,), jnp.int32), (bucket(sorted_rows) + 1 + cell_off).ravel(),
        num_segments=B * (nk + 1),
    )  # fmt: skip
    start = jnp.cumsum(counts.reshape(B, nk + 1), axis=-1)  # start[c] = #{k : cell_k < c}
    cq = bucket(q)
    lo = _flat_take(start, cq)
    hi = _flat_take(start, cq + 1)
    flat = sorted_rows.ravel()
    off = _offsets(B, n)

    def step(lohi):
        lo, hi = lohi
        open_ = lo < hi
        mid = (lo + hi) // 2
        go_right = (flat[jnp.minimum(mid, n - 1) + off] < q) & open_
        return jnp.where(go_right, mid + 1, lo), jnp.where(go_right | ~open_, hi, mid)

    lo, _ = jax.lax.while_loop(lambda lohi: jnp.any(lohi[0] < lohi[1]), step, (lo, hi))
    return lo


def _bin_cumsum(a: jax.Array, b: jax.Array, values: jax.Array, n_bins: int) -> jax.Array:
    # Per row: Σ_{j: a_j ≤ k < b_j} values_j for k < n_bins, by a difference array over the
    # bins (one flat segment_sum for all rows) and a cumulative sum.
    B = a.shape[0]
    off = _offsets(B, n_bins + 1)
    ids = jnp.concatenate([(a + off).ravel(), (b + off).ravel()])
    vals = jnp.concatenate([values.ravel(), -values.ravel()])
    diff = jax.ops.segment_sum(vals, ids, num_segments=B * (n_bins + 1))
    return jnp.cumsum(diff.reshape(B, n_bins + 1)[:, :n_bins], axis=-1)


def _prefix(x: jax.Array) -> jax.Array:
    return jnp.concatenate([jnp.zeros((x.shape[0], 1), x.dtype), jnp.cumsum(x, axis=-1)], -1)


def _unsort(order: jax.Array, x_sorted: jax.Array) -> jax.Array:
    B, n = x_sorted.shape
    flat = jnp.zeros((B * n,), x_sorted.dtype)
    idx = (order + _offsets(B, n)).ravel()
    return flat.at[idx].set(x_sorted.ravel(), unique_indices=True).reshape(B, n)


def _windows_b(fp: jax.Array, fn: jax.Array, loss: PiecewiseQuadratic) -> Windows:
    dt = fp.dtype
    n_pos = fp.shape[1]
    n_neg = fn.shape[1]
    order = jnp.argsort(fp, axis=-1).astype(jnp.int32)
    fp_sorted = jnp.take_along_axis(fp, order, axis=-1)
    lo = jnp.asarray(loss.lo, dt)
    lo = lo[:, None] if lo.ndim else lo
    # Pieces are decided on the unshifted scores: pair (i, j) is linear iff f_i < f_j + lo and
    # quadratic iff f_j + lo ≤ f_i < f_j + 1 (a tie at a breakpoint takes the upper piece).
    a = _searchsorted_rows(fp_sorted, fn + lo)
    b = _searchsorted_rows(fp_sorted, fn + 1)
    shift = jnp.mean(fp, axis=-1, keepdims=True)
    sp = fp_sorted - shift
    fn = fn - shift
    active = b > a
    nq = _bin_cumsum(a, b, active.astype(jnp.int32), n_pos)
    # a_j ≤ k counts every negative whose linear window ends at or before k.
    a_le = _bin_cumsum(a, jnp.full_like(a, n_pos), jnp.ones_like(a), n_pos)
    nl = n_neg - a_le
    return Windows(order=order, sp=sp, fn=fn, a=a, b=b, active=active, nl=nl, nq=nq)


def _loss_col(v, dt):
    v = jnp.asarray(v, dt)
    return v[:, None] if v.ndim else v


def _value_and_grad_b(fp, fn, loss):
    w = _windows_b(fp, fn, loss)
    dt = fp.dtype
    q = _loss_col(loss.q, dt)
    c = _loss_col(loss.c, dt)
    P1 = _prefix(w.sp)
    P2 = _prefix(w.sp * w.sp)
    af = w.a.astype(dt)
    nqn = (w.b - w.a).astype(dt)
    P1a, P1b = _flat_take(P1, w.a), _flat_take(P1, w.b)
    S1 = P1b - P1a
    S2 = _flat_take(P2, w.b) - _flat_take(P2, w.a)
    u = w.fn
    one_u = 1 + u
    lin = af * (c + u) - P1a
    quad = q * (nqn * one_u * one_u - 2 * one_u * S1 + S2)
    value = jnp.sum(lin + quad, axis=-1)
    grad_neg = af + 2 * q * (nqn * one_u - S1)
    # Σ_{j∈Q(k)} (1 + f_j): only active negatives enter the difference array.
    sq = _bin_cumsum(w.a, w.b, jnp.where(w.active, one_u, 0), fp.shape[1])
    grad_sorted = -w.nl.astype(dt) - 2 * q * (sq - w.nq.astype(dt) * w.sp)
    return value, _unsort(w.order, grad_sorted), grad_neg, w


def _hvp_b(w: Windows, dp, dn, loss):
    dt = dp.dtype
    q2 = 2 * _loss_col(loss.q, dt)
    ds = jnp.take_along_axis(dp, w.order, axis=-1)
    DP = _prefix(ds)
    h_neg = q2 * ((w.b - w.a).astype(dt) * dn - (_flat_take(DP, w.b) - _flat_take(DP, w.a)))
    sd = _bin_cumsum(w.a, w.b, jnp.where(w.active, dn, 0), dp.shape[1])
    h_sorted = q2 * (w.nq.astype(dt) * ds - sd)
    return _unsort(w.order, h_sorted), h_neg


def _batched(impl):
    """Wrap a ``(B, n)``-native implementation as a single-problem function whose ``vmap`` runs
    the native batched code (leading vmapped axes are moved to the front and flattened)."""

    def single(*args):
        out = impl(*jax.tree.map(lambda x: jnp.asarray(x)[None], args))
        return jax.tree.map(lambda x: x[0], out)

    fun = jax.custom_batching.custom_vmap(single)

    @fun.def_vmap
    def rule(axis_size, in_batched, *args):
        args = jax.tree.map(
            lambda x, b: x if b else jnp.broadcast_to(x, (axis_size, *jnp.shape(x))),
            args,
            tuple(in_batched),
        )
        out = impl(*args)
        return out, jax.tree.map(lambda _: True, out)

    return fun


_windows = _batched(_windows_b)
_value_and_grad = _batched(_value_and_grad_b)
_hvp = _batched(_hvp_b)


def windows(fp: jax.Array, fn: jax.Array, loss: PiecewiseQuadratic) -> Windows:
    """Sort the positives and locate every negative's linear and quadratic windows.

    Args:
      fp: positive scores, shape ``(m+,)``.
      fn: negative scores, shape ``(m−,)``.
      loss: the piece boundaries of ℓ.

    Returns:
      The :class:`Windows` at these scores. Cost O(m+ log m+ + m− log m+).
    """
    return _windows(fp, fn, loss)


def value_and_grad(
    fp: jax.Array, fn: jax.Array, loss: PiecewiseQuadratic
) -> tuple[jax.Array, jax.Array, jax.Array, Windows]:
    """``L(f) = Σ_{i∈+} Σ_{j∈−} ℓ(f_i − f_j)`` and its gradient in score space.

    Seed 000 eq. (18)-(20) with the sorted windows of DESIGN §3: per negative ``j`` (``u = f_j``,
    ``w = 1 + u``, sorted positives ``s``, window ``[a, b)``, ``n = b − a``)::

        Σ_i ℓ(s_i − u) = a (c + u) − Σ_{k<a} s_k + q (n w² − 2 w Σ_{a≤k<b} s_k + Σ_{a≤k<b} s_k²)
        ∂L/∂u          = a + 2q (n w − Σ_{a≤k<b} s_k)

    and per sorted positive ``k``: ``∂L/∂s_k = −nl_k − 2q Σ_{j∈Q(k)} (1 − s_k + f_j)``.

    ``jax.vmap`` of this function (a λ grid) runs a native batched implementation. It is not
    differentiable by JAX (it *is* the derivative); use :func:`hvp` for second order.

    Args:
      fp: positive scores ``(m+,)``.
      fn: negative scores ``(m−,)``.
      loss: the piece boundaries of ℓ.

    Returns:
      ``(value, grad_pos, grad_neg, windows)``: the unnormalised sum, ``(m+,)`` and ``(m−,)``
      gradients, and the :class:`Windows` to reuse in :func:`hvp`.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxrank.losses import smoothed_hinge
      >>> v, gp, gn, _ = value_and_grad(jnp.array([1.0]), jnp.array([0.0, 2.0]), smoothed_hinge())
      >>> float(v)  # ℓ(1) + ℓ(−1) = 0 + 1.5
      1.5
    """
    return _value_and_grad(fp, fn, loss)


def hvp(
    w: Windows, dp: jax.Array, dn: jax.Array, loss: PiecewiseQuadratic
) -> tuple[jax.Array, jax.Array]:
    """Hessian-vector product of ``L`` in score space, reusing a step's :class:`Windows`.

    Each pair in the quadratic piece contributes ``2q (d_i − d_j)`` to positive ``i`` and
    ``2q (d_j − d_i)`` to negative ``j`` (seed 000, the ``I^Q`` term of the Hessian after
    eq. 20; DESIGN §3)::

        (H d)_k = 2q (nq_k d_k − Σ_{j∈Q(k)} d_j)       (H d)_j = 2q (n_j d_j − Σ_{a_j≤k<b_j} d_k)

    Args:
      w: the windows from :func:`value_and_grad` at the current scores.
      dp: direction on the positives ``(m+,)``.
      dn: direction on the negatives ``(m−,)``.
      loss: the piece boundaries of ℓ (only ``q`` is used).

    Returns:
      ``(h_pos, h_neg)`` of shapes ``(m+,)`` and ``(m−,)``.
    """
    return _hvp(w, dp, dn, loss)
