"""Pages whose size once grew with the attempts stored: a system's page and the samples of one n
list their samples a page at a time, each summarised with a link to its attempts, whatever the
number of attempts; their JSON is paginated alike; a bad page number is answered, never a 500."""
import csv
import io
import re

import pytest
from django.urls import reverse

from leaderboard.rules import LeaderboardFilters
from leaderboard.selectors import leaderboard_get
from runs.models import Attempt, Paper, Sample, Suite
from tests.leaderboard.factories import FAIL, PASS, make_run
from tests.support import standings_refreshed

pytestmark = pytest.mark.django_db

SAMPLES = 120  # a page and a bit of the system page (100), two and a bit of the samples page (50)


@pytest.fixture
def crowded():
    """Suite "crowded": 120 samples at n = 1, and one system with a run of 2 attempts at each."""
    suite = Suite.objects.create(name="crowded", version="1", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=suite, paper_id="q", title="A paper", text="The method.")
    samples = Sample.objects.bulk_create([Sample(paper=paper, sample_id=f"q_{i:03d}", n=1) for i in range(SAMPLES)])
    upload(suite, samples, runs=1)
    standings_refreshed()
    slug = leaderboard_get(filters=LeaderboardFilters()).rows[0].slug
    return {"suite": suite, "samples": samples, "url": reverse("leaderboard:system", args=[slug]), "slug": slug}


def upload(suite, samples, *, runs: int) -> None:
    """`runs` more runs of the system, 2 attempts at every sample each (a pass and a failure)."""
    for _ in range(runs):
        run = make_run(suite, k=2, n_values=(1,))
        Attempt.objects.bulk_create(
            [Attempt(run=run, sample=sample, index=index, **(PASS if index == 0 else FAIL))
             for sample in samples for index in range(2)]
        )


def body(client, url, **params) -> str:
    response = client.get(url, params)
    assert response.status_code == 200, response.content[:300]
    return response.content.decode()


def test_system_page_size_does_not_grow_with_its_attempts(crowded, client):
    url = crowded["url"]
    before = {"html": body(client, url), "json": body(client, url, format="json"), "last": body(client, url, samples_page="2")}
    upload(crowded["suite"], crowded["samples"], runs=9)  # ten times the attempts: 2,400
    standings_refreshed()  # the page lists what the system's refresh stored
    after = {"html": body(client, url), "json": body(client, url, format="json"), "last": body(client, url, samples_page="2")}
    for name in before:
        # A count's extra digit per sample and a line per new run (50 at most); listing each new
        # attempt would add 216,000 links.
        assert len(after[name]) - len(before[name]) < 2_000 + 9 * 300, name
    tables = [re.search(r'id="system-samples">.*?</table>', page["html"], re.S)[0] for page in (before, after)]
    assert len(tables[1]) - len(tables[0]) < 1_000
    assert after["html"].count('class="lb-sample"') == 100
    assert "20 attempts</a>" in after["html"] and "50.0%" in after["html"]  # 10 of 20 pass at every sample
    # The export still holds every attempt of every sample.
    exported = list(csv.DictReader(io.StringIO(client.get(url, {"format": "csv"}).getvalue().decode())))
    assert len(exported) == SAMPLES and all(len(row["attempt_ids"].split()) == 20 for row in exported)


def test_system_page_links_its_pages(crowded, client):
    url = crowded["url"]
    first = body(client, url)
    assert "Samples 1–100 of 120, page 1 of 2" in first and 'rel="prev"' not in first
    next_link = re.search(r'<a href="([^"]+)#system-samples" rel="next">', first)[1].replace("&amp;", "&")
    second = client.get(url + next_link).content.decode()
    assert second.count('class="lb-sample"') == 20 and 'rel="prev"' in second and 'rel="next"' not in second

    data = client.get(url, {"format": "json"}).json()
    page = data["samples_page"]
    assert (page["number"], page["pages"], page["count"], page["previous"]) == (1, 2, 120, None)
    assert len(data["samples"]) == 100 and data["samples"][0]["attempts_url"].startswith("/explore/?system=")
    following = client.get(page["next"]).json()
    assert len(following["samples"]) == 20 and following["samples_page"]["next"] is None
    assert following["samples_page"]["previous"] == f"{url}?format=json&samples_page=1"


@pytest.mark.parametrize("number", ["3", "0", "-1", "abc", "1e3", "٢", "99999999999999999999999", ""])
def test_a_bad_page_of_a_system_is_answered_never_a_500(crowded, client, number):
    url = crowded["url"]
    response = client.get(url, {"samples_page": number})
    if number == "":  # no page asked for: the first
        assert response.status_code == 200
        return
    assert response.status_code == 400
    html = response.content.decode()
    assert "the pages of samples run from 1 to 2" in html and html.count('class="lb-sample"') == 100
    response = client.get(url, {"samples_page": number, "format": "json"})
    assert response.status_code == 400 and "the pages of samples run from 1 to 2" in response.json()["error"]


def test_samples_page_size_does_not_grow_with_the_attempts(crowded, client):
    url = reverse("leaderboard:benchmark_samples", args=["crowded"])
    before = {"html": body(client, url, n="1"), "json": body(client, url, n="1", format="json")}
    upload(crowded["suite"], crowded["samples"], runs=9)
    after = {"html": body(client, url, n="1"), "json": body(client, url, n="1", format="json")}
    for name in before:
        assert len(after[name]) - len(before[name]) < 2_000, name
    assert after["html"].count('class="lb-sample"') == 50 and "20 attempts</a>" in after["html"]


def test_samples_page_links_its_pages_in_html_and_json(crowded, client):
    url = reverse("leaderboard:benchmark_samples", args=["crowded"])
    first = body(client, url, n="1")
    next_link = re.search(r'<a href="([^"]+)" rel="next">', first)[1].replace("&amp;", "&")
    second = client.get(url + next_link).content.decode()
    assert "page 2 of 3" in second and 'rel="prev"' in second and 'rel="next"' in second

    data = client.get(url, {"n": "1", "format": "json"}).json()
    assert (data["page"], data["pages"], data["previous"]) == (1, 3, None)
    last = client.get(client.get(data["next"]).json()["next"]).json()
    assert (last["page"], len(last["samples"]), last["next"]) == (3, 20, None)
    for number in ("4", "0", "x", "٣"):
        response = client.get(url, {"n": "1", "page": number})
        assert response.status_code == 400 and "pages of n=1 run from 1 to 3" in response.content.decode()
