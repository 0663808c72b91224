"""Pytest fixtures for the fakes. Register with `pytest_plugins = ["tests.fakes.fixtures"]` in
tests/conftest.py (or import the fixture into a test module)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .fake_llm_server import FakeLLMServer


@pytest.fixture
def fake_llm() -> Iterator[FakeLLMServer]:
    """A started fake LLM server with an empty script; stopped after the test.

    `.script([...])` sets the replies, `.requests` holds what the clients sent, and
    `.base_url_openai` / `.base_url_anthropic` are the SDK base URLs.
    """
    with FakeLLMServer() as server:
        yield server
