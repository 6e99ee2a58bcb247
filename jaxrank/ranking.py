"""The pairwise AUC surrogate as a differentiable JAX loss over ``[..., n]`` scores.

For scores ``f``, labels (the positive class where ``True`` / ``> 0``), optional entry weights
``w`` and segments (one ranking per query or group), :func:`pairwise_loss` is (seed 000
eq. 13's data term; weighted pairs as in a weighted Mann-Whitney statistic)::

    L(f) = Σ_{i ∈ +} Σ_{j ∈ −, seg_j = seg_i} w_i w_j ℓ(f_i − f_j)           reduce="sum"
    L(f) / Σ_{i ∈ +} Σ_{j ∈ −, seg_j = seg_i} w_i w_j                        reduce="mean"

per ranking (one value per leading index), with ``ℓ`` a piecewise-quadratic surrogate of the
0-1 ranking loss (:mod:`jaxrank.losses`). ``reduce="mean"`` is the RankRC objective's
normalisation (``1/(m+ m−)`` without weights), so a network trained with it optimises the same
quantity a kernel fit reports as ``info.objective`` minus the regulariser.

It never forms the pair matrix: one sort of the ``n`` entries per ranking by (class, segment,
score) puts the positives first, sorted; each negative's linear and quadratic windows over them
come from a search, and the window sums from prefix sums — the sorted-window operators of
:mod:`jaxrank.pairwise` that the solver's own objective uses (value, gradient and
Hessian-vector product all O(n log n), docs/design.md §3). Masked entries
(``where=False``) sort last and enter no pair, so a masked call costs what an unmasked one does.

Exact at any finite scores: every window sum is taken relative to its own window (compressed
coordinates for the bounded quadratic window, distances to the window's top, with non-negative
increments, for the unbounded ones; ``jaxrank.pairwise.exact_value_and_grad_b``), so a
score far from the rest, as a network's can run away to, changes no other pair's terms (one
positive at 1e6 among 2000 float32 scores gave 1.2265 for 0.9852 before). ±inf scores whose
pairs cost nothing give the exact value; a pair that costs infinitely much gives inf; a NaN
score that enters a ranking makes its value and gradient NaN.

Derivatives: :func:`pairwise_loss` with ``reduce="mean"`` or ``"sum"`` carries a custom JVP
whose tangent is the operators' analytic gradient and whose second order is their
Hessian-vector product, so ``jax.grad``, ``jax.value_and_grad``, ``jax.jvp``, ``jax.hessian``
and forward-over-reverse HVPs cost one sort plus O(n) work and equal the pair loop's exact
derivatives (``tests/test_ranking.py``). The loss is differentiated with respect to the scores
only: labels, masks, segments, weights and ε are data (their tangents are dropped).

Which surrogates fit: any ``ℓ`` that is a polynomial of degree ≤ 2 on each of its three pieces
(smoothed hinge, squared hinge, hinge), because a window sum of ``(1 − f_i + f_j)²`` splits into
prefix sums of ``1, f, f²``. The logistic ``log(1 + e^{−z})`` does not split that way (no
finite set of prefix sums gives ``Σ_j log(1 + e^{f_j − f_i})``), so an exact all-pairs logistic
loss costs O(n+ n−) and is not offered.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from jax.interpreters import ad, batching, mlir

from jaxrank import losses as _losses
from jaxrank import pairwise as _pw
from jaxrank._checks import raise_if
from jaxrank.losses import PiecewiseQuadratic

__all__ = ["pairwise_auc", "pairwise_loss"]

_REDUCE = ("mean", "sum", "none")


def _resolve_loss(loss, eps) -> PiecewiseQuadratic:
    if isinstance(loss, PiecewiseQuadratic):
        return loss
    if loss == "logistic":
        raise ValueError(
            "loss='logistic' has no exact O(n log n) form: the sorted windows need a loss that "
            "is quadratic on each piece (see jaxrank.ranking); use 'smoothed_hinge', "
            "'squared_hinge' or 'hinge'."
        )
    if loss == "smoothed_hinge":
        if jnp.ndim(eps) != 0:
            raise ValueError(
                f"eps must be a scalar, got shape {jnp.shape(eps)}; for several ε, jax.vmap "
                "over it (each vmapped member may have its own)."
            )
        if _concrete(eps) and not (float(eps) > 0):
            raise ValueError(f"eps must be > 0 for the smoothed hinge, got {eps!r}.")
        return _losses.smoothed_hinge(eps)
    return _losses.get_loss(loss, eps)


def _float_scores(scores) -> jax.Array:
    s = jnp.asarray(scores)
    if not jnp.issubdtype(s.dtype, jnp.floating):
        s = s.astype(jax.dtypes.canonicalize_dtype(jnp.float64))
    if s.ndim == 0:
        raise ValueError("scores must have at least one axis ([..., n]); got a scalar.")
    return s


def _broadcast(name, x, shape, dtype=None):
    if x is None:
        return None
    x = jnp.asarray(x) if dtype is None else jnp.asarray(x).astype(dtype)
    try:
        return jnp.broadcast_to(x, shape)
    except ValueError:
        raise ValueError(
            f"{name} of shape {jnp.shape(x)} does not broadcast to the scores' {shape}."
        ) from None


class _Layout:
    """One ranking per row of a ``(B, n)`` batch, laid out for the pairwise operators.

    One sort per row by (class, segment, score), class 0 = positive, 1 = negative, 2 = masked:
    the positives come first in (segment, score) order (``fp``, ``n_pos`` real entries, the
    rest padding), the negatives next (``fn``, gathered to the front, ``n_neg`` real).
    """

    def __init__(self, s, pos, keep, seg, w):
        B, n = s.shape
        cls = jnp.where(keep, jnp.where(pos, 0, 1), 2).astype(jnp.int32)
        iota = jax.lax.broadcasted_iota(jnp.int32, (B, n), 1)
        keys = (cls,) if seg is None else (cls, seg)
        self.perm = _sort_order(keys, jax.lax.stop_gradient(s))
        self.fp = _pw.flat_take(s, self.perm)
        self.n_pos = jnp.sum(cls == 0, axis=1, dtype=jnp.int32)
        self.n_neg = jnp.sum(cls == 1, axis=1, dtype=jnp.int32)
        # negatives from position n_pos on, moved to the front (their layout in fn)
        self.neg_idx = jnp.minimum(iota + self.n_pos[:, None], n - 1)
        self.fn = _pw.flat_take(self.fp, self.neg_idx)
        self.wp = None if w is None else _pw.flat_take(w, self.perm)
        self.wn = None if w is None else _pw.flat_take(self.wp, self.neg_idx)
        self.seg = None
        if seg is not None:
            seg_sorted = _pw.flat_take(seg, self.perm)
            seg_n = _pw.flat_take(seg_sorted, self.neg_idx)
            self.seg = (seg_sorted, jnp.where(iota < self.n_neg[:, None], seg_n, -1))

    def segment_end(self):
        # per negative: the number of positives up to the end of its segment, the bound
        # (s, +inf) taken inclusively (not (s + 1, −inf): an id s + 1 can overflow)
        seg_p, seg_n = self.seg
        inf = jnp.full_like(self.fn, jnp.inf)
        end = _pw.bisect_rows(self.fp, seg_p, inf, seg_n, self.n_pos, right=True)
        return jnp.where(seg_n >= 0, end, 0)

    def counts(self):
        return self.n_pos, self.n_neg

    def opts(self):
        return dict(wp=self.wp, wn=self.wn, seg=self.seg, presorted=True)

    def sorted_to_entries(self, gp, gn):
        # (B, n) per-entry values in the input order from the fp / fn layouts
        n = gp.shape[1]
        k = jax.lax.broadcasted_iota(jnp.int32, gp.shape, 1)
        from_neg = _pw.flat_take(gn, jnp.clip(k - self.n_pos[:, None], 0, n - 1))
        is_neg = (k >= self.n_pos[:, None]) & (k < (self.n_pos + self.n_neg)[:, None])
        g_sorted = jnp.where(k < self.n_pos[:, None], gp, jnp.where(is_neg, from_neg, 0))
        return _pw.unsort(self.perm, g_sorted)

    def entries_to_sorted(self, t):
        tp = _pw.flat_take(t, self.perm)
        return tp, _pw.flat_take(tp, self.neg_idx)


def _sort_order(keys, s):
    """Per row, the order sorting by ``(*keys, s)`` (int32 / int64 keys, then the score).

    On CPU, a sort of more than :data:`HOST_SORT_MIN_ELEMENTS` entries (all rows together) goes
    through numpy's ``lexsort`` on the host (measured at n = 10⁵: 121 ms against 409 ms for
    ``lax.sort`` with two keys on a loaded 2-core machine; sorting is nearly all of the loss's
    cost there); elsewhere, and for smaller sorts, ``lax.sort`` (GPUs sort fast natively). A
    host callback cannot be serialised, so when the program is lowered for ``jax.export`` (any
    platforms, shape-polymorphic or not) the CPU branch is ``lax.sort`` too: the choice is made
    per lowering by the primitive ``_sort_order_p`` (issue 41 item 8).
    """
    return _sort_order_p.bind(*keys, s)


def _device_order(*args):
    iota = jax.lax.broadcasted_iota(jnp.int32, args[-1].shape, 1)
    return jax.lax.sort((*args, iota), dimension=1, num_keys=len(args))[-1]


def _host_order(*args):
    out = jax.ShapeDtypeStruct(args[-1].shape, jnp.int32)
    return jax.pure_callback(_lexsort, out, *args, vmap_method="broadcast_all")


def _lexsort(*args):
    # np.lexsort sorts by its last key first: (s, seg, cls) -> by cls, then seg, then s
    return np.lexsort(args[::-1], axis=-1).astype(np.int32)


HOST_SORT_MIN_ELEMENTS = 1024
"""On CPU, sorts of more entries than this (rows × length) run on the host, smaller ones in XLA.

