"""The leaderboard's maintained numbers (leaderboard.standings): marked stale by every change, refreshed
by one coalesced job on the maintenance queue, read by requests that never compute them."""
import pytest
from django.core.cache import cache
from django.db.models import F
from django.urls import reverse
from rq import Queue

from leaderboard import figures
from leaderboard.computation import standing_numbers_computed
from leaderboard.failure_analysis import failure_rows_computed
from leaderboard.figures import _figure_input, figure_cache_key
from leaderboard.models import SystemStanding, SystemStandingByN
from leaderboard.reference import reference_rows
from leaderboard.rules import LeaderboardFilters
from leaderboard.selectors import function_difficulty, leaderboard_get, system_detail
from leaderboard.standings import _store, standings_refresh, standings_refresh_queued
from runs.evaluation.kinds import run_mark_finished
from runs.evaluation.queue import maintenance_queue
from runs.evaluation.services import runs_set_hidden
from runs.evaluation.worker import EvaluationWorker
from runs.models import Attempt
from runs.signals import results_changed_send, upkeep_due
from tests.leaderboard.factories import PASS, make_attempt, make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(unverified_view_client):
    """This module's numbers are over every counted attempt, unverified uploads included (?unverified=1)."""
    return unverified_view_client


def rows(**filters):
    return {row.model: row for row in leaderboard_get(filters=LeaderboardFilters(**{"verified_only": False, **filters})).rows}


def claude(**filters):
    return rows(**filters)["anthropic:claude-3-5-sonnet"]


def test_a_change_shows_the_last_numbers_marked_stale_until_the_refresh(board_data, client):
    """System C (agentless, claude) has Pass@1 2/3 at n = 1; its failing s2 attempt turns into a pass."""
    assert (claude().by_n[1].pass1, claude().stale) == (pytest.approx(2 / 3), False)
    Attempt.objects.filter(run=board_data.run_c, sample=board_data.samples["s2"]).update(passed=True, reexecution_passed=True)
    run_mark_finished(run_id=board_data.run_c.pk)  # what settling an attempt of the run ends with

    stale = claude()
    assert (stale.by_n[1].pass1, stale.stale) == (pytest.approx(2 / 3), True)  # not recomputed by the request
    html = client.get("/").content.decode()
    assert html.count("lb-stale") == 1 and "being updated" in html
    shown = {row["model"]: row for row in client.get("/", {"format": "json"}).json()["rows"] if not row["reference"]}
    assert shown["anthropic:claude-3-5-sonnet"]["stale"] is True and shown["openai:gpt-4o"]["stale"] is False
    system = client.get(reverse("leaderboard:system", args=[stale.slug])).content.decode()
    assert 'id="system-stale"' in system

    assert standings_refresh() == 1  # only the changed system
    fresh = claude()
    assert (fresh.by_n[1].pass1, fresh.stale) == (1.0, False)
    assert "lb-stale" not in client.get("/").content.decode()


def test_data_changed_behind_the_applications_back_is_not_seen_until_a_full_refresh(board_data):
    """Nothing is computed in a request: a write that announces nothing changes no number shown."""
    def f0_passes():  # the per-function table reads stored counts too
        return next(row.passes for row in function_difficulty(filters=LeaderboardFilters(verified_only=False)) if row.name == "f0")

    assert f0_passes() == 4
    Attempt.objects.filter(run=board_data.run_c).update(passed=False, reexecution_passed=False)
    assert standings_refresh() == 0 and claude().by_n[1].pass1 == pytest.approx(2 / 3) and f0_passes() == 4
    assert standings_refresh(everything=True) == 3
    assert claude().by_n[1].pass1 == 0.0 and f0_passes() == 3


def test_a_run_hidden_or_shown_again_leaves_and_rejoins_every_public_table(board_data, client):
    slug = claude().slug
    runs_set_hidden(runs=[board_data.run_c], hidden=True)
    standings_refresh()
    assert "anthropic:claude-3-5-sonnet" not in rows()
    assert slug not in client.get("/", {"format": "csv"}).content.decode()
    assert client.get(reverse("leaderboard:system", args=[slug])).status_code == 404
    runs_set_hidden(runs=[board_data.run_c], hidden=False)
    standings_refresh()
    assert claude().by_n[1].pass1 == pytest.approx(2 / 3)


def test_a_deleted_run_takes_its_numbers_with_it(board_data):
    slug = claude().slug
    board_data.run_c.delete()
    standings_refresh()
    assert "anthropic:claude-3-5-sonnet" not in rows()
    assert not SystemStandingByN.objects.filter(standing__slug=slug).exists()


