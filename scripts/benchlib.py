"""What the benchmark scripts share: scratch Postgres databases, URLs, percentiles, bulk loading in SQL.

Imported by the scripts beside it (`python scripts/bench_*.py` puts this folder on sys.path).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit


def url_with_path(url: str, path: str) -> str:
    """`url` with its path (a database name or number) replaced, and no query or fragment."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def postgres_admin(admin_url: str, statement: str) -> None:
    """Run one statement outside a transaction (CREATE/DROP DATABASE cannot run inside one)."""
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(statement)


def create_database(admin_url: str, name: str) -> None:
    """An empty database, or with BENCH_TEMPLATE_DATABASE set a copy of that one (a migrated database
    no one is connected to: the smoke tests share one, so that each script's `migrate` has nothing
    left to do instead of taking seconds)."""
    template = os.environ.get("BENCH_TEMPLATE_DATABASE")
    postgres_admin(admin_url, f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))


def drop_database(admin_url: str, name: str) -> None:
    """Drop a scratch database, closing this process's Django connections to it first (if Django
    was set up) and ending anyone else's (FORCE)."""
    try:
        from django.db import connections

        connections.close_all()
    except Exception:  # noqa: BLE001 - Django never got set up
        pass
    postgres_admin(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile of `values` (0 <= q <= 1), interpolating between neighbours."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def flush_redis(url: str) -> None:
    """Empty the benchmark's own Redis database, if Redis is there (cleaning up only)."""
    try:
        import redis

        redis.Redis.from_url(url).flushdb()
    except Exception:  # noqa: BLE001 - nothing to clean where Redis is gone
        pass


@contextlib.contextmanager
def scratch_deployment(kind: str, *, backend: str, redis_db: int):
    """A Postgres database (`bench_<kind>_<pid>`, on BENCH_DATABASE_URL's server), a Redis database
    (`redis_db` of REDIS_URL's server) and a workspace folder of this run alone, set in os.environ
    (for Django in this process) and yielded as (env, scratch folder) for worker processes;
    dropped, flushed and removed at the end, whatever happens."""
    admin_url = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    name = f"bench_{kind}_{os.getpid()}"
    redis_url = url_with_path(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), f"/{redis_db}")
    scratch = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-"))
    env = {
        **os.environ,
        "DEBUG": "1",
        "DATABASE_URL": url_with_path(admin_url, f"/{name}"),
        "REDIS_URL": redis_url,
        "WORKSPACE_ROOT": str(scratch / "workspaces"),
        "SANDBOX_BACKEND": backend,
        "LOG_LEVEL": os.environ.get("LOG_LEVEL", "WARNING"),
        "DJANGO_SETTINGS_MODULE": "autoexperiment_site.settings",
    }
    os.environ.update(env)
    create_database(admin_url, name)
    try:
        yield env, scratch
    finally:
        drop_database(admin_url, name)
        flush_redis(redis_url)
        shutil.rmtree(scratch, ignore_errors=True)


def wait_until(condition: Callable, *, timeout: float, what: str, logs: Path | None = None):
    """condition()'s first truthy value, polled every 0.2 s; past `timeout` seconds the script stops,
    saying what it waited for (with the tails of the *.log files in `logs`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    tails = "".join(f"\n--- {log.name}\n{log.read_text()[-3000:]}" for log in sorted(logs.glob("*.log"))) if logs else ""
    raise SystemExit(f"timed out after {timeout:g} s waiting for {what}{tails}")


def worker_command(*, burst: bool, worker_class: str = "runs.evaluation.worker.EvaluationWorker") -> list[str]:
    """`manage.py evaluation_worker` (on this deployment's evaluation queue), run from the repository's root."""
    return [sys.executable, "manage.py", "evaluation_worker", *(["--burst"] if burst else []), "--skip-checks",
            "--worker-class", worker_class]


def attempts_cut(run, keep: int | None) -> list:
    """The run's attempts, or only the `keep` of them whose samples run the fewest experiments, the
    others deleted (--attempts: a smoke run's tiny size); longest first, the order run_create
    enqueues them in. Enqueues nothing: create the run with enqueue=False, then enqueue these."""
    from runs.suites.selectors import sample_experiments

    attempts = list(run.attempts.select_related("sample").order_by("pk"))
    experiments = {attempt.pk: len(sample_experiments(sample=attempt.sample)) for attempt in attempts}
    if keep is not None:
        attempts.sort(key=lambda attempt: experiments[attempt.pk])
        run.attempts.filter(pk__in=[attempt.pk for attempt in attempts[keep:]]).delete()
        attempts = sorted(attempts[:keep], key=lambda attempt: attempt.pk)
    return sorted(attempts, key=lambda attempt: -experiments[attempt.pk])


def with_defaults(sql: str, model) -> tuple[str, dict]:
    """`sql`, an INSERT ... SELECT into `model`'s table, with every NOT NULL column it does not list
    set to the model field's default (at {more_columns} and {more_values}), and the parameters that
    carry those defaults. The loader thereby keeps up with the schema: a column added later with a
    default is filled as the ORM would fill it; one without a default stops the script, naming it."""
    import re

    from django.db import connection
    from django.db.models import NOT_PROVIDED

    listed = re.search(r"INSERT INTO \w+ \((.*?)\{more_columns\}", sql, re.DOTALL)
    if listed is None or "{more_values}" not in sql:
        raise ValueError("with_defaults needs INSERT INTO table (columns{more_columns}) SELECT values{more_values} ...")
    named = {name.strip() for name in listed.group(1).split(",")}
    columns, values, params = [], [], {}
    for field in model._meta.concrete_fields:
        if field.column in named or field.null or (field.primary_key and field.auto_created) or field.db_default is not NOT_PROVIDED:
            continue
        columns.append(field.column)
        if getattr(field, "auto_now", False) or getattr(field, "auto_now_add", False):
            values.append("now()")
            continue
        default = field.get_default()
        if default is None:
            raise SystemExit(f"{model._meta.db_table}.{field.column} is NOT NULL without a default: "
                             "give it a value in the loader's SQL")
        values.append(f"%(default_{field.column})s")
        params[f"default_{field.column}"] = field.get_db_prep_save(default, connection)
    return (sql.replace("{more_columns}", "".join(f", {column}" for column in columns))
               .replace("{more_values}", "".join(f", {value}" for value in values))), params
