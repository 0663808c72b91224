"""Fixtures for the agent tests: a built toy workspace and a bubblewrap sandbox on it."""

from __future__ import annotations

import functools

import pytest

from runs.agents.llm import pricing
from sandbox import Limits, backend_problem, open_sandbox
from tests.agents.helpers import build_toy_workspace
from tests.support import require


@functools.cache
def _bubblewrap_problem() -> str | None:
    return backend_problem("bubblewrap")


@pytest.fixture(autouse=True)
def clean_llm_environment(monkeypatch):
    """No key, endpoint or price file leaks in from the developer's shell."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "LLM_PRICES_FILE"):
        monkeypatch.delenv(name, raising=False)
    pricing.reload_prices()
    yield
    pricing.reload_prices()


@pytest.fixture
def workspace(tmp_path):
    """The toy workspace (weighted_mean masked, full paper context)."""
    return build_toy_workspace(tmp_path)


@pytest.fixture
def sandbox_on():
    """sandbox_on(workspace): a bubblewrap sandbox on it, closed after the test."""
    problem = _bubblewrap_problem()
    require(problem is None, f"bubblewrap sandbox unavailable: {problem}; run sandbox/images/install_host_packages.sh")
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
