"""Fits on JAX's multi-process runtime: rows spread over processes, one model on every process.

Every process runs the same program (JAX's multi-controller model). Each holds its own rows;
``jax.distributed`` connects the processes, a 1-D mesh ``"rows"`` spans every process's devices
(``jax.devices()``), and the kernel block ``K_{·R}`` is built split by rows over that mesh, each
process computing only its part. The solver then runs unchanged inside ``jit`` on the global
arrays: products stay local and the compiler inserts the collectives (scores gathered for the
sort, ``g @ K`` summed), as on the devices of one process (``docs/multiprocess.md``).

What the one-process fit reads from all rows on the host comes from per-process pieces plus
collectives (``process_allgather`` of small summaries):

- validation: each process checks its own rows; every process then sees every process's verdict
  and a fingerprint of its options (feature count, dtypes, λ grid, kernel, basis, solver options),
  and a mismatch is refused before any work, naming the process that differs;
- the σ² heuristic (seed 000, Sec. 6) from per-process counts, means and centred sums of squares
  (Chan et al.'s pairwise update, exact to rounding);
- the labels: one byte per row gathered, so the basis choice (``"rare"``, ``"all"``,
  ``"random"``, ``"rare_first"`` or an index array into the rows in process order) and the fold
  split of a search are the one-process ones;
- the rows in the solver's layout [positives; negatives; padding] and the basis rows: one
  ``jit`` gather over the global array of every process's rows, whose output is split by rows
  again (the global ``X`` is ``m·d`` numbers, small next to the ``m·|R|`` block);
- the spectral preconditioner's moments: products with the split block (summed by the compiler).

Results equal the one-process fit on the rows of every process concatenated in process order
(tests: ``tests/test_distributed.py``, 2 and 4 local processes, 1e-10 in float64).

Faults (issue 43, ``docs/multiprocess.md``): :func:`initialize` sets the runtime's heartbeat
timeout to the fault bound (``$JAXRANK_FAULT_TIMEOUT``, default 10 s) and starts a watchdog
thread. A process that dies makes the collectives of the others fail; they stop with
:class:`ProcessLostError` naming the lost process (``get_live_nodes`` of the coordination
service), or, if the runtime notices first, the runtime ends them with its own message naming
the task. A process that raises inside a fit tells the others through the coordination
service (:class:`announcing_failure`), and a coordinator that stops answering is named by the
watchdog: either way every other process prints the fault and exits with
:data:`FAULT_EXIT_STATUS`. Nothing is written: the command line writes its model file after the
fit returns, from process 0 only.
"""

from __future__ import annotations

import atexit
import ctypes
import dataclasses
import functools
import hashlib
import json
import os
import sys
import threading
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrank import kernels as _kernels
from jaxrank._fitting import biclass_rows, check_fit_options, fit_rows
from jaxrank._validation import check_binary_labels, check_lam, check_X, label_vector
from jaxrank.model import RankModel

__all__ = [
    "AXIS",
    "DEFAULT_FAULT_TIMEOUT",
    "DEFAULT_INIT_TIMEOUT",
    "ENV_NUM_PROCESSES",
    "ENV_PROCESS_ID",
    "FAULT_EXIT_STATUS",
    "FAULT_TIMEOUT_ENV",
    "INIT_TIMEOUT_ENV",
    "CoordinatorError",
    "InputMismatchError",
    "ProcessLostError",
    "agree",
    "announcing_failure",
    "binary_scales",
    "fault_timeout",
    "fingerprint",
    "fit",
    "gather_json",
    "gather_rows",
    "global_rows",
    "initialize",
    "is_global",
    "local_rows",
    "rare_mask",
    "sigma2_heuristic",
]

#: The mesh axis the rows are split over.
AXIS = "rows"
#: Environment variables :func:`initialize` reads (set by ``python -m jaxrank.launch``), next to
#: ``JAX_COORDINATOR_ADDRESS``, which ``jax.distributed.initialize`` reads itself.
ENV_NUM_PROCESSES = "JAXRANK_NUM_PROCESSES"
ENV_PROCESS_ID = "JAXRANK_PROCESS_ID"

#: Bytes of each process's summary exchanged before a fit (JSON, zero-padded).
_SUMMARY_BYTES = 4096

#: Environment variable: the fault bound in seconds (:func:`fault_timeout`).
FAULT_TIMEOUT_ENV = "JAXRANK_FAULT_TIMEOUT"
#: The fault bound when neither the argument nor the environment gives one: a lost, stopped or
#: failed process ends every other one within about this many seconds.
DEFAULT_FAULT_TIMEOUT = 10
#: Environment variable: how long a process waits to join the job, in seconds.
INIT_TIMEOUT_ENV = "JAXRANK_INIT_TIMEOUT"
DEFAULT_INIT_TIMEOUT = 120
#: Exit status of a process the watchdog ends (a peer failed, or the coordinator is gone): it is
#: blocked inside a collective that cannot be interrupted from Python (EX_SOFTWARE).
FAULT_EXIT_STATUS = 70
#: Test hook (issue 43): ``<stage>:<process>`` makes that process raise at that stage of a fit
#: (``solve``: after the block is built, while the others wait in the solver's collectives).
TEST_FAULT_ENV = "JAXRANK_TEST_FAULT"
_FAILED_DIR = "jaxrank/failed/"
#: Where each process says it has read a failure (:func:`_read_failure`): no process exits before
#: every other one has read the reason, or a bound passed.
_READ_DIR = "jaxrank/failure_read/"


class InputMismatchError(ValueError):
    """The processes of a multi-process fit were given inputs that do not fit together.

    Raised on every process, before any work, naming the process that differs.

    Example:
      >>> import jaxrank
      >>> issubclass(jaxrank.distributed.InputMismatchError, ValueError)
      True
    """


