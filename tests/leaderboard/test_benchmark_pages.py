"""The public benchmark pages (suite, paper, function, experiment, samples) and their JSON: gold
hidden from everybody but staff unless the suite's gold is public (runs.visibility.gold_access, the
replay's rule too), hidden runs' attempts from those who may not see them."""
import ast
import json
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils.html import escape

from leaderboard.benchmark import code_tree
from runs.benchmark.masking import function_body_source
from runs.models import Experiment, Function, HeldOutCheck, Sample, Suite
from tests.leaderboard.factories import FAIL, PASS, make_attempt, make_run
from tests.replay.factories import make_user
from tests.support import standings_refreshed

pytestmark = pytest.mark.django_db

PAPER = "adam-bias-correction"


def url(name: str, *args) -> str:
    return reverse(f"leaderboard:benchmark_{name}", args=["builtin", *args])


def json_of(client, address: str, **params) -> dict:
    response = client.get(address, {"format": "json", **params})
    assert response.status_code == 200, response.content[:500]
    return json.loads(response.content)


@pytest.fixture
def attempts(builtin):
    """On the n=1 sample masking function 0 of PAPER: a public passing attempt and a hidden failing one."""
    function = Function.objects.get(paper__paper_id=PAPER, func_id=0)
    sample = Sample.objects.get(n=1, functions=function)
    public = make_attempt(make_run(builtin, n_values=(1,)), sample, 0, PASS)
    hidden_run = make_run(builtin, agent="agentless", n_values=(1,))
    hidden_run.hidden = True
    hidden_run.save(update_fields=["hidden"])
    hidden = make_attempt(hidden_run, sample, 0, FAIL)
    standings_refreshed()
    return {"function": function, "sample": sample, "public": public, "hidden": hidden}


def gold_body_line(function: Function) -> str:
    """The longest code line of the function's gold body: text no page shows but the gold body."""
    source = (Path(function.paper.code_dir) / function.file).read_text(encoding="utf-8")
    body = function_body_source(source, function.name, line_hint=function.line_hint)
    statements = ast.parse(body).body
    if isinstance(statements[0], ast.Expr) and isinstance(statements[0].value, ast.Constant):
        statements = statements[1:]  # the docstring, which the masked stub replaces by the description
    lines = body.splitlines()
    code = [lines[number - 1].strip() for stmt in statements for number in range(stmt.lineno, stmt.end_lineno + 1)]
    return max((line for line in code if not line.startswith("#")), key=len)


def test_suite_page_counts_papers_functions_experiments_and_samples(builtin, client, django_assert_max_num_queries):
    with django_assert_max_num_queries(4):  # none per paper
        response = client.get(url("suite"))
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('href="/benchmark/builtin/papers/') == 4
    assert f'href="{url("samples")}?n=1">28 at n = 1<' in html
    assert 'id="gold-stability"' in html
    # The task export's downloads, one per n and context condition.
    assert reverse("leaderboard:task_download", args=["builtin", 1, "oracle"]) in html

    data = json_of(client, url("suite"))
    assert (data["functions"], data["experiments"], data["samples_by_n"]) == (28, Experiment.objects.count(), {"1": 28})
    assert sum(paper["functions"] for paper in data["papers"]) == 28
    assert {paper["paper_id"] for paper in data["papers"]} >= {PAPER}
    assert set(data["gold_stability"]) == {"experiments", "unstable", "policy", "held_out_checked"}
    # Every built-in experiment has a hidden variant: the page says so, and shows nothing of them.
    assert data["gold_stability"]["held_out_checked"] is True
    assert "passes are held-out checked" in html
    hidden = HeldOutCheck.objects.filter(experiment__paper__suite=builtin)
    assert hidden.count() >= data["experiments"]
    assert not [variant.command for variant in hidden if variant.command in html]
    assert {(item["n"], item["context"]) for item in data["task_downloads"]} == {(1, "none"), (1, "full"), (1, "oracle")}


