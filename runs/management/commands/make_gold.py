from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from runs.models import Suite
from runs.suites.gold import DEFAULT_REPEATS, GoldError, suite_check_gold, suite_make_gold
from runs.suites.selectors import suite_get


class Command(BaseCommand):
    help = (
        "Run every experiment of a suite's gold code N times (--repeats, default 3), each time in a fresh "
        "sandbox, and store the first run's results as gold with every number's spread (and, for our own "
        "suites, in each paper's gold.json). An experiment whose runs differ by more than half a number's "
        "tolerance is marked unstable and handled by the suite's policy; a crash or runs printing different "
        "keys store nothing. --check re-runs the gold code and reports each number's drift from the stored "
        "gold, writing nothing, and fails when a number drifted beyond its tolerance."
    )

    def add_arguments(self, parser):
        parser.add_argument("suite")
        parser.add_argument(
            "--repeats", type=int, default=None,
            help=f"gold runs per experiment (default {DEFAULT_REPEATS}, at least 2; with --check default 1)",
        )
        parser.add_argument("--check", action="store_true", help="compare with the stored gold; write nothing")
        parser.add_argument("--backend", default=None, help="sandbox backend (default: SANDBOX_BACKEND)")

    def handle(self, *args, suite, repeats, check, backend, **options):
        backend = backend or settings.SANDBOX_BACKEND
        try:
            suite = suite_get(name=suite)
            if check:
                self._check(suite, backend, 1 if repeats is None else repeats)
                return
            measured = suite_make_gold(
                suite=suite, backend=backend, repeats=DEFAULT_REPEATS if repeats is None else repeats,
                progress=self.stdout.write,
            )
        except (Suite.DoesNotExist, GoldError) as error:
            raise CommandError(str(error)) from None
        policy = Suite.UnstablePolicy(suite.unstable_policy).label
        experiments = [stability for stability in measured if not stability.held_out]
        variants = [stability for stability in measured if stability.held_out]
        self.stdout.write(
            f"gold stability: {sum(s.unstable for s in experiments)} of {len(experiments)} experiments unstable"
            + (f", {sum(s.unstable for s in variants)} of {len(variants)} hidden variants" if variants else "")
            + f" (policy: {policy})"
        )
        for stability in measured:
            if stability.unstable:
                self.stdout.write(f"UNSTABLE: {stability.label}: largest spread {stability.in_tolerances:.2g} of its tolerance")
        self.stdout.write(self.style.SUCCESS(f"Gold results stored for suite {suite.name}"))

    def _check(self, suite, backend, repeats):
        check = suite_check_gold(suite=suite, backend=backend, repeats=repeats)
        for line in check.lines():
            self.stdout.write(line)
        drifted = check.drifted
        self.stdout.write(
            f"{len(check.rows)} numbers checked over {repeats} run(s): {len(drifted)} drifted beyond tolerance"
        )
        if drifted or check.problems:
            raise CommandError(
                f"gold drift in suite {suite.name}: {len(drifted)} number(s) beyond tolerance, "
                f"{len(check.problems)} experiment(s) could not be compared; the stored gold was not changed"
            )
        self.stdout.write(self.style.SUCCESS(f"The stored gold of suite {suite.name} is reproduced within tolerance"))
