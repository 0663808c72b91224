#!/usr/bin/env python
"""Load on a running server: N requests at concurrency C to each URL, printing errors and latency.

    .venv/bin/python scripts/bench_load.py                          # against make demo's server
    .venv/bin/python scripts/bench_load.py --attempt 42 /attempts/99/ /functions/

Measures, by default, the leaderboard `/`, its JSON export `/?format=json` and one replay page
`/attempts/<id>/`, 200 requests each at concurrency 10, one URL at a time after one warm-up
request each (reported apart: the leaderboard's first request computes its bootstrap intervals).
Extra paths (or loopback URLs) given as arguments are measured the same way, e.g. the replay of
the largest trajectory the upload limits allow.

The replay is `--attempt ID`, or else the newest finished attempt of a public run, read from the
database in DATABASE_URL (default: the demo's, postgres://postgres@127.0.0.1:5432/autoexperiment_demo).

A request counts as an error unless it returns 200 (redirects are not followed). Exits 1 when
any request failed.

Bounded on purpose, so it cannot be pointed at someone else's site or used as a flood: only
loopback addresses, at most 2,000 requests per URL and a concurrency of at most 50.
"""
from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import statistics
import sys
import time
import urllib.error
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urljoin, urlsplit

ROOT = Path(__file__).resolve().parents[1]
from benchlib import percentile  # noqa: E402 - beside this script

MAX_REQUESTS = 2000
MAX_CONCURRENCY = 50
DEMO_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/autoexperiment_demo"


class Refused(Exception):
    """A URL or an option outside what this script allows."""


def require_loopback(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise Refused(f"{url!r} is not an http(s) URL with a host")
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(parts.hostname, parts.port or 80)}
    except socket.gaierror as error:
        raise Refused(f"{url!r}: cannot resolve {parts.hostname!r} ({error})") from None
    outside = sorted(a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_loopback)
    if outside:
        raise Refused(f"{url!r} resolves to {', '.join(outside)}, which is not loopback; this script only loads local servers")
    return url


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def fetch(url: str, timeout: float) -> tuple[float, int | str, int]:
    """(seconds, status or error text, bytes read)."""
    started = time.perf_counter()
    try:
        with _opener.open(url, timeout=timeout) as response:
            size = len(response.read())
            status: int | str = response.status
    except urllib.error.HTTPError as error:
        size = len(error.read())
        status = error.code
    except (OSError, urllib.error.URLError) as error:
        size, status = 0, f"{type(error).__name__}: {getattr(error, 'reason', error)}"
    return time.perf_counter() - started, status, size


def measure(url: str, *, requests: int, concurrency: int, timeout: float) -> bool:
    warm_seconds, warm_status, _ = fetch(url, timeout)
    wall = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        results = list(pool.map(lambda _: fetch(url, timeout), range(requests)))
    wall = time.perf_counter() - wall
    times = [seconds for seconds, _, _ in results]
    errors = Counter(status for _, status, _ in results if status != 200)
    sizes = [size for _, status, size in results if status == 200]
    print(
        f"{url}\n  {requests} requests, concurrency {concurrency}: {sum(errors.values())} errors, "
        f"p50 {percentile(times, 0.5) * 1000:.0f} ms, p95 {percentile(times, 0.95) * 1000:.0f} ms, "
        f"max {max(times) * 1000:.0f} ms, {requests / wall:.1f} requests/s, "
        f"{statistics.mean(sizes) / 1024 if sizes else 0:.0f} KiB per response; "
        f"warm-up request: {warm_status} in {warm_seconds * 1000:.0f} ms"
    )
    for status, count in errors.most_common():
        print(f"  error: {count} x {status}")
    return not errors


def newest_public_attempt(database_url: str) -> int:
    """The newest finished attempt of a public run, from the database the server uses."""
    sys.path.insert(0, str(ROOT))
    os.environ["DATABASE_URL"] = database_url
    os.environ["DEBUG"] = "1"  # a read of one id; no SECRET_KEY needed for that
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "autoexperiment_site.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from runs.models import Attempt
    from runs.visibility import public_runs_q

    attempt = (
        Attempt.objects.filter(public_runs_q(prefix="run__"), status=Attempt.DONE).order_by("-pk").only("pk").first()
    )
    if attempt is None:
        raise Refused(f"no finished public attempt in {database_url}; run make demo first or pass --attempt ID")
    return attempt.pk


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", help="more paths (or loopback URLs) to measure")
    parser.add_argument("--base-url", default="http://127.0.0.1:8000", help="the server (loopback only)")
    parser.add_argument("--attempt", type=int, help="the attempt whose replay page to measure")
    parser.add_argument("--requests", type=int, default=200, help=f"per URL, at most {MAX_REQUESTS}")
    parser.add_argument("--concurrency", type=int, default=10, help=f"at most {MAX_CONCURRENCY}")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", DEMO_DATABASE_URL),
                        help="where to find an attempt when --attempt is not given")
    args = parser.parse_args(argv)
    try:
        if not 1 <= args.requests <= MAX_REQUESTS:
            raise Refused(f"--requests {args.requests}: give 1 to {MAX_REQUESTS}")
        if not 1 <= args.concurrency <= MAX_CONCURRENCY:
            raise Refused(f"--concurrency {args.concurrency}: give 1 to {MAX_CONCURRENCY}")
        base = require_loopback(args.base_url.rstrip("/") + "/")
        attempt = args.attempt if args.attempt is not None else newest_public_attempt(args.database_url)
        paths = ["/", "/?format=json", f"/attempts/{attempt}/", *args.paths]
        urls = [require_loopback(urljoin(base, path)) for path in paths]
    except Refused as error:
        print(f"bench_load: {error}", file=sys.stderr)
        return 2
    healthy = True
    for url in urls:
        healthy &= measure(url, requests=args.requests, concurrency=args.concurrency, timeout=args.timeout)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main())
