"""GPUs shared by the workers of one machine: each sandbox that needs GPUs leases some for its life.

A worker is told which GPUs of its machine it may use (device ids as nvidia-smi numbers them). A
lease takes an exclusive lock on one file per GPU in a directory all workers of the machine share,
so two attempts never get the same GPU and a machine with four GPUs runs four one-GPU attempts at
once. The locks are flock(2) locks: a worker that dies, however it dies, lets its GPUs go with it.
"""
from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .base import SandboxError

# How long a lease that must have its GPUs waits for others to free them, and how often it looks.
DEFAULT_WAIT_SECONDS = 3600.0
_POLL_SECONDS = 0.5


def parse_gpu_ids(text: str) -> list[str]:
    """"0,1,3" -> ["0", "1", "3"]; "" or "none" -> []. SandboxError for anything else."""
    text = text.strip()
    if text.lower() in ("", "none"):
        return []
    ids = [part.strip() for part in text.split(",")]
    if not all(part.isascii() and part.isdigit() for part in ids) or len(set(ids)) != len(ids):
        raise SandboxError(f"GPU ids {text!r}: expected distinct device numbers separated by commas, e.g. 0,1")
    return ids


def _try_lock(lock_dir: Path, gpu: str) -> int | None:
    descriptor = os.open(lock_dir / f"gpu-{gpu}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    return descriptor


@contextmanager
def gpu_lease(
    count: int, *, devices: Sequence[str], lock_dir: str | os.PathLike[str], wait: bool = True,
    wait_seconds: float = DEFAULT_WAIT_SECONDS,
) -> Iterator[list[str]]:
    """Lease `count` of `devices` for the body of the `with`; yields their ids (for open_sandbox's
    `gpus`). `wait`: wait until enough are free (SandboxError after `wait_seconds`); otherwise
    yield [] at once when they are not (the caller runs on the CPU). SandboxError when the machine
    has fewer than `count` GPUs for this worker at all."""
    if count < 1:
        yield []
        return
    if count > len(devices):
        raise SandboxError(f"{count} GPU(s) needed; this worker may use {len(devices)} ({','.join(devices) or 'none'})")
    lock_dir = Path(lock_dir)
    lock_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_seconds
    held: dict[str, int] = {}
    try:
        while True:
            for gpu in devices:
                if len(held) == count:
                    break
                if gpu not in held and (descriptor := _try_lock(lock_dir, gpu)) is not None:
                    held[gpu] = descriptor
            if len(held) == count:
                break
            # Holding some while waiting for more could deadlock two leases of two GPUs each.
            for descriptor in held.values():
                os.close(descriptor)
            held.clear()
            if not wait:
                yield []
                return
            if time.monotonic() > deadline:
                raise SandboxError(f"no {count} free GPU(s) among {','.join(devices)} after {wait_seconds:.0f} s")
            time.sleep(_POLL_SECONDS)
        yield sorted(held, key=devices.index)
    finally:
        for descriptor in held.values():
            os.close(descriptor)
