"""Train a small network for AUC with jaxrank's all-pairs loss, beside rax and cross-entropy.

A two-layer MLP (plain JAX + optax) on rare-class data (``jaxrank.datasets.make_rare_class``:
2 % positives), trained full-batch — every epoch sees every (positive, negative) pair, none
sampled — with four losses:

- ``jaxrank.pairwise_loss``: the smoothed-hinge AUC surrogate, exact, O(n log n);
- ``rax.pairwise_hinge_loss`` and ``rax.pairwise_logistic_loss``: the same kind of all-pairs
  loss, formed as an n × n pair matrix (skipped when rax is not installed);
- binary cross-entropy (``optax.sigmoid_binary_cross_entropy``), the usual baseline.

Prints each loss's time per epoch and the test AUC (``jaxrank.pairwise_auc``). Run:
``python examples/auc_network.py [--small]``; ``notebooks/auc_network.ipynb`` walks through the
same steps.
"""

from __future__ import annotations

import argparse
import itertools
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxrank


def init_mlp(key, sizes, dtype=jnp.float32):
    params = []
    keys = jax.random.split(key, len(sizes) - 1)
    for k, (a, b) in zip(keys, itertools.pairwise(sizes), strict=True):
        w = jax.random.normal(k, (a, b), dtype) * jnp.sqrt(2.0 / a).astype(dtype)
        params.append((w, jnp.zeros(b, dtype)))
    return params


def mlp(params, X):
    for W, b in params[:-1]:
        X = jax.nn.relu(X @ W + b)
    W, b = params[-1]
    return (X @ W + b)[:, 0]


def make_losses():
    out = {
        "jaxrank pairwise": lambda f, y: jaxrank.pairwise_loss(f, y),
        "cross-entropy": lambda f, y: jnp.mean(optax.sigmoid_binary_cross_entropy(f, y)),
    }
    try:
        import rax
    except ImportError:
        return out
    out["rax pairwise hinge"] = lambda f, y: rax.pairwise_hinge_loss(f, y)
    out["rax pairwise logistic"] = lambda f, y: rax.pairwise_logistic_loss(f, y)
    return out


def train(loss, X, y, *, epochs, key, lr=3e-3):
    opt = optax.adam(lr)
    params = init_mlp(key, (X.shape[1], 32, 32, 1))

    @jax.jit
    def run(params):
        def epoch(carry, _):
            params, state = carry
            value, grad = jax.value_and_grad(lambda p: loss(mlp(p, X), y))(params)
            updates, state = opt.update(grad, state, params)
            return (optax.apply_updates(params, updates), state), value

        (params, _), values = jax.lax.scan(epoch, (params, opt.init(params)), length=epochs)
        return params, values

    jax.block_until_ready(run(params))  # compile
    t0 = time.perf_counter()
    params, values = jax.block_until_ready(run(params))
    return params, values, (time.perf_counter() - t0) / epochs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--small", action="store_true", help="1,000 training rows, 50 epochs")
    args = p.parse_args(argv)
    m, epochs = (1_000, 50) if args.small else (4_000, 300)
    X, y = jaxrank.datasets.make_rare_class(2 * m, 0.02, 0.75, seed=0)
    X, y = np.asarray(X, np.float32), np.asarray(y) == 1
    mu, sd = X[:m].mean(0), X[:m].std(0)
    Xtr, Xte = jnp.asarray((X[:m] - mu) / sd), jnp.asarray((X[m:] - mu) / sd)
    ytr, yte = jnp.asarray(y[:m], jnp.float32), y[m:]
    print(f"{m} training rows, {int(ytr.sum())} positive; {epochs} full-batch epochs")
    for name, loss in make_losses().items():
        params, _, per_epoch = train(loss, Xtr, ytr, epochs=epochs, key=jax.random.key(0))
        auc = float(jaxrank.pairwise_auc(mlp(params, Xte), yte))
        print(f"{name:24s} {per_epoch * 1e3:8.2f} ms/epoch   test AUC {auc:.4f}")


if __name__ == "__main__":
    main()
