"""`python manage.py import_suite PATH`: import a suite in our format, then draw its samples."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from runs.benchmark.sampling import DEFAULT_CAP
from runs.models import Sample
from runs.suites.importers.common import SuiteFormatError
from runs.suites.importers.native import import_native_suite
from runs.suites.services import samples_ensure


def _n_values(text: str) -> list[int]:
    try:
        values = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise CommandError(f"--samples {text!r}: expected comma-separated numbers of masked functions, e.g. 1,2") from None
    if any(n < 0 for n in values):
        raise CommandError(f"--samples {text!r}: n must not be negative")
    return values


class Command(BaseCommand):
    help = "Import (or re-import) a suite directory in our format and make sure its samples exist."

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path, help="Suite directory (holding suite.json).")
        parser.add_argument("--samples", default="1,2",
                            help='Comma-separated n values to draw samples for (default "1,2"; "" for none).')
        parser.add_argument("--seed", type=int, default=0, help="Seed of the sample draw (default 0).")
        parser.add_argument("--cap", type=int, default=DEFAULT_CAP,
                            help=f"At most this many samples per paper and n (default {DEFAULT_CAP}).")

    def handle(self, *args, path: Path, samples: str, seed: int, cap: int, **options):
        n_values = _n_values(samples)
        if cap < 1:
            raise CommandError(f"--cap {cap}: must be at least 1")
        try:
            suite, report = import_native_suite(path)
        except SuiteFormatError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(report.render())
        if not n_values:
            return
        samples_ensure(suite=suite, n_values=n_values, seed=seed, cap=cap)
        self.stdout.write(f"Samples of suite {suite.name} (seed {seed}, cap {cap} per paper and n):")
        for n in n_values:
            count = Sample.objects.filter(paper__suite=suite, n=n).count()
            self.stdout.write(f"  n={n}: {count}")
