"""Lists of systems, which one account can grow without end by varying a model's name, are shown a
page at a time: the leaderboard (HTML and JSON; the CSV holds every system), a function's pass rates
by system and the comparison's choices. Sort and filters carry over to every page; a page a list
does not have is answered with what was wrong, never a 500; page 1 is what the list was."""
import csv
import io
import re

import pytest
from django.urls import reverse

from leaderboard.rules import LeaderboardFilters
from leaderboard.selectors import leaderboard_get
from runs.evaluation.services import runs_set_hidden
from runs.models import Attempt, Function, Paper, Run, Sample, Suite
from runs.signals import results_changed_send
from tests.leaderboard.factories import FAIL, PASS, make_run
from tests.support import standings_refreshed

pytestmark = pytest.mark.django_db

PER_PAGE = 2


@pytest.fixture(autouse=True)
def small_pages(monkeypatch):
    for name in ("leaderboard.views.LEADERBOARD_PER_PAGE", "leaderboard.benchmark_views.RATES_PER_PAGE",
                 "leaderboard.comparison.CHOICES_PER_PAGE"):
        monkeypatch.setattr(name, PER_PAGE)


def _systems(count: int, *, first: int = 0) -> None:
    """`count` more systems (models m-<number>), each with an attempt at the one sample masking f0:
    every third one passes."""
    suite = Suite.objects.filter(name="many").first()
    if suite is None:
        suite = Suite.objects.create(name="many", version="1", gold_root="/nonexistent")
        paper = Paper.objects.create(suite=suite, paper_id="q", title="A paper", text="The method.")
        function = Function.objects.create(paper=paper, func_id=0, file="m.py", name="f0")
        Sample.objects.create(paper=paper, sample_id="q_0", n=1).functions.set([function])
    sample = Sample.objects.get(paper__suite=suite)
    for number in range(first, first + count):
        run = make_run(suite, model=f"openai:m-{number:03d}", n_values=(1,))
        Attempt.objects.create(run=run, sample=sample, index=0, **(PASS if number % 3 == 0 else FAIL))
    standings_refreshed()


@pytest.fixture
def five():
    _systems(5)


def _json(client, url, **params) -> dict:
    response = client.get(url, {**params, "format": "json"})
    assert response.status_code == 200, response.content[:300]
    return response.json()


def _options(html: str) -> list[str]:
    """The systems a picking form offers (each twice: as A and as B)."""
    return re.findall(r'<option value="([0-9a-f]{12})"', html)


def _csv_slugs(client, **params) -> list[str]:
    body = client.get("/", {**params, "format": "csv"}).content.decode()
    return list(dict.fromkeys(row["slug"] for row in csv.DictReader(io.StringIO(body)) if row["reference"] == "false"))


@pytest.mark.parametrize("sort", ["", "name", "-pass1_n1"])
def test_the_leaderboard_pages_through_every_system_in_the_order_asked(client, five, sort):
    params = {"sort": sort} if sort else {}
    data = _json(client, "/", **params)
    assert (data["page"]["number"], data["page"]["pages"], data["page"]["count"], data["page"]["previous"]) == (1, 3, 5, None)
    slugs = [row["slug"] for row in data["rows"] if not row["reference"]]
    while data["page"]["next"]:
        assert sort in data["page"]["next"] and "format=json" in data["page"]["next"]
        data = client.get(data["page"]["next"]).json()
        slugs += [row["slug"] for row in data["rows"] if not row["reference"]]
    assert data["page"]["number"] == 3 and data["page"]["previous"].startswith("/?")
    assert slugs == _csv_slugs(client, **params) and len(slugs) == 5  # the CSV holds them all, in the same order


def test_the_leaderboard_html_links_its_pages_keeping_the_filters(client, five):
    first = client.get("/", {"sort": "name", "unverified": "1"}).content.decode()
    assert first.count('class="lb-row"') == PER_PAGE and "Systems 1–2 of 5, page 1 of 3" in first
    assert 'rel="prev"' not in first
    next_link = re.search(r'<a href="([^"]+)#leaderboard-table" rel="next">', first)[1].replace("&amp;", "&")
    assert "sort=name" in next_link and "unverified=1" in next_link and "page=2" in next_link
    last = client.get("/" + next_link.replace("page=2", "page=3")).content.decode()
    assert last.count('class="lb-row"') == 1 and 'rel="prev"' in last and 'rel="next"' not in last
    assert "openai:m-004" in last and "openai:m-004" not in first  # by name: the last one on the last page


