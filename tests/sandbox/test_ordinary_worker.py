"""Root's guarantees for a worker that runs as an ordinary user (DESIGN.md section 6).

A non-root worker runs sandboxed commands under its own uid, so the agent's processes share the
worker's uid and own the workspace's files as the worker does; no cgroup holds them. Each attack
here runs in a worker process of its own, once as root and once as an ordinary user
(tests.support.run_sandbox_script), through the real bubblewrap backend.
"""
from __future__ import annotations

import platform

import pytest

from tests.support import require_backend, run_sandbox_script

pytestmark = pytest.mark.usefixtures("bubblewrap")


@pytest.fixture
def bubblewrap() -> None:
    require_backend("bubblewrap")


@pytest.fixture(params=["root", "ordinary user"])
def as_ordinary_user(request) -> bool:
    return request.param == "ordinary user"


# x86-64, position independent: prctl(PR_SET_PDEATHSIG, 0), so the death of bwrap's monitor no longer
# kills it; fd = open("/workspace/survivor", O_WRONLY|O_CREAT|O_APPEND, 0644); then for ever
# write(fd, "/", 1) and nanosleep 20 ms. (Assembled with GNU as; the source is in the comments.)
SURVIVOR_SHELLCODE = bytes.fromhex(
    "bf01000000"  # mov edi, 1
    "31f6"  # xor esi, esi
    "b89d000000"  # mov eax, 157 (prctl)
    "0f05"  # syscall
    "488d3d4a000000"  # lea rdi, [rip+path]
    "be41040000"  # mov esi, O_WRONLY|O_CREAT|O_APPEND
    "baa4010000"  # mov edx, 0644
    "b802000000"  # mov eax, 2 (open)
    "0f05"  # syscall
    "89c3"  # mov ebx, eax
    "89df"  # again: mov edi, ebx
    "488d352e000000"  # lea rsi, [rip+path]
    "ba01000000"  # mov edx, 1
    "b801000000"  # mov eax, 1 (write)
    "0f05"  # syscall
    "488d3d0b000000"  # lea rdi, [rip+ts]
    "31f6"  # xor esi, esi
    "b823000000"  # mov eax, 35 (nanosleep)
    "0f05"  # syscall
    "ebd9"  # jmp again
    "0000000000000000" "002d310100000000"  # ts: 0 s, 20,000,000 ns
) + b"/workspace/survivor\0"

# Inside the sandbox: write the payload where PID 1 (bwrap's init, the same uid) resumes when its
# wait() returns, through /proc/1/mem (ptrace and process_vm_writev are refused by seccomp), then
# wake it with an orphan that exits.
_TAKEOVER = r"""
import os, subprocess, sys
payload = bytes.fromhex(sys.argv[1])
try:
    pc = int(open("/proc/1/syscall").read().split()[-1], 16)
    memory = os.open("/proc/1/mem", os.O_RDWR)
    os.pwrite(memory, payload, pc)
except OSError as error:
    print("takeover refused:", error)
    sys.exit(3)
print("injected at", hex(pc))
sys.stdout.flush()
subprocess.run(["sh", "-c", "sleep 0.2 &"])
"""

_WORKER = r"""
import json, os, pathlib, sys, time
from sandbox import Limits, open_sandbox

workspace = pathlib.Path("workspace")
workspace.mkdir()
(workspace / "takeover.py").write_text(TAKEOVER)
box = open_sandbox("bubblewrap", workspace, limits=Limits(memory_mb=512, pids=64, disk_mb=100))
result = box.execute("python3 takeover.py " + PAYLOAD + "; sleep 0.5", timeout=5)
# The plain way out too: daemonised loops, then the command kills its own shell.
box.execute(
    "setsid sh -c 'while :; do date +%s%N >> daemon; sleep 0.05; done' >/dev/null 2>&1 </dev/null &\n"
    "while [ ! -s daemon ]; do sleep 0.02; done; kill -KILL $$", timeout=10)
box.close()
sizes = []
for _ in range(3):
    time.sleep(0.3)
    sizes.append([(workspace / name).stat().st_size if (workspace / name).exists() else 0 for name in ("survivor", "daemon")])
print(json.dumps({"output": result.output, "exit_code": result.exit_code, "sizes_after_close": sizes}))
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the payload is x86-64 machine code")
def test_pid1_cannot_be_taken_over_through_proc_mem_and_nothing_survives_close(as_ordinary_user, worker_scratch):
    """A command writes code into PID 1 (bwrap's init, of its own uid) through /proc/1/mem that
    clears its parent-death signal and appends to a file for ever; on an ordinary user's worker (no
    cgroup) it went on writing after close(). Then a daemonised loop, the plain way out."""
    script = f"TAKEOVER = {_TAKEOVER!r}\nPAYLOAD = {SURVIVOR_SHELLCODE.hex()!r}\n{_WORKER}"
    report = run_sandbox_script(script, as_ordinary_user=as_ordinary_user, scratch=worker_scratch)
    sizes = report["sizes_after_close"]
    assert sizes[0] == sizes[-1], f"a process wrote into the workspace after close(): sizes {sizes}; {report['output']}"
    assert sizes[0][1] > 0, "the daemon never ran"
    assert "injected" not in report["output"], report["output"]
    assert "takeover refused" in report["output"], report["output"]


_VOIDING = r"""
import json, pathlib
from sandbox import Limits, fs, open_sandbox

workspace = pathlib.Path("workspace")
workspace.mkdir()
report = {}

def step(name, action):
    try:
        report[name] = action()
    except Exception as error:  # what the harness would have died of
        report[name] = f"raised {type(error).__name__}: {error}"

box = open_sandbox("bubblewrap", workspace, limits=Limits(memory_mb=512, pids=64, disk_mb=100))
step("lock", lambda: box.execute(
    "mkdir -p code out && echo data > code/metric.py && echo 0.5 > out/result.txt && mkfifo out/pipe && "
    "chmod 0 code/metric.py out && chmod 100 code && chmod 0 /workspace; echo locked", timeout=20).output)
step("read", lambda: box.read_file("code/metric.py"))
step("listing", lambda: box.list_files(".", recursive=True))
step("hide", lambda: (lambda result: [result.exit_code, result.output])(box.execute(
    "mkdir hidden && head -c 120M /dev/zero > hidden/big; chmod 0 hidden; echo hid", timeout=30)))
step("next", lambda: box.execute("chmod u+rwx hidden; rm -rf hidden; echo next", timeout=10).output)
box.close()
step("removed", lambda: (fs.remove_tree(workspace), not workspace.exists())[1])
print(json.dumps(report))
"""


def test_what_a_command_does_to_permissions_is_its_own_result(as_ordinary_user, worker_scratch):
    """A command locks the workspace (`chmod 0 /workspace`), a file, a directory holding an output,
    and hides 120 MB over a 100 MB cap in a directory it then locks. For a non-root worker every one
    of these was an OSError in the harness (the quota walk, reading, listing, removing): an attempt
    voided into an uncounted infrastructure error, or a disk cap bypassed."""
    report = run_sandbox_script(_VOIDING, as_ordinary_user=as_ordinary_user, scratch=worker_scratch)
    assert report["lock"].endswith("locked\n"), report
    assert report["read"] == "data\n", report
    assert {"code/metric.py", "out/result.txt", "out/pipe"} <= set(report["listing"]), report
    exit_code, output = report["hide"]
    assert exit_code == 122 and "disk quota exceeded" in output, report
    assert report["next"] == "next\n", report
    assert report["removed"] is True, report
