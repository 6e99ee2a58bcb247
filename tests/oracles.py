"""Explicit O(m+ m−) pair-loop oracles: the definitions the fast operators must equal."""

import numpy as np


def pieces(fp, fn, lo):
    """Linear / quadratic masks of every pair, decided as documented in jaxrank.pairwise."""
    fp = np.asarray(fp)[:, None]
    fn = np.asarray(fn)[None, :]
    lin = fp < fn + lo
    quad = ~lin & (fp < fn + 1)
    return lin, quad


def pair_value_grad_hvp(fp, fn, loss, dp, dn):
    """Value, gradient and Hessian-vector product of Σ_ij ℓ(fp_i − fn_j) by a pair loop."""
    lo, q, c = (float(v) for v in loss)
    fp, fn, dp, dn = (np.asarray(v, np.float64) for v in (fp, fn, dp, dn))
    value = 0.0
    gp = np.zeros_like(fp)
    gn = np.zeros_like(fn)
    hp = np.zeros_like(fp)
    hn = np.zeros_like(fn)
    for i in range(fp.size):
        for j in range(fn.size):
            z = fp[i] - fn[j]
            if fp[i] < fn[j] + lo:
                value += c - z
                gp[i] -= 1.0
                gn[j] += 1.0
            elif fp[i] < fn[j] + 1:
                value += q * (1 - z) ** 2
                d = -2 * q * (1 - z)
                gp[i] += d
                gn[j] -= d
                hp[i] += 2 * q * (dp[i] - dn[j])
                hn[j] += 2 * q * (dn[j] - dp[i])
    return value, gp, gn, hp, hn


def rank_objective(beta, K, Krr, pos, lam, loss):
    """F(β) of seed 000 eq. (11) by the pair loop (vectorised over pairs, no windows)."""
    lo, q, c = (float(v) for v in loss)
    f = K @ beta
    fp, fn = f[pos], f[~pos]
    z = fp[:, None] - fn[None, :]
    lin, quad = pieces(fp, fn, lo)
    val = np.where(lin, c - z, np.where(quad, q * (1 - z) ** 2, 0.0))
    return val.mean() + 0.5 * lam * beta @ Krr @ beta


def rank_grad_hess(beta, K, Krr, pos, lam, loss):
    """Gradient and Hessian of F(β) by the pair loop (dense, for small problems)."""
    lo, q, _c = (float(v) for v in loss)
    f = K @ beta
    Kp, Kn = K[pos], K[~pos]
    fp, fn = f[pos], f[~pos]
    z = fp[:, None] - fn[None, :]
    lin, quad = pieces(fp, fn, lo)
    dl = np.where(lin, -1.0, np.where(quad, -2 * q * (1 - z), 0.0))
    n = fp.size * fn.size
    A = Kp[:, None, :] - Kn[None, :, :]  # (m+, m−, R) pair differences
    grad = np.einsum("ij,ijr->r", dl, A) / n + lam * Krr @ beta
    H = 2 * q * np.einsum("ij,ijr,ijs->rs", quad.astype(float), A, A) / n + lam * Krr
    return grad, H


def multilevel_value_grad_hvp(f, levels, loss, d):
    """Σ over every pair with level_i > level_j of ℓ(f_i − f_j) (seed 003 eq. 47-48, before
    normalisation), its score gradient and Hessian-vector product, by a pair loop.

    Rows in any order; returns ``(value, grad, hvp)`` with ``grad`` and ``hvp`` of shape ``(n,)``.
    """
    lo, q, c = (float(v) for v in loss)
    f, d = np.asarray(f, np.float64), np.asarray(d, np.float64)
    levels = np.asarray(levels)
    value = 0.0
    g = np.zeros_like(f)
    h = np.zeros_like(f)
    for i in range(f.size):
        for j in range(f.size):
            if not levels[i] > levels[j]:
                continue
            z = f[i] - f[j]
            if f[i] < f[j] + lo:
                value += c - z
                g[i] -= 1.0
                g[j] += 1.0
            elif f[i] < f[j] + 1:
                value += q * (1 - z) ** 2
                gz = -2 * q * (1 - z)
                g[i] += gz
                g[j] -= gz
                h[i] += 2 * q * (d[i] - d[j])
                h[j] += 2 * q * (d[j] - d[i])
    return value, g, h


def multilevel_objective(beta, K, Krr, levels, lam, loss, v):
    """F(β), ∇F(β) and ∇²F(β)·v of seed 003 eq. (48) by the pair loop (any row order of K)."""
    levels = np.asarray(levels)
    _, counts = np.unique(levels, return_counts=True)
    n_pairs = sum(counts[s] * counts[:s].sum() for s in range(1, counts.size))
    value, g, h = multilevel_value_grad_hvp(K @ beta, levels, loss, K @ v)
    F = value / n_pairs + 0.5 * lam * beta @ Krr @ beta
    grad = K.T @ g / n_pairs + lam * Krr @ beta
    Hv = K.T @ h / n_pairs + lam * Krr @ v
    return F, grad, Hv


def ranking_loss_oracle(s, pos, keep, w, seg, loss, d):
    """Σ over (positive, negative) pairs of one segment of w_i w_j ℓ(f_i − f_j), its gradient and
    its Hessian times ``d``, by a pair loop over one ranking (masked entries enter no pair)."""
    lo, q, c = (float(v) for v in loss)
    s, w, d = (np.asarray(v, np.float64) for v in (s, w, d))
    value, pairs = 0.0, 0.0
    g = np.zeros_like(s)
    h = np.zeros_like(s)
    for i in np.flatnonzero(pos & keep):
        for j in np.flatnonzero(~pos & keep):
            if seg[i] != seg[j]:
                continue
            ww = w[i] * w[j]
            pairs += ww
            z = s[i] - s[j]
            # written as s_i < s_j + lo, not z < lo: at s_j = +inf with no linear piece
            # (lo = −inf) the sum is NaN and the test False, as that pair has no linear term
            with np.errstate(invalid="ignore"):
                linear = s[i] < s[j] + lo
            if linear:
                value += ww * (c - z)
                g[i] -= ww
                g[j] += ww
            elif s[i] < s[j] + 1:
                value += ww * q * (1 - z) ** 2
                gz = -2 * q * (1 - z) * ww
                g[i] += gz
                g[j] -= gz
                h[i] += 2 * q * ww * (d[i] - d[j])
                h[j] += 2 * q * ww * (d[j] - d[i])
    return value, pairs, g, h
