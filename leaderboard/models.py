"""What the leaderboard stores of its own: verifier selections. Everything else it reads from runs."""
from django.db import models

from runs.models import Attempt, Run, Sample


class VerifierSelection(models.Model):
    """The attempt a verifier chose among a run's k attempts at one sample.

    `verifier` is "oracle" (a passing attempt whenever there is one: the upper bound, Pass@k) or
    the model spec of a model-as-verifier. Verifier-selected Pass@1 is the share of samples whose
    chosen attempt passed.
    """

    ORACLE = "oracle"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="verifier_selections")
    sample = models.ForeignKey(Sample, on_delete=models.CASCADE, related_name="verifier_selections")
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="verifier_selections")
    verifier = models.CharField(max_length=500, help_text='"oracle" or a model spec (provider:model).')
    candidates = models.PositiveSmallIntegerField(help_text="How many done attempts it chose among.")
    reasoning = models.TextField(blank=True)
    fallback = models.BooleanField(default=False, help_text="No choice could be read from the model; candidate 1 was taken.")
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost = models.FloatField(null=True, blank=True, help_text="USD; null when a price was unknown.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "sample", "verifier"], name="unique_selection_per_run_sample_verifier")
        ]
        ordering = ["run", "sample", "verifier"]

    def __str__(self):
        return f"{self.verifier} chose attempt {self.attempt_id} for run {self.run_id} sample {self.sample_id}"
