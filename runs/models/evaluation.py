"""Evaluation: runs (an agent on a suite's samples) and their attempts (one sample, one try at it)."""

from django.conf import settings
from django.db import models

from runs.agents.settings import AGENT_CONFIG_VERSION
from runs.benchmark import workspace
from runs.models.suites import Sample, Suite


class Run(models.Model):
    """One evaluation: an agent (and model) on a suite's samples for some n, k attempts each.

    Its status is not stored: it follows from its attempts' statuses (see `Run.status_from_counts`
    and runs.evaluation.selectors.run_progress), so it can never disagree with them.
    """

    class Context(models.TextChoices):
        """How much of the paper the agent sees (runs.benchmark.workspace.Context, labelled)."""

        NONE = workspace.Context.NONE, "No paper"
        FULL = workspace.Context.FULL, "Full paper"
        ORACLE = workspace.Context.ORACLE, "Oracle snippets"

    class Status(models.TextChoices):
        """A run's status, never stored: `status_from_counts` derives it from its attempts'."""

        QUEUED = "queued"
        RUNNING = "running"
        CANCELLED = "cancelled"
        FAILED = "failed"  # ended, some attempts without a valid result (status error)
        FINISHED = "finished"

    suite = models.ForeignKey(Suite, on_delete=models.PROTECT, related_name="runs")
    agent = models.CharField(max_length=100, help_text="Registered agent name: react, agentless, gold, noop, mutant.")
    agent_config = models.JSONField(default=dict, blank=True, help_text="Keyword settings for agent_from_name.")
    # The shape agent_config was stored in: the worker migrates an older one on reading it
    # (runs.agents.settings). Runs stored before the version was recorded hold version 1.
    agent_config_version = models.PositiveSmallIntegerField(
        default=AGENT_CONFIG_VERSION, help_text="Version of agent_config's shape (runs.agents.settings)."
    )
    model = models.CharField(max_length=500, blank=True, help_text="Model spec (provider:model); blank for baselines.")
    context = models.CharField(max_length=10, choices=Context, default=Context.FULL)
    n_values = models.JSONField(default=list, help_text="Numbers of masked functions, e.g. [1, 2].")
    sample_seed = models.IntegerField(default=0)
    sample_cap = models.PositiveIntegerField(default=100, help_text="At most this many samples per paper and n.")
    attempts_per_sample = models.PositiveSmallIntegerField(default=1, help_text="k of pass@k.")
    max_steps = models.PositiveIntegerField(default=50)
    max_seconds = models.FloatField(default=1800.0)
    max_cost = models.FloatField(default=1.0, help_text="USD per attempt.")
    sandbox_backend = models.CharField(max_length=20)
    description = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="evaluation_runs",
        help_text="Its owner (a submission's uploader); blank for runs started from the command line, which belong to staff.",
    )
    hidden = models.BooleanField(
        default=False, help_text="Hidden runs (and their submission) are seen by their owner and staff only (runs.visibility)."
    )
    transplants = models.BooleanField(
        default=True,
        help_text="Judge each masked function of a failed attempt at n >= 2 alone against gold (runs.evaluation.transplants).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True, help_text="When the last attempt ended.")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["hidden", "created_at"], name="run_hidden_created")]
        # Staff start runs from the site's run form (/runs/new/); so does anyone staff grant this in the admin.
        permissions = [("start_run", "Can start evaluation runs from the site")]

    def __str__(self):
        model = f" {self.model}" if self.model else ""
        return f"run {self.pk}: {self.agent}{model} on {self.suite.name} n={self.n_values} k={self.attempts_per_sample}"

    @staticmethod
    def status_from_counts(counts: dict[str, int], *, cancelled: bool) -> str:
        """The run's status (a Run.Status) from its attempts' counts by Attempt.Status."""
        queued, running = counts.get(Attempt.Status.QUEUED, 0), counts.get(Attempt.Status.RUNNING, 0)
        if running:
            return Run.Status.RUNNING
        if cancelled and not queued:
            return Run.Status.CANCELLED
        if queued:
            started = counts.get(Attempt.Status.DONE, 0) + counts.get(Attempt.Status.ERROR, 0)
            return Run.Status.RUNNING if started else Run.Status.QUEUED
        return Run.Status.FAILED if counts.get(Attempt.Status.ERROR, 0) else Run.Status.FINISHED


class ClaimedWork(models.Model):
    """The bookkeeping of work a job claims (runs.evaluation.claims): every claim increments `tries`,
    which fences later writes (a worker that lost its claim can no longer write); `infra_history`
    keeps each infrastructure failure."""

    tries = models.PositiveIntegerField(default=0)
    infra_failures = models.PositiveSmallIntegerField(default=0)
    infra_history = models.JSONField(default=list, blank=True)
    job_id = models.CharField(max_length=100, blank=True, help_text="RQ job of the current or last try.")
    claimed_by = models.CharField(max_length=200, blank=True, help_text="host:pid of the process executing it.")
    claimed_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The healing (runs.evaluation.recovery.attempts_requeue_lost) re-queues waiting work whose job
    # Redis lost; work never handed to RQ (an in-process run) has no queued_at and is left alone.
    queued_at = models.DateTimeField(null=True, blank=True, help_text="When its current job was last put on the queue.")
    job_lost_at = models.DateTimeField(
        null=True, blank=True, help_text="When the healing queued it again because Redis had lost its job; cleared by its next claim."
    )

    class Meta:
        abstract = True


class Attempt(ClaimedWork):
    """One try of an agent on one sample (index 0..k-1), and both of its verdicts.

    `passed` is the leaderboard's verdict: the reported answer passes AND the harness's own
    re-execution of the final code passes. `mismatch` flags reported numbers the code does not
    produce. Status `error` means no valid result (infrastructure or model provider failure); such
    attempts never count for or against the model.
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        ERROR = "error"
        CANCELLED = "cancelled"

    class FailureLabel(models.TextChoices):
        """Why an attempt failed, as the harness decided when it ended (runs.evaluation.verdicts)."""

        INFRASTRUCTURE = "infrastructure", "Sandbox or worker failure"
        MODEL_PROVIDER = "model_provider", "Model provider error"
        # The paper's environment or data files are not prepared on this worker: nothing ran, not retried.
        NOT_PREPARED = "not_prepared", "Environment or data not prepared"
        BUDGET_EXHAUSTED = "budget_exhausted", "Budget exhausted"
        NO_ANSWER = "no_answer", "No answer"
        UNPARSEABLE_ANSWER = "unparseable_answer", "Unparseable answer"
        WRONG_ANSWER = "wrong_answer", "Wrong answer"

    class Outcome(models.TextChoices):
        """The outcome of a done attempt, for failure analysis (runs.analysis.outcomes decides it, on
        every write of a verdict): the failure labels, refined by what re-execution found."""

        PASSED = "passed", "Passed"
        WRONG_ANSWER = "wrong_answer", "Wrong answer"
        NO_ANSWER = "no_answer", "No answer"
        UNPARSEABLE_ANSWER = "unparseable_answer", "Unparseable answer"
        REEXECUTION_FAILED = "reexecution_failed", "Crashed or timed out in re-execution"
        BUDGET_EXHAUSTED = "budget_exhausted", "Step, time or cost budget exhausted"
        OUT_OF_SCOPE = "out_of_scope", "Edits outside the task dropped"
        HELD_OUT_FAILED = "held_out_failed", "Failed the held-out check"
        GOLD_LITERAL = "gold_literal", "Hard-codes a gold number"
        PATCH_TOO_LARGE = "patch_too_large", "Final patch over the limits"
        MODEL_PROVIDER = "model_provider", "Model provider error"
        NOT_PREPARED = "not_prepared", "Environment or data not prepared"
        INFRASTRUCTURE = "infrastructure", "Sandbox or worker failure"

    class Diagnosis(models.TextChoices):
        """Which of the masked functions broke a failed attempt at n >= 2 (runs.evaluation.transplants),
        once every transplant of it is settled; blank when none were made."""

        INTERACTION = "interaction", "Interaction failure: every function right alone"
        ONE_WRONG = "one_wrong", "One function wrong"
        SEVERAL_WRONG = "several_wrong", "Several functions wrong"
        NOT_DECIDED = "not_decided", "Not decided"
        PENDING = "pending", "Being judged"

    # The members under their older, shorter names (Attempt.DONE, Attempt.WRONG_ANSWER, ...), which
    # hundreds of lines use; an outcome and a failure label of one name are the same string.
    QUEUED, RUNNING, DONE, ERROR, CANCELLED = Status.QUEUED, Status.RUNNING, Status.DONE, Status.ERROR, Status.CANCELLED
    INFRASTRUCTURE, MODEL_PROVIDER, NOT_PREPARED = FailureLabel.INFRASTRUCTURE, FailureLabel.MODEL_PROVIDER, FailureLabel.NOT_PREPARED
    BUDGET_EXHAUSTED, NO_ANSWER = FailureLabel.BUDGET_EXHAUSTED, FailureLabel.NO_ANSWER
    UNPARSEABLE_ANSWER, WRONG_ANSWER = FailureLabel.UNPARSEABLE_ANSWER, FailureLabel.WRONG_ANSWER
    PASSED, REEXECUTION_FAILED, OUT_OF_SCOPE = Outcome.PASSED, Outcome.REEXECUTION_FAILED, Outcome.OUT_OF_SCOPE
    HELD_OUT_FAILED, GOLD_LITERAL, PATCH_TOO_LARGE = Outcome.HELD_OUT_FAILED, Outcome.GOLD_LITERAL, Outcome.PATCH_TOO_LARGE
    INTERACTION, ONE_WRONG, SEVERAL_WRONG = Diagnosis.INTERACTION, Diagnosis.ONE_WRONG, Diagnosis.SEVERAL_WRONG
    NOT_DECIDED, PENDING = Diagnosis.NOT_DECIDED, Diagnosis.PENDING

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts")
    sample = models.ForeignKey(Sample, on_delete=models.PROTECT, related_name="attempts")
    index = models.PositiveSmallIntegerField(help_text="0..k-1 among the run's attempts at this sample.")
    status = models.CharField(max_length=10, choices=Status, default=Status.QUEUED)
    # Our agents' runs.agents.base.ExitStatus; converted trajectories of other tools keep theirs.
    exit_status = models.CharField(max_length=20, blank=True, help_text="How the agent run ended.")
    exit_message = models.TextField(blank=True)
    failure_label = models.CharField(max_length=20, choices=FailureLabel, blank=True, help_text="Blank when passed.")
    failure_detail = models.TextField(blank=True)

    final_answer_raw = models.TextField(null=True, blank=True)
    parsed_answer = models.JSONField(null=True, blank=True)
    reported_score = models.JSONField(null=True, blank=True, help_text="SampleScore of the reported answer.")
    reported_passed = models.BooleanField(null=True)
    reexecution_score = models.JSONField(null=True, blank=True, help_text="SampleScore of what the re-run printed.")
    reexecution_passed = models.BooleanField(null=True)
    reexecution_error = models.TextField(blank=True, help_text="Why the re-execution could not run the code.")
    reexecution_output = models.TextField(blank=True, help_text="The re-run experiments' output, bounded.")
    out_of_scope_edits = models.JSONField(
        default=list, blank=True,
        help_text="What re-execution dropped from the final patch as outside the task: [{path, reason, diff}].",
    )
    # The held-out check (runs.suites: HeldOutCheck): None where the suite has none for the sample or
    # the code was not re-executed. Only the verdict is ever shown to anyone but staff; the variants'
    # own scores (`held_out_scores`) are for staff, in the admin.
    held_out_passed = models.BooleanField(null=True, help_text="Every hidden variant of the sample's experiments passed.")
    held_out_scores = models.JSONField(
        null=True, blank=True, help_text="Staff only: each hidden variant's score, keyed by experiment and variant."
    )
    # Numeric literals of the agent's implementations that lie within tolerance of one of the
    # sample's gold numbers (suites without held-out checks): [{path, function, literal, line}].
    gold_literals = models.JSONField(default=list, blank=True, help_text="Hard-coded gold numbers found in the implementations.")
    passed = models.BooleanField(default=False)
    outcome = models.CharField(
        max_length=20, choices=Outcome, blank=True,
        help_text="Why a done attempt passed or failed (runs.analysis.outcomes); blank until it is scored.",
    )
    mismatch = models.BooleanField(default=False, help_text="Reported numbers pass, the re-executed code does not.")
    tolerance_ratio = models.FloatField(
        null=True,
        blank=True,
        help_text="The verdict's largest number error in units of that number's tolerance (<= 1 passes); "
        "null when no tolerance would make it pass (missing, unparseable or crashed) or not scored.",
    )

    function_diagnosis = models.CharField(max_length=20, choices=Diagnosis, blank=True)

    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost = models.FloatField(null=True, blank=True, help_text="USD; null when a price was unknown.")
    agent_seconds = models.FloatField(null=True, blank=True)
    # Seconds its sandboxes (the agent's and the re-execution's) held GPUs, times the GPUs held.
    gpu_seconds = models.FloatField(null=True, blank=True, help_text="GPU-seconds its sandboxes held (seconds x GPUs).")
    reexecution_seconds = models.FloatField(null=True, blank=True)
    harness_seconds = models.FloatField(null=True, blank=True, help_text="Workspaces, sandboxes, patching, scoring.")
    experiment_seconds = models.FloatField(null=True, blank=True, help_text="The re-execution's experiment commands.")
    timings = models.JSONField(default=dict, blank=True)
    trajectory = models.JSONField(null=True, blank=True)
    final_patch = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "sample", "index"], name="unique_attempt_per_run_sample_index")
        ]
        indexes = [
            models.Index(fields=["run", "status"], name="attempt_run_status"),
            models.Index(fields=["run", "passed"], name="attempt_run_passed"),
            models.Index(fields=["status", "heartbeat_at"], name="attempt_status_heartbeat"),
            models.Index(fields=["outcome", "id"], name="attempt_outcome"),
        ]
        ordering = ["run", "sample", "index"]

    def __str__(self):
        return f"attempt {self.pk} (#{self.index}, {self.status})"

    @property
    def total_seconds(self) -> float | None:
        if self.claimed_at and self.finished_at:
            return (self.finished_at - self.claimed_at).total_seconds()
        return None


class Transplant(ClaimedWork):
    """One masked function of a failed attempt at n >= 2 judged alone: the sample's experiments
    re-run with the agent's implementation of `function` and the gold bodies of the other masked
    functions (runs.evaluation.transplants). Claimed, fenced and retried like an attempt."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        GIVEN_UP = "given_up", "Given up (infrastructure)"

    class Verdict(models.TextChoices):
        RIGHT = "right", "Right alone"
        WRONG = "wrong", "Wrong"
        NOT_DECIDABLE = "not_decidable", "Not decidable"

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="transplants")
    function = models.ForeignKey("runs.Function", on_delete=models.CASCADE, related_name="transplants")  # a dropped function leaves no verdict
    status = models.CharField(max_length=10, choices=Status, default=Status.QUEUED)
    verdict = models.CharField(max_length=15, choices=Verdict, blank=True)
    reason = models.TextField(blank=True, help_text="Why: the experiments that failed, or what kept it from a verdict.")
    score = models.JSONField(null=True, blank=True, help_text="SampleScore of what the transplant run printed.")
    experiment_seconds = models.FloatField(null=True, blank=True)
    sandbox_seconds = models.FloatField(null=True, blank=True, help_text="Workspace, sandbox and experiments: counted apart from the attempt's.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["attempt", "function"], name="unique_transplant_per_function")]
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="transplant_status_heartbeat")]
        ordering = ["attempt", "function__func_id"]

    def __str__(self):
        return f"transplant {self.pk} (attempt {self.attempt_id}, {self.status})"
