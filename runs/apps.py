from django.apps import AppConfig


class RunsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "runs"
    verbose_name = "Benchmark and runs"

    def ready(self) -> None:
        """Register the kinds of work and connect every receiver of the app's signals: here, so
        that every process (site, worker, command) has them all, and none connects at import."""
        # The submissions' re-execution and the transplants register their kinds of work when
        # imported (runs.evaluation.kinds): every process that claims, enqueues or heals work knows them.
        from runs.evaluation import transplants
        from runs.signals import attempt_reexecuted
        from runs.submissions import reexecution  # noqa: F401

        attempt_reexecuted.connect(transplants.transplants_plan_on_reexecution, dispatch_uid="runs.evaluation.transplants")
