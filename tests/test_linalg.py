"""jaxrank._linalg: factorisations that loop instead of batching on CPU (no pool deadlock).

The values and derivatives must be the plain jax.numpy / jax.scipy ones; under vmap on CPU the
compiled program must hold no batched LAPACK call (one matrix per call); and the pattern that
hung XLA:CPU's thread pool (batched factorisations from several threads, two independent ones in
one program) must now finish.
"""

import re
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrank import _linalg

RNG = np.random.default_rng(0)


def _spd(*batch, n=5):
    A = RNG.normal(size=(*batch, n, n))
    return jnp.asarray(A @ np.swapaxes(A, -1, -2) + n * np.eye(n))


def _rhs(*batch, n=5, k=2):
    return jnp.asarray(RNG.normal(size=(*batch, n, k)))


def _lower(A):
    return jnp.linalg.cholesky(A)


# name -> (safe, plain, operands from a batch shape)
OPS = {
    "cholesky": (_linalg.cholesky, jnp.linalg.cholesky, lambda *b: (_spd(*b),)),
    "eigvalsh": (_linalg.eigvalsh, jnp.linalg.eigvalsh, lambda *b: (_spd(*b),)),
    "eigh_values": (
        lambda a: _linalg.eigh(a)[0],
        lambda a: jnp.linalg.eigh(a)[0],
        lambda *b: (_spd(*b),),
    ),
    "solve_lower": (
        lambda a, b: _linalg.solve_triangular(a, b, lower=True),
        lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=True),
        lambda *b: (_lower(_spd(*b)), _rhs(*b)),
    ),
    "solve_lower_T": (
        lambda a, b: _linalg.solve_triangular(a, b, lower=True, trans="T"),
        lambda a, b: jax.scipy.linalg.solve_triangular(a, b, lower=True, trans="T"),
        lambda *b: (_lower(_spd(*b)), _rhs(*b)),
    ),
    "cho_solve": (
        _linalg.cho_solve,
        lambda c, b: jax.scipy.linalg.cho_solve((c, True), b),
        lambda *b: (_lower(_spd(*b)), _rhs(*b)),
    ),
}


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("batch", [(), (3,), (2, 3)], ids=["single", "vmap", "vmap2"])
def test_values_match_plain(name, batch):
    safe, plain, make = OPS[name]
    args = make(*batch)
    f = safe
    for _ in batch:
        f = jax.vmap(f)
    got, want = jax.jit(f)(*args), plain(*args)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12, atol=1e-12)


def test_eigenvectors_match_plain():
    A = _spd(4)
    w, v = jax.vmap(_linalg.eigh)(A)
    w0, v0 = jnp.linalg.eigh(A)
    np.testing.assert_allclose(np.asarray(w), np.asarray(w0), rtol=1e-12)
    # the same LAPACK routine on each matrix: the same signs too
    np.testing.assert_allclose(np.asarray(v), np.asarray(v0), atol=1e-12)


@pytest.mark.parametrize("name", sorted(OPS))
def test_derivatives_match_plain(name):
    safe, plain, make = OPS[name]
    args = make()
    tangents = tuple(jnp.asarray(RNG.normal(size=a.shape)) for a in args)
    if name.startswith("solve") or name == "cho_solve":  # keep the factor triangular
        tangents = (jnp.tril(tangents[0]), *tangents[1:])
    loss = lambda f: lambda *a: jnp.sum(f(*a) ** 2)
    g, g0 = jax.grad(loss(safe))(*args), jax.grad(loss(plain))(*args)
    np.testing.assert_allclose(np.asarray(g), np.asarray(g0), rtol=1e-10, atol=1e-10)
    t, t0 = jax.jvp(safe, args, tangents)[1], jax.jvp(plain, args, tangents)[1]
    np.testing.assert_allclose(np.asarray(t), np.asarray(t0), rtol=1e-10, atol=1e-10)
    # a derivative under vmap
    batched = make(3)
    gv = jax.vmap(jax.grad(loss(safe)))(*batched)
    gv0 = jax.vmap(jax.grad(loss(plain)))(*batched)
    np.testing.assert_allclose(np.asarray(gv), np.asarray(gv0), rtol=1e-10, atol=1e-10)


