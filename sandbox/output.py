"""Bounded capture of a command's output."""

from __future__ import annotations

import threading


class BoundedOutput:
    """Keeps the first and last bytes of a stream and counts what falls in between.

    Commands can print without limit (a 100 MB flood must not reach the worker's memory, nor an
    agent's context), yet both ends carry meaning: the head shows what started, the tail shows the
    error a crash ends with. Memory stays below twice the limit whatever is fed.
    """

    def __init__(self, limit: int) -> None:
        if limit < 2:
            raise ValueError("output limit must be at least 2 bytes")
        self.limit = limit
        self._head_size = limit // 2
        self._tail_size = limit - self._head_size
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0
        # Fed by a reader thread while the supervising thread may already render a partial result.
        self._lock = threading.Lock()

    def feed(self, data: bytes) -> None:
        if not data:
            return
        with self._lock:
            self.total += len(data)
            room = self._head_size - len(self._head)
            if room > 0:
                self._head += data[:room]
                data = data[room:]
            if data:
                self._tail += data[-self._tail_size :]
                # Trim lazily: chopping on every small chunk would copy the tail each time.
                if len(self._tail) > 2 * self._tail_size:
                    del self._tail[: -self._tail_size]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        """The kept bytes decoded as UTF-8, with a marker where bytes were dropped."""
        with self._lock:
            tail = bytes(self._tail[-self._tail_size :])
            head = bytes(self._head)
            dropped = self.total - len(head) - len(tail)
        if dropped <= 0:
            return (head + tail).decode("utf-8", errors="replace")
        return (
            head.decode("utf-8", errors="replace")
            + truncation_marker(dropped)
            + tail.decode("utf-8", errors="replace")
        )


def truncation_marker(dropped: int) -> str:
    return f"\n[... {dropped} bytes truncated ...]\n"
