"""Image building for the Docker backend, callable from Python (the scripts here do the work)."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from ..base import SandboxError

SCRIPTS = Path(__file__).resolve().parent


def script(name: str) -> Path:
    """Path of one of the shell scripts in this directory, e.g. script("start_docker_engine.sh")."""
    return SCRIPTS / name


def ensure_suite_image(
    name: str,
    *,
    apt: Sequence[str] = (),
    pip: Sequence[str] = (),
    base: str = "autoexperiment-base:bookworm",
    timeout: float = 3600,
) -> str:
    """Builds (once) the image a suite declares: base plus its Debian and pip packages.

    Quick when an image of that name was already built from the same base and packages. Needs
    network at build time (apt, PyPI); returns the image name for open_sandbox(image=...).
    """
    command = [str(script("build_suite_image.sh")), base, name]
    if apt:
        command += ["--apt", *apt]
    if pip:
        command += ["--pip", *pip]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    if completed.returncode != 0:
        raise SandboxError(f"building image {name} failed:\n{completed.stdout[-2000:]}{completed.stderr[-2000:]}")
    return name
