"""A run's page and an uploader's list of submissions grow with uploads: they list a page at a
time; a page number past the end (or below 1) shows the last page and one that is not a number the
first, never a 500."""
import pytest
from django.urls import reverse

from runs.evaluation.views import ATTEMPTS_PER_PAGE
from runs.models import Attempt, Paper, Sample, Submission, Suite
from runs.submissions.views import SUBMISSIONS_PER_PAGE
from tests.leaderboard.factories import PASS, make_run
from tests.replay.factories import make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def suite():
    suite = Suite.objects.create(name="lists", version="1", gold_root="/nonexistent")
    paper = Paper.objects.create(suite=suite, paper_id="q", title="A paper", text="The method.")
    Sample.objects.bulk_create([Sample(paper=paper, sample_id=f"q_{i:03d}", n=1) for i in range(125)])
    return suite


def test_a_run_page_lists_its_attempts_a_page_at_a_time(suite, client):
    run = make_run(suite, k=2, n_values=(1,))
    Attempt.objects.bulk_create(
        [Attempt(run=run, sample=sample, index=index, **PASS) for sample in Sample.objects.all() for index in range(2)]
    )  # 250 attempts
    client.force_login(make_user(is_staff=True))
    url = reverse("runs:run_detail", args=[run.pk])
    first = client.get(url).content.decode()
    assert first.count('data-status="done"') == ATTEMPTS_PER_PAGE and "attempts 1–100 of 250" in first
    assert '<a href="?page=2#attempts" rel="next">' in first
    last = client.get(url, {"page": "3"}).content.decode()
    assert last.count('data-status="done"') == 50 and 'rel="prev"' in last and 'rel="next"' not in last
    for number, shown in (("99", "attempts 201–250"), ("-1", "attempts 201–250"), ("x", "attempts 1–100")):
        response = client.get(url, {"page": number})
        assert response.status_code == 200 and shown in response.content.decode()


def test_my_submissions_are_listed_a_page_at_a_time(suite, client):
    uploader = make_user()
    for number in range(SUBMISSIONS_PER_PAGE + 5):
        Submission.objects.create(run=make_run(suite, n_values=(1,)), uploader=uploader, model="m", agent="react",
                                  contact="a@example.org", file_sha256="0" * 64, file_bytes=1, record_count=0)
    client.force_login(uploader)
    url = reverse("submissions:mine")
    first = client.get(url).content.decode()
    assert first.count('href="/submissions/') - first.count('href="/submissions/upload') - first.count(
        'href="/submissions/tokens') == SUBMISSIONS_PER_PAGE
    assert "submissions 1–50 of 55" in first and '<a href="?page=2" rel="next">' in first
    second = client.get(url, {"page": "2"}).content.decode()
    assert "submissions 51–55 of 55" in second and 'rel="prev"' in second
    assert "submissions 51–55 of 55" in client.get(url, {"page": "1000"}).content.decode()
