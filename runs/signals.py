"""What runs announce to the apps that read them (the leaderboard keeps its numbers up to date by it).

`results_changed` is sent with `run_ids` whenever something a run's numbers are made of may have
changed: an attempt settled (done, errored or re-executed), attempts uploaded or queued again, a
run hidden, shown, finished or taken up again. Senders call `results_changed_send`; receivers get
it inside the sender's transaction, so what they write commits or rolls back with the change.
"""
from collections.abc import Iterable

from django.dispatch import Signal

results_changed = Signal()  # keyword argument: run_ids (a list of Run primary keys)
# Sent with `attempt_id` once an attempt's re-execution verdict is written (a run's attempt settled, a
# submitted attempt re-executed), and `enqueue`: False when the work is done in-process (run_eval
# --sync), which then does what follows itself. The transplants of a failed one at n >= 2 are planned by it.
attempt_reexecuted = Signal()
# Sent by every long-running evaluation worker's self-healing round (runs.evaluation.worker): a chance
# for derived data to notice work left undone (a refresh job lost with Redis, say) and queue it again.
upkeep_due = Signal()


def results_changed_send(*, run_ids: Iterable[int]) -> None:
    run_ids = sorted({int(pk) for pk in run_ids})
    if run_ids:
        results_changed.send(sender=None, run_ids=run_ids)
