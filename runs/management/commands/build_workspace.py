from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from runs.benchmark.workspace import CONTEXT_CONDITIONS, Context, WorkspaceError
from runs.suites.selectors import SampleNotFound, sample_get
from runs.suites.services import workspace_build


class Command(BaseCommand):
    help = "Write the leak-free workspace of a sample (masked code, paper, refsol.sh, task) into DEST."

    def add_arguments(self, parser):
        parser.add_argument("sample_id", help="for example adam-bias-correction_0,3")
        parser.add_argument("dest", type=Path, help="a directory that does not exist yet or is empty")
        parser.add_argument("--suite", help="suite name, needed only when two suites have this sample id")
        parser.add_argument("--context", choices=CONTEXT_CONDITIONS, default=Context.FULL)

    def handle(self, *args, sample_id, dest, suite, context, **options):
        try:
            sample = sample_get(sample_id=sample_id, suite=suite)
            manifest = workspace_build(sample=sample, dest=dest, context=context)
        except (SampleNotFound, WorkspaceError) as error:
            raise CommandError(str(error)) from None
        for note in manifest.notes:
            self.stdout.write(f"note: {note}")
        missing = ", ".join(f"{f['file']}:{f['name']}" for f in manifest.missing_functions) or "none"
        self.stdout.write(f"Wrote {len(manifest.files)} files to {dest}; masked: {missing}")
