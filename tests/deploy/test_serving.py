"""Production serving through a real gunicorn (DEBUG off): pages, hashed static files with
far-future caching, /healthz, and database connections bounded by the worker x thread count."""
from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from tests.deploy.conftest import closed_port

# Starting gunicorn and collecting the static files take a while (once per session, tests/deploy/conftest.py),
# hence slow. django_db: so that
# pytest-django creates the test database, which gunicorn serves from.
pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def test_pages_and_hashed_static_files_are_served(gunicorn):
    status, headers, body = gunicorn.get("/")
    assert status == 200, body[-2000:]
    page = body.decode()
    stylesheet = re.search(r'href="(/static/css/site\.[0-9a-f]{12}\.css)"', page)
    assert stylesheet, "the page links the hashed stylesheet (ManifestStaticFilesStorage, DEBUG off)"

    status, headers, body = gunicorn.get(stylesheet.group(1))
    assert status == 200
    assert headers["Content-Type"].startswith("text/css") and b"{" in body
    cache_control = headers["Cache-Control"]
    assert "immutable" in cache_control
    assert int(re.search(r"max-age=(\d+)", cache_control).group(1)) >= 365 * 24 * 3600

    status, headers, body = gunicorn.get("/?format=json")
    assert status == 200
    json.loads(body)
    assert gunicorn.get("/no-such-page/")[0] == 404  # DEBUG off: no technical 404 page
    assert b"Django tried these URL patterns" not in gunicorn.get("/no-such-page/")[2]


def test_healthz_reports_every_check(gunicorn, redis_client):
    from rq import Queue, Worker

    from runs.evaluation.queue import queue_name

    listening = Worker([Queue(queue_name(), connection=redis_client)], connection=redis_client)
    listening.register_birth()  # as a live worker is registered (none runs here)
    status, headers, body = gunicorn.get("/healthz")
    report = json.loads(body)
    assert status == 200, report
    assert report["status"] == "ok" and report["failing"] == []
    assert set(report["checks"]) == {"database", "redis", "queue", "workers"}
    assert all(check["ok"] for check in report["checks"].values())
    assert report["checks"]["queue"]["queued"] == 0
    assert report["checks"]["workers"]["live"] == 1
    assert "no-cache" in headers["Cache-Control"] or "max-age=0" in headers["Cache-Control"]


def test_healthz_names_what_is_unreachable_without_saying_where_it_is(start_gunicorn):
    redis_port, database_port = closed_port(), closed_port()
    server = start_gunicorn(
        REDIS_URL=f"redis://127.0.0.1:{redis_port}/0",
        DATABASE_URL=f"postgres://postgres:hunter2@127.0.0.1:{database_port}/nowhere",
    )
    status, _, body = server.get("/healthz")
    report = json.loads(body)
    assert status == 503
    assert report["status"] == "fail"
    assert report["failing"] == ["database", "redis", "queue", "workers"]
    assert report["checks"]["redis"] == {"ok": False, "error": "ConnectionError"}
    assert report["checks"]["database"] == {"ok": False, "error": "OperationalError"}
    text = body.decode()
    assert "hunter2" not in text and str(redis_port) not in text and str(database_port) not in text


def _connections_of(server, database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as connection:
        return connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (server.application_name,)
        ).fetchone()[0]


def test_a_burst_holds_no_more_connections_than_threads(gunicorn, database_url):
    """The demo's failure: 30 concurrent requests under runserver left 31 connections open. Under
    gunicorn (1 worker x 2 threads here) a burst waits for a thread instead of opening a connection."""
    with ThreadPoolExecutor(max_workers=30) as pool:
        statuses = list(pool.map(lambda _: gunicorn.get("/?format=json", timeout=60)[0], range(90)))
    assert statuses == [200] * 90
    # Connections are kept (CONN_MAX_AGE), one per thread at most.
    assert 1 <= _connections_of(gunicorn, database_url) <= 2


def test_a_loaded_worker_puts_its_start_up_objects_out_of_the_collectors_reach():
    """A full collection would otherwise scan the few hundred thousand objects every worker loads to
    start, in the middle of a request (gunicorn's post_worker_init hook)."""
    import gc

    from autoexperiment_site import gunicorn_conf

    try:
        gunicorn_conf.post_worker_init(worker=None)
        assert gc.get_freeze_count() > 10_000
    finally:
        gc.unfreeze()