class CoordinatorError(RuntimeError):
    """The job could not start: process 0's port is taken, or a process could not join it in
    time (the message names the process, the address and the wait).

    Example:
      >>> import jaxrank
      >>> issubclass(jaxrank.distributed.CoordinatorError, RuntimeError)
      True
    """


class InjectedFault(RuntimeError):
    """The failure :data:`TEST_FAULT_ENV` asks for (tests of the fault handling only)."""


class ProcessLostError(RuntimeError):
    """A process of a multi-process fit died or stopped answering during the fit.

    Example:
      >>> import jaxrank
      >>> issubclass(jaxrank.distributed.ProcessLostError, RuntimeError)
      True
    """


def initialize(
    coordinator_address: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    heartbeat_timeout_seconds: int | None = None,
    shutdown_timeout_seconds: int = 300,
    initialization_timeout: int | None = None,
    **kwargs: Any,
) -> None:
    """``jax.distributed.initialize`` with CPU collectives over gloo and short fault timeouts.

    Arguments left ``None`` come from the launcher's environment (``JAX_COORDINATOR_ADDRESS``,
    ``JAXRANK_NUM_PROCESSES``, ``JAXRANK_PROCESS_ID``: ``python -m jaxrank.launch``) or, when
    those are unset too, from the cluster JAX detects (SLURM, Open MPI, Kubernetes, Cloud TPU).
    Call it first, before any other JAX call.

    Args:
      coordinator_address: ``host:port`` of process 0's coordination service.
      num_processes, process_id: this job's size and this process's rank.
      heartbeat_timeout_seconds: the fault bound: how long a silent process (dead, stopped,
        or a coordinator that no longer answers) counts as alive; every other process gives up
        within about this time. Default ``$JAXRANK_FAULT_TIMEOUT``, else
        :data:`DEFAULT_FAULT_TIMEOUT` (JAX's own default is 100 s).
      shutdown_timeout_seconds: as in ``jax.distributed.initialize``.
      initialization_timeout: how long a process waits to join the job (seconds; default
        ``$JAXRANK_INIT_TIMEOUT``, else :data:`DEFAULT_INIT_TIMEOUT`).
      **kwargs: passed on (``local_device_ids``, ``cluster_detection_method``, ...).

    Example (the environment ``python -m jaxrank.launch`` sets for each process; in a script,
    ``jaxrank.distributed.initialize()`` is the first call)::

        import jaxrank
        jaxrank.distributed.initialize()

      >>> from jaxrank import distributed
      >>> distributed.ENV_NUM_PROCESSES, distributed.ENV_PROCESS_ID
      ('JAXRANK_NUM_PROCESSES', 'JAXRANK_PROCESS_ID')
    """
    env = os.environ
    if num_processes is None and env.get(ENV_NUM_PROCESSES):
        num_processes = int(env[ENV_NUM_PROCESSES])
    if process_id is None and env.get(ENV_PROCESS_ID):
        process_id = int(env[ENV_PROCESS_ID])
    # CPU devices exchange data only through a collectives library; gloo ships with jaxlib
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    timeout = fault_timeout() if heartbeat_timeout_seconds is None else heartbeat_timeout_seconds
    join = initialization_timeout or _seconds(INIT_TIMEOUT_ENV, DEFAULT_INIT_TIMEOUT)
    address = coordinator_address or env.get("JAX_COORDINATOR_ADDRESS")
    if process_id == 0 and address and "coordinator_bind_address" not in kwargs:
        _check_coordinator_port(address)
    joining = _join_text(process_id, address, join)
    # the runtime aborts a process that cannot register in time, naming no address: say it
    # first, from a timer that only a finished join cancels
    timer = threading.Timer(max(1.0, join - 1.0), _end_process, args=(joining,))
    timer.daemon = True
    timer.start()
    try:
        jax.distributed.initialize(
            coordinator_address,
            num_processes,
            process_id,
            heartbeat_timeout_seconds=int(timeout),
            shutdown_timeout_seconds=shutdown_timeout_seconds,
            initialization_timeout=int(join),
            **kwargs,
        )
    except (jax.errors.JaxRuntimeError, RuntimeError) as err:
        first = str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
        raise CoordinatorError(f"{joining} ({first})") from err
    finally:
        timer.cancel()
    if jax.process_count() > 1:
        _start_watchdog(float(timeout))


def _join_text(process_id, address, join) -> str:
    return (f"process {process_id} could not join the job at {address} within {join} s: is "
            "process 0 running, and is that port its own? "
            f"({INIT_TIMEOUT_ENV} sets the wait)")  # fmt: skip


