"""Trajectories of other tools converted to ours (runs.agents.foreign): exact steps from a small
file in each documented format, and a malformed file of each format refused with a message that
names the format and what is wrong."""
from __future__ import annotations

import io
import json
import struct
import zipfile
from pathlib import Path

import pytest
import zstandard

from runs.agents.foreign import ForeignTrajectoryError, detect_and_convert
from runs.agents.foreign.base import list_at, object_at, text_at
from runs.agents.trajectory import FORMAT, trajectory_from_json

FIXTURES = Path(__file__).parent / "foreign_fixtures"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def brief(converted) -> list[tuple]:
    """(index, thought, tool, arguments, observation, exit_code, error) of every step."""
    return [
        (s["index"], s["thought"], s["tool"], s["arguments"], s["observation"], s["exit_code"], s["error"])
        for s in converted.steps
    ]


def inspect_eval(sample: dict, *, zstd_members: bool, header: dict | None = None, extra_samples: int = 0) -> bytes:
    """An Inspect .eval archive: header.json and samples/*.json, deflated or zstd-compressed
    (method 93, which Python's zipfile writes as stored bytes that we then relabel)."""
    header = header or {"version": 2, "status": "success", "eval": {"task": "reproduce", "model": "openai/gpt-4o"}}
    members = {"header.json": header, "samples/1_epoch_1.json": sample}
    for number in range(extra_samples):
        members[f"samples/{number + 2}_epoch_1.json"] = sample
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED if zstd_members else zipfile.ZIP_DEFLATED) as archive:
        for name, value in members.items():
            text = json.dumps(value).encode()
            archive.writestr(name, zstandard.ZstdCompressor().compress(text) if zstd_members else text)
    data = bytearray(buffer.getvalue())
    if zstd_members:
        for signature, method_at in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):
            start = 0
            while (start := data.find(signature, start)) >= 0:
                data[start + method_at:start + method_at + 2] = struct.pack("<H", 93)
                start += 4
    return bytes(data)


def test_autoexperiment_text_log_becomes_exact_steps():
    converted = detect_and_convert(fixture("autoexperiment.txt"), "run.txt")
    assert converted.source_format == "autoexperiment-text-log"
    assert brief(converted) == [
        (1, "I should look at the code first.\nAction: list the files.", "execute_bash", {"command": "ls code"},
         "run.py\nstats.py", None, False),
        (2, "Run the experiment.", "execute_bash", {"command": "python code/run.py", "timeout": 60}, '{"mean": 2.6}', None, False),
        (3, "Read a file that is not there.", "read_file", {"file_name": "nope.py"},
         "Execution of read_file resulted in error [Errno 2] No such file or directory: 'nope.py'", None, True),
    ]
    header = converted.trajectory["header"]
    assert (header["input_tokens"], header["output_tokens"], header["cost"]) == (1500, 210, 0.0125)
    assert header["versions"]["source_format"] == "autoexperiment-text-log"
    assert trajectory_from_json(converted.trajectory).format == FORMAT


def test_mini_swe_agent_1_becomes_exact_steps():
    converted = detect_and_convert(fixture("mini_v1.traj.json"), "x.traj.json")
    assert (converted.source_format, converted.source_version) == ("mini-swe-agent", "mini-swe-agent-1")
    assert brief(converted) == [
        (1, "THOUGHT: list the files.", "bash", {"command": "ls code"}, "run.py", 0, False),
        (2, "THOUGHT: run it.", "bash", {"command": "python code/missing.py"},
         "python: can't open file 'code/missing.py'", 2, True),
    ]
    assert converted.trajectory["header"]["cost"] == 0.02
    assert converted.trajectory["header"]["model"] == "gpt-4o"


def test_mini_swe_agent_1_1_takes_actions_tokens_cost_and_patch():
    converted = detect_and_convert(fixture("mini_v11.traj.json"), "x.json")
    assert converted.source_version == "mini-swe-agent-1.1"
    [step] = converted.steps
    assert (step["tool"], step["arguments"], step["exit_code"]) == ("bash", {"command": "sed -i s/1/2/ code/stats.py"}, 0)
    assert (step["input_tokens"], step["output_tokens"], step["cost"]) == (900, 40, 0.05)
    assert step["notes"] == ["Submitted"]
    assert converted.trajectory["final_patch"].startswith("diff --git a/code/stats.py")


def test_swe_agent_traj_becomes_exact_steps_with_the_diff_of_the_editing_step():
    converted = detect_and_convert(fixture("swe_agent.traj"), "x.traj")
    assert (converted.source_format, converted.source_version) == ("swe-agent", "1.0.1")
    assert brief(converted) == [
        (1, "Look at the file.", "bash", {"command": "cat code/stats.py"}, "x = 1", None, False),
        (2, "Fix it.", "bash", {"command": "sed -i s/1/2/ code/stats.py"}, "", None, False),
    ]
    assert converted.steps[0]["files_changed"] == []
    [change] = converted.steps[1]["files_changed"]
    assert (change["path"], change["change"]) == ("code/stats.py", "modified")
    assert "+x = 2" in change["diff"]
    header = converted.trajectory["header"]
    assert (header["input_tokens"], header["output_tokens"], header["cost"]) == (12000, 800, 0.3)


INSPECT_STEPS = [
    (1, "Where is the code?\nListing.", "bash", {"cmd": "ls code"}, "run.py", None, False),
    (2, "Reading a file.", "text_editor", {"command": "view", "path": "code/nope.py"}, "code/nope.py does not exist", None, True),
    (3, 'ANSWER: {"mean": 2.6}', None, {}, "", None, False),
]


