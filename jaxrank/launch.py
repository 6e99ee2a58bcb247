"""Start N local processes of one script on JAX's multi-process runtime (CPU, gloo).

``python -m jaxrank.launch -n 4 script.py [args ...]`` runs ``script.py`` four times, each with
the environment :func:`jaxrank.distributed.initialize` reads: ``JAX_COORDINATOR_ADDRESS``
(process 0 on a free local port), ``JAXRANK_NUM_PROCESSES`` and ``JAXRANK_PROCESS_ID``. The
script calls ``jaxrank.distributed.initialize()`` first. ``-m module`` runs a module instead
(``python -m jaxrank.launch -n 2 -m jaxrank fit ...``). On a cluster the scheduler starts the
processes and ``jax.distributed.initialize()`` reads its environment (``docs/multiprocess.md``).

The launcher waits for every process. When one exits non-zero the others get ``--grace``
seconds (default 60) to stop on their own (a lost process is named by the runtime within its
heartbeat timeout) before they are killed; the launcher then exits with the first non-zero
status. Output goes to the launcher's stdout/stderr, each line prefixed with ``[p]``.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time

__all__ = ["free_port", "launch", "main"]


def free_port() -> int:
    """A TCP port free on this machine now (for the coordinator).

    Example:
      >>> 0 < free_port() < 2**16
      True
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pump(stream, out, tag: str) -> None:
    for line in iter(stream.readline, ""):
        out.write(f"{tag}{line}")
        out.flush()
    stream.close()


def launch(
    n: int, argv: list[str], *, port: int | None = None, grace: float = 60.0, env=None,
    prefix: bool = True,
) -> int:  # fmt: skip
    """Run ``[sys.executable, *argv]`` as ``n`` processes of one job; returns the job's status
    (0, or the first non-zero exit status; a process killed by signal ``s`` counts ``128 + s``).

    Each process gets ``JAX_COORDINATOR_ADDRESS``, ``JAXRANK_NUM_PROCESSES`` and
    ``JAXRANK_PROCESS_ID`` (read by :func:`jaxrank.distributed.initialize`).

    Example:
      >>> code = "import os; assert os.environ['JAXRANK_NUM_PROCESSES'] == '2'"
      >>> launch(2, ["-c", code], prefix=False)
      0
    """
    if n < 1:
        raise ValueError(f"the number of processes must be >= 1, got {n}.")
    port = free_port() if port is None else int(port)
    base = dict(os.environ if env is None else env)
    base.setdefault("JAX_PLATFORMS", "cpu")
    procs, pumps = [], []
    for p in range(n):
        penv = dict(
            base,
            JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}",
            JAXRANK_NUM_PROCESSES=str(n),
            JAXRANK_PROCESS_ID=str(p),
            PYTHONUNBUFFERED="1",
        )
        proc = subprocess.Popen(
            [sys.executable, *argv], env=penv, text=True,
            stdout=subprocess.PIPE if prefix else None, stderr=subprocess.PIPE if prefix else None,
        )  # fmt: skip
        procs.append(proc)
        if prefix:
            for stream, out in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr)):
                t = threading.Thread(target=_pump, args=(stream, out, f"[{p}] "), daemon=True)
                t.start()
                pumps.append(t)
    status, deadline = 0, None
    while any(proc.poll() is None for proc in procs):
        for proc in procs:
            rc = proc.poll()
            if rc not in (None, 0) and status == 0:
                status = rc if rc > 0 else 128 - rc
                deadline = time.monotonic() + grace
        if deadline is not None and time.monotonic() > deadline:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
        time.sleep(0.05)
    for proc in procs:
        rc = proc.returncode
        if rc != 0 and status == 0:
            status = rc if rc > 0 else 128 - rc
    for t in pumps:
        t.join(timeout=5)
    return status


def main(argv: list[str] | None = None) -> int:
    """``python -m jaxrank.launch -n N [--port P] [--grace S] (script.py | -m module) [args]``:
    :func:`launch` from the command line; returns the job's exit status.

    Example:
      >>> main(["-n", "1", "-m", "abc"])  # a module that prints nothing
      0
    """
    parser = argparse.ArgumentParser(
        prog="python -m jaxrank.launch",
        description="Run a script as N local processes of one jax.distributed job (CPU, gloo).",
    )
    parser.add_argument("-n", "--processes", type=int, required=True, help="number of processes")
    parser.add_argument("--port", type=int, default=None, help="coordinator port (default: free)")
    parser.add_argument(
        "--grace", type=float, default=60.0,
        help="seconds the others get to stop after one fails, then they are killed",
    )  # fmt: skip
    parser.add_argument("-m", dest="module", default=None, help="run a module, as python -m")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="script and its arguments")
    ns = parser.parse_args(argv)
    if ns.module is None and not ns.args:
        parser.error("give a script (or -m module) to run.")
    if ns.processes < 1:
        parser.error(f"-n must be >= 1, got {ns.processes}.")
    argv = (["-m", ns.module] if ns.module else []) + ns.args
    return launch(ns.processes, argv, port=ns.port, grace=ns.grace)


if __name__ == "__main__":
    sys.exit(main())
