from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from runs.benchmark.workspace import CONTEXT_CONDITIONS, Context
from runs.management.commands._options import int_list
from runs.models import Suite
from runs.submissions.format_text import upload_format_markdown
from runs.suites.export import ExportError, tasks_export
from runs.suites.selectors import suite_get


class Command(BaseCommand):
    help = (
        "Export a suite's samples for offline runs into DEST: manifest.jsonl (no gold), README.md (task, "
        "answer and upload format) and samples/<sample_id>.tar.gz, each the workspace the harness builds."
    )

    def add_arguments(self, parser):
        parser.add_argument("dest", type=Path, help="a directory that does not exist yet or is empty")
        parser.add_argument("--suite", required=True, help="suite name, e.g. builtin")
        parser.add_argument("--n", type=int_list, default=[1], help="comma-separated n values, e.g. 1,2")
        parser.add_argument("--context", choices=CONTEXT_CONDITIONS, default=Context.FULL)

    def handle(self, *args, dest, suite, n, context, **options):
        try:
            summary = tasks_export(
                suite=suite_get(name=suite), n_values=n, context=context, dest=dest, upload_format=upload_format_markdown()
            )
        except (Suite.DoesNotExist, ExportError) as error:
            raise CommandError(str(error)) from None
        for note in summary.notes:
            self.stdout.write(f"note: {note}")
        self.stdout.write(f"Exported {summary.samples} samples (n={','.join(map(str, n))}, context {context}) to {dest}")
