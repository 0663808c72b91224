"""Helpers for tests that need a component of the machine (a sandbox backend, a browser, fixtures)."""
import functools
import os

import pytest


def require(condition: bool, how_to_fix: str) -> None:
    """Fail in CI, where every component must be there; skip elsewhere, saying how to install it."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"missing in CI: {how_to_fix}", pytrace=False)
    pytest.skip(how_to_fix)


_BACKEND_HINTS = {
    "bubblewrap": "run sandbox/images/install_host_packages.sh (apt-get install bubblewrap python3-numpy)",
    "docker": "run sandbox/images/start_docker_engine.sh, then sandbox/images/build_base_image.sh",
}


@functools.cache
def _backend_problem(backend: str) -> str | None:
    from sandbox import backend_problem

    return backend_problem(backend)


def require_backend(backend: str) -> None:
    """Skip, or fail under CI, when a sandbox backend cannot run here."""
    problem = _backend_problem(backend)
    require(problem is None, f"{backend} sandbox unavailable: {problem}. To provide it: {_BACKEND_HINTS[backend]}")
