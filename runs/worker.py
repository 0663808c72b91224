"""The RQ worker class for evaluation workers.

RQ forks a fresh work horse per job, and the horse imports the job's module if the parent has not:
for attempts that means the agents, the LLM SDKs and the harness, over a second per job. This
class's module imports them once in the parent, so every horse starts warm:

    python manage.py rqworker --worker-class runs.worker.EvaluationWorker

(or settings `RQ = {"WORKER_CLASS": "runs.worker.EvaluationWorker"}`, which makes it the default).
"""
import logging

from django.db import connection
from rq import Worker

import runs.jobs  # noqa: F401 - preloaded before the fork, see above
from runs.attempts import leftovers_sweep

logger = logging.getLogger(__name__)


class EvaluationWorker(Worker):
    """rq.Worker whose work horses inherit the attempt code already imported, and which sweeps the
    leftovers of dead tries (containers, cgroups, workspaces) when it starts."""

    def bootstrap(self, *args, **kwargs):
        super().bootstrap(*args, **kwargs)
        try:
            leftovers_sweep()
        except Exception:  # noqa: BLE001 - a failed sweep must not keep the worker from working
            logger.exception("sweeping leftovers at worker start failed")
        finally:
            connection.close()  # forked work horses must not share this process's connection
