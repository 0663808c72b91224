"""`python manage.py run_eval --suite builtin --agent gold --n 1,2 --k 1`: create a run, queue it
and follow it with a progress bar until every attempt has ended."""
import json
import sys
import time

from django.core.management.base import BaseCommand, CommandError

from runs.benchmark.sampling import DEFAULT_CAP
from runs.benchmark.text import format_seconds
from runs.benchmark.workspace import CONTEXT_CONDITIONS, Context
from runs.evaluation.queue import evaluation_queue, queue_name
from runs.evaluation.selectors import run_get, run_label_counts, run_progress
from runs.evaluation.services import RunError, RunOptionsInvalid, run_create, run_execute_sync, run_resume
from runs.management.commands._options import int_list
from runs.models import Run, Suite
from runs.suites.selectors import suite_get

BAR_WIDTH = 30


def progress_line(progress, *, workers: int | None = None) -> str:
    """One line: bar, attempts ended of all, percent, counts by status, passes and ETA."""
    total = progress.total or 1
    filled = int(BAR_WIDTH * progress.ended / total)
    bar = "#" * filled + "." * (BAR_WIDTH - filled)
    counts = " ".join(f"{status} {count}" for status, count in progress.counts_by_status)
    eta = progress.eta(workers=workers)
    if not progress.active:
        eta_text = "done"
    elif eta is None:
        eta_text = "ETA ?"
    else:
        eta_text = f"ETA {format_seconds(eta)}"
    return f"[{bar}] {progress.ended}/{progress.total} {progress.percent:3.0f}% | {counts} | passed {progress.passed} | {eta_text}"


