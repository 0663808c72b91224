"""Where a try's files and sandboxes live, and how they are removed.

Each try of an attempt gets its own directories under settings.WORKSPACE_ROOT (the agent's
workspace, the re-execution's workspace) and its own trajectory file outside them, so a worker
presumed dead but still running never shares a directory with the try that replaced it. Its
sandboxes are named after the deployment, attempt and try, which lets the sweep
(runs.evaluation.recovery.leftovers_sweep) tell a live try's leftovers from a dead one's.
Workspaces are removed through sandbox.fs, whatever the agent left in them."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from django.conf import settings

from sandbox import fs

logger = logging.getLogger(__name__)


def attempt_workspace_dir(attempt_id: int, try_number: int) -> Path:
    """One directory per try: a worker presumed dead but still running keeps its own directory,
    and the new try never builds into a half-deleted one."""
    return Path(settings.WORKSPACE_ROOT) / f"attempt-{attempt_id}-try-{try_number}"


def attempt_reexecution_dir(attempt_id: int, try_number: int, *, prefix: str = "") -> Path:
    """A try's re-execution workspace; `prefix` is its kind's (WorkKind.sandbox_prefix), and with
    it `attempt_id` the id of the row that kind claims (a submission's attempt, a transplant)."""
    return Path(settings.WORKSPACE_ROOT) / f"{prefix}attempt-{attempt_id}-try-{try_number}-reexecution"


def attempt_sandbox_name(attempt_id: int, try_number: int, *, prefix: str = "") -> str:
    """The name of a try's sandboxes (the re-execution's adds "-reexecution"). Containers, cgroups
    and mount points carry it, so leftovers_sweep can tell a live try's from a dead one's. It
    starts with this deployment's id: deployments (a demo and a test run, say) may share one Docker
    engine and one machine, and each sweeps only its own."""
    return f"{sandbox_owner_id()}-{prefix}attempt-{attempt_id}-try-{try_number}"


def attempt_trajectory_path(attempt_id: int, try_number: int) -> Path:
    """Outside every workspace, one file per try, so a crashed try's partial trajectory is kept."""
    return Path(settings.WORKSPACE_ROOT) / "trajectories" / f"attempt-{attempt_id}-try-{try_number}.json"


def remove_tree(path: Path) -> None:
    """Removes a workspace the agent controlled, whatever it left in it (links, FIFOs, any names,
    any depth). A failure is logged, never raised: it must not change the attempt's result, and
    the sweep (leftovers_sweep) tries again later."""
    try:
        fs.remove_tree(path)
    except OSError:
        logger.exception("could not remove %s; the sweep will try again", path)

def sandbox_owner_id() -> str:
    """8 hex digits naming this deployment's sandboxes on this host: its id and its workspace root
    (two worker "hosts" of one deployment may share a machine, each sweeping its own)."""
    key = f"{settings.DEPLOYMENT_ID}|{settings.WORKSPACE_ROOT}"
    return hashlib.sha256(key.encode()).hexdigest()[:8]
