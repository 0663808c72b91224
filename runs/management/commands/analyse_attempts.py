"""Build the failure analysis of attempts that lack it (runs.analysis.services).

    python manage.py analyse_attempts          # attempts without analysis, or analysed by older rules
    python manage.py analyse_attempts --all    # every attempt again

The write paths analyse each attempt when its trajectory or re-execution output is stored; this
backfills attempts stored before, redoes those whose analysis failed (it is logged, never
raised), and redoes everything after the rules change (RULES_VERSION).
"""
from django.core.management.base import BaseCommand

from runs.analysis.services import RULES_VERSION, attempt_analysis_record, attempts_to_analyse

BATCH = 200


class Command(BaseCommand):
    help = (
        "Record the failure analysis (trajectory facts, exceptions, searchable step text) of attempts that have none "
        f"or were analysed by rules older than version {RULES_VERSION}; --all redoes every attempt."
    )

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", dest="redo_all", help="analyse every attempt again")
        parser.add_argument("--batch", type=int, default=BATCH, help=f"attempts per batch (default {BATCH})")

    def handle(self, *args, redo_all: bool, batch: int, **options):
        batch = max(1, batch)
        # Listed first: analysing changes what the "missing or older" query would return.
        ids = list(attempts_to_analyse(redo_all=redo_all))
        self.stdout.write(f"{len(ids):,} attempts to analyse")
        analysed = 0
        for start in range(0, len(ids), batch):
            analysed += attempt_analysis_record(ids[start:start + batch])
            self.stdout.write(f"analysed {analysed:,} of {len(ids):,}")
        self.stdout.write(self.style.SUCCESS(f"done: {analysed:,} attempts analysed (rules version {RULES_VERSION})"))
