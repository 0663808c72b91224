"""`manage.py evaluation_worker [rqworker's options] [queue ...]`: django-rq's rqworker on this
deployment's evaluation queue (settings.EVALUATION_QUEUE, named after DEPLOYMENT_ID) unless queues
are named. Every evaluation worker also takes the maintenance and transplant queues
(runs.evaluation.worker.EvaluationWorker, the worker class in settings.RQ)."""

from django.conf import settings
from django_rq.management.commands.rqworker import Command as RQWorkerCommand


class Command(RQWorkerCommand):
    help = "Run an evaluation worker on this deployment's queues (rqworker's options apply)."

    def handle(self, *queues, **options):
        return super().handle(*(queues or [settings.EVALUATION_QUEUE]), **options)
