"""How the bubblewrap backend holds a sandbox to its memory limit: a cgroup, made under a configured
parent ($SANDBOX_CGROUP_PARENT) where our own cgroup delegates nothing, else rlimits, and for GPU
sandboxes an rlimit that CUDA survives (it reserves far more address space than it uses).
"""
from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest

from sandbox import Limits, SandboxError, open_sandbox
from sandbox.cgroup import leftover_cgroups
from tests.support import require_backend, run_sandbox_script

LIMITS = Limits(memory_mb=256, pids=64, cpus=1.0)
# What CUDA does at start-up (an address-space reservation it never touches), then what a memory hog does.
RESERVE_THEN_HOG = (
    "python3 -c \"import mmap; reservation = mmap.mmap(-1, 64 * 2**30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=0); print('reserved', flush=True); "
    "hog = bytearray(1024 * 2**20); print('hogged')\""
)


@pytest.fixture(autouse=True)
def bubblewrap() -> None:
    require_backend("bubblewrap")


@pytest.fixture
def cgroup_parent(monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("sandbox cgroups need a root worker (CI runs the tests as root)")
    parent = f"/autoexperiment-test-{secrets.token_hex(4)}"
    monkeypatch.setenv("SANDBOX_CGROUP_PARENT", parent)
    yield parent
    for directory in Path("/sys/fs/cgroup").glob(f"*{parent}"):
        directory.rmdir()


def _memory_limit_files(parent: str) -> list[Path]:
    """The memory limit files of the sandbox cgroups under `parent` (v1 or v2 hierarchy)."""
    found = []
    for directory in Path("/sys/fs/cgroup").glob(f"**{parent}/autoexperiment-sandbox-*"):
        found += [path for path in (directory / "memory.limit_in_bytes", directory / "memory.max") if path.exists()]
    return found


def test_sandbox_cgroups_are_made_under_the_configured_parent_and_hold_the_limit(cgroup_parent, tmp_path):
    with open_sandbox("bubblewrap", tmp_path, limits=LIMITS, name="parented") as box:
        assert box.memory_enforcement.startswith("cgroup")
        files = _memory_limit_files(cgroup_parent)
        assert [int(path.read_text()) for path in files] == [LIMITS.memory_mb * 2**20], files
        assert any(leaf.startswith("autoexperiment-sandbox-parented-") for leaf in leftover_cgroups())  # the sweep looks there
        hog = box.execute("python3 -c \"hog = bytearray(1024 * 2**20); print('hogged')\"", timeout=60)
        assert hog.exit_code == 137 and "hogged" not in hog.output  # the OOM killer, not an rlimit
    assert _memory_limit_files(cgroup_parent) == []  # removed on close


@pytest.mark.parametrize("parent", ["relative/path", "/a/../../escape"])
def test_a_malformed_parent_is_refused_with_the_variable_named(monkeypatch, tmp_path, parent):
    if os.geteuid() != 0:
        pytest.skip("only a root worker makes cgroups")
    monkeypatch.setenv("SANDBOX_CGROUP_PARENT", parent)
    with pytest.raises(SandboxError, match="SANDBOX_CGROUP_PARENT"):
        open_sandbox("bubblewrap", tmp_path, limits=LIMITS)


_WITHOUT_CGROUP = f"""
import json, pathlib
from sandbox import Limits, open_sandbox
found = {{}}
for gpus in (None, "all"):
    workspace = pathlib.Path("workspace-" + str(gpus))
    workspace.mkdir()
    with open_sandbox("bubblewrap", workspace, limits=Limits(memory_mb={LIMITS.memory_mb}, pids=64), gpus=gpus) as box:
        result = box.execute({RESERVE_THEN_HOG!r}, timeout=60)
        found[str(gpus)] = {{"output": result.output, "enforcement": box.memory_enforcement}}
print(json.dumps(found))
"""


def test_without_a_cgroup_a_gpu_sandbox_lets_cuda_reserve_address_space_and_still_bounds_memory(worker_scratch):
    """An ordinary user's worker gets no cgroup: memory is bounded by rlimits. The address-space
    limit of a CPU sandbox refuses CUDA's reservation; a GPU sandbox's data-segment limit allows it
    and still refuses the hog."""
    found = run_sandbox_script(_WITHOUT_CGROUP, as_ordinary_user=True, scratch=worker_scratch)
    cpu, gpu = found["None"], found["all"]
    assert "reserved" not in cpu["output"] and "Cannot allocate memory" in cpu["output"], json.dumps(cpu)
    assert "RLIMIT_AS" in cpu["enforcement"]
    assert "reserved" in gpu["output"] and "hogged" not in gpu["output"] and "MemoryError" in gpu["output"], json.dumps(gpu)
    assert "RLIMIT_DATA" in gpu["enforcement"]
