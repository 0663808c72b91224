from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from leaderboard.datasets import DatasetError, dataset_export


class Command(BaseCommand):
    help = (
        "Export a suite as a Hugging Face-style dataset into --out: samples.parquet (one row per sample with "
        "its task), attempts.parquet (one row per attempt of the public runs, with its verdicts, cost and "
        "outcome) and README.md (the dataset card). Never gold, never hidden runs."
    )

    def add_arguments(self, parser):
        parser.add_argument("--suite", required=True, help="suite name, e.g. builtin")
        parser.add_argument("--out", type=Path, default=None,
                            help="a directory that does not exist yet or is empty (default: ./dataset-<suite>)")

    def handle(self, *args, suite, out, **options):
        dest = out if out is not None else Path(f"dataset-{suite}")
        try:
            summary = dataset_export(suite=suite, dest=dest)
        except DatasetError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(
            f"Exported {summary.samples} samples and {summary.attempts} attempts of suite {suite} to {dest}: "
            + ", ".join(summary.files)
        )
