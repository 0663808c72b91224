"""What an attacker would try on /explore/ and /compare/: search syntax and odd input that could
give a 500, snippets that could break out of their markup, search results that could show what
the replay hides (hidden runs, the gold code of the gold and mutant baselines), huge and repeated
parameters, formulas in CSV cells."""
import csv
import io

import pytest

from leaderboard.explorer import MAX_PAGE
from leaderboard.rules import canonical_config, system_slug
from runs.analysis.services import attempt_analysis_record
from runs.models import Attempt, Run, StepText, Suite
from tests.analysis.test_trajectories import python, step, trajectory
from tests.leaderboard.factories import PASS, make_attempt, make_run
from tests.leaderboard.test_explorer import URL, index_steps, listed, slug_of
from tests.replay.factories import make_user

GOLD_SECRET = "zqgoldsecretbody"


@pytest.fixture
def searchable(board_data):
    attempt = board_data.attempts[("A", "s2", 0)]
    index_steps(attempt, [
        "ls code",
        "gmm.py says <script>alert(1)</script> and \x02fake hit\x03 then </mark><mark>x and &amp; shape",
        "shape " + "filler " * 2000 + "shape",
    ])
    return attempt


# --- odd search input --------------------------------------------------------------------------------


@pytest.mark.parametrize("q", [
    "!", "!!shape", ":*", "shape:*", "shape:* & gmm", "<->", "shape <-> gmm", "shape <2> gmm", "(", ")", "((shape",
    "'", "''", "\\", "\\'", "&", "|", "&&||!!", "-", "--shape", "or", "OR OR", '"', '"""', "a\"b'c", "*", "%", "_",
    "\u200b", "\x01\x02\x03", "💥", "ÄÖÜ shape", "shape" * 40, "a " * 99, "OR " * 66, '"><script>alert(1)</script>',
])
def test_any_search_text_is_a_page_or_an_empty_result_never_a_500(client, searchable, q):
    for output in ("html", "json", "csv"):
        response = client.get(URL, {"q": q, "format": output})
        assert response.status_code == 200, (q, output, response.content[:300])
        if output == "html":  # the search is repeated in the form and the links, escaped
            assert "<script>alert" not in response.content.decode()


@pytest.mark.parametrize("params", [
    {"q": "shape\x00"}, {"q": "x" * 201}, {"exception": "Value\x00Error"}, {"paper": "\x00"}, {"exit_status": "\x00"},
    {"page": "9" * 5000}, {"page": str(MAX_PAGE + 1)}, {"page": "-1"}, {"page": "1e3"}, {"n": "9" * 5000},
    {"function": "p:" + "9" * 5000}, {"system": "../../etc"}, {"sort": "-"}, {"sort": "--id"},
])
def test_odd_parameters_are_a_400_naming_them(client, board_data, params):
    name = next(iter(params))
    for output in ("html", "json"):
        response = client.get(URL, {**params, "format": output})
        assert response.status_code == 400, (params, output)
        assert f"{name}=" in response.content.decode()


def test_a_repeated_parameter_takes_its_last_value_and_the_deepest_page_is_an_empty_page(client, board_data):
    system_c = slug_of(board_data.run_c)
    assert client.get(URL, {"system": ["0" * 12, system_c], "format": "json"}).status_code == 200
    assert set(listed(client, system=["0" * 12, system_c])) == set(
        Attempt.objects.filter(run=board_data.run_c).values_list("id", flat=True))
    response = client.get(URL, {"page": MAX_PAGE, "q": ["nothing", "shape"]})
    assert response.status_code == 404 and response.context["result"].rows == []


# --- snippets ----------------------------------------------------------------------------------------------


def test_a_snippet_cannot_break_out_of_its_markup(client, searchable):
    page = client.get(URL, {"q": "gmm.py"}).content.decode()
    assert "<script>alert" not in page and "</mark><mark>x" not in page
    # The step's own marker characters are dropped: only the real hit is marked.
    result = client.get(URL, {"q": "gmm.py"}).context["result"].rows
    assert [text for hit in result for text, marked in hit.snippet if marked] == ["gmm.py"]
    assert "fake hit" in result[0].snippet_text and "\x02" not in result[0].snippet_text
    # The text between marks is escaped: "&amp;" in a step shows as typed.
    assert "x and &amp;amp; shape" in " ".join(page.split())


# --- what the search may show ----------------------------------------------------------------------------


@pytest.fixture
def hidden_step(board_data):
    owner = make_user()
    run = make_run(board_data.suite, model="hidden:model", n_values=(1,))
    Run.objects.filter(pk=run.pk).update(hidden=True, created_by=owner)
    attempt = make_attempt(run, board_data.samples["s0"], 0, PASS)
    index_steps(attempt, ["the quixotic hidden observation"])
    return owner, attempt


