"""Each tool call as people read it (runs.replay.calls.call_view): a command as a shell block, a
file written as the file, an inspection as the lines it read, anything else as formatted JSON; long
thoughts folded, never cut. Through step_view and the real pages, with the gold rule applied."""
from __future__ import annotations

import json

import pytest
from django.urls import reverse

from runs.agents.trajectory import trajectory_from_stored
from runs.analysis.gold_text import WITHHELD_LINE, GoldRedaction
from runs.limits import replay_bounds
from runs.replay.calls import CODE_OPEN_LINES, MAX_CODE_LINES, call_view
from runs.replay.diffs import HighlightBudget
from runs.replay.steps import THOUGHT_FOLD_CHARS, step_view
from tests.replay.factories import FUNCTION_DIFF, make_attempt, make_step, make_trajectory, make_user, text_of

MODULE = '''"""Weighted statistics."""
import math


def weighted_mean(values, weights):
    """The mean of `values`, each counted `weights` times."""
    total = sum(w * v for v, w in zip(values, weights))
    return total / sum(weights)
'''
LISTING = (
    "code/stats.py lines 4-6 of 8:\n"
    "4 | \n"
    "5 | def weighted_mean(values, weights):\n"
    '6 |     """The mean of `values`."""\n'
    "[shown 200 lines at most per call; continue from line 7]"
)


def view(tool, arguments, **step_fields):
    return step_view(make_step(1, tool=tool, arguments=arguments, **step_fields), 1, hide_gold_code=False)


# --- each tool's presentation ------------------------------------------------------------------------


@pytest.mark.parametrize(("tool", "arguments"), [
    ("command_line", {"command": "python3 train.py --epochs 3", "timeout": 60}),
    ("bash", {"command": "python3 train.py --epochs 3"}),  # mini-swe-agent, SWE-agent
    ("bash", {"cmd": "python3 train.py --epochs 3"}),  # Inspect
    ("execute_bash", {"command": "python3 train.py --epochs 3"}),  # the original AutoExperiment harness
])
def test_a_command_is_a_shell_block(tool, arguments):
    call = call_view(tool, arguments)
    assert (call.kind, call.title, call.command) == ("command", "Command", "python3 train.py --epochs 3")
    assert call.fields == ([("timeout", "60 s")] if "timeout" in arguments else [])
    assert call.json == ""


def test_a_file_written_is_the_file_numbered_and_highlighted():
    call = call_view("write_file", {"path": "code/stats.py", "content": MODULE})
    assert (call.kind, call.title, call.target) == ("file", "File written", "code/stats.py")
    lines = call.code.lines
    assert [line["n"] for line in lines] == list(range(1, 9))  # the final newline starts no ninth line
    assert [line["text"] for line in lines] == MODULE.splitlines()
    for line in lines:  # highlighting never changes the text
        assert "".join(segment["t"] for segment in line["segs"]) == line["text"]
    assert {"c": "k", "t": "def"} in lines[4]["segs"] and {"c": "k", "t": "return"} in lines[7]["segs"]
    # The file is lexed whole: the docstring's text is a string on every line it spans.
    assert lines[0]["segs"] == [{"c": "sd", "t": '"""Weighted statistics."""'}]
    assert call.code.python and not call.code.collapsed and not call.code.hidden


def test_a_file_that_is_not_python_is_numbered_and_not_highlighted():
    call = call_view("write_file", {"path": "notes.md", "content": "# Plan\n\ndef is a word here\n"})
    assert [(line["n"], line["text"], line["segs"]) for line in call.code.lines] == [
        (1, "# Plan", None), (2, "", None), (3, "def is a word here", None)]


def test_a_script_run_shows_how_it_runs_and_the_script_it_wrote():
    call = call_view("execute_python_script", {"path": "check me.py", "content": "print(1)\n", "arguments": "--x 1",
                                               "timeout": 30.5})
    assert (call.kind, call.command, call.target) == ("script", "python3 'check me.py' --x 1", "check me.py")
    assert [line["text"] for line in call.code.lines] == ["print(1)"] and call.code.python
    assert call.fields == [("timeout", "30.5 s")]
    bash = call_view("execute_bash_script", {"path": "run.sh"})
    assert (bash.command, bash.code) == ("bash run.sh", None)


