#!/usr/bin/env python
"""Build time, size and memory of the Parquet dataset downloads (leaderboard.datasets) on a million
attempts, and what a download costs once built.

Creates a scratch Postgres database (bench_datasets_<pid>), loads the page benchmarks' synthetic suite
(scripts/benchsuite.py: 2,300 samples) and `--attempts` attempts across `--systems` systems in SQL
(INSERT ... SELECT over generate_series, no ORM object per row, as bench_explore loads its own), each
done or errored with both scores (one or two experiments, their numbers beside their verdicts, as
scoring stores them), and marks the systems changed as settling attempts mark them
(leaderboard.standings). Then, through Django's test Client (in process: server time, no network):

  - the largest system's `dataset.zip` the first time: built (cold); its rows, its size, the
    process's peak resident memory while the view ran (VmHWM, reset before it: the build's peak, not
    the loading's nor the body's read by this client) and the most Arrow held at once (the attempts in
    columns: bounded by a row group, however many attempts); then the same download served from its file, and a request that holds it already
    (If-None-Match: 304);
  - the same for the suite's `dataset.zip`, every cached file deleted first;
  - the suite's again after one more attempt settles: built again from the other systems' files and
    that system's attempts read again, one row more.

    .venv/bin/python scripts/bench_datasets.py [--attempts 1000000] [--systems 40] [--requests 5] [--redis-db 12]

Postgres: BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres), a role that may
create databases; Redis: REDIS_URL's server, database --redis-db (the refresh job the marking queues
goes there; emptied at the end). The database and the cache folder are removed at the end.
"""
from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchlib import scratch_deployment, with_defaults  # noqa: E402 - beside this script
from benchsuite import AGENTS, CONTEXTS, MODELS, load_suite  # noqa: E402

SUITE = "bench_datasets"
# Each run holds at most one attempt per (sample, index): a system of many attempts has several runs.
N_CHOICES = [(1, 2, 3), (1, 2), (2, 3), (1,)]

# One attempt per (sample, index) of one run, in SQL: its status and verdicts drawn per row, its two
# scores as scoring stores them (each experiment's verdict beside the numbers compared).
ATTEMPT_SQL = """
INSERT INTO runs_attempt (
    run_id, sample_id, index, status, exit_status, failure_label, reported_passed, reexecution_passed, passed, mismatch,
    outcome, reported_score, reexecution_score, tolerance_ratio, input_tokens, output_tokens, cost, agent_seconds,
    reexecution_seconds, created_at, finished_at{more_columns})
SELECT %(run)s, d.sample_id, d.idx, CASE WHEN d.error THEN 'error' ELSE 'done' END,
    CASE WHEN d.error THEN 'model_error' ELSE 'submitted' END,
    CASE WHEN d.error THEN 'infrastructure' WHEN d.reported AND d.reexecuted THEN '' ELSE 'wrong_answer' END,
    CASE WHEN d.error THEN NULL ELSE d.reported END,
    CASE WHEN d.error OR %(uploaded)s THEN NULL ELSE d.reexecuted END,
    NOT d.error AND NOT %(uploaded)s AND d.reported AND d.reexecuted,
    NOT d.error AND NOT %(uploaded)s AND d.reported AND NOT d.reexecuted,
    CASE WHEN d.error THEN '' WHEN d.reported AND (d.reexecuted OR %(uploaded)s) THEN 'passed' ELSE 'wrong_answer' END,
    CASE WHEN d.error THEN NULL ELSE {score_reported} END,
    CASE WHEN d.error OR %(uploaded)s THEN NULL ELSE {score_reexecuted} END,
    CASE WHEN d.error THEN NULL ELSE d.ratio END,
    20000 + (random() * 380000)::int, 2000 + (random() * 28000)::int,
    CASE WHEN random() < 0.05 THEN NULL ELSE 0.02 + random() * 0.9 END, 60 + random() * 1500,
    CASE WHEN d.error OR %(uploaded)s THEN NULL ELSE 20 + random() * 300 END,
    now() - d.age, now() - d.age + interval '20 minutes'{more_values}
FROM (
    SELECT u.sample_id, u.idx, u.age, u.v < 0.03 AS error, u.w < %(p)s AS reported, u.w < %(p)s * 0.93 AS reexecuted,
        u.w / %(p)s AS ratio, u.m < 0.5 AS two
    FROM (  -- random() in a select list: one draw per row
        SELECT s.id AS sample_id, idx, random() AS v, random() AS w, random() AS m, random() * interval '60 days' AS age
        FROM (SELECT id FROM runs_sample WHERE n = ANY(%(n_values)s) ORDER BY md5(id::text || %(salt)s) LIMIT %(samples)s) s
        CROSS JOIN generate_series(0, %(k)s - 1) idx
        LIMIT %(wanted)s
    ) u
) d
"""


