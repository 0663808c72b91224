from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from runs.models import Suite
from runs.suites.gold import DEFAULT_REPEATS, GoldError, suite_validate
from runs.suites.selectors import suite_get


class Command(BaseCommand):
    help = (
        "Check a suite: the gold code passes every experiment in a built workspace, masking any function "
        "breaks a dependent experiment, and plausible wrong implementations (mutants) are caught (counted as "
        "crashing or printing wrong numbers). Also reports each experiment's gold stability over --repeats runs "
        "in fresh sandboxes; an experiment measured unstable that make_gold did not mark so makes the suite invalid."
    )

    def add_arguments(self, parser):
        parser.add_argument("suite")
        parser.add_argument("--mutants", type=int, default=6, help="mutants tried per function")
        parser.add_argument("--seed", type=int, default=0, help="seed choosing the mutants")
        parser.add_argument("--min-caught", type=float, default=0.9, help="required fraction of mutants caught")
        parser.add_argument(
            "--repeats", type=int, default=DEFAULT_REPEATS,
            help="gold runs per experiment for the stability report (the first is also the pass check)",
        )
        parser.add_argument("--backend", default=None, help="sandbox backend (default: SANDBOX_BACKEND)")
        parser.add_argument(
            "--jobs", type=int, default=1,
            help="papers checked at once, each in sandboxes of its own (the report is the same; one at a time keeps "
                 "one core busy at most)",
        )
        parser.add_argument("--show-survivors", action="store_true", help="list the mutants that were not caught")

    def handle(self, *args, suite, mutants, seed, min_caught, repeats, backend, jobs, show_survivors, **options):
        try:
            suite = suite_get(name=suite)
        except Suite.DoesNotExist as error:
            raise CommandError(str(error)) from None
        try:
            report = suite_validate(
                suite=suite,
                backend=backend or settings.SANDBOX_BACKEND,
                mutants_per_function=mutants,
                seed=seed,
                repeats=repeats,
                jobs=jobs,
                progress=lambda line: self.stderr.write(line) if options["verbosity"] > 1 else None,
            )
        except GoldError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(report.table())
        if show_survivors:
            for check in report.functions:
                for survivor in check.survivors:
                    self.stdout.write(f"survived: {check.label}: {survivor}")
        if not report.passed(min_catch_rate=min_caught):
            raise CommandError(
                "suite is not valid: see the table (every mask must break an experiment, the gold code must "
                "pass, its repeated runs must print the same keys, an experiment measured unstable must be "
                "marked so by make_gold, and at least "
                f"{min_caught:.0%} of mutants must be caught)"
            )
