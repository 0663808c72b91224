from django.core.management.base import BaseCommand

from leaderboard.standings import default_view_build, standings_refresh


class Command(BaseCommand):
    help = (
        "Compute the leaderboard's stored numbers of every system changed since they were last computed "
        "(what the refresh job does after each change), or of every system with --all: after an upgrade, "
        "or after data were written behind the application's back."
    )

    def add_arguments(self, parser):
        parser.add_argument("--all", action="store_true", dest="everything", help="every system, changed or not")

    def handle(self, *args, everything, **options):
        refreshed = standings_refresh(everything=everything)
        if refreshed:
            default_view_build()
        self.stdout.write(f"{refreshed} system(s) refreshed")