def score_sql(passed: str) -> str:
    """A SampleScore in SQL whose verdict is the expression `passed`: one experiment, or two (`d.two`)."""
    def experiment(name: str, metric: str) -> str:
        return (f"jsonb_build_object('experiment_id', '{name}', 'passed', {passed}, 'error', NULL, 'mode', 'strict', "
                f"'rtol', 0.05, 'atol', 0.0, 'mean_relative_error', NULL, 'answer_key', NULL, 'numbers', jsonb_build_array("
                f"jsonb_build_object('path', '{metric}', 'gold', 0.8731, 'pred', 0.8731 * (1 + d.ratio * 0.05), 'passed', {passed})))")

    first, second = experiment("Experiment 1", "accuracy"), experiment("Experiment 2", "loss")
    return (f"jsonb_build_object('passed', {passed}, 'error', NULL, 'parse_method', 'json', 'experiments', "
            f"CASE WHEN d.two THEN jsonb_build_array({first}, {second}) ELSE jsonb_build_array({first}) END)")


def load_attempts(suite, *, total: int, systems: int) -> tuple[list[int], str]:
    """`total` attempts across `systems` systems (a fifth of them uploaded, never re-executed); returns
    the run ids and the slug of the system with the most attempts."""
    from django.db import connection

    from leaderboard.rules import canonical_config, system_slug
    from runs.models import Attempt, Run, Sample

    samples_by_n = {n: Sample.objects.filter(paper__suite=suite, n=n).count() for n in (1, 2, 3)}
    keys = [(model, agent, context) for model in MODELS for agent in AGENTS for context in CONTEXTS][:systems]
    if len(keys) < systems:
        raise SystemExit(f"--systems: at most {len(keys)} (models x agents x contexts of scripts/benchsuite.py)")
    sql = ATTEMPT_SQL.replace("{score_reported}", score_sql("d.reported")).replace("{score_reexecuted}", score_sql("d.reexecuted"))
    sql, defaults = with_defaults(sql, Attempt)
    run_ids, made, largest = [], 0, (0, "")
    for number, ((model, strength), agent, context) in enumerate(keys):
        k = (1, 3, 5)[number % 3]
        n_values = N_CHOICES[number % len(N_CHOICES)]
        uploaded = number % 5 == 4
        wanted = total // systems + (1 if number < total % systems else 0)
        if wanted > largest[0]:
            largest = (wanted, system_slug(suite=suite.name, agent=agent, model=model, config_json=canonical_config({}),
                                           context=context))
        run_number = 0
        while wanted > 0:
            run = Run.objects.create(
                suite=suite, agent=agent, model=model, agent_config={}, context=context, n_values=list(n_values),
                attempts_per_sample=k, sandbox_backend="bubblewrap", description=f"bench_datasets system {number} run {run_number}",
            )
            run_ids.append(run.pk)
            with connection.cursor() as cursor:
                cursor.execute(sql, {
                    **defaults, "run": run.pk, "n_values": list(n_values), "salt": f"{number}-{run_number}", "k": k,
                    "samples": sum(samples_by_n[n] for n in n_values), "wanted": wanted, "uploaded": uploaded,
                    "p": min(0.95, strength * (0.35 if agent == "agentless" else 1.0)),
                })
                wanted -= cursor.rowcount
                made += cursor.rowcount
            run_number += 1
    if made != total:
        raise SystemExit(f"loaded {made:,} attempts, not the {total:,} asked for")
    return run_ids, largest[1]


def peak_rss_reset() -> None:
    """Start the process's peak resident memory (VmHWM) again from what it holds now (Linux 4.0 and
    later); where that is refused, the peak stays the process's since it started."""
    try:
        with open("/proc/self/clear_refs", "w") as clear:
            clear.write("5")
    except OSError:
        pass


def rss_mb(kind: str) -> float:
    """The process's resident memory now (VmRSS) or its peak since the last reset (VmHWM), in MB."""
    status = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{kind}:\s+(\d+) kB", status, re.MULTILINE).group(1)) / 1024


def download(client, url: str, **headers) -> tuple[float, int, bytes, object, float]:
    """GET `url` read to its end: (seconds, status, body, response, peak RSS in MB while the view ran,
    before the body was read into this process)."""
    started = time.perf_counter()
    response = client.get(url, headers=headers)
    peak = rss_mb("VmHWM")
    body = b"".join(response.streaming_content) if response.streaming else response.content
    seconds = time.perf_counter() - started
    if response.status_code not in (200, 304):
        raise SystemExit(f"GET {url} answered {response.status_code}: {body[:300]!r}")
    return seconds, response.status_code, body, response, peak