def test_paper_page_shows_the_start_of_its_text_and_its_code_tree(builtin, client):
    response = client.get(url("paper", PAPER))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Bias-Corrected Moment Estimates" in html and 'id="code-tree"' in html
    assert "<code>optim/adam.py</code>" in html

    data = json_of(client, url("paper", PAPER))
    paper = builtin.papers.get(paper_id=PAPER)
    assert data["text_start"] == paper.text[:2000] and data["text_truncated"] == (len(paper.text) > 2000)
    paths = [entry["path"] for entry in data["code_tree"]["files"]]
    assert "optim/adam.py" in paths and "models.py" in paths
    assert all(entry["size"] > 0 for entry in data["code_tree"]["files"])
    assert data["functions"][0]["url"] == url("function", PAPER, 0)
    assert data["experiments"][0]["url"] == url("experiment", PAPER, data["experiments"][0]["exp_id"])


def test_paper_text_is_escaped(builtin, client):
    builtin.papers.filter(paper_id=PAPER).update(text="<script>alert(1)</script> the method")
    html = client.get(url("paper", PAPER)).content.decode()
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)" in html


def test_code_tree_skips_history_and_caches_never_follows_links_and_is_capped(tmp_path):
    outside = tmp_path / "outside"
    (outside / "secret").mkdir(parents=True)
    (outside / "secret" / "gold.py").write_text("x = 1\n")
    code = tmp_path / "code"
    (code / "pkg" / "__pycache__").mkdir(parents=True)
    (code / ".git").mkdir()
    (code / ".git" / "HEAD").write_text("ref\n")
    (code / "pkg" / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"\0")
    (code / "pkg" / "m.py").write_text("print(1)\n")
    (code / "pkg" / "m.py.orig").write_text("old\n")
    (code / "linked").symlink_to(outside / "secret")
    (code / "link.py").symlink_to(outside / "secret" / "gold.py")
    tree = code_tree(str(code))
    assert [(f.path, f.size, f.symlink) for f in tree.files] == [
        ("link.py", None, True), ("linked", None, True), ("pkg/m.py", 9, False),
    ]
    assert not tree.truncated
    capped = code_tree(str(code), limit=2)
    assert len(capped.files) == 2 and capped.truncated
    assert code_tree("").problem and code_tree(str(tmp_path / "missing")).problem


def test_function_page_shows_the_masked_stub_to_all_and_the_gold_body_to_staff_only(attempts, client):
    Suite.objects.filter(name="builtin").update(gold_public=False)  # a private suite
    function = attempts["function"]
    secret = gold_body_line(function)
    assert len(secret) > 20
    anonymous_html = client.get(url("function", PAPER, 0)).content.decode()
    anonymous_json = client.get(url("function", PAPER, 0), {"format": "json"}).content.decode()
    for text in (anonymous_html, anonymous_json):
        assert "raise NotImplementedError" in text
        assert secret not in text
    data = json.loads(anonymous_json)
    assert "gold_body" not in data
    assert data["masked_stub"].startswith("    def loss_and_grad(")
    assert data["masked_stub"].rstrip().endswith("raise NotImplementedError")
    assert (data["file"], data["name"]) == ("models.py", "LinearRegression.loss_and_grad")
    # Rates by system: public runs only (the hidden run's failure is not counted).
    assert [(row["attempts"], row["passes"], row["pass_rate_n1"]) for row in data["systems"]] == [(1, 1, 1.0)]
    assert data["systems"][0]["url"] == reverse("leaderboard:system", args=[data["systems"][0]["system"]])

    # A signed-in user who is not staff sees no gold either.
    client.force_login(make_user())
    assert secret not in client.get(url("function", PAPER, 0)).content.decode()

    client.force_login(make_user(is_staff=True))
    staff_html = client.get(url("function", PAPER, 0)).content.decode()
    assert 'id="gold-body"' in staff_html
    assert escape(secret) in staff_html
    assert secret in json_of(client, url("function", PAPER, 0))["gold_body"]

    # A suite whose gold is public shows it to everyone, as its replays do.
    client.logout()
    Suite.objects.filter(name="builtin").update(gold_public=True)
    assert secret in json_of(client, url("function", PAPER, 0))["gold_body"]


