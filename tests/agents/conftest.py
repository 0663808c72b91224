"""Fixtures for the agent tests: a built toy workspace and a bubblewrap sandbox on it."""

from __future__ import annotations

import pytest

from sandbox import Limits, open_sandbox
from tests.agents.helpers import build_toy_workspace
from tests.support import require_backend


@pytest.fixture
def workspace(tmp_path):
    """The toy workspace (weighted_mean masked, full paper context)."""
    return build_toy_workspace(tmp_path)


@pytest.fixture
def sandbox_on():
    """sandbox_on(workspace): a bubblewrap sandbox on it, closed after the test."""
    require_backend("bubblewrap")
    opened = []

    def open_on(path):
        sandbox = open_sandbox("bubblewrap", path, limits=Limits(memory_mb=512, disk_mb=200))
        opened.append(sandbox)
        return sandbox

    yield open_on
    for sandbox in opened:
        sandbox.close()


@pytest.fixture
def sandbox(workspace, sandbox_on):
    """A bubblewrap sandbox on the toy workspace."""
    return sandbox_on(workspace)
