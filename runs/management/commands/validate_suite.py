from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from runs.models import Suite
from runs.suites.gold import suite_validate
from runs.suites.selectors import suite_get


class Command(BaseCommand):
    help = (
        "Check a suite: the gold code passes every experiment in a built workspace, masking any function "
        "breaks a dependent experiment, and plausible wrong implementations (mutants) are caught."
    )

    def add_arguments(self, parser):
        parser.add_argument("suite")
        parser.add_argument("--mutants", type=int, default=6, help="mutants tried per function")
        parser.add_argument("--seed", type=int, default=0, help="seed choosing the mutants")
        parser.add_argument("--min-caught", type=float, default=0.9, help="required fraction of mutants caught")
        parser.add_argument("--backend", default=None, help="sandbox backend (default: SANDBOX_BACKEND)")
        parser.add_argument("--show-survivors", action="store_true", help="list the mutants that were not caught")

    def handle(self, *args, suite, mutants, seed, min_caught, backend, show_survivors, **options):
        try:
            suite = suite_get(name=suite)
        except Suite.DoesNotExist as error:
            raise CommandError(str(error)) from None
        report = suite_validate(
            suite=suite,
            backend=backend or settings.SANDBOX_BACKEND,
            mutants_per_function=mutants,
            seed=seed,
            progress=lambda line: self.stderr.write(line) if options["verbosity"] > 1 else None,
        )
        self.stdout.write(report.table())
        if show_survivors:
            for check in report.functions:
                for survivor in check.survivors:
                    self.stdout.write(f"survived: {check.label}: {survivor}")
        if not report.passed(min_catch_rate=min_caught):
            raise CommandError(
                "suite is not valid: see the table (every mask must break an experiment, the gold code must "
                f"pass, and at least {min_caught:.0%} of mutants must be caught)"
            )
