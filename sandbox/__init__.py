"""Sandboxes for running untrusted code (agents' commands, re-execution of submissions).

No Django here: the package is usable from workers, scripts and tests alike.

    from sandbox import Limits, open_sandbox

    with open_sandbox("docker", workspace, limits=Limits(memory_mb=1024), name=f"attempt-{id}") as sb:
        result = sb.execute("python3 run.py", timeout=600)
        answer = sb.read_file("answer.json")
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import (
    DATA_MOUNT,
    DISK_QUOTA_EXIT_CODE,
    TIMEOUT_EXIT_CODE,
    Backend,
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    sandbox_env,
    warm_up,
)

if TYPE_CHECKING:
    from .bwrap_backend import BubblewrapSandbox
    from .docker_backend import DockerSandbox

# As a tuple, for membership tests of plain strings (`"docker" in Backend` raises TypeError before
# Python 3.12) and argparse's choices.
BACKENDS = tuple(Backend)
# Every accepted spelling of a backend and the backend it names: the settings, the commands' --backend
# and open_sandbox all accept "bwrap", the name of bubblewrap's program, for bubblewrap.
BACKEND_NAMES = {"docker": Backend.DOCKER, "bubblewrap": Backend.BUBBLEWRAP, "bwrap": Backend.BUBBLEWRAP}

__all__ = [
    "BACKENDS",
    "Backend",
    "DATA_MOUNT",
    "BACKEND_NAMES",
    "DISK_QUOTA_EXIT_CODE",
    "TIMEOUT_EXIT_CODE",
    "ExecResult",
    "Limits",
    "Sandbox",
    "SandboxError",
    "backend_class",
    "backend_problem",
    "canonical_backend",
    "open_sandbox",
    "sandbox_env",
    "warm_up",
]


def canonical_backend(backend: str) -> Backend:
    """The backend `backend` names ("bwrap" -> "bubblewrap"); SandboxError for an unknown name."""
    try:
        return BACKEND_NAMES[backend]
    except KeyError:
        raise SandboxError(f"unknown sandbox backend {backend!r}; choose one of {', '.join(BACKENDS)}") from None


def open_sandbox(
    backend: str,
    workspace: str | Path,
    *,
    limits: Limits | None = None,
    name: str = "",
    image: str | None = None,
    env: Mapping[str, str] | None = None,
    gpus: str | int | None = None,
    environment: str | Path | None = None,
    data: Mapping[str, str | Path] | None = None,
) -> Sandbox:
    """Opens a sandbox on an existing workspace directory with the named backend.

    backend: "docker" or "bubblewrap" (alias "bwrap").
    name: identifies the sandbox, typically "attempt-<id>"; the Docker container is named after it
        and a leftover container of that name (from a crashed worker) is removed first. Empty:
        a random unique name.
    image: Docker image; default $SANDBOX_IMAGE, else autoexperiment-base:bookworm. Ignored by
        bubblewrap, which uses the host's /usr.
    env: extra environment variables for commands, on top of the fixed allow-list.
    gpus: pass GPUs through: "all", a count (an int), or comma-separated device ids (a str, such
        as a lease from sandbox.gpus gives). Docker uses device requests (needs the NVIDIA container
        toolkit); bubblewrap binds the driver's /dev/nvidia* nodes and those of the GPUs given.
    environment: a built Python environment (sandbox.environments), bound read-only at its own
        path, its bin/ first on PATH: `python3` is then the environment's in both backends.
    data: file name -> host file, each bound read-only at /data/<name>.
    """
    options: dict[str, Any] = {"image": image} if canonical_backend(backend) == Backend.DOCKER else {}
    return backend_class(backend)(
        workspace, limits=limits, name=name, env=env, gpus=gpus, environment=environment, data=data, **options
    )


def backend_class(backend: str) -> type[DockerSandbox] | type[BubblewrapSandbox]:
    """The named backend's class, its module imported on first use (the Docker SDK is heavy, and
    a worker imports only its own backend before forking: runs.evaluation.worker)."""
    if canonical_backend(backend) == Backend.DOCKER:
        from .docker_backend import DockerSandbox

        return DockerSandbox
    from .bwrap_backend import BubblewrapSandbox

    return BubblewrapSandbox


def backend_problem(backend: str, image: str | None = None) -> str | None:
    """None when the backend can run sandboxes on this machine, else what is missing and how to
    provide it (for health checks, tests and the benchmark script)."""
    if canonical_backend(backend) == Backend.DOCKER:
        from . import docker_backend

        return docker_backend.probe(image or os.environ.get("SANDBOX_IMAGE") or None)
    from . import bwrap_backend

    return bwrap_backend.probe()