def _check_coordinator_port(address: str) -> None:
    """Refuse, on process 0, a coordinator port already taken on this host: JAX's service then
    fails with a bare gRPC message and the process crashes (measured: a segmentation fault),
    while the others wait their whole initialisation timeout."""
    from jaxrank.launch import port_in_use

    try:
        port = int(address.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return  # JAX reports a malformed address itself
    why = port_in_use(port)
    if why is not None:
        raise CoordinatorError(
            f"process 0 cannot start the coordination service: port {port} of "
            f"{address} is already in use ({why}); choose another port "
            "(python -m jaxrank.launch picks a free one unless --port is given)."
        )


def fault_timeout() -> int:
    """The fault bound in seconds: ``$JAXRANK_FAULT_TIMEOUT`` (a positive integer), else
    :data:`DEFAULT_FAULT_TIMEOUT`.

    Example:
      >>> fault_timeout() > 0
      True
    """
    return _seconds(FAULT_TIMEOUT_ENV, DEFAULT_FAULT_TIMEOUT)


def _seconds(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(float(raw))
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{name} must be a positive number of seconds, got {raw!r}.")
    return value


def mesh() -> jax.sharding.Mesh:
    """The 1-D mesh ``"rows"`` over every process's devices, in process order."""
    devices = sorted(jax.devices(), key=lambda d: (d.process_index, d.id))
    return jax.sharding.Mesh(np.asarray(devices), (AXIS,))


def is_global(X) -> bool:
    """Whether ``X`` is a ``jax.Array`` spread over several processes.

    Example:
      >>> import numpy as np
      >>> is_global(np.ones(3)), is_global(global_rows(np.ones((2, 1))))  # one process here
      (False, False)
    """
    return isinstance(X, jax.Array) and not X.is_fully_addressable


def global_rows(X_local, y_local=None):
    """``X`` (and ``y``) as global arrays split by rows: every process passes its own rows.

    JAX's standard form (``jax.make_array_from_process_local_data`` over :func:`mesh`); every
    process must pass the same number of rows (:func:`fit` takes uneven pieces directly).

    Example (in every process, after :func:`initialize`)::

        Xg, yg = jaxrank.distributed.global_rows(X_mine, y_mine)
        model = jaxrank.fit(Xg, yg, 1e-3)   # the same model on every process

      In one process (the global array is then this process's rows):

      >>> import numpy as np
      >>> Xg, yg = global_rows(np.arange(8.0).reshape(4, 2), np.array([1, 0, 0, 0]))
      >>> Xg.shape, yg.shape
      ((4, 2), (4,))
    """
    m = mesh()
    out = []
    for a in (X_local,) if y_local is None else (X_local, y_local):
        a = np.asarray(a)
        spec = jax.sharding.PartitionSpec(AXIS, *([None] * (a.ndim - 1)))
        out.append(jax.make_array_from_process_local_data(jax.sharding.NamedSharding(m, spec), a))
    return out[0] if y_local is None else tuple(out)


def local_rows(A) -> np.ndarray:
    """This process's rows of a global array split by rows (its shards, in row order).

    Example (one process: every row is its own):
      >>> import numpy as np
      >>> local_rows(global_rows(np.arange(6.0).reshape(3, 2))).tolist()
      [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    """
    if not isinstance(A, jax.Array) or A.is_fully_addressable:
        return np.asarray(A)
    spec = getattr(A.sharding, "spec", None)
    if spec is not None and any(s is not None for s in tuple(spec)[1:]):
        raise ValueError("a global X must be split by rows only (PartitionSpec(axis, None)).")
    pieces, seen = [], set()
    for s in sorted(A.addressable_shards, key=lambda s: s.index[0].start or 0):
        start = s.index[0].start or 0
        if start in seen:  # a replica of a piece already taken
            continue
        seen.add(start)
        pieces.append((start, np.asarray(s.data)))
    starts = [p[0] for p in pieces]
    ends = [p[0] + p[1].shape[0] for p in pieces]
    if any(a != b for a, b in zip(ends[:-1], starts[1:], strict=True)):
        raise ValueError("this process's rows of a global array must be one contiguous range.")
    return np.concatenate([p[1] for p in pieces])


# ---- collectives over small host summaries ----------------------------------------------------


def _allgather(a: np.ndarray) -> np.ndarray:
    """``(P, *a.shape)``: every process's ``a`` (same shape and dtype everywhere)."""
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(np.asarray(a), tiled=False))


def gather_rows(a: np.ndarray) -> list[np.ndarray]:
    """Every process's array ``a`` (rows of any count; the other axes and the dtype the same
    everywhere), in process order: a collective over small host arrays (labels, scores).

    Example (one process):
      >>> import numpy as np
      >>> [a.tolist() for a in gather_rows(np.arange(3))]
      [[0, 1, 2]]
    """
    n = _allgather(np.asarray([a.shape[0]], np.int64))[:, 0]
    pad = np.zeros((int(n.max()), *a.shape[1:]), a.dtype)
    pad[: a.shape[0]] = a
    full = _allgather(pad)
    return [full[p, : int(n[p])] for p in range(n.size)]


def gather_json(summary: dict) -> list[dict]:
    """Every process's ``summary`` (a JSON-serialisable dict of at most a few KiB), in process
    order: a collective.

    Example (one process):
      >>> gather_json({"features": 5})
      [{'features': 5}]
    """
    raw = json.dumps(summary, sort_keys=True).encode()
    if len(raw) > _SUMMARY_BYTES:  # a long error message: keep its start
        summary = dict(summary, error=str(summary.get("error"))[:1000])
        raw = json.dumps(summary, sort_keys=True).encode()[:_SUMMARY_BYTES]
    buf = np.zeros(_SUMMARY_BYTES, np.uint8)
    buf[: len(raw)] = np.frombuffer(raw, np.uint8)
    rows = _allgather(buf)
    return [json.loads(bytes(r).rstrip(b"\0").decode()) for r in rows]


def _key_values(key) -> list:
    # typed keys (jax.random.key) and raw uint32 keys (jax.random.PRNGKey) alike
    if jax.dtypes.issubdtype(getattr(key, "dtype", None), jax.dtypes.prng_key):
        key = jax.random.key_data(key)
    return np.asarray(key).tolist()


def _fingerprint(value) -> str:
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


#: What every process must agree on, in the order a mismatch is reported.
_AGREE = (
    ("d", "the number of features"),
    ("x_dtype", "the dtype of X"),
    ("lams", "the λ grid"),
    ("kernel", "the kernel options"),
    ("basis", "the basis"),
    ("options", "the fit options"),
)


def _agree(summaries: list[dict]) -> None:
    """Refuse on every process if some process failed its checks or differs from process 0."""
    for p, s in enumerate(summaries):
        if s.get("error"):
            raise InputMismatchError(f"process {p} refused its input: {s['error']}")
    ref = summaries[0]
    for field, what in _AGREE:
        for p, s in enumerate(summaries[1:], start=1):
            if s[field] != ref[field]:
                shown = (s.get(field + "_text", s[field]), ref.get(field + "_text", ref[field]))
                raise InputMismatchError(
                    f"process {p} differs from process 0 in {what}: {shown[0]} vs {shown[1]}; "
                    "every process must pass the same options and rows of the same shape."
                )


def agree(summary: dict) -> list[dict]:
    """Every process's ``summary``, after refusing on every process, naming the process, any
    ``error`` a process reported or a field of ``d``, ``x_dtype``, ``lams``, ``kernel``,
    ``basis``, ``options`` that differs from process 0's (a ``<field>_text`` shows the values).
    A collective: every process calls it before any work that needs the others to agree.

    Raises:
      InputMismatchError: on every process, naming the first process that differs.

    Example (one process):
      >>> fields = dict(d=3, x_dtype="float64", lams="a", kernel="k", basis="b", options="o")
      >>> agree(dict(fields, error=None))[0]["d"]
      3
    """
    summaries = gather_json(summary)
    _agree(summaries)
    return summaries


def fingerprint(value) -> str:
    """A short hash of ``repr(value)`` (options compared across processes by :func:`agree`);
    a random key is taken by its values.

    Example:
      >>> fingerprint([1, 2]) == fingerprint([1, 2]) != fingerprint([1, 3])
      True
    """
    if jax.dtypes.issubdtype(getattr(value, "dtype", None), jax.dtypes.prng_key) or (
        isinstance(value, jax.Array | np.ndarray) and value.dtype == np.uint32
    ):
        value = _key_values(value)
    return _fingerprint(value)


def binary_scales(X_local) -> np.ndarray | None:
    """The binary-aware column scales of :func:`jaxrank.kernels.binary_scales` over the rows of
    every process: ``1/(hi − lo)`` for a column whose values over all processes are two,
    ``lo < hi``, else 1; ``None`` when every scale is 1. A collective (two small all-gathers:
    the global range of each column, then whether each process's values all lie on it).

    Example (one process: the one-process rule):
      >>> binary_scales([[0.0, 1.0], [4.0, 2.0], [0.0, 3.0]]).tolist()
      [0.25, 1.0]
    """
    X = np.asarray(X_local, np.float64)
    d = X.shape[1]
    lo_hi = (
        np.full((2, d), [[np.inf], [-np.inf]])
        if X.shape[0] == 0
        else np.stack([X.min(axis=0), X.max(axis=0)])
    )
    parts = _allgather(lo_hi)
    lo, hi = parts[:, 0].min(axis=0), parts[:, 1].max(axis=0)
    on_ends = np.all((X == lo) | (X == hi), axis=0) if X.shape[0] else np.ones(d, bool)
    two = (hi > lo) & np.all(_allgather(on_ends.astype(np.uint8)).astype(bool), axis=0)
    scales = np.ones(d)
    with np.errstate(over="ignore"):
        spread = hi[two] - lo[two]
        scales[two] = np.where(np.isfinite(spread), 1.0 / spread, 1.0)
    return None if np.all(scales == 1.0) else scales


def sigma2_heuristic(X_local) -> float:
    """σ² = (1/m²) Σ_ij ||x_i − x_j||² over the rows of every process (seed 000, Sec. 6).

    The one-process :func:`jaxrank.kernels.sigma2_heuristic` on all rows, from each process's
    row count ``n_p``, mean ``μ_p`` and centred sum of squares ``M_p`` (float64):
    ``σ² = 2/m · (Σ_p M_p + Σ_p n_p ||μ_p − μ||²)``, ``μ = Σ_p n_p μ_p / m``. A collective:
    every process must call it.

    Example (one process: the one-process heuristic):
      >>> sigma2_heuristic([[0.0], [2.0]])  # pairs: 0, 4, 4, 0 -> mean 2
      2.0
    """
    X = np.asarray(X_local, np.float64)
    n = X.shape[0]
    mean = X.mean(axis=0) if n else np.zeros(X.shape[1])
    centred = X - mean
    M2 = float(np.sum(centred * centred))
    parts = _allgather(np.concatenate([[n, M2], mean]))
    counts, M2s, means = parts[:, 0], parts[:, 1], parts[:, 2:]
    m = counts.sum()
    mu = (counts[:, None] * means).sum(axis=0) / m
    dev = means - mu
    s2 = 2.0 * float((M2s.sum() + np.sum(counts * np.sum(dev * dev, axis=1))) / m)
    return s2 if s2 > 0 else 1.0


# ---- the fit -----------------------------------------------------------------------------------

#: Bases that read the rows themselves (distances) and are not available across processes.
_ROW_BASES = ("kmeans++", "auto", "greedy")


@dataclasses.dataclass
class _Rows:
    """This process's rows and where every process's rows sit in the concatenated order."""

    X: np.ndarray  # (n_p, d) in the fit's dtype
    counts: np.ndarray  # rows per process
    mesh: jax.sharding.Mesh

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.counts.sum()), self.X.shape[1])

    def natural(self) -> jax.Array:
        """Every process's rows as one global array ``(P·M, d)``, process ``p`` in rows
        ``[p·M, p·M + n_p)`` (``M`` the largest piece; the rest copies of its first row)."""
        M = int(self.counts.max())
        local = jax.local_device_count()
        M = -(-M // local) * local
        pad = np.empty((M, self.X.shape[1]), self.X.dtype)
        pad[:] = self.X[0]
        pad[: self.X.shape[0]] = self.X
        spec = jax.sharding.PartitionSpec(AXIS, None)
        return jax.make_array_from_process_local_data(
            jax.sharding.NamedSharding(self.mesh, spec), pad
        )

    def to_natural(self, rows: np.ndarray) -> np.ndarray:
        """Indices into :meth:`natural` of rows of the concatenated order."""
        M = -(-int(self.counts.max()) // jax.local_device_count()) * jax.local_device_count()
        starts = np.concatenate([[0], np.cumsum(self.counts)[:-1]])
        proc = np.searchsorted(starts, rows, side="right") - 1
        return (proc * M + rows - starts[proc]).astype(np.int32)

    def block(self, kernel, dt, order, slots, idx, m_rows, nb_pad, block, streamed):
        """``(K, Bn)``: the block of the rows ``order`` at rows ``slots`` (the others copies of
        ``order[0]``, up to ``m_rows`` and the mesh's multiple) split by rows over the mesh, and
        the basis rows ``idx`` on the host (the hook :func:`jaxrank._fitting.fit_rows` calls)."""
        n_dev = self.mesh.shape[AXIS]
        _release_host_memory()
        Xnat = self.natural()
        Bn = np.asarray(_gather(Xnat, self.to_natural(idx), _replicated(self.mesh)))
        Bp = np.empty((nb_pad, Bn.shape[1]), dt)
        Bp[:] = Bn[0]
        Bp[: Bn.shape[0]] = Bn
        if streamed:
            # chunks of rows as in kernels.streamed_block; each chunk split by rows over the mesh
            rows, n_chunks = _kernels.chunk_rows(m_rows, nb_pad, dt.itemsize, block)
            rows = -(-rows // (n_dev * block)) * n_dev * block
            total = rows * n_chunks
        else:
            rows, n_chunks = _kernels.chunk_rows(-(-m_rows // n_dev), nb_pad, dt.itemsize, block)
            total = rows * n_chunks * n_dev
        rows_at = np.full(total, order[0], np.int64)
        rows_at[slots] = order
        nat = self.to_natural(rows_at)
        if streamed:
            sharding = jax.sharding.NamedSharding(
                self.mesh, jax.sharding.PartitionSpec(None, AXIS, None)
            )
            Xo = _gather(Xnat, nat.reshape(n_chunks, rows), sharding)
            del Xnat
            K = _kernels.StreamedBlock(Xo, jax.device_put(Bp), kernel, jnp.int32(len(idx)))
        else:
            sharding = jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec(AXIS))
            Xo = _gather(Xnat, nat, sharding)
            del Xnat
            K = _kernels.sharded_block(
                kernel, Xo, Bp, self.mesh, AXIS, multiple=block, n_basis=len(idx)
            )
        inject_fault("solve")
        return K, Bn


#: this process's rows under a public name (not in ``__all__``), for :mod:`jaxrank.internals`
ProcessRows = _Rows


def _release_host_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc ``malloc_trim``; elsewhere a
    no-op). XLA's compiler frees what it allocates, but glibc keeps the pages: a few hundred
    MiB per process after the solver compiles (measured: 337 MiB at m = 10⁵, P = 4), which the
    block built next (allocated apart, by ``mmap``) would add to instead of reuse."""
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL("libc.so.6")
            _LIBC.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _LIBC = False
    if _LIBC:
        _LIBC.malloc_trim(0)


_LIBC: Any = None

#: Compilations at least this long are followed by :func:`_release_host_memory` inside a fit.
_TRIM_AFTER_COMPILE_SECONDS = 0.5
_trim_state = {"active": 0, "listening": False}


def _trim_after_compile(event: str, duration: float, **_: Any) -> None:
    # a jax.monitoring listener: XLA has just compiled a program and is about to run it. The
    # compiler's freed heap (hundreds of MiB for the solver) would otherwise stay resident while
    # the program's own temporaries are allocated, on top of the block (measured at m = 4·10⁵,
    # |R| = 2000, P = 4: ~0.3 GiB of the 1.1 GiB each process held beyond its block)
    if (
        _trim_state["active"]
        and event == _COMPILE_EVENT
        and duration >= _TRIM_AFTER_COMPILE_SECONDS
    ):
        _release_host_memory()


_COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"


class _trimming_after_compiles:
    """Within a multi-process fit, hand the compiler's freed heap back after each long compile."""

    def __enter__(self):
        if not _trim_state["listening"]:
            jax.monitoring.register_event_duration_secs_listener(_trim_after_compile)
            _trim_state["listening"] = True
        _trim_state["active"] += 1
        return self

    def __exit__(self, *exc):
        _trim_state["active"] -= 1
        return False


def _replicated(mesh):
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())


@functools.partial(jax.jit, static_argnums=2)
def _gather(Xnat, idx, sharding):
    # one program per shape and sharding: rows of the global array, laid out by `sharding`
    return jax.lax.with_sharding_constraint(Xnat[idx], sharding)


#: Most distinct label values a process reports (more: its own check refuses them).
_MAX_LABELS = 2


def _check_local(X_local, y_local, lam, kernel, basis, options: dict, key=None, n_basis=None):
    """This process's checked pieces and its summary for :func:`_agree` (errors kept, not
    raised: every process must reach the exchange). A piece may hold one class only; the two
    classes are checked over the labels of every process (:func:`_positive_mask`)."""
    summary: dict[str, Any] = {"error": None}
    out = None
    try:
        X = check_X(X_local)
        labels = label_vector(y_local, "y")
        values = np.unique(labels)
        if values.size > _MAX_LABELS:
            check_binary_labels(labels)  # raises the one-process message
        if X.shape[0] != labels.shape[0]:
            raise ValueError(
                f"X and y have different lengths: X has {X.shape[0]} rows, y has {labels.shape[0]}."
            )
        lams, scalar = check_lam(lam)
        if isinstance(basis, str) and basis in _ROW_BASES:
            raise ValueError(
                f"basis={basis!r} reads every row (distances) and is not available across "
                "processes; use 'rare', 'all', 'random', 'rare_first' or an index array."
            )
        fit_opts = check_fit_options(X, **options)
        out = (X, labels, lams, scalar, fit_opts)
        summary.update(
            d=int(X.shape[1]),
            x_dtype=str(X.dtype),
            labels=values.tolist(),
            lams=_fingerprint((lams.tobytes(), scalar)),
            lams_text=repr(lams.tolist()) if lams.size <= 8 else f"{lams.size} values",
            kernel=_fingerprint(kernel),
            kernel_text=repr(kernel),
            basis=_fingerprint(
                (
                    np.asarray(basis).tolist() if not isinstance(basis, str) else basis,
                    None if key is None else _key_values(key),
                    n_basis,
                )
            ),
            basis_text=(repr(basis) if isinstance(basis, str) else "an index array")
            + f" (n_basis={n_basis}, key {'given' if key is not None else 'none'})",
            options=_fingerprint(sorted((k, repr(v)) for k, v in fit_opts._asdict().items())),
            options_text=repr(sorted((k, repr(v)) for k, v in fit_opts._asdict().items())),
        )
    except Exception as err:
        summary["error"] = f"{type(err).__name__}: {err}"
    return out, summary


def rare_mask(y_local) -> np.ndarray:
    """This process's rare-class mask from its labels, the labels of every process judged
    together as one process judges its ``y`` (a piece may hold one class only). A collective.

    Raises:
      InputMismatchError: on every process, when some process's labels are refused or all
        labels together are not two-valued with a rare class (the message names the process).

    Example (one process):
      >>> import numpy as np
      >>> rare_mask(np.array([1, -1, -1])).tolist()
      [True, False, False]
    """
    summary: dict[str, Any] = {"error": None}
    labels = None
    try:
        labels = label_vector(y_local, "y")
        values = np.unique(labels)
        if values.size > _MAX_LABELS:
            check_binary_labels(labels)
        summary["labels"] = values.tolist()
    except Exception as err:
        summary["error"] = f"{type(err).__name__}: {err}"
    summaries = gather_json(summary)
    for p, s in enumerate(summaries):
        if s.get("error"):
            raise InputMismatchError(f"process {p} refused its input: {s['error']}")
    return _positive_mask(labels, summaries)


def _positive_mask(labels: np.ndarray, summaries: list[dict]) -> np.ndarray:
    """This process's rare-class mask, the labels of every process judged together by the
    one-process rule (:func:`~jaxrank._validation.check_binary_labels`)."""
    union = sorted({v for s in summaries for v in s["labels"]}, key=repr)
    try:
        positive = check_binary_labels(np.asarray(union))
    except ValueError as err:
        each = "; ".join(f"process {p}: {s['labels']}" for p, s in enumerate(summaries))
        raise InputMismatchError(
            f"the labels of all processes together are refused ({each}): {err}"
        ) from None
    return np.isin(labels, np.asarray(union)[positive])


def fit(
    X_local,
    y_local,
    lam,
    *,
    basis="rare",
    kernel=None,
    key=None,
    n_basis: int | None = None,
    init=None,
    max_kernel_bytes: int | None = None,
    loss: str = "smoothed_hinge",
    eps: float = 0.5,
    tol: float = 1e-6,
    max_iter: int = 100,
    max_cg: int = 25,
    path: str = "batch",
    chains: int = 4,
    precondition: str = "auto",
    dtype=None,
    memory_budget: int | None = None,
) -> RankModel:
    """:func:`jaxrank.fit` over the rows of every process: each process passes its own rows.

    Minimises seed 000 eq. (11) over the rows of all processes, concatenated in process order
    (``m = Σ_p m_p``; pieces may differ in size, even be without rare rows), with the block
    ``K_{·R}`` split by rows over every process's devices. A collective: every process calls it
    with its own rows and the same options; each returns the same :class:`~jaxrank.RankModel`.
    ``jaxrank.fit`` with global arrays (:func:`global_rows`) comes here.

    Args:
      X_local: ``(m_p, d)`` this process's rows; ``y_local``: their two-valued labels.
      lam, basis, kernel, key, ...: as in :func:`jaxrank.fit` (``basis``: ``"rare"``,
        ``"all"``, ``"random"``, ``"rare_first"`` or indices into the concatenated rows).

    Raises:
      InputMismatchError: on every process, before any work, when some process's rows fail
        the checks or its feature count, dtype, λ grid, kernel, basis or options differ from
        process 0's (the message names the process).
      ProcessLostError: a process died during the fit (the message names it).

    Example (``python -m jaxrank.launch -n 2 script.py`` runs ``script.py`` twice)::

        import jaxrank, jaxrank.distributed as dist
        dist.initialize()
        X, y = my_rows(jax.process_index())      # this process's rows
        model = dist.fit(X, y, [1e-1, 1e-3])     # the same model on every process

    In one process it is :func:`jaxrank.fit` on a one-device mesh:
      >>> import jaxrank, jaxrank.distributed as dist
      >>> X, y = jaxrank.datasets.make_rare_class(300, 0.1, 0.75, seed=0)
      >>> dist.fit(X, y, 1e-2).coef.shape
      (30,)
    """
    options = dict(loss=loss, eps=eps, tol=tol, path=path, chains=chains,
                   precondition=precondition, max_iter=max_iter, max_cg=max_cg, dtype=dtype,
                   memory_budget=memory_budget, max_kernel_bytes=max_kernel_bytes)  # fmt: skip
    checked, summary = _check_local(
        X_local, y_local, lam, kernel, basis, options, key=key, n_basis=n_basis
    )
    summaries = gather_json(summary)
    _agree(summaries)
    X, labels, lams, scalar, fit_opts = checked
    pos = _positive_mask(labels, summaries)
    with announcing_failure(), _naming_lost_processes(), _trimming_after_compiles():
        return _fit_checked(X, pos, lams, scalar, fit_opts, basis=basis, kernel=kernel, key=key,
                            n_basis=n_basis, init=init)  # fmt: skip


def _resolve_kernel(kernel, X):
    """:func:`jaxrank.kernels.resolve_kernel` over every process's rows (a collective): σ², the
    binary-aware scales (``"binary"``) and missing ARD scales from all rows."""
    if kernel is None or (isinstance(kernel, str) and kernel in ("gaussian", "rbf")):
        kernel = _kernels.Gaussian()
    elif isinstance(kernel, str) and kernel in ("binary", "ard"):
        scales = binary_scales(X)
        if scales is None and kernel == "ard":
            scales = np.ones(np.shape(X)[1])
        kernel = _kernels.Gaussian() if scales is None else _kernels.ARDGaussian(scales=scales)
    elif isinstance(kernel, _kernels.ARDGaussian) and kernel.scales is None:
        scales = binary_scales(X)
        kernel = _kernels.ARDGaussian(
            kernel.sigma2, np.ones(np.shape(X)[1]) if scales is None else scales
        )
    if isinstance(kernel, _kernels.Gaussian) and kernel.sigma2 is None:
        if isinstance(kernel, _kernels.ARDGaussian):
            Xs = np.asarray(X, np.float64) * np.asarray(kernel.scales, np.float64)
            return _kernels.ARDGaussian(sigma2=sigma2_heuristic(Xs), scales=kernel.scales)
        return _kernels.Gaussian(sigma2=sigma2_heuristic(X))
    return _kernels.resolve_kernel(kernel, X[:1])  # names and types


def _fit_checked(X, pos, lams, scalar, fit_opts, *, basis, kernel, key, n_basis, init):
    resolved = _resolve_kernel(kernel, X)
    pieces = gather_rows(pos.astype(np.uint8))
    pos_all = np.concatenate(pieces).astype(bool)
    counts = np.asarray([p.size for p in pieces])
    order, idx, layout = biclass_rows(None, pos_all, basis, key=key, n_basis=n_basis)
    rows = _Rows(np.asarray(X, fit_opts.dtype), counts, mesh())
    return fit_rows(rows, order, idx, lams, scalar, layout, kernel=resolved, init=init,
                    mesh=(rows.mesh, AXIS), process_rows=rows.block,
                    **fit_opts._asdict())  # fmt: skip


class _naming_lost_processes:
    """Turn the runtime error of a collective whose peer died into :class:`ProcessLostError`
    naming the processes the coordination service no longer sees."""

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb):
        if err is None or not isinstance(err, jax.errors.JaxRuntimeError):
            return False
        lost = _lost_processes()
        who = (
            f"process {', '.join(map(str, lost))}"
            if lost
            else "another process (not yet named by the coordination service)"
        )
        raise ProcessLostError(
            f"{who} of {jax.process_count()} was lost during a multi-process fit "
            f"(runtime error: {str(err).splitlines()[0][:300]}); no model was returned."
        ) from err


def inject_fault(stage: str) -> None:
    """Raise :class:`InjectedFault` on the process :data:`TEST_FAULT_ENV` names for ``stage``."""
    spec = os.environ.get(TEST_FAULT_ENV, "")
    if spec and spec == f"{stage}:{jax.process_index()}":
        raise InjectedFault(f"injected fault ({TEST_FAULT_ENV}={spec}) on process "
                            f"{jax.process_index()} during the {stage}")  # fmt: skip


def _client():
    from jax._src import distributed as _jd  # the runtime's client: no public handle

    return _jd.global_state.client


class announcing_failure:
    """Tell the other processes, through the coordination service's key-value store, that this
    one failed (the exception's type and message); their watchdogs end them with that message.

    Without it, a process that raises where the others wait in a collective (inside the solve,
    or in a summary exchange it never reaches) leaves them waiting: its heartbeats go on, so the
    runtime sees nothing wrong. Refusals raised on every process alike
    (:class:`InputMismatchError`) and a lost peer (:class:`ProcessLostError`, a runtime error:
    the runtime names it) are not announced.

    Example (one process: nothing to tell, the error goes on as it is):
      >>> try:
      ...     with announcing_failure():
      ...         1 / 0
      ... except ZeroDivisionError:
      ...     print("raised as it was")
      raised as it was
    """

    def __enter__(self):
        return self

    def __exit__(self, kind, err, tb):
        if err is None or jax.process_count() < 2:
            return False
        if isinstance(err, (InputMismatchError, ProcessLostError, jax.errors.JaxRuntimeError)):
            return False
        client = _client()
        if client is None:
            return False
        me, why = jax.process_index(), f"{type(err).__name__}: {err}"[:2000]
        # said first: this process may be ended by the runtime before its traceback is printed
        # (when the others leave, process 0 takes the coordination service with it)
        sys.stderr.write(f"jaxrank.distributed: process {me} of {jax.process_count()} failed "
                         f"during a multi-process fit: {why}; ending the others.\n")  # fmt: skip
        sys.stderr.flush()
        try:
            client.key_value_set(f"{_FAILED_DIR}{me}", why)
        except Exception:  # the service is gone too: the runtime ends the others
            return False
        # the others poll every _POLL_SECONDS: let them read the reason before this process
        # exits (process 0 takes the coordination service with it)
        _await_readers(client, set(range(jax.process_count())) - {me})
        return False


_POLL_SECONDS = 0.5
_watchdog: dict[str, Any] = {"thread": None, "stop": None, "silence": 0.0, "bound": 0.0}


def _silence(bound: float) -> float:
    # the runtime ends a process whose heartbeat RPC to a silent coordinator timed out, with a
    # message that names no process: its RPC deadline is half the bound and a heartbeat can be
    # sent just as the coordinator stops, so the runtime may end this process ~bound/2 s after
    # the stop. Name it first: one ask starts at most _POLL_SECONDS after the stop and is given
    # up after `silence` s counted from its start (0.3 * bound + 0.5 < bound / 2 from 5 s up)
    return max(1.5, 0.3 * bound)


def _start_watchdog(bound: float) -> None:
    """One daemon thread per process: ends this process, naming the fault, when another process
    announced a failure (:class:`announcing_failure`) or the coordination service stops
    answering for ``bound`` seconds (process 0 killed or stopped). Stopped at exit
    (:func:`_stop_watchdog`)."""
    if _watchdog["thread"] is not None:
        return
    stop = threading.Event()
    t = threading.Thread(target=_watch, args=(bound, stop), name="jaxrank-fault-watchdog",
                         daemon=True)  # fmt: skip
    _watchdog.update(thread=t, stop=stop, silence=_silence(bound), bound=bound)
    t.start()
    # registered after JAX's own exit hook (jax._src.api.clean_up, which shuts the runtime
    # down), so it runs first
    atexit.register(_stop_watchdog)


def _stop_watchdog() -> None:
    """End the watchdog and wait for its question in flight. A daemon thread still inside the
    runtime's RPC when the interpreter finalizes is unwound by force through C++ frames that
    do not allow it: the process aborts ("FATAL: exception not rethrown", SIGABRT) after its
    work is done, and the job fails (seen once in a 4-process test run)."""
    t, stop = _watchdog["thread"], _watchdog["stop"]
    if t is None:
        return
    stop.set()
    t.join(_watchdog["silence"] + 2 * _POLL_SECONDS)
    _watchdog.update(thread=None, stop=None)


def _watch(bound: float, stop: threading.Event) -> None:
    me = jax.process_index()
    silence = _silence(bound)
    while not stop.wait(_POLL_SECONDS):
        client = _client()
        if client is None:  # jax.distributed.shutdown(): the job is over
            return
        failed, ok = _ask(lambda c=client: c.key_value_dir_get(_FAILED_DIR), silence)
        if stop.is_set():  # the process is exiting: its work is done, whatever the answer
            return
        if not ok:
            if _client() is None:  # shut down while asking
                return
            _end(f"the coordinator (process 0 of {jax.process_count()}, which runs the "
                 f"coordination service) has not answered for {silence:.1f} s: killed, "
                 "stopped or unreachable")  # fmt: skip
        others = [(int(key.rsplit("/", 1)[-1]), why) for key, why in failed or []]
        others = [(who, why) for who, why in others if who != me]
        if others:
            who, why = others[0]
            failed_ids = {w for w, _ in others}
            _end(f"process {who} of {jax.process_count()} failed: {why}",
                 then=functools.partial(_read_failure, client, failed_ids))  # fmt: skip


def _read_failure(client, failed: set[int]) -> None:
    """Say this process has read a failure (after saying why it stops), then wait until every
    process that did not fail has (:func:`_await_readers`): the first to exit may take the
    coordination service with it (process 0) or make the runtime end the rest with its own
    report, naming no process (seen at P = 4: survivors ended by the runtime's abort, or by the
    watchdog's silence, before they had read the failure)."""
    _ask(lambda: client.key_value_set(f"{_READ_DIR}{jax.process_index()}", "read"),
         _watchdog["silence"])  # fmt: skip
    _await_readers(client, set(range(jax.process_count())) - failed)


def _await_readers(client, expect: set[int]) -> None:
    """Wait until the processes ``expect`` have read a failure (:data:`_READ_DIR`), at most
    half the fault bound (a process stopped as well never reads it)."""
    deadline = time.monotonic() + max(3 * _POLL_SECONDS, 0.5 * _watchdog["bound"])
    while time.monotonic() < deadline:
        read, ok = _ask(lambda: client.key_value_dir_get(_READ_DIR),
                        max(0.1, deadline - time.monotonic()))  # fmt: skip
        if not ok:  # the service is gone: nobody is left to wait for
            return
        if expect <= {int(key.rsplit("/", 1)[-1]) for key, _ in read}:
            return
        time.sleep(_POLL_SECONDS / 5)


def _ask(call, timeout: float):
    """``(result, True)`` of ``call()`` in a helper thread, ``(None, False)`` if it raised or did
    not return within ``timeout`` seconds (an RPC to a stopped coordinator blocks)."""
    out: list = []

    def run():
        try:
            out.append(call())
        except Exception:
            pass

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    return (out[0], True) if out else (None, False)


def _end(why: str, then=None) -> None:
    # this process is blocked in a collective (or will be at its next one) that no Python
    # exception can leave: report and exit, as the runtime does when it sees a dead task
    _end_process(
        f"stopping process {jax.process_index()} of {jax.process_count()} (exit status "
        f"{FAULT_EXIT_STATUS}): {why}. No model was written by this process",
        then,
    )


def _end_process(text: str, then=None) -> None:
    """Say ``text`` on stderr, call ``then()`` (said first: the runtime may end this process
    while it waits there), exit with :data:`FAULT_EXIT_STATUS`."""
    sys.stderr.write(f"jaxrank.distributed: {text}.\n")
    sys.stderr.flush()
    sys.stdout.flush()
    if then is not None:
        then()
    os._exit(FAULT_EXIT_STATUS)


def _lost_processes(timeout: float = 45.0) -> list[int]:
    """Processes the coordination service no longer counts as live (waits for the survivors,
    at most ``timeout`` seconds; the heartbeat timeout decides when a dead process is out)."""
    from jax._src import distributed as _jd  # the runtime's client: no public handle

    client = _jd.global_state.client
    if client is None:
        return []
    ids = list(range(jax.process_count()))
    out: list = []

    def ask():
        try:
            out.append(client.get_live_nodes(ids))
        except Exception:
            pass

    t = threading.Thread(target=ask, daemon=True)
    t.start()
    t.join(timeout)
    if not out:
        return []
    live = out[0]
    return [p for p in ids if p not in live]


def fit_global(X, y, lam, **kwargs) -> RankModel:
    """:func:`fit` from global arrays split by rows (``jaxrank.fit`` dispatches here)."""
    return fit(local_rows(X), local_rows(y), lam, **kwargs)
