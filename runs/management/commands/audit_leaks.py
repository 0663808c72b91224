import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from runs.management.commands._options import int_list
from runs.models import Suite
from runs.suites.selectors import suite_get
from runs.suites.services import sample_audit_leaks, samples_ensure


class Command(BaseCommand):
    help = (
        "Build every sample's workspace for the given n and check that none holds a masked function's "
        "original body or a gold number. Exits non-zero on a leak; near-copies are warnings."
    )

    def add_arguments(self, parser):
        parser.add_argument("suite")
        parser.add_argument("--n", type=int_list, default=[1], help="comma-separated n values, e.g. 1,2")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--cap", type=int, default=100, help="at most this many samples per paper and n")

    def handle(self, *args, suite, n, seed, cap, **options):
        try:
            suite = suite_get(name=suite)
        except Suite.DoesNotExist as error:
            raise CommandError(str(error)) from None
        samples = samples_ensure(suite=suite, n_values=n, seed=seed, cap=cap)
        leaks = warnings = 0
        with tempfile.TemporaryDirectory(prefix="audit-leaks-") as scratch:
            for sample in samples:
                result = sample_audit_leaks(sample=sample, scratch_dir=Path(scratch))
                for leak in result.leaks:
                    self.stderr.write(f"LEAK {sample.sample_id}: {leak}")
                for warning in result.warnings:
                    self.stdout.write(f"warning {sample.sample_id}: {warning}")
                leaks += len(result.leaks)
                warnings += len(result.warnings)
        self.stdout.write(f"Audited {len(samples)} samples (n={','.join(map(str, n))}): {leaks} leaks, {warnings} warnings")
        if leaks:
            raise CommandError(f"{leaks} leaks found")