def test_inspect_json_log_becomes_exact_steps():
    converted = detect_and_convert(fixture("inspect.json"), "log.json")
    assert (converted.source_format, converted.source_version) == ("inspect-json", "2")
    assert brief(converted) == INSPECT_STEPS
    assert converted.trajectory["header"]["input_tokens"] == 700


@pytest.mark.parametrize("zstd_members", [False, True], ids=["deflate", "zstd"])
def test_inspect_eval_archive_becomes_exact_steps(zstd_members):
    sample = json.loads(fixture("inspect.json"))["samples"][0]
    converted = detect_and_convert(inspect_eval(sample, zstd_members=zstd_members), "log.eval")
    assert converted.source_format == "inspect-eval"
    assert brief(converted) == INSPECT_STEPS


MALFORMED = [
    ("autoexperiment-text-log", "run.txt",
     fixture("autoexperiment.txt").replace(b"Action:\narguments=", b"Action:\nrun ls ").replace(b"Function(arguments=", b"F("),
     "step 1 (line 4): the action is not a tool call"),
    ("autoexperiment-text-log", "run.txt", b"SYSTEM PROMPT\nhi\n#############\nStep: 0\n\nno sections\n#############\nCompute Cost: 1\n",
     "no 'Thought:' section"),
    ("mini-swe-agent", "x.traj.json", b'{"trajectory_format": "mini-swe-agent-1", "messages": {}}', "'messages' must be a list"),
    ("mini-swe-agent", "x.traj.json", b'{"trajectory_format": "mini-swe-agent-9", "messages": []}', "'mini-swe-agent-9' is not one"),
    ("swe-agent", "x.traj", b'{"trajectory": [{"thought": "t"}], "info": {}}', "step 1: has neither 'action' nor 'observation'"),
    ("swe-agent", "x.traj", b'{"trajectory": [', "invalid JSON"),
    ("inspect-json", "log.json", b'{"version": 2, "eval": {}, "samples": []}', "holds 0 samples"),
    ("inspect-json", "log.json",
     b'{"version": 2, "eval": {}, "samples": [{"messages": [{"role": "tool", "tool_call_id": "c9", "content": "x"}]}]}',
     "message 1: answers tool call 'c9'"),
]


@pytest.mark.parametrize(("format_name", "filename", "data", "problem"), MALFORMED)
def test_a_malformed_file_is_refused_naming_its_format_and_the_problem(format_name, filename, data, problem):
    with pytest.raises(ForeignTrajectoryError) as raised:
        detect_and_convert(data, filename)
    assert str(raised.value).startswith(f"{format_name}: ")
    assert problem in str(raised.value)


def test_a_malformed_eval_archive_is_refused_naming_the_format():
    sample = json.loads(fixture("inspect.json"))["samples"][0]
    with pytest.raises(ForeignTrajectoryError, match=r"^inspect-eval: the log holds 2 samples"):
        detect_and_convert(inspect_eval(sample, zstd_members=True, extra_samples=1), "log.eval")
    broken = inspect_eval(sample, zstd_members=True).replace(zstandard.ZstdCompressor().compress(json.dumps(sample).encode())[:8], b"garbage!")
    with pytest.raises(ForeignTrajectoryError, match=r"^inspect-eval: samples/1_epoch_1.json: not valid zstd data"):
        detect_and_convert(broken, "log.eval")


def test_a_file_in_no_known_format_is_refused():
    with pytest.raises(ForeignTrajectoryError, match="not a trajectory format this site reads"):
        detect_and_convert(b'{"hello": 1}', "x.json")


def test_an_eval_member_decompressing_past_the_limit_is_refused(monkeypatch):
    from runs.agents.foreign import inspect_log

    sample = json.loads(fixture("inspect.json"))["samples"][0]
    sample["padding"] = "x" * 5000  # compresses to a few bytes
    monkeypatch.setattr(inspect_log, "MAX_MEMBER_BYTES", 4000)
    with pytest.raises(ForeignTrajectoryError, match=r"^inspect-eval: samples/1_epoch_1.json: decompresses to more than 4,000"):
        detect_and_convert(inspect_eval(sample, zstd_members=True), "log.eval")


@pytest.mark.parametrize("data", [
    b'{"trajectory_format": "mini-swe-agent-1.1", "messages": [{"role": "assistant", "content": 5, "extra": {"actions": 5}, "tool_calls": 7}]}',
    b'{"trajectory_format": "mini-swe-agent-1.1", "messages": [{"role": "assistant", "content": "x", "extra": {"response": {"usage": 3}}}]}',
    b'{"trajectory": [{"action": "ls", "observation": ["a", 1], "state": 4, "execution_time": "slow"}], "info": []}',
    b'{"version": 2, "eval": {}, "samples": [{"messages": [{"role": "assistant", "content": {"a": 1}, "tool_calls": [{"function": "f", "arguments": 3}]}]}]}',
], ids=["mini-odd-types", "mini-odd-usage", "swe-odd-types", "inspect-odd-types"])
def test_odd_shapes_convert_or_are_refused_naming_the_format(data):
    try:
        converted = detect_and_convert(data, "x")
    except ForeignTrajectoryError as error:
        assert error.format_name in ("mini-swe-agent", "swe-agent", "inspect-json")
    else:
        assert trajectory_from_json(converted.trajectory).steps


def test_an_optional_field_of_another_json_type_reads_as_absent():
    record = {"info": [], "actions": {}, "submission": 3, "stats": {"cost": 1}, "patch": "diff"}
    assert (object_at(record, "info"), list_at(record, "actions"), text_at(record, "submission")) == ({}, [], None)
    assert (object_at(record, "stats"), text_at(record, "patch"), object_at(record, "missing")) == ({"cost": 1}, "diff", {})