def test_a_hidden_runs_text_is_found_by_its_owner_alone_in_every_format(client, board_data, hidden_step):
    owner, attempt = hidden_step
    for viewer in (None, make_user()):
        if viewer is not None:
            client.force_login(viewer)
        response = client.get(URL, {"q": "quixotic"})  # the page repeats the search in its form and links
        assert response.context["result"].rows == [] and "hidden:model" not in response.content.decode()
        assert "hidden observation" not in response.content.decode()
        assert client.get(URL, {"q": "quixotic", "format": "json"}).json()["rows"] == []
        content = client.get(URL, {"q": "quixotic", "format": "csv"}).content.decode()
        assert "hidden:model" not in content and f"/attempts/{attempt.pk}/" not in content
    client.force_login(owner)
    assert listed(client, q="quixotic") == [attempt.pk]


@pytest.mark.parametrize("agent", ["gold", "mutant"])
def test_the_gold_code_a_baseline_wrote_or_read_is_never_found(client, board_data, agent):
    run = make_run(board_data.suite, agent=agent, model="", n_values=(1,))
    attempt = make_attempt(run, board_data.samples["s0"], 0, PASS)
    gold = f"return {GOLD_SECRET}(values)"
    Attempt.objects.filter(pk=attempt.pk).update(trajectory=trajectory(
        step("write_file", {"path": "code/m.py", "content": gold}, "wrote code/m.py", thought=f"write {GOLD_SECRET}",
             files_changed=[{"path": "code/m.py", "change": "modified", "diff": f"+{gold}"}]),
        step("edit_file", {"path": "code/m.py", "old": gold, "new": gold}, "edited code/m.py"),
        step("understand_file", {"path": "code/m.py"}, f"The function computes {GOLD_SECRET}."),
        step("inspect_file_lines", {"path": "code/m.py"}, f"1: {gold}"),
        python("import run", "plainvisibleoutput"),
    ))
    # A suite whose gold numbers are public: a private suite's gold baseline shows none of its output (runs.analysis.public).
    Suite.objects.filter(pk=run.suite_id).update(gold_public=True)
    attempt_analysis_record([attempt.pk])

    assert client.get(URL, {"q": GOLD_SECRET}).context["result"].rows == []
    assert client.get(URL, {"q": GOLD_SECRET, "format": "json"}).json()["rows"] == []
    assert GOLD_SECRET not in client.get(URL, {"q": GOLD_SECRET, "format": "csv"}).content.decode()
    # Nor by a word next to it: no snippet of any hit holds it.
    for hit in client.get(URL, {"q": "code"}).context["result"].rows:
        assert GOLD_SECRET not in hit.snippet_text
    assert listed(client, q=GOLD_SECRET) == []
    assert listed(client, q="code/m.py") != []  # the paths the replay shows are found
    assert listed(client, q="plainvisibleoutput") == [attempt.pk]


# --- exports --------------------------------------------------------------------------------------------------


def test_formulas_in_uploaded_names_and_messages_are_text_in_the_csv(client, board_data):
    run = make_run(board_data.suite, agent="@SUM(1+1)", model='=HYPERLINK("http://evil","x")', n_values=(1,))
    attempt = make_attempt(run, board_data.samples["s0"], 0, PASS)
    Attempt.objects.filter(pk=attempt.pk).update(exit_status="+cmd|' /C calc'!A0", trajectory=trajectory(
        python("import run", "Traceback (most recent call last):\n-ValueError: =1+1\n", exit_code=1),
    ))
    attempt_analysis_record([attempt.pk])
    StepText.objects.filter(attempt=attempt).update(text="=cmd|' /C calc'!A0 formula")
    for params in ({"format": "csv"}, {"format": "csv", "q": "import"}):
        table = list(csv.reader(io.StringIO(client.get(URL, params).content.decode())))
        for row in table[1:]:
            for cell in row:
                assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), (params, cell)
    rows = list(csv.DictReader(io.StringIO(client.get(URL, {"format": "csv"}).content.decode())))
    mine = next(row for row in rows if int(row["attempt_id"]) == attempt.pk)
    assert mine["system"].startswith("'=HYPERLINK") and mine["exit_status"].startswith("'+cmd")


# --- /compare/ -------------------------------------------------------------------------------------------------


def test_compare_never_shows_a_hidden_system_even_to_its_owner(client, board_data, hidden_step):
    owner, attempt = hidden_step
    run = attempt.run
    hidden_slug = system_slug(suite="toy", agent=run.agent, model=run.model, config_json=canonical_config(run.agent_config),
                              context=run.context)
    client.force_login(owner)
    for output in ("html", "json"):
        response = client.get("/compare/", {"a": hidden_slug, "b": slug_of(board_data.run_c), "format": output})
        assert response.status_code == 404
        assert "hidden:model" not in response.content.decode()


@pytest.mark.parametrize("params", [
    {"a": "\x00", "b": "x"}, {"a": "a" * 65, "b": "b"}, {"a": "<script>", "b": "b"}, {"n": "9" * 5000, "a": "a", "b": "b"},
    {"a": ["x", "y"], "b": "y"}, {"format": "csv", "a": "a", "b": "b"},
])
def test_compare_refuses_odd_parameters_without_a_500(client, board_data, params):
    response = client.get("/compare/", params)
    assert response.status_code in (400, 404), response.content[:300]
    assert "<script>" not in response.content.decode()

