from django.apps import AppConfig


class RunsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "runs"
    verbose_name = "Benchmark and runs"

    def ready(self) -> None:
        # Registers the submissions' re-execution with the evaluation machinery (runs.evaluation.kinds),
        # so that every process that claims, enqueues or heals work knows both kinds.
        import runs.evaluation.transplants  # noqa: F401 - and transplants, which also plans them on attempt_reexecuted
        import runs.submissions.reexecution  # noqa: F401
