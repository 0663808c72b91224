"""`python manage.py supervised_worker [evaluation_worker's options] [queue ...]`: an evaluation
worker (`manage.py evaluation_worker`, with these arguments) that is started again whenever it
dies: the Procfile's `worker`. runs.evaluation.supervisor says what the supervision does."""
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from runs.evaluation.supervisor import supervise


class Command(BaseCommand):
    help = (
        "Run `manage.py evaluation_worker` with these arguments and start it again whenever it exits "
        "(SIGKILLed, Redis lost), until this command gets SIGTERM or SIGINT, which it forwards to the "
        "worker once. Work horses that outlive a dead worker are killed before the next one starts."
    )

    def run_from_argv(self, argv):
        # Every argument is the worker's: Django's parser would refuse rqworker's options.
        arguments = argv[2:]
        if {"-h", "--help"} & set(arguments):
            self.stdout.write(f"usage: manage.py supervised_worker [evaluation_worker options] [queue ...]\n\n{self.help}\n")
            sys.exit(0)
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        sys.exit(supervise([sys.executable, manage, "evaluation_worker", *arguments]))
