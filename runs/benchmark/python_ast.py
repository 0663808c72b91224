"""`ast.parse` behind one lock, for every parse of Python source in the harness.

CPython 3.11 before 3.11.8 keeps the AST constructor's recursion depth per interpreter, not per
thread, so two threads parsing at once can fail with "SystemError: AST constructor recursion depth
mismatch" (python/cpython#106905). Baselines run in threads (tests, verifiers); parsing is quick.
"""
import ast
import threading
from typing import Any

_LOCK = threading.Lock()


def parse(source: str, *args: Any, **kwargs: Any) -> ast.Module:
    """ast.parse, one thread at a time."""
    with _LOCK:
        return ast.parse(source, *args, **kwargs)
