"""gunicorn's settings, from the environment (docs/production.md).

    gunicorn --config python:autoexperiment_site.gunicorn_conf autoexperiment_site.wsgi

Threaded workers (gthread): WEB_CONCURRENCY processes of WEB_THREADS threads each. Every thread
keeps at most one database connection, so the web tier never holds more than
WEB_CONCURRENCY x WEB_THREADS connections however many requests arrive; the rest wait in the
listen backlog instead of opening connections until Postgres refuses them.
"""
import gc
import logging

from autoexperiment_site.env import env_int, env_str

_host = env_str("WEB_HOST", "127.0.0.1")
if ":" in _host and not _host.startswith("["):
    _host = f"[{_host}]"  # an IPv6 address
bind = [f"{_host}:{env_int('PORT', 8000, minimum=1)}"]
workers = env_int("WEB_CONCURRENCY", 2, minimum=1)
threads = env_int("WEB_THREADS", 4, minimum=1)
worker_class = "gthread"
timeout = env_int("WEB_TIMEOUT", 60, minimum=1)
graceful_timeout = 30
# Recycle workers now and then, so slow growth of a worker's memory cannot accumulate for ever.
max_requests = 2000
max_requests_jitter = 200
accesslog = "-"
# gunicorn's control socket has one default path per user ($HOME/.gunicorn/gunicorn.ctl): a second
# server on the host (a test, the demo) would take it over. Nothing here uses gunicornc.
control_socket_disable = True

# RQ workers hold one connection each while a job runs; the scheduler and a management command or
# two take a few more. Counted against Postgres' max_connections at start-up (see below).
_RQ_WORKERS = env_int("RQ_WORKERS", 1)
_OTHER_CONNECTIONS = 3


def post_worker_init(worker):
    """Put what the worker loaded to start (Django, the apps, pandas, Plotly, the SDKs: a few hundred
    thousand objects) out of the garbage collector's reach: a full collection then scans what the
    requests made, instead of pausing one request in twenty for a tenth of a second or more
    (scripts/bench_pages.py, a system's page at a million attempts)."""
    gc.collect()
    gc.freeze()


def when_ready(server):
    """Warn when this deployment's connections would not fit in Postgres' max_connections."""
    log = logging.getLogger("gunicorn.error")
    need = workers * threads + _RQ_WORKERS + _OTHER_CONNECTIONS
    try:
        available = _postgres_connection_limit()
    except Exception as error:  # noqa: BLE001 - a warning, never a reason not to serve
        log.info("could not read Postgres' max_connections (%s); this deployment needs up to %d", type(error).__name__, need)
        return
    if available is None:
        return
    message = (
        "database connections: up to %d (WEB_CONCURRENCY %d x WEB_THREADS %d + RQ_WORKERS %d + %d) "
        "of the %d Postgres allows to ordinary users"
    )
    args = (need, workers, threads, _RQ_WORKERS, _OTHER_CONNECTIONS, available)
    if need > available:
        log.warning(message + ": lower WEB_CONCURRENCY, WEB_THREADS or RQ_WORKERS, or raise max_connections", *args)
    else:
        log.info(message, *args)


def _postgres_connection_limit() -> int | None:
    """max_connections less the superuser reserve, or None when the database is not Postgres."""
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "autoexperiment_site.settings")
    django.setup()
    from django.db import connection

    if connection.vendor != "postgresql":
        return None
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int"
            )
            return cursor.fetchone()[0]
    finally:
        connection.close()  # the arbiter forks the workers: they must not share it