def test_a_new_system_is_counted_as_being_computed_not_shown_half_done(board_data, client):
    run = make_run(board_data.suite, model="openai:new-model")
    make_attempt(run, board_data.samples["s0"], 0, PASS)
    results_changed_send(run_ids=[run.pk])
    board = leaderboard_get(filters=LeaderboardFilters(verified_only=False))
    assert "openai:new-model" not in {row.model for row in board.rows} and board.computing == 1
    assert 'id="lb-computing"' in client.get("/").content.decode()
    assert client.get("/", {"format": "json"}).json()["computing"] == 1
    standings_refresh()
    assert rows()["openai:new-model"].by_n[1].pass1 == 1.0 and leaderboard_get(filters=LeaderboardFilters(verified_only=False)).computing == 0


def test_a_hidden_runs_system_is_not_even_counted(board_data):
    """A system known only from a hidden run gets no standing: not a row, not a count."""
    run = make_run(board_data.suite, model="openai:secret-model")
    run.hidden = True
    run.save(update_fields=["hidden"])
    make_attempt(run, board_data.samples["s0"], 0, PASS)
    results_changed_send(run_ids=[run.pk])
    assert leaderboard_get(filters=LeaderboardFilters(verified_only=False)).computing == 0
    assert not SystemStanding.objects.filter(model="openai:secret-model").exists()


def test_filters_read_the_variant_and_n_range_they_ask_for(board_data):
    """System B was uploaded (nothing re-executed): it has no verified-only numbers at all."""
    assert {row.agent for row in rows(verified_only=True).values()} == {"react", "agentless"}
    assert len(rows(verified_only=True)) == 2
    a = rows(n_min=2)["openai:gpt-4o"]
    assert list(a.by_n) == [2] and a.attempts == 4  # totals over the n shown only
    assert rows(tolerance=0.01)["anthropic:claude-3-5-sonnet"].by_n[1].pass1_at.keys() == {0.01}
    detail = system_detail(slug=claude().slug, filters=LeaderboardFilters(verified_only=False))
    assert len(detail.system.by_n[1].pass1_at) == 6  # the system page's sensitivity table: every tolerance


def test_a_refresh_that_read_before_a_change_leaves_it_stale(board_data):
    """The marks are read before the data: a change that lands while a refresh computes is one more
    mark, so the system stays stale and the next refresh (queued by that change) recomputes it."""
    standing = SystemStanding.objects.get(slug=claude().slug)
    seen = standing.changes
    [(slug, numbers)] = standing_numbers_computed([standing.slug])  # a refresh reads the marks, then the data
    results_changed_send(run_ids=[board_data.run_c.pk])  # a change lands while it computes
    _store(slug, numbers, failure_rows_computed(numbers.run_ids), seen=seen)
    standing.refresh_from_db()
    assert standing.stale
    assert standings_refresh() == 1
    standing.refresh_from_db()
    assert not standing.stale


def test_an_older_refresh_never_overwrites_a_newer_one(board_data):
    standing = SystemStanding.objects.get(slug=claude().slug)
    results_changed_send(run_ids=[board_data.run_c.pk])
    standings_refresh()
    standing.refresh_from_db()
    before = (standing.refreshed_changes, standing.refreshed_at)
    [(slug, numbers)] = standing_numbers_computed(["000000000000"])  # no runs at all
    _store(standing.slug, numbers, failure_rows_computed(numbers.run_ids), seen=before[0] - 1)  # and late: an older refresh
    standing.refresh_from_db()
    assert (standing.refreshed_changes, standing.refreshed_at) == before
    assert claude().by_n[1].pass1 == pytest.approx(2 / 3)


# --- the job ----------------------------------------------------------------------------------------


def test_evaluation_workers_take_maintenance_jobs_before_attempts(settings, redis_queue):
    worker = EvaluationWorker([redis_queue], connection=redis_queue.connection)
    # ...and transplants (runs.evaluation.transplants) last of all.
    assert worker.queue_names() == [settings.MAINTENANCE_QUEUE, redis_queue.name, settings.TRANSPLANT_QUEUE]
    only_maintenance = EvaluationWorker([Queue(settings.MAINTENANCE_QUEUE, connection=redis_queue.connection)],
                                        connection=redis_queue.connection)
    assert only_maintenance.queue_names() == [settings.MAINTENANCE_QUEUE, settings.TRANSPLANT_QUEUE]


