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
status. Output goes to the launcher's stdout/stderr, each line prefixed with ``[p]``. On a
failure it says which process failed first and why (its exit status or signal and the last
error line it wrote), then how every other process ended (issue 43). A ``--port`` already in use
is refused before any process starts.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

__all__ = ["free_port", "launch", "main", "port_in_use"]


def free_port() -> int:
    """A TCP port free on this machine now (for the coordinator).

    Example:
      >>> 0 < free_port() < 2**16
      True
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_in_use(port: int) -> str | None:
    """Why the coordinator cannot listen on ``port`` here (``None`` when it can): JAX's service
    binds every address (``[::]:port``); a port taken fails there with a bare gRPC message and
    a crash of process 0, while the others wait for their initialisation timeout.

    Example:
      >>> port_in_use(free_port()) is None
      True
    """
    for family, host in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            with socket.socket(family) as s:
                s.bind((host, int(port)))
            return None
        except OSError as err:
            if family == socket.AF_INET6 and err.errno not in (98, 48, 10048):  # no IPv6 here
                continue
            return f"{type(err).__name__}: {err}"
    return None


#: Lines of each process's stderr kept to say why it failed.
_TAIL = 40


def _pump(stream, out, tag: str, tail: list | None = None) -> None:
    for line in iter(stream.readline, ""):
        out.write(f"{tag}{line}")
        out.flush()
        if tail is not None:
            tail.append(line.rstrip("\n"))
            del tail[:-_TAIL]
    stream.close()


#: What says why a process failed, best first: jaxrank's own fault reports, the command line's
#: one-line error, a Python exception, the runtime's fatal message.
_WHY = (
    re.compile(r"^jaxrank\.distributed: "),
    re.compile(r"^jaxrank: error: "),
    re.compile(r"^[\w.]*(Error|Exception|Fault)\b.*: "),
    re.compile(r"Terminating process|error", re.IGNORECASE),
)


def _reason(tail: list[str]) -> str:
    """The line of a failed process's stderr that says why (:data:`_WHY`, the last line of the
    first kind found), else its last line."""
    lines = [ln.strip() for ln in tail if ln.strip() and not ln.startswith((" ", "***"))]
    for pattern in _WHY:
        for line in reversed(lines):
            if pattern.search(line):
                return line[:400]
    return lines[-1][:400] if lines else "(no output)"


def _status_text(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"


def _report(procs, tails, first: int | None, killed: set) -> None:
    if first is None:
        return
    err = sys.stderr
    err.write(f"jaxrank.launch: the job failed; process {first} of {len(procs)} ended first "
              f"({_status_text(procs[first].returncode)}): {_reason(tails[first])}\n")  # fmt: skip
    for p, proc in enumerate(procs):
        if p == first:
            continue
        if p in killed:
            how = "did not stop within --grace; killed by the launcher"
        elif proc.returncode == 0:
            how = "exit status 0"
        else:
            how = f"{_status_text(proc.returncode)}: {_reason(tails[p])}"
        err.write(f"jaxrank.launch: process {p}: {how}\n")
    err.flush()


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
    if port is not None and (why := port_in_use(port)) is not None:
        sys.stderr.write(
            f"jaxrank.launch: the coordinator's port {port} is already in use ({why}); choose "
            "another --port, or leave it out for a free one.\n"
        )
        return 2
    port = free_port() if port is None else int(port)
    base = dict(os.environ if env is None else env)
    base.setdefault("JAX_PLATFORMS", "cpu")
    procs, pumps, tails = [], [], [[] for _ in range(n)]
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
                tail = tails[p] if stream is proc.stderr else None
                t = threading.Thread(target=_pump, args=(stream, out, f"[{p}] ", tail), daemon=True)
                t.start()
                pumps.append(t)
    status, deadline, first, killed = 0, None, None, set()
    while any(proc.poll() is None for proc in procs):
        for p, proc in enumerate(procs):
            rc = proc.poll()
            if rc not in (None, 0) and status == 0:
                status, first = (rc if rc > 0 else 128 - rc), p
                deadline = time.monotonic() + grace
        if deadline is not None and time.monotonic() > deadline:
            for p, proc in enumerate(procs):
                if proc.poll() is None:
                    proc.kill()  # a stopped (SIGSTOP) process too
                    killed.add(p)
        time.sleep(0.05)
    for p, proc in enumerate(procs):
        rc = proc.returncode
        if rc != 0 and status == 0:
            status, first = (rc if rc > 0 else 128 - rc), p
    for t in pumps:
        t.join(timeout=5)
    if prefix:
        _report(procs, tails, first, killed)
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
