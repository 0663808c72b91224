from django.core.management.base import BaseCommand, CommandError

from runs.models import Suite
from runs.suites.environments import NotPrepared, PreparationError, paper_prepare, suite_needs
from runs.suites.importers.common import SuiteFormatError


class Command(BaseCommand):
    help = (
        "Prepare a suite's papers on this machine: build each declared environment (a venv per declared "
        "content under ENVIRONMENTS_ROOT, made with /usr/bin/python3, the requirements pip-installed with this "
        "machine's pip configuration; Debian packages installed on the host) and fetch each declared data file "
        "into DATA_CACHE_ROOT, checked against its size and sha256. What is done already is left alone. Workers "
        "refuse attempts of papers not prepared here."
    )

    def add_arguments(self, parser):
        parser.add_argument("suite", help="a suite directory in our format, or the name of an imported suite")
        parser.add_argument("--paper", default=None, help="only this paper (its id)")
        parser.add_argument("--no-data", action="store_true", help="build the environments only")

    def handle(self, *args, suite, paper, no_data, **options):
        prepare(self, suite=suite, paper=paper, environment=True, data=not no_data)


def prepare(command: BaseCommand, *, suite: str, paper: str | None, environment: bool, data: bool) -> None:
    """The work of build_environment and fetch_data, with their errors as CommandErrors."""
    try:
        papers = suite_needs(suite=suite, paper_id=paper)
        for needs in papers:
            paper_prepare(needs, log=command.stdout.write, environment=environment, data=data)
    except (Suite.DoesNotExist, SuiteFormatError, NotPrepared, PreparationError) as error:
        raise CommandError(str(error)) from None
    what = "environments and data" if environment and data else "environments" if environment else "data"
    name = papers[0].suite_name if papers else suite
    command.stdout.write(command.style.SUCCESS(f"Suite {name}: the {what} of {len(papers)} paper(s) are ready on this machine"))
