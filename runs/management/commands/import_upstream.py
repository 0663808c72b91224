"""`python manage.py import_upstream --metadata DIR [--code DIR]`: import upstream AutoExperiment metadata."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from runs.suites.importers.common import SuiteFormatError
from runs.suites.importers.upstream import import_upstream


class Command(BaseCommand):
    help = (
        "Import the upstream release's metadata (mlrc_*.csv, *.jsonl, each paper's folder P/ with "
        "paper.txt) as a suite. Paper P's gold code is expected at CODE/P/, else at METADATA/P/code/ "
        "(upstream's layout, the default when --code is not given); papers without it are imported "
        "without code and their functions, experiments and samples are skipped (see the report)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--metadata", type=Path, required=True, help="Directory holding mlrc_main.csv etc.")
        parser.add_argument(
            "--code", type=Path, default=None,
            help="Directory holding one checkout per paper id (default: METADATA, upstream's P/code/ layout).",
        )
        parser.add_argument("--suite", default="upstream", help='Suite name (default "upstream").')

    def handle(self, *args, metadata: Path, code: Path | None, suite: str, **options):
        try:
            imported, report = import_upstream(metadata_dir=metadata, code_dir=code or metadata, suite_name=suite)
        except SuiteFormatError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(report.render())
        self.stdout.write(f"Suite {imported.name}: {imported.papers.count()} paper(s).")
