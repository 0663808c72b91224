"""What the benchmark scripts share: scratch Postgres databases, URLs, percentiles.

Imported by the scripts beside it (`python scripts/bench_*.py` puts this folder on sys.path).
"""
from __future__ import annotations

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
    postgres_admin(admin_url, f'CREATE DATABASE "{name}"')


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
