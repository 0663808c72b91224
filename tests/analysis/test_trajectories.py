"""Trajectory facts and exceptions on hand-written trajectories (runs.analysis.trajectories: pure)."""
import pytest

from runs.analysis.trajectories import exceptions_in, invokes_python, message_pattern, trajectory_facts

TRACEBACK = (
    'Traceback (most recent call last):\n  File "/work/code/run.py", line 9, in <module>\n    main()\n'
    "ValueError: expected 3 values, got 4\n"
)


def step(tool=None, arguments=None, observation="", duration=1.0, cost=0.01, **fields):
    return {"index": 0, "started_at": "", "tool": tool, "arguments": arguments or {}, "observation": observation,
            "duration": duration, "cost": cost, **fields}


def python(content, observation, exit_code=0, **fields):
    return step("execute_python_script", {"path": "check.py", "content": content},
                f"{observation}\n[exit code {exit_code}; 0.2 s; cwd code]", exit_code=exit_code, **fields)


def trajectory(*steps):
    return {"format": "autoexperiment.trajectory/1", "header": {"agent": "react"}, "steps": list(steps)}


def test_a_crash_then_a_recovery():
    facts = trajectory_facts(trajectory(
        step("list_files", {"path": "."}, "run.py\nstats.py", duration=2.0),
        python("import run", TRACEBACK, exit_code=1, duration=3.0, cost=0.02),
        step("write_file", {"path": "stats.py", "content": "def f(): return 1"}, "wrote stats.py", duration=1.5),
        python("import run", '{"mean": 2.0}', duration=4.0, cost=0.03),
        python("import run", '{"mean": 2.0}'),
    ))
    assert facts.steps == 5
    assert facts.experiment_runs == 3
    assert (facts.first_run_step, facts.first_run_crashed) == (2, True)
    assert facts.working_run_step == 4
    assert facts.seconds_to_working == pytest.approx(2.0 + 3.0 + 1.5 + 4.0)
    assert facts.cost_to_working == pytest.approx(0.01 + 0.02 + 0.01 + 0.03)
    assert facts.first_error_step == 2
    assert facts.first_error_line == "ValueError: expected 3 values, got 4"
    assert [(found.step, found.exception.type, found.exception.pattern) for found in facts.exceptions] == [
        (2, "ValueError", "expected <n> values, got <n>")
    ]


def test_a_run_that_never_recovers():
    facts = trajectory_facts(trajectory(
        python("import run", TRACEBACK, exit_code=1),
        python("import run", "", exit_code=0),  # exits 0 but prints nothing: not a working run
        step("command_line", {"command": "cd code && python3 run.py mean"}, "Killed\n[exit code 137; 9.0 s; cwd .]", exit_code=137),
    ))
    assert facts.experiment_runs == 3
    assert (facts.first_run_step, facts.first_run_crashed) == (1, True)
    assert facts.working_run_step is None and facts.seconds_to_working is None and facts.cost_to_working is None
    assert facts.first_error_step == 1


def test_no_experiment_run():
    facts = trajectory_facts(trajectory(
        step("list_files", {"path": "."}, "run.py"),
        step("command_line", {"command": "cat run.py"}, "print(1)\n[exit code 0; 0.1 s; cwd .]", exit_code=0),
        step("command_line", {"command": "pip install nothing"}, "ERROR: no such package\n[exit code 1; 1.0 s; cwd .]",
             exit_code=1),
        step("final_answer", {"answer": "{}"}, "submitted"),
    ))
    assert facts.experiment_runs == 0
    assert facts.first_run_step is None and facts.first_run_crashed is None and facts.working_run_step is None
    # An error that is no experiment run is still the first error.
    assert (facts.first_error_step, facts.first_error_line) == (3, "ERROR: no such package")


def test_a_foreign_bash_tool_counts_by_what_its_command_runs():
    facts = trajectory_facts(trajectory(
        step("bash", {"command": "ls"}, "run.py"),
        step("bash", {"command": "python run.py --epochs 1"}, TRACEBACK, exit_code=1),
        # No exit code recorded (an older converter): its output decides.
        step("bash", {"command": "timeout 600 python3 run.py"}, "accuracy 0.91"),
    ))
    assert facts.experiment_runs == 2
    assert (facts.first_run_step, facts.first_run_crashed, facts.working_run_step) == (2, True, 3)


