from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from runs.models import Suite
from runs.suites.gold import GoldError, suite_make_gold
from runs.suites.selectors import suite_get


class Command(BaseCommand):
    help = (
        "Run every experiment of a suite's gold code twice in the sandbox and store the results as gold "
        "(and, for our own suites, in each paper's gold.json). Fails, storing nothing, if two runs differ "
        "by more than a hundredth of the tolerance."
    )

    def add_arguments(self, parser):
        parser.add_argument("suite")
        parser.add_argument("--runs", type=int, default=2, help="runs per experiment (at least 2)")
        parser.add_argument("--backend", default=None, help="sandbox backend (default: SANDBOX_BACKEND)")

    def handle(self, *args, suite, runs, backend, **options):
        try:
            suite = suite_get(name=suite)
            suite_make_gold(
                suite=suite, backend=backend or settings.SANDBOX_BACKEND, runs=runs, progress=self.stdout.write
            )
        except (Suite.DoesNotExist, GoldError) as error:
            raise CommandError(str(error)) from None
        self.stdout.write(self.style.SUCCESS(f"Gold results stored for suite {suite.name}"))