def test_without_redis_the_change_is_kept_and_shown_as_stale(board_data, settings, caplog, django_capture_on_commit_callbacks):
    settings.RQ_QUEUES = {settings.EVALUATION_QUEUE: {"URL": "redis://127.0.0.1:1/0", "DEFAULT_TIMEOUT": 60}}
    with django_capture_on_commit_callbacks(execute=True):
        assert runs_set_hidden(runs=[board_data.run_c], hidden=True) == 1
    assert "could not be queued" in caplog.text
    assert SystemStanding.objects.get(model="anthropic:claude-3-5-sonnet").stale
    assert board_data.run_c.__class__.objects.get(pk=board_data.run_c.pk).hidden
    assert "anthropic:claude-3-5-sonnet" not in rows()  # who may see it is not the refresh's to say
    standings_refresh()  # `manage.py refresh_standings`, or the next change once Redis is back
    assert not SystemStanding.objects.get(model="anthropic:claude-3-5-sonnet").stale
    assert "anthropic:claude-3-5-sonnet" not in rows()


def test_a_lost_refresh_job_is_queued_again_by_the_workers_self_healing(board_data, redis_queue):
    """The change's own job never reached the queue here (its transaction's on-commit hook does not
    run inside a test): as if Redis had lost it."""
    maintenance = maintenance_queue()
    results_changed_send(run_ids=[board_data.run_c.pk])
    assert maintenance.count == 0 and claude().stale
    upkeep_due.send(sender=None)  # what every long-running worker's self-healing round sends
    assert maintenance.count == 1
    upkeep_due.send(sender=None)  # while that job waits, no second one
    assert maintenance.count == 1
    redis_queue.connection.flushdb()  # that job gone too, and its turn with it
    upkeep_due.send(sender=None)
    assert maintenance.count == 1  # the system is still stale: queued again
    standings_refresh()
    redis_queue.connection.flushdb()
    upkeep_due.send(sender=None)  # nothing stale: nothing queued
    assert maintenance.count == 0


def test_the_refresh_job_builds_the_first_opened_views_figures_ahead_of_its_first_request(board_data, redis_queue, client):
    """Building a figure of a few hundred systems takes Plotly most of a second: the job does it, into
    the shared cache every web process reads, so the first request after a change does not."""
    Attempt.objects.filter(run=board_data.run_c, sample=board_data.samples["s2"]).update(passed=True, reexecution_passed=True)
    results_changed_send(run_ids=[board_data.run_c.pk])
    figures._memoised.cache_clear()  # the job's work horse has built nothing before
    assert standings_refresh_queued() == 1
    board = leaderboard_get(filters=LeaderboardFilters())  # the first opened view: re-executed attempts only
    key = figure_cache_key("pass-rate", _figure_input(board, reference_rows()))
    stored = cache.get(key)
    assert stored is not None and any(trace.get("y") == [1.0] for trace in stored["data"])  # system C's new Pass@1
    figures._memoised.cache_clear()  # a web process that has built nothing itself
    assert client.get("/", {"unverified": "0"}).context["figure"] == stored


def test_a_run_moved_to_another_system_in_the_admin_marks_both_systems_changed(board_data, admin_client):
    """Staff correct a run's model in the admin: the system it leaves and the one it joins are both
    marked as being updated in that request, and the refresh moves its numbers across."""
    from runs.models import Run

    old_slug = claude().slug
    run = board_data.run_c
    url = reverse("admin:runs_run_change", args=[run.pk])
    form = admin_client.get(url).context["adminform"].form
    # value() is what the page shows: a JSON field's text already (preparing it again would post a JSON string).
    data = {name: form[name].value() for name in form.fields}
    data = {name: value for name, value in data.items() if value is not None} | {"model": "anthropic:claude-renamed"}
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Run.objects.get(pk=run.pk).model == "anthropic:claude-renamed"

    assert SystemStanding.objects.get(slug=old_slug).stale
    assert SystemStanding.objects.filter(model="anthropic:claude-renamed").exists()
    standings_refresh()
    slugs = {row.slug for row in leaderboard_get(filters=LeaderboardFilters(verified_only=False)).rows}
    assert old_slug not in slugs  # its only run left it
    assert rows()["anthropic:claude-renamed"].by_n[1].pass1 == pytest.approx(2 / 3)


def test_a_save_that_touches_no_system_field_marks_nothing(board_data):
    board_data.run_c.description = "a note"
    board_data.run_c.save()
    assert not SystemStanding.objects.filter(changes__gt=F("refreshed_changes")).exists()
