"""The RQ worker class for evaluation workers.

RQ forks a fresh work horse per job, and the horse imports the job's module if the parent has not:
for attempts that means the agents, the LLM SDKs and the harness, over a second per job. This
class's module imports them once in the parent, so every horse starts warm:

    python manage.py rqworker --worker-class runs.worker.EvaluationWorker

(or settings `RQ = {"WORKER_CLASS": "runs.worker.EvaluationWorker"}`, which makes it the default).
"""
from rq import Worker

import runs.jobs  # noqa: F401 - preloaded before the fork, see above


class EvaluationWorker(Worker):
    """rq.Worker whose work horses inherit the attempt code already imported."""
