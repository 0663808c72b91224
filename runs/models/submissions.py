"""Results produced elsewhere: uploaded submissions and the API tokens that upload them.

A submission is stored as an ordinary `Run` (agent and model from its header, `agent_config`
`{"submitted": true}`) with one `Attempt` per uploaded record, so the leaderboard and the replay
pages read it like any run; `Submission` holds what only an upload has (who sent it, the header,
moderation, verification). They refer to Run by name ("runs.Run").
"""
from django.conf import settings
from django.db import models


class Submission(models.Model):
    """One uploaded results file and the run it became.

    `verified_at` is set only by re-execution, when the harness has re-run the final patch of every
    attempt in a fresh sandbox (runs.submissions.reexecution.attempt_reexecute); nobody can set it by
    hand, not even in the admin. Hiding is the run's (`Run.hidden`, one field for runs and submissions,
    decided by runs.visibility); flagged ones stay visible with the staff's reason.
    """

    class Status(models.TextChoices):
        SCORED = "scored", "Scored against gold (reported answers only)"
        REEXECUTING = "reexecuting", "Re-execution in progress"
        VERIFIED = "verified", "Verified: every attempt re-executed"
        INCOMPLETE = "incomplete", "Re-execution incomplete (infrastructure failures or queue unavailable)"

    class Channel(models.TextChoices):
        WEB = "web", "Upload page"
        API = "api", "API"

    run = models.OneToOneField("runs.Run", on_delete=models.CASCADE, related_name="submission")
    uploader = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="submissions"
    )
    token = models.ForeignKey(
        "runs.ApiToken", on_delete=models.SET_NULL, null=True, blank=True, related_name="submissions",
        help_text="The API token that uploaded it (blank for the upload page).",
    )
    channel = models.CharField(max_length=3, choices=Channel, default=Channel.WEB)

    # The header, as given (the run repeats agent, model, context and description).
    model = models.CharField(max_length=200)
    agent = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    contact = models.CharField(max_length=200, help_text="Shown to the uploader and staff only.")

    filename = models.CharField(max_length=255, blank=True)
    file_sha256 = models.CharField(max_length=64)
    file_bytes = models.PositiveBigIntegerField()
    record_count = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    status = models.CharField(max_length=12, choices=Status, default=Status.SCORED)
    status_detail = models.TextField(blank=True)
    reexecution_requested_at = models.DateTimeField(null=True, blank=True)
    verified_at = models.DateTimeField(null=True, blank=True, help_text="Set by re-execution only.")

    flagged = models.BooleanField(default=False)
    flag_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"submission {self.pk}: {self.agent} {self.model}"

    @property
    def hidden(self) -> bool:
        """Read-only: a submission is hidden when its run is (set with runs.evaluation.services.runs_set_hidden)."""
        return self.run.hidden

    @property
    def verified(self) -> bool:
        return self.verified_at is not None


class ApiToken(models.Model):
    """A key for the submissions API. Only its SHA-256 is stored; the key is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, help_text="The key's first characters, to tell tokens apart.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.prefix}… ({self.user})"

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class TrajectorySource(models.Model):
    """The file another tool wrote (runs.agents.foreign), exactly as uploaded, kept for download
    beside the attempt's converted trajectory. Only converted trajectories have one; its size is
    bounded by the upload's own limits (runs.submissions.upload_limits), nothing more is refused here."""

    attempt = models.OneToOneField("runs.Attempt", on_delete=models.CASCADE, related_name="trajectory_source")
    filename = models.CharField(max_length=255)
    source_format = models.CharField(max_length=50)
    source_version = models.CharField(max_length=100, blank=True)
    content = models.BinaryField()
    size = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.filename} ({self.source_format} {self.source_version}) of attempt {self.attempt_id}"
