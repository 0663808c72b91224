from django.core.management.base import BaseCommand

from runs.management.commands.build_environment import prepare


class Command(BaseCommand):
    help = (
        "Fetch a suite's declared data files into DATA_CACHE_ROOT (one file per sha256): copied from the suite "
        "or downloaded, size and sha256 checked, renamed into place only when they match. Cached files are "
        "left alone. build_environment does this too."
    )

    def add_arguments(self, parser):
        parser.add_argument("suite", help="a suite directory in our format, or the name of an imported suite")
        parser.add_argument("--paper", default=None, help="only this paper (its id)")

    def handle(self, *args, suite, paper, **options):
        prepare(self, suite=suite, paper=paper, environment=False, data=True)