class Command(BaseCommand):
    help = (
        "Create an evaluation run (one attempt per sample and index), queue its attempts for the RQ "
        "workers (python manage.py evaluation_worker) and show its progress until it ends. --sync runs the "
        "attempts in this process, without Redis. Exits non-zero when attempts ended in "
        "infrastructure errors."
    )

    def add_arguments(self, parser):
        parser.add_argument("--suite", help="suite name (e.g. builtin)")
        parser.add_argument("--agent", default="react", help="react, agentless, gold, noop, mutant (default react)")
        parser.add_argument("--model", default="", help="model spec, e.g. openai:gpt-4o (blank for baselines)")
        parser.add_argument("--n", type=int_list, default=[1], help="numbers of masked functions, e.g. 1,2 (default 1)")
        parser.add_argument("--k", type=int, default=1, help="attempts per sample (default 1)")
        parser.add_argument("--seed", type=int, default=0, help="seed of the sample draw (default 0)")
        parser.add_argument("--cap", type=int, default=DEFAULT_CAP, help=f"at most this many samples per paper and n (default {DEFAULT_CAP})")
        parser.add_argument("--context", default=Context.FULL, choices=CONTEXT_CONDITIONS, help="paper context (default full)")
        parser.add_argument("--max-steps", type=int, default=50)
        parser.add_argument("--max-seconds", type=float, default=1800.0)
        parser.add_argument("--max-cost", type=float, default=1.0, help="USD per attempt")
        parser.add_argument("--history", default=None, help="ReAct history: full, window or summary")
        parser.add_argument("--window", type=int, default=None, help="ReAct window k (window and summary histories)")
        parser.add_argument("--agent-config", default=None, help="more agent settings as a JSON object")
        parser.add_argument("--backend", default=None, help="sandbox backend (default SANDBOX_BACKEND), or `any`: each worker's own SANDBOX_BACKEND")
        parser.add_argument("--description", default="")
        parser.add_argument("--no-transplants", action="store_true",
                            help="do not judge each masked function of a failed attempt at n >= 2 alone against gold")
        parser.add_argument("--sync", action="store_true", help="run the attempts in this process, without Redis")
        parser.add_argument("--no-wait", action="store_true", help="queue the run and return")
        parser.add_argument("--resume", type=int, metavar="RUN_ID", help="resume an existing run instead of creating one")
        parser.add_argument("--poll", type=float, default=1.0, help=argparse_hidden())

    def handle(self, *args, **options):
        if options["resume"] is not None:
            run = self._resume(options)
        else:
            run = self._create(options)
        if options["sync"]:
            self._sync(run)
        elif options["no_wait"]:
            self.stdout.write(f"Run {run.pk} queued; follow it on /runs/{run.pk}/ or with run_eval --resume {run.pk}.")
            return
        else:
            self._wait(run, poll=options["poll"])
        self._summary(run)

    # --- starting --------------------------------------------------------------------------------

    def _create(self, options) -> Run:
        if not options["suite"]:
            raise CommandError("--suite is required (or --resume RUN_ID)")
        try:
            suite = suite_get(name=options["suite"])
        except Suite.DoesNotExist as error:
            raise CommandError(str(error)) from None
        config = {}
        if options["agent_config"]:
            try:
                config = json.loads(options["agent_config"])
            except ValueError as error:
                raise CommandError(f"--agent-config is not JSON: {error}") from None
            if not isinstance(config, dict):
                raise CommandError("--agent-config must be a JSON object")
        if options["history"] is not None:
            config["history"] = options["history"]
        if options["window"] is not None:
            config["window"] = options["window"]
        try:
            run = run_create(
                suite=suite,
                agent=options["agent"],
                model=options["model"],
                n_values=options["n"],
                attempts_per_sample=options["k"],
                agent_config=config,
                context=options["context"],
                sample_seed=options["seed"],
                sample_cap=options["cap"],
                max_steps=options["max_steps"],
                max_seconds=options["max_seconds"],
                max_cost=options["max_cost"],
                sandbox_backend=options["backend"],
                description=options["description"],
                enqueue=not options["sync"],
                transplants=not options["no_transplants"],
            )
        except RunOptionsInvalid as error:
            # The same check as the site's run form (runs.evaluation.services.run_options_problems),
            # each problem named by its flag here.
            raise CommandError("; ".join(f"{flag(problem.field)}: {problem.message}" for problem in error.problems)) from None
        except RunError as error:
            raise CommandError(str(error)) from None
        total = run.attempts.count()
        where = "in this process" if options["sync"] else f"on queue {queue_name()!r}"
        self.stdout.write(f"Run {run.pk}: {run.agent}{' ' + run.model if run.model else ''} on {suite.name}, "
                          f"n={run.n_values}, k={run.attempts_per_sample}: {total} attempts {where}.")
        return run

    def _resume(self, options) -> Run:
        try:
            run = run_get(pk=options["resume"])
        except Run.DoesNotExist:
            raise CommandError(f"no run {options['resume']}") from None
        report = run_resume(run=run, enqueue=not options["sync"])
        self.stdout.write(
            f"Run {run.pk} resumed: {report.recovered} attempt(s) of dead workers recovered, "
            f"{report.uncancelled} un-cancelled, {report.enqueued} job(s) enqueued."
        )
        return run

    # --- following -------------------------------------------------------------------------------

    def _show(self, line: str, last: list) -> None:
        """On a terminal, redraw one line; otherwise print a line whenever the counts change."""
        if self.stdout.isatty():
            self.stdout.write("\r" + line.ljust(last[0] if last else 0), ending="")
            self.stdout.flush()
            last[:] = [len(line)]
        else:
            counts = line.rsplit("|", 1)[0]
            if not last or last[0] != counts:
                self.stdout.write(line)
                last[:] = [counts]

    def _end_line(self) -> None:
        if self.stdout.isatty():
            self.stdout.write("")

    def _sync(self, run: Run) -> None:
        last: list = []
        self._show(progress_line(run_progress(run=run), workers=1), last)
        try:
            run_execute_sync(run=run, progress=lambda: self._show(progress_line(run_progress(run=run), workers=1), last))
        except KeyboardInterrupt:
            self._end_line()
            raise CommandError(
                f"interrupted; the attempt in progress is recovered by: python manage.py run_eval --resume {run.pk} --sync"
            ) from None
        self._end_line()

    def _wait(self, run: Run, *, poll: float) -> None:
        last: list = []
        warned = False
        try:
            while True:
                progress = run_progress(run=run)
                self._show(progress_line(progress), last)
                if not progress.active:
                    break
                if not warned and not progress.running and not self._workers():
                    self._end_line()
                    self.stdout.write(f"No worker is listening on queue {queue_name()!r}: start one with "
                                      "python manage.py evaluation_worker")
                    warned = True
                time.sleep(poll)
        except KeyboardInterrupt:
            self._end_line()
            self.stdout.write(f"Stopped following; run {run.pk} goes on in the workers.")
            sys.exit(130)
        self._end_line()

    def _workers(self) -> int:
        from rq import Worker

        try:
            return Worker.count(queue=evaluation_queue())
        except Exception:  # noqa: BLE001 - only a hint
            return 1

    def _summary(self, run: Run) -> None:
        progress = run_progress(run=run)
        labels = run_label_counts(run=run)
        self.stdout.write(
            f"Run {run.pk} {progress.status}: {progress.passed} of {progress.total} attempts passed"
            + (f", {progress.mismatches} flagged (reported numbers the code does not produce)" if progress.mismatches else "")
            + "."
        )
        if labels:
            self.stdout.write("Failures: " + ", ".join(f"{label} {count}" for label, count in sorted(labels.items())))
        if progress.infrastructure_errors:
            raise CommandError(
                f"{progress.infrastructure_errors} attempt(s) ended in infrastructure errors; "
                f"retry them with the queue page's Retry failed button"
            )


def flag(field: str) -> str:
    """The flag of a run option as run_options_problems names it: max_cost -> --max-cost."""
    return "--" + field.replace("_", "-")


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS
