"""Helpers for tests that need a component of the machine (a sandbox backend, a browser, fixtures)."""
import os

import pytest


def require(condition: bool, how_to_fix: str) -> None:
    """Fail in CI, where every component must be there; skip elsewhere, saying how to install it."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"missing in CI: {how_to_fix}", pytrace=False)
    pytest.skip(how_to_fix)
