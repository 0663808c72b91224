"""Fakes for tests: real servers on loopback, never mocks of our own code."""

from .fake_llm_server import FakeError, FakeLLMServer, FakeTurn, RecordedRequest

__all__ = ["FakeError", "FakeLLMServer", "FakeTurn", "RecordedRequest"]