def test_an_inspection_reads_as_the_lines_it_read_with_their_numbers():
    step = view("inspect_file_lines", {"path": "code/stats.py", "start_line": 4, "end_line": 6}, observation=LISTING,
                exit_code=None)
    assert (step.call.kind, step.call.target) == ("read", "code/stats.py, lines 4–6")
    assert step.listing_head == "code/stats.py lines 4-6 of 8:"
    lines = step.listing.lines
    assert [(line["n"], line["text"]) for line in lines] == [
        (4, ""), (5, "def weighted_mean(values, weights):"), (6, '    """The mean of `values`."""'),
        ("", "[shown 200 lines at most per call; continue from line 7]"),  # the tool's note: no number
    ]
    assert {"c": "k", "t": "def"} in lines[1]["segs"] and lines[3]["segs"] is None
    # An inspection that failed is its message, as any observation.
    failed = view("inspect_file_lines", {"path": "nope.py"}, observation="Error: nope.py does not exist", error=True)
    assert failed.listing is None and failed.observation[0].text == "Error: nope.py does not exist"


@pytest.mark.parametrize(("tool", "arguments", "kind", "target", "fields"), [
    ("list_files", {"path": "code", "recursive": True}, "call", "code (with subdirectories)", []),
    ("list_files", {"path": "code"}, "call", "code", []),
    ("change_directory", {"path": "code"}, "call", "code", []),
    ("move", {"source": "a.py", "destination": "b.py"}, "call", "a.py → b.py", []),
    ("edit_file", {"path": "code/stats.py", "instruction": "Use math.fsum."}, "edit", "code/stats.py",
     [("instruction", "Use math.fsum.")]),
    ("understand_file", {"path": "code/stats.py", "question": "What is w?"}, "ask", "code/stats.py", [("question", "What is w?")]),
    # Arguments the tool does not take are shown too, by name.
    ("command_line", {"command": "ls", "cwd": "/tmp", "env": {"A": 1}}, "command", "", [("cwd", "/tmp"), ("env", '{"A": 1}')]),
])
def test_other_tools_read_in_words(tool, arguments, kind, target, fields):
    call = call_view(tool, arguments)
    assert (call.kind, call.target, call.fields) == (kind, target, fields)


@pytest.mark.parametrize("answer", [{"Experiment 1": {"accuracy": 0.91}}, '{"Experiment 1": {"accuracy": 0.91}}'])
def test_the_final_answer_is_formatted_json_whether_sent_as_an_object_or_as_text(answer):
    call = call_view("final_answer", {"answer": answer})
    assert (call.kind, call.title) == ("answer", "Final answer")
    assert call.json == json.dumps({"Experiment 1": {"accuracy": 0.91}}, indent=2)
    assert call_view("final_answer", {"answer": "not json {"}).json == "not json {"


def test_an_unknown_tool_falls_back_to_formatted_json():
    arguments = {"command": "create", "path": "code/x.py", "file_text": "x = 1\n"}  # Inspect's text_editor
    call = call_view("text_editor", arguments)
    assert (call.kind, call.title) == ("json", "Arguments")
    assert call.json == json.dumps(arguments, indent=2)


@pytest.mark.parametrize(("tool", "arguments"), [
    ("write_file", {"path": "code/stats.py", "content": 5}),  # content is no string
    ("write_file", {"path": "code/stats.py", "content": ["x = 1"]}),
    ("write_file", {"content": "x = 1"}),  # no path
    ("command_line", {"command": ["ls", "-l"]}),
    ("command_line", {"timeout": 5}),  # no command
    ("inspect_file_lines", {"path": "a.py", "start_line": "3"}),
    ("inspect_file_lines", {"path": "a.py", "start_line": 2.5}),
    ("list_files", {"path": "code", "recursive": "yes"}),
    ("edit_file", {"path": "a.py", "instruction": None}),
    ("move", {"source": "a.py"}),
    ("final_answer", {"text": "0.9"}),
])
def test_arguments_not_in_the_tools_form_fall_back_to_json_and_lose_nothing(tool, arguments):
    step = view(tool, arguments)
    assert (step.call.kind, step.call.title) == ("json", "Arguments")
    assert json.loads(step.call.json) == arguments  # everything recorded is there


@pytest.mark.parametrize(("tool", "arguments"), [("command_line", ["ls"]), ("write_file", "x = 1")])
def test_stored_arguments_that_are_no_object_are_shown_under_input(tool, arguments):
    # Uploads stored before the trajectory's fields were typed may hold them.
    stored = make_trajectory(steps=[make_step(1, tool=tool)])
    stored["steps"][0]["arguments"] = arguments
    step = step_view(trajectory_from_stored(stored).steps[0], 1, hide_gold_code=False)
    assert (step.call.kind, step.call.title) == ("json", "Arguments")
    assert json.loads(step.call.json) == {"input": arguments}


