"""Sweeping what sandboxes of dead workers left behind.

A worker killed while a sandbox is open never reaches close(): its Docker container keeps running,
its bubblewrap cgroup (and any process the kill missed) stays, and so does the empty directory the
workspace was bind-mounted on. Every such resource carries the sandbox's name; the caller, which
knows which names belong to live work, says which to keep.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .cgroup import LEAF_PREFIX, leftover_cgroups, sandbox_name_of_leaf

logger = logging.getLogger(__name__)

# The bubblewrap backend's mount points: tempfile.mkdtemp(prefix=BIND_PREFIX + name + "-").
BIND_PREFIX = LEAF_PREFIX


def sweep_sandboxes(is_live: Callable[[str, float], bool], *, docker: bool = True) -> list[str]:
    """Removes every sandbox resource whose sandbox `is_live(name, age_seconds)` says is dead:
    Docker containers (when `docker` and an engine answers), cgroups with their processes, and
    bubblewrap mount-point directories. Returns a line per removed resource."""
    removed: list[str] = []
    if docker:
        removed += _sweep_containers(is_live)
    for leaf, (age, group) in leftover_cgroups().items():
        if not is_live(sandbox_name_of_leaf(leaf), age):
            group.remove()
            removed.append(f"cgroup {leaf}")
    for directory in Path(tempfile.gettempdir()).glob(f"{BIND_PREFIX}*"):
        name = directory.name[len(BIND_PREFIX):].rsplit("-", 1)[0]
        try:
            age = time.time() - directory.lstat().st_mtime
        except OSError:
            continue
        if directory.is_dir() and not directory.is_symlink() and not is_live(name, age):
            try:
                os.rmdir(directory)  # only ever an empty mount point; never anything with content
                removed.append(f"directory {directory}")
            except OSError as error:
                logger.warning("could not remove %s: %s", directory, error)
    return removed


def _sweep_containers(is_live: Callable[[str, float], bool]) -> list[str]:
    from .docker_backend import sandbox_containers  # the docker SDK only when sweeping

    removed = []
    try:
        for container, name, age in sandbox_containers():
            if not is_live(name, age):
                container.remove(force=True, v=True)
                removed.append(f"container {container.name}")
    except Exception as error:  # noqa: BLE001 - no engine here, or it went away: nothing to sweep there
        logger.info("Docker containers not swept: %s", error)
    return removed