def rows_of(body: bytes) -> tuple[int, int]:
    """(attempt rows, sample rows) of a dataset zip, from its Parquet footers."""
    import io
    import zipfile

    import pyarrow.parquet as pq

    with zipfile.ZipFile(io.BytesIO(body)) as bundle:
        counts = {Path(name).name: pq.ParquetFile(io.BytesIO(bundle.read(name))).metadata.num_rows
                  for name in bundle.namelist() if name.endswith(".parquet")}
    return counts["attempts.parquet"], counts["samples.parquet"]


def cold_and_cached(client, url: str, what: str, requests: int) -> bytes:
    """Time `url` built, then served `requests` times from the cache and once not modified; print them."""
    import pyarrow

    gc.collect()
    peak_rss_reset()
    before = rss_mb("VmRSS")
    seconds, _, body, response, peak = download(client, url)
    arrow_peak = pyarrow.default_memory_pool().max_memory() / 2**20
    attempts, samples = rows_of(body)
    print(f"{what}, cold build: {seconds:.1f} s, {attempts:,} attempt rows, {samples:,} sample rows, "
          f"zip {len(body) / 2**20:.1f} MB; peak RSS {peak:.0f} MB (before the build {before:.0f} MB), "
          f"Arrow's peak {arrow_peak:.0f} MB", flush=True)
    times = [download(client, url)[0] for _ in range(requests)]
    etag = response.headers.get("ETag")
    unchanged_seconds, status, *_ = download(client, url, if_none_match=etag or '"none"')
    print(f"{what}, cached download: {statistics.median(times) * 1000:.0f} ms (median of {requests}); "
          f"If-None-Match: {status} in {unchanged_seconds * 1000:.0f} ms", flush=True)
    return body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=1_000_000)
    parser.add_argument("--systems", type=int, default=40)
    parser.add_argument("--requests", type=int, default=5, help="timed cached downloads of each dataset")
    parser.add_argument("--redis-db", type=int, default=12)
    options = parser.parse_args()
    # Server time is measured, not the per-address page limits.
    for limit in ("RATE_LIMIT_PAGES_PER_ADDRESS", "RATE_LIMIT_HEAVY_PAGES_PER_ADDRESS"):
        os.environ[limit] = "off"
    with scratch_deployment("datasets", backend="bubblewrap", redis_db=options.redis_db) as (_, scratch):
        os.environ["DATASET_CACHE_ROOT"] = str(scratch / "datasets")
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection, transaction
        from django.test import Client

        from leaderboard.standings import standings_mark_stale
        from runs.models import Attempt, Run, Sample
        from runs.signals import results_changed_send

        call_command("migrate", verbosity=0)
        clock = time.perf_counter()
        suite, samples = load_suite(name=SUITE, file_of=lambda f: f"src/module_{f % 3}.py")
        run_ids, largest = load_attempts(suite, total=options.attempts, systems=options.systems)
        with transaction.atomic():
            standings_mark_stale(run_ids=run_ids)  # as the attempts' settling would have
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        print(f"loaded {options.attempts:,} attempts across {options.systems} systems ({len(run_ids)} runs), "
              f"{len(samples):,} samples in {time.perf_counter() - clock:.1f} s", flush=True)

        client = Client(HTTP_HOST="localhost")
        cold_and_cached(client, f"/systems/{largest}/dataset.zip", "largest system's dataset", options.requests)
        shutil.rmtree(os.environ["DATASET_CACHE_ROOT"])  # the suite's build reads every system's attempts
        suite_url = f"/benchmark/{SUITE}/dataset.zip"
        before = cold_and_cached(client, suite_url, "suite dataset", options.requests)

        # One more attempt settles (at a sample its run has not tried yet, announced as settling announces it).
        run, sample = next(
            (run, sample) for run in Run.objects.filter(pk__in=run_ids).order_by("-pk")
            for sample in [Sample.objects.filter(paper__suite=suite, n__in=run.n_values).exclude(attempts__run=run).first()]
            if sample is not None
        )
        with transaction.atomic():
            Attempt.objects.create(run=run, sample=sample, index=0, status=Attempt.DONE, reported_passed=True,
                                   reexecution_passed=True, passed=True, outcome=Attempt.PASSED)
            results_changed_send(run_ids=[run.pk])
        seconds, _, body, *_ = download(client, suite_url)
        print(f"suite dataset after one more attempt: built again in {seconds:.1f} s, "
              f"{rows_of(body)[0] - rows_of(before)[0]:+,} attempt row(s)", flush=True)


if __name__ == "__main__":
    main()
