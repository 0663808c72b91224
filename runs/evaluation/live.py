"""Live attempts: a running attempt's trajectory reaches the database while its agent works.

The recorder (runs.agents.recorder.TrajectoryWriter) saves the trajectory file atomically after
every step, cut to the trajectory limits. A `TrajectoryStream` watches that file for the attempt's
heartbeat thread (runs.evaluation.claims.Heartbeat), which stores what it reads in
`Attempt.trajectory` at most every ATTEMPT_LIVE_SECONDS, behind the same fence as its beat: only
while this try still holds the claim, so a try that was taken over never writes over the newer
try's steps. The harness stores the whole agent trajectory once more as the agent ends (the
re-execution that follows may take minutes), and the final write of the attempt's result stays the
source of truth. A work horse killed mid-attempt leaves in the database what it had stored, at
most ATTEMPT_LIVE_SECONDS older than its last step (longer for a large trajectory: see
LIVE_WRITE_SHARE).

Why the heartbeat thread and not a callback in the agent's loop: nothing is added to the agent's
own path (a read and a write of the trajectory, now and then, in another thread), and a step
followed by a long tool call is stored within the interval, where a throttle inside the step
callback would hold it back until the next step.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from django.conf import settings

from runs.agents import load_trajectory
from runs.benchmark.text import json_safe

logger = logging.getLogger(__name__)


# Live writes take at most 1/LIVE_WRITE_SHARE of an attempt's time: after a write that took t
# seconds the next waits at least (LIVE_WRITE_SHARE - 1) * t (a trajectory near its 10 MB limit
# costs a few hundred milliseconds to read and store).
LIVE_WRITE_SHARE = 40


def live_seconds() -> float:
    """How often a running attempt's trajectory is stored; 0: only at its end (no live view)."""
    return float(settings.ATTEMPT_LIVE_SECONDS)


def trajectory_file_read(path: Path) -> dict | None:
    """The trajectory file at `path` as storable JSON, or None when there is none or it cannot be
    read (the recorder replaces it atomically: a reader sees a whole version or the previous one)."""
    if not path.is_file():
        return None
    try:
        return json_safe(load_trajectory(path).model_dump())
    except Exception:
        logger.exception("trajectory %s could not be read", path)
        return None


class TrajectoryStream:
    """The trajectory file of a running try, read when it changed since the last read.

    A change is told by the file's identity and stat (each atomic save is a new inode), so a poll
    with nothing new costs one stat. `seconds` and `writes` add up what storing it cost."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._signature: tuple[int, int, int] | None = None
        self.seconds = 0.0
        self.writes = 0

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return info.st_ino, info.st_mtime_ns, info.st_size

    def changed(self) -> bool:
        signature = self._stat()
        return signature is not None and signature != self._signature

    def read_if_changed(self) -> dict | None:
        """The trajectory as storable JSON if the file changed since the last call, else None."""
        signature = self._stat()
        if signature is None or signature == self._signature:
            return None
        data = trajectory_file_read(self.path)
        if data is not None:
            self._signature = signature
        return data

    def timed(self, started: float) -> None:
        self.seconds += time.monotonic() - started
        self.writes += 1