def test_a_step_without_arguments_shows_no_call():
    assert view("list_files", {}).call is None and view(None, {}).call is None


# --- bounds ------------------------------------------------------------------------------------------


def test_a_huge_file_is_bounded_and_highlighting_stops_at_the_pages_budget():
    content = "x = 1\n" * (MAX_CODE_LINES * 10)
    call = call_view("write_file", {"path": "big.py", "content": content}, budget=HighlightBudget())
    assert len(call.code.lines) == MAX_CODE_LINES and call.code.omitted_lines == MAX_CODE_LINES * 9
    assert call.code.line_count == MAX_CODE_LINES * 10 and call.code.collapsed
    assert all(line["segs"] for line in call.code.lines)
    spent = HighlightBudget(100)
    again = call_view("write_file", {"path": "big.py", "content": content}, budget=spent)
    assert all(line["segs"] is None for line in again.code.lines) and spent.left == 0


def test_file_text_past_the_pages_text_bound_is_cut_with_a_marker():
    bounds = replay_bounds()
    content = "y = 2\n" * (bounds.text_bytes // 3)
    call = call_view("write_file", {"path": "big.py", "content": content}, bounds=bounds)
    shown = "\n".join(line["text"] for line in call.code.lines)
    assert len(shown) < bounds.text_bytes and call.code.line_count < content.count("\n")


def test_a_modified_files_diff_opens_beside_the_write_and_a_long_file_folds():
    step = view("write_file", {"path": "code/stats.py", "content": MODULE}, files=[("code/stats.py", "modified", FUNCTION_DIFF)])
    assert not step.files[0].collapsed and not step.call.code.collapsed
    added = view("write_file", {"path": "code/new.py", "content": MODULE}, files=[("code/new.py", "added", FUNCTION_DIFF)])
    assert added.files[0].collapsed  # all of it is the file above
    other = view("command_line", {"command": "sed -i s/a/b/ x.py"}, files=[("x.py", "modified", FUNCTION_DIFF)])
    assert other.files[0].collapsed
    long = call_view("write_file", {"path": "a.py", "content": "x = 1\n" * (CODE_OPEN_LINES + 1)})
    assert long.code.collapsed


# --- thoughts ----------------------------------------------------------------------------------------


def test_a_long_thought_is_folded_never_cut():
    thought = "I will compute the weighted mean first. " * (THOUGHT_FOLD_CHARS // 20)
    step = view("command_line", {"command": "ls"}, thought=thought)
    assert step.thought_folded and step.thought == thought  # the whole of it, folded
    assert step.thought_head.endswith("…") and len(step.thought_head) <= 160
    assert not step.thought_head.endswith("weig…")  # cut at a word
    many_lines = view("command_line", {"command": "ls"}, thought="a\n" * 12)
    assert many_lines.thought_folded
    short = view("command_line", {"command": "ls"}, thought="List the files first.")
    assert not short.thought_folded


# --- gold --------------------------------------------------------------------------------------------


def test_a_gold_write_keeps_its_path_and_hides_its_content():
    step = step_view(make_step(2, tool="write_file", arguments={"path": "code/stats.py", "content": MODULE},
                               files=[("code/stats.py", "modified", FUNCTION_DIFF)]), 2, hide_gold_code=True)
    assert step.redacted and step.call.kind == "file" and step.call.target == "code/stats.py"
    assert step.call.code.hidden and step.call.code.lines == []
    assert step.files[0].hidden and step.files[0].collapsed
    edit = step_view(make_step(2, tool="edit_file", arguments={"path": "code/stats.py", "instruction": "total = sum(w * v)"}),
                     2, hide_gold_code=True)
    assert edit.call.target == "code/stats.py" and edit.call.fields == []
    assert "total = sum" not in edit.call.text()


def test_gold_lines_quoted_in_any_agents_file_are_withheld_from_the_presentation():
    redaction = GoldRedaction.of(lines=["total = sum(w * v for v, w in zip(values, weights))"])
    step = step_view(make_step(1, tool="write_file", arguments={"path": "code/stats.py", "content": MODULE}), 1,
                     hide_gold_code=False, redaction=redaction)
    texts = [line["text"] for line in step.call.code.lines]
    assert "    " + WITHHELD_LINE in texts and not any("zip(values" in text for text in texts)
    listing = step_view(make_step(1, tool="inspect_file_lines", arguments={"path": "code/stats.py"},
                                  observation="code/stats.py lines 7-7 of 8:\n7 |     total = sum(w * v for v, w in zip(values, weights))"),
                        1, hide_gold_code=False, redaction=redaction)
    assert [line["text"] for line in listing.listing.lines] == ["    " + WITHHELD_LINE]


# --- the pages ---------------------------------------------------------------------------------------


def tool_steps():
    return [
        make_step(1, thought="Look at the code.", tool="inspect_file_lines",
                  arguments={"path": "code/stats.py", "start_line": 4, "end_line": 6}, observation=LISTING, exit_code=None),
        make_step(2, thought="Implement it.", tool="write_file", arguments={"path": "code/stats.py", "content": MODULE},
                  observation="Overwrote code/stats.py (200 characters)", exit_code=None,
                  files=[("code/stats.py", "modified", FUNCTION_DIFF)]),
        make_step(3, thought="Long reasoning. " * 100, tool="command_line",
                  arguments={"command": 'python3 run.py --name "a b" && echo <done>'}),
        make_step(4, thought="Imported.", tool="str_replace_editor", arguments={"path": "x", "new_str": "<b>y</b>"}),
    ]


@pytest.mark.django_db
def test_the_attempt_page_shows_each_call_in_its_tools_terms(client):
    attempt = make_attempt(steps=tool_steps())
    html = client.get(reverse("replay:attempt", args=[attempt.pk])).content.decode()
    text = text_of(html)
    assert '<pre tabindex="0" class="code shell">python3 run.py --name &quot;a b&quot; &amp;&amp; echo &lt;done&gt;</pre>' in html
    assert '<span class="cl" data-n="5"><span class="tk-k">def</span> weighted_mean(values, weights):</span>' in html
    assert "Lines read" in html and "code/stats.py lines 4-6 of 8:" in html
    assert MODULE.splitlines()[6] in text  # the file written, whole
    assert '<span class="dl dl-add">' in html  # and its diff
    assert '<details class="part thought thought-folded">' in html and ("Long reasoning. " * 100).strip() in text
    assert "&quot;new_str&quot;: &quot;&lt;b&gt;y&lt;/b&gt;&quot;" in html  # the unknown tool's JSON, escaped
    assert "<b>y</b>" not in html


@pytest.mark.django_db
def test_the_comparison_and_the_step_fragments_show_the_same(client):
    a = make_attempt(steps=tool_steps())
    b = make_attempt(sample=a.sample)
    compare = client.get(reverse("replay:compare"), {"a": a.pk, "b": b.pk}).content.decode()
    assert '<span class="part-label">File written</span><code class="call-target">code/stats.py</code>' in compare
    assert '<span class="cl" data-n="5"><span class="tk-k">def</span>' in compare
    fragment = client.get(reverse("replay:steps", args=[a.pk]), {"first": 1, "last": 4}).content.decode()
    assert '<span class="cl" data-n="5"><span class="tk-k">def</span>' in fragment
    assert '<pre tabindex="0" class="code shell">' in fragment and "Lines read" in fragment


@pytest.mark.django_db
@pytest.mark.parametrize("agent", ["gold", "mutant"])
def test_a_gold_write_file_stays_hidden_on_every_page(client, agent):
    attempt = make_attempt(agent=agent, model="", steps=tool_steps())
    other = make_attempt(sample=attempt.sample, steps=[make_step(1)], final_patch=None)  # nothing of its own to show
    pages = [
        client.get(reverse("replay:attempt", args=[attempt.pk])).content.decode(),
        client.get(reverse("replay:compare"), {"a": attempt.pk, "b": other.pk}).content.decode(),
        client.get(reverse("replay:steps", args=[attempt.pk]), {"first": 1, "last": 4}).content.decode(),
    ]
    for html in pages:
        text = text_of(html)
        assert "zip(values, weights)" not in text and "return total / sum(weights)" not in text
        assert "Content withheld." in text and "code/stats.py" in text
    client.force_login(make_user(is_staff=True))
    html = client.get(reverse("replay:attempt", args=[attempt.pk])).content.decode()
    assert "return total / sum(weights)" in text_of(html) and "Content withheld." not in html


@pytest.mark.django_db
def test_the_search_of_steps_not_loaded_looks_at_the_call_as_shown(client):
    """A step the page has not loaded is searched in what its body shows: the file's lines, not
    the JSON the model sent (no quotes escaped, no argument names)."""
    attempt = make_attempt(steps=tool_steps())

    def found(query):
        return client.get(reverse("replay:search", args=[attempt.pk]), {"q": query, "first": 1, "last": 4}).json()["steps"]

    assert found('"""Weighted statistics."""') == [2]  # a line of the file, as written
    assert found('--name "a b"') == [3]
    assert found('"content":') == []
