"""GPU leases between the workers of one machine (sandbox.gpus): never one GPU to two sandboxes,
freed by a worker's death, no deadlock between leases of several GPUs."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from sandbox import SandboxError
from sandbox.gpus import gpu_lease, parse_gpu_ids

DEVICES = ["0", "1"]


def test_each_lease_gets_gpus_no_other_lease_holds(tmp_path):
    with gpu_lease(1, devices=DEVICES, lock_dir=tmp_path) as first, gpu_lease(1, devices=DEVICES, lock_dir=tmp_path) as second:
        assert sorted(first + second) == DEVICES
        with gpu_lease(1, devices=DEVICES, lock_dir=tmp_path, wait=False) as third:
            assert third == []  # an optional GPU: none free, so the CPU
    with gpu_lease(2, devices=DEVICES, lock_dir=tmp_path, wait=False) as both:
        assert both == DEVICES  # released on leaving


def test_a_worker_killed_mid_lease_frees_its_gpu(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import time
            from sandbox.gpus import gpu_lease
            with gpu_lease(2, devices={DEVICES!r}, lock_dir={str(tmp_path)!r}):
                print("held", flush=True)
                time.sleep(600)
        """)],
        stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with gpu_lease(1, devices=DEVICES, lock_dir=tmp_path, wait=False) as none_free:
            assert none_free == []
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with gpu_lease(1, devices=DEVICES, lock_dir=tmp_path, wait=False) as freed:
        assert freed == ["0"]


def test_leases_of_several_gpus_wait_for_each_other_without_deadlock(tmp_path):
    """Two leases of both GPUs each, at once: one runs, then the other (a lease holding one GPU
    while waiting for the second would deadlock with its twin)."""
    order = []

    def lease(name):
        with gpu_lease(2, devices=DEVICES, lock_dir=tmp_path, wait_seconds=30) as gpus:
            order.append((name, "start", gpus))
            time.sleep(0.3)
            order.append((name, "end", gpus))

    threads = [threading.Thread(target=lease, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert [step for _, step, _ in order] == ["start", "end", "start", "end"], order
    assert all(gpus == DEVICES for _, _, gpus in order)


def test_a_lease_of_more_gpus_than_the_worker_has_is_refused_with_the_numbers(tmp_path):
    with pytest.raises(SandboxError, match="2 GPU.*needed.*may use 1"):
        with gpu_lease(2, devices=["0"], lock_dir=tmp_path):
            pass
    with pytest.raises(SandboxError, match="after 1 s"):
        with gpu_lease(1, devices=["0"], lock_dir=tmp_path), gpu_lease(1, devices=["0"], lock_dir=tmp_path, wait_seconds=1):
            pass


@pytest.mark.parametrize(("text", "ids"), [("", []), ("none", []), ("0", ["0"]), (" 0, 3 ", ["0", "3"])])
def test_gpu_ids_are_read_from_settings_text(text, ids):
    assert parse_gpu_ids(text) == ids


@pytest.mark.parametrize("text", ["all", "0,0", "gpu0", "1;2", "-1"])
def test_malformed_gpu_ids_are_refused(text):
    with pytest.raises(SandboxError, match="expected distinct device numbers"):
        parse_gpu_ids(text)