The host callback has a fixed cost of ~0.25 ms a call; ``lax.sort`` costs more per entry. On a
2-core CPU (2 or 3 keys, one to 64 rows) they break even at ~1000 entries: at 256, 127 µs in XLA
against 393 µs on the host; at 4096, 795 against 420. Below the line XLA's sort is also what lets
the program be stored: JAX's persistent compilation cache refuses programs that hold a host
callback, so a small program with the loss (a tuner's step, a fit on a few hundred rows) is
compiled again by every process otherwise."""


def _sort_order_cpu_lowering(ctx, *args):
    # the host sort where the program runs in this process and the sort is large; lax.sort where
    # it is exported or small
    params = getattr(ctx.module_context, "lowering_parameters", None)
    if getattr(params, "for_export", False):  # (its shapes may be symbolic)
        return _LOWER_DEVICE(ctx, *args)
    small = math.prod(ctx.avals_in[-1].shape) <= HOST_SORT_MIN_ELEMENTS
    return _LOWER_DEVICE(ctx, *args) if small else _LOWER_HOST(ctx, *args)


def _sort_order_batch(args, dims):
    # vmap: the mapped axis folded into the rows, (b, B, n) -> (b·B, n) and back
    size = next(a.shape[d] for a, d in zip(args, dims, strict=True) if d is not None)
    moved = [
        jnp.broadcast_to(a, (size, *a.shape)) if d is None else jnp.moveaxis(a, d, 0)
        for a, d in zip(args, dims, strict=True)
    ]
    b, B, n = moved[-1].shape
    out = _sort_order_p.bind(*(a.reshape(b * B, n) for a in moved))
    return out.reshape(b, B, n), 0


def _sort_order_jvp(primals, tangents):
    # an order is integer: no tangent (JAX calls this only if a key or score carries one)
    out = _sort_order_p.bind(*primals)
    return out, ad.Zero(jax.typeof(out).to_tangent_aval())


_sort_order_p = jax.extend.core.Primitive("jaxrank_sort_order")
_sort_order_p.def_abstract_eval(
    lambda *args: jax.core.ShapedArray(args[-1].shape, jnp.dtype(jnp.int32))
)
_sort_order_p.def_impl(jax.jit(lambda *args: _sort_order_p.bind(*args)))
_LOWER_DEVICE = mlir.lower_fun(_device_order, multiple_results=False)
_LOWER_HOST = mlir.lower_fun(_host_order, multiple_results=False)
mlir.register_lowering(_sort_order_p, _LOWER_DEVICE)
mlir.register_lowering(_sort_order_p, _sort_order_cpu_lowering, platform="cpu")
batching.primitive_batchers[_sort_order_p] = _sort_order_batch
ad.primitive_jvps[_sort_order_p] = _sort_order_jvp


def _value_grad_windows(s, pos, keep, seg, w, loss, unbounded):
    # per-negative terms, the gradient of their sum per entry, the windows and the layout
    lay = _Layout(s, pos, keep, seg, w)
    terms, gp, gn, win = _exact(lay, loss, unbounded)
    g = lay.sorted_to_entries(gp, gn)
    return _nan_rows(s, keep, _pw.row_sum(terms)), _nan_rows(s, keep, g), win, lay


def _exact(lay, loss, unbounded):
    # unbounded: True for a quadratic piece without lower end (lo = −inf, the squared hinge),
    # None when lo is traced (both forms, chosen per ranking)
    run = lambda ub: _pw.exact_value_and_grad_b(
        lay.fp, lay.fn, loss, lay.counts(), wp=lay.wp, wn=lay.wn, seg=lay.seg, unbounded=ub
    )
    if unbounded is not None:
        return run(unbounded)
    bounded, free = run(False), run(True)
    pick = jnp.isneginf(jnp.asarray(loss.lo)).reshape(-1, 1) & jnp.ones((lay.fp.shape[0], 1), bool)
    choose = lambda x, y: x if x is None else jnp.where(pick if x.ndim == 2 else pick[:, 0], y, x)
    return jax.tree.map(choose, bounded, free, is_leaf=lambda x: x is None)


def _nan_rows(s, keep, x):
    # a NaN score that enters the loss makes its ranking's result NaN (the sums would not
    # otherwise carry it: a NaN sorts last and is compared false with every window bound)
    bad = jnp.any(jnp.isnan(s) & keep, axis=-1)
    return jnp.where(bad.reshape(bad.shape + (1,) * (x.ndim - 1)), jnp.nan, x)


@functools.partial(jax.custom_jvp, nondiff_argnums=(6,))
def _sum_loss(s, pos, keep, seg, w, loss, unbounded):
    return _value_grad_windows(s, pos, keep, seg, w, loss, unbounded)[0]


@_sum_loss.defjvp
def _sum_loss_jvp(unbounded, primals, tangents):
    value, g = _sum_loss_value_grad(*primals, unbounded)
    return value, jnp.sum(g * tangents[0], axis=-1)


@functools.partial(jax.custom_jvp, nondiff_argnums=(6,))
def _sum_loss_value_grad(s, pos, keep, seg, w, loss, unbounded):
    value, g, _, _ = _value_grad_windows(s, pos, keep, seg, w, loss, unbounded)
    return value, g


@_sum_loss_value_grad.defjvp
def _sum_loss_value_grad_jvp(unbounded, primals, tangents):
    s, pos, keep, seg, w, loss = primals
    t = tangents[0]
    value, g, win, lay = _value_grad_windows(s, pos, keep, seg, w, loss, unbounded)
    tp, tn = lay.entries_to_sorted(t)
    hp, hn = _pw.hvp_b(win, tp, tn, loss)
    h = _nan_rows(s, keep, lay.sorted_to_entries(hp, hn))
    return (value, g), (jnp.sum(g * t, axis=-1), h)


def _pair_weight(pos, keep, seg, w, dt):
    # Σ over the (positive, negative) pairs of each segment of w_i w_j, per row
    if seg is None:
        one = jnp.ones((), dt) if w is None else w
        wp = jnp.sum(jnp.where(keep & pos, one, 0), axis=1, dtype=dt)
        wn = jnp.sum(jnp.where(keep & ~pos, one, 0), axis=1, dtype=dt)
        return wp * wn
    # per negative: the (weighted) positives of its segment, [below (s, −∞), below (s + 1, −∞))
    lay = _Layout(jnp.zeros(pos.shape, dt), pos, keep, seg, w)
    begin = _pw.segment_bounds(lay.fp, lay.seg, lay.fn, -jnp.inf, lay.n_pos)[2]
    end = lay.segment_end()
    W = _positive_prefix(lay, dt)
    per_neg = _pw.flat_take(W, end) - _pw.flat_take(W, begin)
    if lay.wn is not None:
        per_neg = per_neg * lay.wn
    return jnp.sum(per_neg, axis=1)


def _positive_prefix(lay: _Layout, dt):
    # prefix sums of the real positives' weights (1 without weights) in sorted order
    k = jax.lax.broadcasted_iota(jnp.int32, lay.fp.shape, 1)
    one = jnp.ones((), dt) if lay.wp is None else lay.wp
    return _pw.prefix_sum(jnp.where(k < lay.n_pos[:, None], one, 0).astype(dt))


def pairwise_loss(
    scores,
    labels,
    *,
    loss: str | PiecewiseQuadratic = "smoothed_hinge",
    eps=0.5,
    where=None,
    weights=None,
    segments=None,
    reduce: str = "mean",
    throw: bool = False,
) -> jax.Array:
    """The all-pairs ranking surrogate of ``scores``, exact, in O(n log n) per ranking.

    Implements the data term of the RankRC objective (seed 000 eq. 13)::

        L = Σ_{i∈+} Σ_{j∈−} w_i w_j ℓ(f_i − f_j)  [/ Σ_{i∈+} Σ_{j∈−} w_i w_j for "mean"]

    over the pairs of each ranking (and of each segment within it), with ``ℓ`` the ε-smoothed
    hinge (linear below ``1 − 2ε``, ``(1 − z)²/(4ε)`` up to 1, zero above), the squared hinge
    or the hinge. Works under ``jit`` and ``vmap``; ``grad``, ``jvp``, ``hessian`` and HVPs
    with respect to ``scores`` are exact (module notes).

    Args:
      scores: ``[..., n]`` float scores; the leading axes are independent rankings.
      labels: ``[..., n]`` (broadcastable), the positive (rare) class where ``True`` or > 0.
      loss: ``"smoothed_hinge"`` (default), ``"squared_hinge"``, ``"hinge"`` or a
        :class:`~jaxrank.losses.PiecewiseQuadratic`.
      eps: ε of the smoothed hinge (> 0; may be traced).
      where: optional ``[..., n]`` bool mask; ``False`` entries enter no pair.
      weights: optional ``[..., n]`` non-negative entry weights; pair ``(i, j)`` weighs
        ``w_i w_j``. Treated as data (not differentiated).
      segments: optional ``[..., n]`` integer ids ≥ 0; only pairs within one segment count
        (one ranking per query, as in learning to rank).
      reduce: ``"mean"`` (over the weighted pairs; 0 for a ranking without pairs), ``"sum"``,
        or ``"none"``: ``[..., n]`` per-entry terms, each negative ``j`` holding
        ``w_j Σ_i w_i ℓ(f_i − f_j)`` and positives 0 (they sum to ``"sum"``).
      throw: static, default ``False``: a traced ε ≤ 0, a traced negative or NaN weight of a
        kept entry (concrete ones are always refused) or a NaN score of a kept entry makes its
        ranking's value and gradient NaN. ``True``: any of these raises when the program runs
        (under ``jit``, ``vmap``, ``grad``; an error whose message ends with ``ValueError:
        ...`` naming the input, ``jax.errors.JaxRuntimeError`` under JAX's runtime). A host
        callback: such a program cannot be ``jax.export``-ed; the default adds nothing.

    Returns:
      ``scores.shape[:-1]`` for ``"mean"`` and ``"sum"``; ``scores.shape`` for ``"none"``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> import jaxrank
      >>> f = jnp.array([2.0, 0.5, 0.0, -1.0])
      >>> y = jnp.array([1, 0, 1, 0])
      >>> float(jaxrank.pairwise_loss(f, y))  # mean of ℓ(1.5), ℓ(3), ℓ(-0.5) = 1, ℓ(1)
      0.25
      >>> g = jax.grad(lambda f: jaxrank.pairwise_loss(f, y))(f)
      >>> [round(float(v), 4) + 0.0 for v in g]  # + 0.0: no signed zeros
      [0.0, 0.25, -0.25, 0.0]
      >>> loss = jax.jit(lambda f: jaxrank.pairwise_loss(f, y, throw=True))
      >>> try:
      ...     loss(f.at[1].set(jnp.nan))
      ... except (ValueError, RuntimeError) as err:
      ...     print(str(err).splitlines()[-1])
      ValueError: pairwise_loss: a kept score is NaN (throw=True)
    """
    if reduce not in _REDUCE:
        raise ValueError(f"reduce must be one of {_REDUCE}, got {reduce!r}.")
    lossq = _resolve_loss(loss, eps)
    s, pos, keep, w, seg, bad = _arguments(scores, labels, where, weights, segments)
    if s.size == 0:  # no ranking at all (a leading axis of length 0)
        return jnp.zeros(s.shape if reduce == "none" else s.shape[:-1], s.dtype)
    w = None if w is None else jax.lax.stop_gradient(w)
    dt = _compute_dtype(s.dtype)
    lossq = jax.tree.map(lambda v: jax.lax.stop_gradient(jnp.asarray(v, dt)), lossq)
    bad_eps = None
    if not isinstance(loss, PiecewiseQuadratic) and loss == "smoothed_hinge":
        # a traced ε <= 0 (or NaN) has no loss: its rankings are NaN (a concrete one is refused)
        bad_eps = ~(jax.lax.stop_gradient(jnp.asarray(eps, dt)) > 0)
        bad = bad | bad_eps
    if throw:
        s = _throw("pairwise_loss", s, keep, w, bad_eps)
    s = _poison(s, keep, bad)
    out = _loss(s.astype(dt), pos, keep, seg, w, lossq, reduce, _unbounded(lossq.lo))
    return out.astype(s.dtype)


def _throw(name, s, keep, w, bad_eps):
    # throw=True: the scores pass through one host check of every traced invalid input
    preds = [jnp.isnan(jax.lax.stop_gradient(s)) & keep]
    msgs = [f"{name}: a kept score is NaN (throw=True)"]
    if w is not None:
        preds.append(keep & ~(w >= 0))
        msgs.append(f"{name}: weights must be >= 0 (and not NaN) where entries are kept, got a "
                    "traced negative or NaN weight (throw=True)")  # fmt: skip
    if bad_eps is not None:
        preds.append(bad_eps)
        msgs.append(f"{name}: eps must be > 0 for the smoothed hinge, got a traced value <= 0 "
                    "or NaN (throw=True)")  # fmt: skip
    return raise_if(s, tuple(preds), tuple(msgs))


def _poison(s, keep, bad):
    # NaN added to the kept scores of the rankings flagged ``bad`` (a traced invalid input), so
    # that their value and gradient are NaN (an addition: the gradient passes through)
    nan = jnp.where(bad[..., None] & keep, jnp.nan, 0).astype(s.dtype)
    return s + jax.lax.stop_gradient(nan)


def _unbounded(lo):
    # static: does the quadratic piece reach −inf (the squared hinge)? None: lo is traced
    try:
        return bool(np.isneginf(np.asarray(lo)).all())
    except jax.errors.TracerArrayConversionError:
        return None


@functools.partial(jax.jit, static_argnums=(6, 7))
def _loss(s, pos, keep, seg, w, loss, reduce, unbounded):
    # one compiled program per shape and option set; loss parameters (ε) are dynamic
    shape, n = s.shape, s.shape[-1]
    rows = lambda x: None if x is None else x.reshape(-1, n)
    args = (rows(s), rows(pos), rows(keep), rows(seg), rows(w))
    if reduce == "none":
        return _per_entry(*args, loss, unbounded).reshape(shape)
    value = _sum_loss(*args, loss, unbounded)
    if reduce == "mean":
        pairs = _pair_weight(*args[1:], s.dtype)
        # no pair: 0, unless the ranking is NaN (a NaN score, a traced invalid input)
        value = jnp.where((pairs > 0) | jnp.isnan(value), value / jnp.where(pairs > 0, pairs, 1), 0)
    return value.reshape(shape[:-1])


def _per_entry(s, pos, keep, seg, w, loss, unbounded):
    # Per negative j: w_j Σ_i w_i ℓ(f_i − f_j) (positives 0), differentiated by JAX itself.
    lay = _Layout(s, pos, keep, seg, w)
    terms = _exact(lay, loss, unbounded)[0]
    return _nan_rows(s, keep, lay.sorted_to_entries(jnp.zeros_like(terms), terms))


def pairwise_auc(
    scores, labels, *, where=None, weights=None, segments=None, throw: bool = False
) -> jax.Array:
    """The exact (weighted) AUC of ``scores`` per ranking, ties counting one half.

    ``Σ_{i∈+} Σ_{j∈−} w_i w_j ([f_i > f_j] + ½ [f_i = f_j]) / Σ w_i w_j`` over the pairs of each
    ranking (within segments when given): the Mann-Whitney statistic, with the signature of
    :func:`pairwise_loss`. O(n log n); NaN for a ranking without pairs. Not differentiable
    (piecewise constant): train with :func:`pairwise_loss`.

    Args:
      scores, labels, where, weights, segments, throw: as in :func:`pairwise_loss` (``throw``
        covers NaN scores and negative or NaN weights of kept entries).

    Returns:
      ``scores.shape[:-1]``.

    Example:
      >>> import jax.numpy as jnp
      >>> import jaxrank
      >>> float(jaxrank.pairwise_auc(jnp.array([2.0, 0.5, 0.0, -1.0]), jnp.array([1, 0, 1, 0])))
      0.75
    """
    s, pos, keep, w, seg, bad = _arguments(scores, labels, where, weights, segments)
    if s.size == 0:  # no ranking at all (a leading axis of length 0)
        return jnp.zeros(s.shape[:-1], s.dtype)
    s = jax.lax.stop_gradient(s)
    if throw:
        s = _throw("pairwise_auc", s, keep, w, None)
    s = _poison(s, keep, bad)
    return _auc(s, pos, keep, seg, w)


def _arguments(scores, labels, where, weights, segments):
    # (scores, positive mask, kept mask, weights or None, segments or None), all [..., n], and
    # per ranking whether a traced input is invalid (negative or NaN weight of a kept entry)
    s = _float_scores(scores)
    shape = s.shape
    if not isinstance(shape[-1], (int, np.integer)):
        # jax.export with a symbolic length: the sort would take it, the windows' searches and
        # blocked sums fix their passes from n
        raise ValueError(
            f"the score length must be a fixed number, got the symbolic {shape[-1]!r}: export "
            "for one padded length and mask the padding with where= (leading axes may be "
            "symbolic)."
        )
    if shape[-1] == 0:
        raise ValueError("scores has no entries (last axis of length 0).")
    labels = _broadcast("labels", labels, shape)
    pos = labels if labels.dtype == jnp.bool_ else labels > 0
    keep = jnp.ones(shape, bool) if where is None else _broadcast("where", where, shape, bool)
    w, bad = None, jnp.zeros(shape[:-1], bool)
    if weights is not None:
        w = _broadcast("weights", weights, shape, _compute_dtype(s.dtype))
        invalid = keep & ~(w >= 0)
        if _concrete(invalid) and bool(np.any(invalid)):
            raise ValueError("weights must be >= 0 (and not NaN) where entries are kept.")
        bad = jnp.any(invalid, axis=-1)
        # a masked entry's weight is never read: 0, so that a NaN there cannot reach a sum
        w = jnp.where(keep, w, 0)
    seg = None if segments is None else _segment_ids(segments, shape)
    return s, pos, keep, w, seg, bad


def _concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def _segment_ids(segments, shape):
    # integer ids >= 0 kept at their width (int64 under x64: ids 2**32 and 0 stay apart), never
    # truncated from floats or from a wider integer; concrete ids are checked here
    seg = segments if isinstance(segments, jax.Array) else np.asarray(segments)
    if not (jnp.issubdtype(seg.dtype, jnp.integer) or seg.dtype == jnp.bool_):
        raise TypeError(f"segments must be integer ids >= 0, got dtype {seg.dtype}.")
    wide = jax.dtypes.canonicalize_dtype(jnp.int64)
    if _concrete(seg):
        ids = np.asarray(seg)
        if ids.size and int(ids.min()) < 0:
            raise ValueError(f"segments must be ids >= 0, got {int(ids.min())}.")
        if ids.size and int(ids.max()) > np.iinfo(wide).max:
            raise ValueError(
                f"segment id {int(ids.max())} does not fit {np.dtype(wide).name} (enable x64, "
                "or number the segments 0, 1, 2, ...)."
            )
        seg = ids.astype(wide)
    elif seg.dtype != jnp.bool_ and jnp.iinfo(seg.dtype).max > np.iinfo(wide).max:
        raise TypeError(f"traced segments of dtype {seg.dtype} may not fit {np.dtype(wide).name}.")
    return _broadcast("segments", seg, shape, wide)


def _compute_dtype(dt):
    # float16 / bfloat16 scores are summed in float32: pair counts and sums of n = 5000
    # overflow float16 (65504) and lose 0.4 % in bfloat16
    return jnp.float32 if jnp.finfo(dt).bits < 32 else dt


@jax.jit
def _auc(s, pos, keep, seg, w):
    return _auc_rows(s.astype(_compute_dtype(s.dtype)), pos, keep, seg, w).astype(s.dtype)


def _auc_rows(s, pos, keep, seg, w):
    shape, n = s.shape, s.shape[-1]
    rows = lambda x: None if x is None else x.reshape(-1, n)
    args = (rows(pos), rows(keep), rows(seg), rows(w))
    s = rows(s)
    lay = _Layout(s, *args)
    # Per negative: the positives of its ranking tied with it, [a, b), and those above, [b, end)
    dt = s.dtype
    if lay.seg is None:
        zeros = jnp.zeros(lay.fp.shape, jnp.int32)
        seg_p, seg_n = zeros, zeros
        end = jnp.broadcast_to(lay.n_pos[:, None], lay.fn.shape)
    else:
        (seg_p, seg_n), end = lay.seg, lay.segment_end()
    a = _pw.bisect_rows(lay.fp, seg_p, lay.fn, seg_n, lay.n_pos)
    b = _pw.bisect_rows(lay.fp, seg_p, lay.fn, seg_n, lay.n_pos, right=True)
    W = _positive_prefix(lay, dt)
    take = lambda i: _pw.flat_take(W, i)
    credit = (take(end) - take(b)) + 0.5 * (take(b) - take(a))
    k = jax.lax.broadcasted_iota(jnp.int32, lay.fp.shape, 1)
    one = jnp.ones((), dt) if lay.wn is None else lay.wn
    wn = jnp.where(k < lay.n_neg[:, None], one, 0).astype(dt)
    num = jnp.sum(credit * wn, axis=1)
    # a NaN score is compared false with everything: its ranking's AUC is NaN, not a number
    return _nan_rows(s, args[1], num / _pair_weight(*args, dt)).reshape(shape[:-1])
