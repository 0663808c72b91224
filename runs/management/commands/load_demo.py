import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from runs.evaluation.services import RunError, run_create, run_resume
from runs.management.commands._options import int_list
from runs.models import Attempt, Run, Suite, Transplant
from runs.suites.selectors import suite_get

DEMO_DESCRIPTION = "Demo: a model-free baseline over the built-in suite (make demo)"
BASELINES = ("gold", "noop", "mutant")


class Command(BaseCommand):
    help = (
        "Fill the site with real results: runs of the gold, noop and mutant baselines over a suite, made "
        "through the queue and the sandbox by RQ workers started here. Runs already finished are kept."
    )

    def add_arguments(self, parser):
        parser.add_argument("--suite", default="builtin")
        parser.add_argument("--n", type=int_list, default=[1, 2])
        # 4 per paper and n: 32 samples per baseline over the built-in suite, so that make demo serves within
        # 10 minutes on two cores: these attempts are most of its time, and every sample more adds to it.
        parser.add_argument("--cap", type=int, default=4, help="samples per paper and n (the demo keeps it short)")
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--no-wait", action="store_true",
                            help="queue the runs and return: the site's workers run them (make demo does so for the "
                                 "PyTorch suite, whose attempts take minutes, so that the site is up meanwhile)")

    def handle(self, *args, suite, n, cap, workers, no_wait, **options):
        try:
            suite = suite_get(name=suite)
        except Suite.DoesNotExist as error:
            raise CommandError(str(error)) from None
        runs = [self._demo_run(suite, agent, n, cap) for agent in BASELINES]
        pending = Attempt.objects.filter(run__in=runs, status__in=[Attempt.QUEUED, Attempt.RUNNING])
        if no_wait:
            self.stdout.write(f"{pending.count()} attempts of suite {suite.name} queued for the site's workers "
                              f"(runs {', '.join(str(run.pk) for run in runs)}); their results appear as they finish")
            return
        if pending.exists():
            self._work(runs, workers)
        for run in Run.objects.filter(pk__in=[r.pk for r in runs]):
            done = run.attempts.filter(status=Attempt.DONE)
            self.stdout.write(
                f"run {run.pk} {run.agent:<7} {done.filter(passed=True).count():>3}/{done.count()} passed "
                f"({run.attempts.filter(status=Attempt.ERROR).count()} infrastructure errors)"
            )

    def _demo_run(self, suite, agent, n, cap) -> Run:
        existing = Run.objects.filter(suite=suite, agent=agent, description=DEMO_DESCRIPTION, cancelled_at=None).first()
        if existing is None:
            try:
                # noop writes nothing: judging its empty functions one by one would tell nobody anything.
                return run_create(suite=suite, agent=agent, n_values=n, sample_cap=cap, description=DEMO_DESCRIPTION,
                                  transplants=agent != "noop")
            except RunError as error:
                raise CommandError(str(error)) from None
        if existing.finished_at is None:
            run_resume(run=existing)  # an interrupted demo picks up where it stopped
        return existing

    def _work(self, runs, workers: int) -> None:
        """Run burst workers until the queue is empty, reporting progress as attempts finish."""
        command = [sys.executable, str(settings.BASE_DIR / "manage.py"), "evaluation_worker", "--burst"]
        processes = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(workers)]
        attempts = Attempt.objects.filter(run__in=runs)
        transplants = Transplant.objects.filter(attempt__run__in=runs)
        total = attempts.count()
        last = None
        while any(process.poll() is None for process in processes):
            finished = attempts.exclude(status__in=[Attempt.QUEUED, Attempt.RUNNING]).count()
            judged = transplants.filter(status__in=[Transplant.Status.DONE, Transplant.Status.GIVEN_UP]).count(), transplants.count()
            if (finished, judged) != last:
                self.stdout.write(f"{finished}/{total} attempts finished, {judged[0]}/{judged[1]} functions of failed "
                                  f"n >= 2 attempts judged alone ({workers} workers)")
                last = finished, judged
            time.sleep(2)
        failed = [process.returncode for process in processes if process.returncode]
        if failed:
            raise CommandError(f"a worker exited with status {failed[0]}; see `python manage.py evaluation_worker --burst`")