def lapack_operand_ranks(hlo: str) -> list[tuple[str, int]]:
    """(target, rank of its first result) of every LAPACK custom call in an HLO text."""
    out = []
    for line in hlo.splitlines():
        m = re.search(r'custom_call_target="(lapack_\w+)"', line)
        if m:
            shape = re.search(r"\[([\d,]*)\]", line.split("custom-call(")[0]).group(1)
            out.append((m.group(1), len(shape.split(","))))
    return out


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the loop is the CPU rule")
def test_vmapped_ops_lower_to_one_matrix_per_call():
    A = _spd(4, 3)
    f = jax.vmap(jax.vmap(lambda a: _linalg.cho_solve(_linalg.cholesky(a), a) + _linalg.eigh(a)[1]))
    ranks = lapack_operand_ranks(jax.jit(f).lower(A).as_text(dialect="hlo"))
    assert {t.split("_")[1][1:] for t, _ in ranks} >= {"potrf", "trsm", "syevd"}
    assert all(r == 2 for _, r in ranks), ranks
    # the plain functions batch the call: what hung
    plain = jax.vmap(lambda a: jnp.linalg.cholesky(a))
    assert any(
        r == 3 for _, r in lapack_operand_ranks(jax.jit(plain).lower(A[0]).as_text(dialect="hlo"))
    )


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the loop is the CPU rule")
def test_vmapped_core_holds_no_batched_lapack_call():
    import jaxrank
    from jaxrank.core import fit_core
    from jaxrank.kernels import Gaussian

    X, y = jaxrank.datasets.make_rare_class(120, 0.1, 0.75, seed=0)
    X = jnp.asarray(X)
    pos = jnp.asarray(y == 1)
    lams = jnp.asarray([0.01, 0.1, 1.0])
    f = jax.vmap(lambda s: fit_core(X, pos, lams, X[pos], kernel=Gaussian(s)).coef)
    ranks = lapack_operand_ranks(jax.jit(f).lower(jnp.asarray([0.5, 1.0])).as_text(dialect="hlo"))
    assert ranks and all(r == 2 for _, r in ranks), ranks


HANG_SCRIPT = textwrap.dedent(
    """
    import threading, time, jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    from jaxrank import _linalg
    A = np.random.default_rng(0).normal(size=(16, 300, 300))
    A = jnp.asarray(A @ A.transpose(0, 2, 1) + 300 * np.eye(300))
    # two independent batched factorisations in one program, called from 3 threads
    f = jax.jit(lambda a: jax.vmap(_linalg.cholesky)(a).sum()
                + jax.vmap(_linalg.eigvalsh)(2 * a).sum()
                + jax.vmap(_linalg.cho_solve)(jax.vmap(_linalg.cholesky)(a), a).sum())
    f(A).block_until_ready()
    def work():
        t = time.time()
        while time.time() - t < 4:
            f(A).block_until_ready()
    ts = [threading.Thread(target=work, daemon=True) for _ in range(3)]
    [t.start() for t in ts]
    [t.join(60) for t in ts]
    print("hung" if any(t.is_alive() for t in ts) else "finished", flush=True)
    import os; os._exit(0)
    """
)


@pytest.mark.slow  # a fresh process (11 s)
@pytest.mark.skipif(jax.default_backend() != "cpu", reason="an XLA:CPU thread-pool hang")
def test_batched_factorisations_from_threads_finish():
    """With jnp.linalg this hung within seconds here (every thread asleep in a futex)."""
    proc = subprocess.run(
        [sys.executable, "-c", HANG_SCRIPT], capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("finished"), proc.stdout + proc.stderr[-2000:]
