"""Keeping a worker running: `supervise` starts a command again whenever it exits, until told to stop.

The Procfile's `worker` (`manage.py supervised_worker`, run by honcho under `make serve`) runs
`manage.py evaluation_worker` (rqworker on the deployment's queues) under it. Honcho restarts
nothing, and a dead worker went unnoticed there: its work horse, in a process group of its own,
outlived it and held honcho's log pipe. So the supervisor:

- starts the worker in a process group of its own, set to die with the supervisor (a process
  manager that kills the supervisor's group kills the worker too), and forwards the first
  SIGTERM or SIGINT to it once (RQ's warm shutdown: the job under way finishes; a second signal
  would be RQ's cold shutdown), then exits when it does;
- adopts what the worker leaves behind (Linux's child subreaper): when the worker dies, its
  orphaned work horses are killed with their process groups (their sandboxes too) before a new
  worker starts, which then finds their attempts' processes gone and heals them at once
  (runs.evaluation.recovery);
- starts the worker again after RESTART_PAUSE_SECONDS, doubling the pause (up to
  MAX_RESTART_PAUSE_SECONDS) while it keeps dying young (Redis or the database unreachable), and
  back to the first once one lived HEALTHY_SECONDS.

No Django here: the command is any argv.
"""
from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

RESTART_PAUSE_SECONDS = 1.0
MAX_RESTART_PAUSE_SECONDS = 30.0
HEALTHY_SECONDS = 60.0

# prctl(2) options (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux: no subreaper, no parent-death signal
        return False


def _worker_setup() -> None:
    """In the worker, before it execs: a process group of its own (a signal to the supervisor's
    group is not the worker's too: the supervisor forwards it once), and SIGKILL when the
    supervisor dies (killed by a process manager that gave up waiting)."""
    os.setpgid(0, 0)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def describe_status(code: int) -> str:
    """An exit code as subprocess gives it (negative: the signal that killed the process), in words."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"status {code}"


def _children() -> list[int]:
    """The pids of this process's children (read from /proc)."""
    mine = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The command name in parentheses may hold spaces: the fields after its last ")" are fixed.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == mine:
            found.append(int(entry.name))
    return found


def end_orphans(*, timeout: float = 10.0) -> list[int]:
    """Kill the processes this supervisor adopted when its worker died (its work horses), each with
    its process group, and reap them. Returns their pids."""
    ended = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        orphans = _children()
        if not orphans:
            break
        for pid in orphans:
            try:
                group = os.getpgid(pid)
                if group != os.getpgrp():
                    os.killpg(group, signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            if pid not in ended:
                ended.append(pid)
    return ended


def _wait_reaping(pid: int) -> int:
    """Wait for the child `pid` to exit, reaping any adopted process that exits meanwhile; its exit
    code as subprocess gives it."""
    while True:
        try:
            reaped, status = os.waitpid(-1, 0)
        except ChildProcessError:  # reaped elsewhere: nothing more to know
            return 0
        if reaped == pid:
            return os.waitstatus_to_exitcode(status)


def supervise(
    argv: list[str], *, name: str = "the worker", pause: float = RESTART_PAUSE_SECONDS,
    max_pause: float = MAX_RESTART_PAUSE_SECONDS, healthy_after: float = HEALTHY_SECONDS,
    on_start: Callable[[int], None] | None = None,
) -> int:
    """Run `argv` and start it again whenever it exits, until this process gets SIGTERM or SIGINT
    (forwarded once to it): see the module docstring. Returns the exit code of its last run (0 when
    it stopped on the forwarded signal). `on_start(pid)` is called after each start."""
    if not _prctl(_PR_SET_CHILD_SUBREAPER, 1):
        logger.warning("could not become a child subreaper: orphaned work horses end only by themselves")
    stop: list[int] = []
    child: subprocess.Popen | None = None

    def request_stop(signum, _frame) -> None:
        if stop:
            return  # forwarded once: a second signal would be the worker's cold shutdown
        stop.append(signum)
        if child is not None and child.returncode is None:
            try:
                os.kill(child.pid, signum)
            except ProcessLookupError:
                pass

    previous = {signum: signal.signal(signum, request_stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        next_pause = pause
        while True:
            started = time.monotonic()
            child = subprocess.Popen(argv, preexec_fn=_worker_setup)  # noqa: PLW1509 - no threads here
            if stop:  # asked to stop while starting it
                os.kill(child.pid, stop[0])
            if on_start is not None:
                on_start(child.pid)
            code = _wait_reaping(child.pid)
            child.returncode = code
            orphans = end_orphans()
            if orphans:
                logger.warning("ended the work horses %s that outlived their worker", ", ".join(map(str, orphans)))
            if stop:
                return 0 if code in (0, -stop[0]) else code
            lived = time.monotonic() - started
            next_pause = pause if lived >= healthy_after else next_pause
            logger.warning("%s exited (%s) after %.0f s; starting it again in %g s", name, describe_status(code), lived, next_pause)
            deadline = time.monotonic() + next_pause
            while not stop and time.monotonic() < deadline:
                time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
            if stop:
                return 0
            next_pause = min(next_pause * 2, max_pause)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