@pytest.mark.parametrize("number", ["0", "4", "-1", "x", "1e3", "٢", "99999999999999999999999"])
def test_a_bad_page_of_the_leaderboard_is_answered_never_a_500(client, five, number):
    response = client.get("/", {"page": number})
    assert response.status_code == 400
    html = response.content.decode()
    assert "the pages of systems run from 1 to 3" in html and html.count('class="lb-row"') == PER_PAGE
    response = client.get("/", {"page": number, "format": "json"})
    assert response.status_code == 400 and "the pages of systems run from 1 to 3" in response.json()["error"]
    assert client.get("/", {"page": number, "format": "csv"}).status_code == 200  # every system, whatever the page


@pytest.mark.slow
def test_a_leaderboard_page_stays_the_same_size_with_ten_times_the_systems(client):
    _systems(3)
    before = {"html": client.get("/").content.decode(), "json": client.get("/", {"format": "json"}).content.decode()}
    _systems(27, first=3)
    after = {"html": client.get("/").content.decode(), "json": client.get("/", {"format": "json"}).content.decode()}
    for name in before:
        # The page's rows and figures are those of its systems only (a few digits more in the counts).
        assert len(after[name]) - len(before[name]) < 2_000, name
    assert after["html"].count('class="lb-row"') == PER_PAGE and "page 1 of 15" in after["html"]


def _function_url() -> str:
    return reverse("leaderboard:benchmark_function", args=["many", "q", 0])


def test_a_functions_rates_by_system_are_paged_best_first(client, five):
    url = _function_url()
    data = _json(client, url)
    page = data["systems_page"]
    assert (page["number"], page["pages"], page["count"]) == (1, 3, 5)
    rates = list(data["systems"])
    while page["next"]:
        data = client.get(page["next"]).json()
        page = data["systems_page"]
        rates += data["systems"]
    assert [row["model"] for row in rates] == [
        "openai:m-000", "openai:m-003", "openai:m-001", "openai:m-002", "openai:m-004"]  # passes first, then by name
    assert [row["pass_rate"] for row in rates] == [1.0, 1.0, 0.0, 0.0, 0.0]
    html = client.get(url, {"page": "3"}).content.decode()
    assert "openai:m-004" in html and 'rel="prev"' in html and 'rel="next"' not in html
    for number in ("4", "0", "x", "٣"):
        assert client.get(url, {"page": number}).status_code == 400
        response = client.get(url, {"page": number, "format": "json"})
        assert response.status_code == 400 and "the pages of systems run from 1 to 3" in response.json()["error"]


def test_a_functions_rates_mark_a_system_changed_since_and_drop_one_hidden_at_once(client, five):
    changed, hidden = Run.objects.get(model="openai:m-000"), Run.objects.get(model="openai:m-003")
    runs_set_hidden(runs=[hidden], hidden=True)  # no refresh runs: the test's transaction never commits
    Attempt.objects.filter(run=changed).update(**FAIL)
    results_changed_send(run_ids=[changed.pk])
    data = _json(client, _function_url())
    assert [row["model"] for row in data["systems"]] == ["openai:m-000"]  # m-003 gone; its page is a row shorter
    html = client.get(_function_url()).content.decode()
    assert "openai:m-003" not in html and html.count(">updating</span>") == 1


def test_the_comparison_offers_its_systems_a_page_at_a_time_the_chosen_one_always(client, five):
    slugs = {row.model: row.slug for row in leaderboard_get(filters=LeaderboardFilters(verified_only=False)).rows}
    url = reverse("leaderboard:compare")
    first = client.get(url).content.decode()
    assert len(_options(first)) == 2 * PER_PAGE and "page 1 of 3" in first
    chosen = client.get(url, {"with": slugs["openai:m-004"]}).content.decode()
    assert f'<option value="{slugs["openai:m-004"]}" selected>' in chosen  # from page 3, offered on page 1
    last = client.get(url, {"choices_page": "3"}).content.decode()
    assert _options(last) == [slugs["openai:m-004"]] * 2
    for number in ("4", "0", "x", "٣"):
        response = client.get(url, {"choices_page": number})
        assert response.status_code == 400 and "the pages of systems to choose from run from 1 to 3" in response.content.decode()