def test_experiment_page_hides_gold_numbers_from_all_but_staff(attempts, client):
    Suite.objects.filter(name="builtin").update(gold_public=False)  # a private suite
    experiment = Experiment.objects.filter(paper__paper_id=PAPER, dependencies=attempts["function"]).order_by("exp_id").first()
    gold_number = repr(next(iter(experiment.gold_result.values())))
    address = url("experiment", PAPER, experiment.exp_id)
    html = client.get(address).content.decode()
    assert experiment.command in html and 'id="answer-format"' in html
    assert gold_number not in html and 'id="gold-result"' not in html
    data = json_of(client, address)
    assert "gold_result" not in data and "gold_spreads" not in data
    assert gold_number not in json.dumps(data)
    assert data["answer_format"] == experiment.answer_format
    assert url("function", PAPER, 0) in [item["url"] for item in data["depends_on"]]
    assert [(row["attempts"], row["passes"]) for row in data["systems"]] == [(1, 1)]

    client.force_login(make_user(is_staff=True))
    assert json_of(client, address)["gold_result"] == experiment.gold_result
    staff_html = client.get(address).content.decode()
    assert 'id="gold-result"' in staff_html and gold_number in staff_html

    # A suite whose gold is public shows its numbers to everyone, as its replays do.
    client.logout()
    Suite.objects.filter(name="builtin").update(gold_public=True)
    assert json_of(client, address)["gold_result"] == experiment.gold_result


def test_samples_page_summarises_visible_attempts_only(attempts, client, django_assert_max_num_queries):
    sample = attempts["sample"]
    explore = f"/explore/?suite=builtin&amp;paper={PAPER}&amp;sample={sample.sample_id}"
    with django_assert_max_num_queries(6):  # none per sample or attempt
        response = client.get(url("samples"), {"n": "1"})
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('class="lb-sample"') == 28
    assert f'href="{explore}" class="lb-sample-attempts">1 attempt<' in html  # the hidden one is not counted
    data = json_of(client, url("samples"), n="1")
    assert (data["n"], data["count"], data["pages"], data["previous"], data["next"]) == (1, 28, 1, None, None)
    row = next(item for item in data["samples"] if item["sample_id"] == sample.sample_id)
    assert (row["attempts"], row["passes"], row["pass_rate"], row["ended_attempts"], row["runs"]) == (1, 1, 1.0, 1, 1)
    # The link lists exactly those attempts.
    listed = client.get("/explore/", {"suite": "builtin", "paper": PAPER, "sample": sample.sample_id, "format": "json"})
    assert [item["attempt_id"] for item in listed.json()["rows"]] == [attempts["public"].pk]

    client.force_login(make_user(is_staff=True))
    with django_assert_max_num_queries(8):  # and the session and user
        html = client.get(url("samples"), {"n": "1"}).content.decode()
    assert f'href="{explore}" class="lb-sample-attempts">2 attempts<' in html


@pytest.mark.parametrize(("params", "message"), [
    ({"n": "x"}, "is not a whole number"),
    ({"n": "3"}, "has no samples with 3 masked functions"),
    ({"n": "1", "page": "2"}, "pages of n=1 run from 1 to 1"),
])
def test_samples_page_says_what_is_wrong_with_the_request(builtin, client, params, message):
    response = client.get(url("samples"), params)
    assert response.status_code == 400 and message in response.content.decode()
    response = client.get(url("samples"), {**params, "format": "json"})
    assert response.status_code == 400 and message in response.json()["error"]


def test_missing_objects_are_404_and_unknown_formats_400(builtin, client):
    for address in (
        reverse("leaderboard:benchmark_suite", args=["nope"]),
        reverse("leaderboard:benchmark_samples", args=["nope"]),
        url("paper", "nope"),
        url("function", PAPER, 999),
        url("function", "nope", 0),
        url("experiment", PAPER, 999),
    ):
        assert client.get(address).status_code == 404, address
    response = client.get(url("suite"), {"format": "csv"})
    assert response.status_code == 400 and "format='csv'" in response.json()["error"]


def test_leaderboard_and_function_table_link_to_the_benchmark_pages(attempts, client):
    home = client.get(reverse("leaderboard:home")).content.decode()
    assert f'href="{url("suite")}"' in home
    functions = client.get(reverse("leaderboard:functions")).content.decode()
    assert f'href="{url("function", PAPER, 0)}"' in functions