def test_a_timed_out_run_crashed_and_its_status_line_is_no_output():
    facts = trajectory_facts(trajectory(
        python("train()", "epoch 1", exit_code=-9, timed_out=True),
        python("train()", "(no output)"),
    ))
    assert facts.first_run_crashed is True
    assert facts.working_run_step is None  # the second printed nothing but the placeholder
    assert facts.first_error_step == 1


def test_an_unknown_cost_leaves_the_cost_to_working_unknown():
    facts = trajectory_facts(trajectory(
        step("list_files", cost=0.0, cost_unknown=True),
        python("print(1)", "1", duration=2.0),
    ))
    assert facts.working_run_step == 2
    assert facts.seconds_to_working == pytest.approx(3.0)
    assert facts.cost_to_working is None


@pytest.mark.parametrize("document", [None, "text", [], {"steps": "many"}, {"steps": [None, 3, "x", {"tool": 5, "exit_code": "1",
                                                                                                       "duration": "slow"}]}])
def test_odd_documents_never_raise(document):
    facts = trajectory_facts(document)
    assert facts.experiment_runs == 0 and facts.first_error_step is None


def test_only_the_first_max_steps_are_read():
    facts = trajectory_facts(trajectory(*[step("list_files")] * 5, python("x", TRACEBACK, exit_code=1)), max_steps=5)
    assert facts.steps == 6 and facts.experiment_runs == 0 and facts.first_error_step is None


@pytest.mark.parametrize(("command", "runs_python"), [
    ("python3 run.py", True), ("cd code && python run.py --x 1", True), ("CUDA_VISIBLE_DEVICES=0 python3.11 a.py", True),
    ("timeout 60 python -c 'print(1)'", True), ("./train.py", True), ('bash -c "python3 x.py"', True),
    ("uv run python a.py", True), ("cat run.py", False), ("pip install numpy", False), ("ls /usr/bin/python3", False),
])
def test_which_commands_run_python(command, runs_python):
    assert invokes_python(command) is runs_python


def test_exceptions_end_each_traceback_with_dotted_types_and_chains():
    text = (
        "loading\n" + TRACEBACK.replace("ValueError: expected 3 values, got 4", "KeyError: 'fc1.weight'")
        + "\nDuring handling of the above exception, another exception occurred:\n\n"
        + 'Traceback (most recent call last):\n  File "x.py", line 2, in f\n    g()\n      ^\n'
        + "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 7.79 GiB total)\n"
        + "[exit code 1; 2.0 s; cwd code]"
    )
    found = exceptions_in(text)
    assert [(item.type, item.pattern) for item in found] == [
        ("KeyError", "'fc1.weight'"),
        ("torch.cuda.OutOfMemoryError", "CUDA out of memory. Tried to allocate <n> MiB (GPU <n>; <n> GiB total)"),
    ]
    assert found[1].message.startswith("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB")


def test_stdout_between_the_frames_and_the_exception_is_skipped():
    text = 'Traceback (most recent call last):\n  File "a.py", line 1\nloss: 0.5\nRuntimeError: boom\n'
    assert [item.type for item in exceptions_in(text)] == ["RuntimeError"]


@pytest.mark.parametrize(("message", "pattern"), [
    ("mat1 and mat2 shapes cannot be multiplied (64x128 and 256x10)", "mat1 and mat2 shapes cannot be multiplied (<shape> and <shape>)"),
    ("The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1",
     "The size of tensor a (<n>) must match the size of tensor b (<n>) at non-singleton dimension <n>"),
    ("expected torch.Size([3, 4]), got (3, 5) and [2, 2]", "expected <shape>, got <shape> and <shape>"),
    ("[Errno 2] No such file or directory: '/data/x/train.csv'", "[Errno <n>] No such file or directory: '<path>'"),
    ("can't open file 'code/run.py'", "can't open file '<path>'"),
    ("<object at 0x7f3a9c2b1d30> is not callable", "<object at <hex>> is not callable"),
    ("unexpected key 'layer.0.weight' in float32 tensor", "unexpected key 'layer.0.weight' in float32 tensor"),
    ("lr must be positive, got -1e-05", "lr must be positive, got <n>"),
])
def test_message_patterns_mask_what_varies(message, pattern):
    assert message_pattern(message) == pattern


def test_a_huge_observation_is_read_within_bounds():
    text = ("x" * 1000 + "\n") * 200 + TRACEBACK * 100
    found = exceptions_in(text)
    assert 0 < len(found) <= 20
