"""What failure analysis reads of an attempt, derived from its stored trajectory and re-execution
output when they are written (runs.analysis), so the system page's analyses, the attempts
explorer and the search across trajectories never parse a trajectory inside a request.

- `AttemptAnalysis`: one row per attempt whose trajectory was analysed: how many steps, the
  experiment runs (the first one, whether it crashed, the first one that printed a result and
  the steps, time and cost it took to get there) and the first error.
- `AttemptException`: every exception seen in a step's output or in the re-execution output, as
  printed and normalised (type plus a message pattern with numbers, paths and shapes masked).
- `StepText`: one step's searchable text, exactly what the public replay shows of it (gold code
  left out), with its Postgres full-text vector (GIN-indexed; empty on other databases, which
  search the text itself).

All three are rebuilt together for an attempt by runs.analysis.services.attempt_analysis_record;
`RULES_VERSION` says which rules built a row, so `manage.py analyse_attempts` redoes old ones.
"""
from django.contrib.postgres.search import SearchVectorField
from django.db import models

from runs.models.evaluation import Attempt


class AttemptAnalysis(models.Model):
    """The trajectory facts of one attempt (step numbers are 1-based, as the replay's #step-N)."""

    attempt = models.OneToOneField(Attempt, on_delete=models.CASCADE, primary_key=True, related_name="analysis")
    rules_version = models.PositiveSmallIntegerField(default=0)
    steps = models.PositiveIntegerField(default=0)
    experiment_runs = models.PositiveIntegerField(default=0, help_text="Steps that ran the paper's code (a Python program).")
    first_run_step = models.PositiveIntegerField(null=True, blank=True)
    first_run_crashed = models.BooleanField(null=True, help_text="Null when no experiment ran.")
    working_run_step = models.PositiveIntegerField(
        null=True, blank=True, help_text="The first experiment run that exited 0 and printed a result."
    )
    seconds_to_working = models.FloatField(null=True, blank=True, help_text="Step durations up to and including it.")
    cost_to_working = models.FloatField(null=True, blank=True, help_text="USD up to and including it; null if unknown.")
    first_error_step = models.PositiveIntegerField(null=True, blank=True)
    first_error_line = models.CharField(max_length=300, blank=True)
    analysed_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["first_run_crashed"], name="analysis_first_run_crashed")]

    def __str__(self):
        return f"analysis of attempt {self.attempt_id}"


class AttemptException(models.Model):
    """One exception in an attempt: in step `step`'s output, or (step null) in the re-execution output."""

    # db_index off: the (attempt, step) index below serves lookups by attempt.
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="exceptions", db_index=False)
    step = models.PositiveIntegerField(null=True, blank=True, help_text="Null: the harness's re-execution output.")
    exception_type = models.CharField(max_length=200)
    pattern = models.CharField(max_length=300, help_text="The message with numbers, paths and shapes masked.")
    message = models.CharField(max_length=500, help_text="The exception line as printed, cut.")

    class Meta:
        indexes = [
            models.Index(fields=["exception_type", "attempt"], name="exception_type_attempt"),
            models.Index(fields=["attempt", "step"], name="exception_attempt_step"),
        ]

    def __str__(self):
        return f"{self.exception_type}: {self.pattern}"


class StepText(models.Model):
    """One step's searchable text: thought, tool, arguments, observation and error text as the
    anonymous replay shows them (runs.analysis.public.step_search_text)."""

    # db_index off: the unique (attempt, step) constraint's index serves lookups by attempt.
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="step_texts", db_index=False)
    step = models.PositiveIntegerField()
    text = models.TextField()
    document = SearchVectorField(null=True, blank=True, help_text="to_tsvector('simple', text), Postgres only.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["attempt", "step"], name="unique_step_text")]
        # The GIN index on `document` is created by migration 0009 on Postgres only (SQLite has no GIN).

    def __str__(self):
        return f"attempt {self.attempt_id} step {self.step}"
