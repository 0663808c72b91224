"""What the leaderboard stores of its own: verifier selections, and the numbers leaderboard.standings keeps
of each system (its standings by n and by function, its page's samples, runs and near misses)."""
from django.db import models

from runs.models import Attempt, Function, Run, Sample


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


class SystemStanding(models.Model):
    """A system's numbers on the leaderboard, maintained by leaderboard.standings: requests read
    them, never compute them.

    Every change to the system's attempts, runs or verifier selections bumps `changes` (in the
    transaction of the change); a refresh computes the numbers from the attempts and stores the
    `changes` it started from in `refreshed_changes`. While `changes` is ahead the numbers shown are
    those of the last refresh and are marked as being updated.
    """

    slug = models.CharField(max_length=12, unique=True)
    suite = models.CharField(max_length=200)
    agent = models.CharField(max_length=100)
    model = models.CharField(max_length=500, blank=True)
    config_json = models.TextField(help_text="The agent configuration as canonical JSON.")
    context = models.CharField(max_length=20)
    run_ids = models.JSONField(default=list, help_text="Its public runs when last refreshed.")
    k = models.PositiveSmallIntegerField(default=1)
    date = models.DateTimeField(null=True, blank=True, help_text="When its last finished run finished.")
    unfinished_runs = models.PositiveIntegerField(default=0)
    changes = models.PositiveBigIntegerField(default=1)
    refreshed_changes = models.PositiveBigIntegerField(default=0)
    refreshed_at = models.DateTimeField(null=True, blank=True)
    curve_fits = models.JSONField(
        default=dict, blank=True,
        help_text='Its difficulty curve per counting rule ("verified": re-executed attempts only, "all": every counted '
                  "attempt): leaderboard.curves.CurveFit.as_dict(); {} until a refresh computes it.",
    )

    class Meta:
        ordering = ["slug"]

    def __str__(self):
        return f"{self.model or 'baseline'} · {self.agent} ({self.slug})"

    @property
    def stale(self) -> bool:
        return self.changes > self.refreshed_changes


class SystemStandingByN(models.Model):
    """A system's numbers at one n, over all counted attempts or the re-executed ones only
    (`verified_only`, the leaderboard's filter): leaderboard.metrics.NMetrics as stored, with the
    sums the totals over several n are made of."""

    standing = models.ForeignKey(SystemStanding, on_delete=models.CASCADE, related_name="by_n")
    verified_only = models.BooleanField()
    n = models.PositiveSmallIntegerField()
    metrics = models.JSONField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["standing", "verified_only", "n"], name="unique_standing_per_variant_and_n")
        ]

    def __str__(self):
        return f"{self.standing} at n={self.n}{' (verified only)' if self.verified_only else ''}"


class SystemFunctionStanding(models.Model):
    """A system's counted attempts at the samples masking one function, at one n, how many passed,
    and what they say of that function (per counting rule, like SystemStandingByN): the per-function
    difficulty table sums these.

    Every attempt is exactly one of `right`, `wrong` or `undecided` about the function
    (leaderboard.computation._function_counts): a pass says it was right; a failure at n = 1
    that it was wrong; a failure at n >= 2 what its transplant said (right or wrong alone against
    gold), or nothing when there is no such verdict."""

    standing = models.ForeignKey(SystemStanding, on_delete=models.CASCADE, related_name="functions")
    verified_only = models.BooleanField()
    function = models.ForeignKey(Function, on_delete=models.CASCADE, related_name="+")
    n = models.PositiveSmallIntegerField()
    attempts = models.PositiveIntegerField()
    passes = models.PositiveIntegerField()
    right = models.PositiveIntegerField(default=0)
    wrong = models.PositiveIntegerField(default=0)
    undecided = models.PositiveIntegerField(
        default=0, help_text="Failed at n >= 2 without a right or wrong transplant verdict for this function: left out of its rate."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["standing", "verified_only", "function", "n"], name="unique_function_standing_per_variant_and_n"
            )
        ]
        indexes = [models.Index(fields=["verified_only", "function"], name="function_standing_lookup")]


class SystemSampleStanding(models.Model):
    """One sample of a system as its page lists it (leaderboard.selectors.system_samples_page), as of
    its last refresh: its attempts that ended, failed on the infrastructure or had out-of-scope edits
    dropped, those that count and pass under either counting rule, and which attempt each verifier
    chose. The sample's sort columns are copied here so that a page of them is an index range
    (LIMIT/OFFSET over `system_sample_order`), whatever the number of attempts behind them."""

    standing = models.ForeignKey(SystemStanding, on_delete=models.CASCADE, related_name="samples")
    sample = models.ForeignKey(Sample, on_delete=models.CASCADE, related_name="+")
    n = models.PositiveSmallIntegerField()
    paper = models.CharField(max_length=200, help_text="The sample's paper id.")
    sample_name = models.CharField(max_length=300, help_text="The sample's sample_id.")
    ended = models.PositiveIntegerField(help_text="Attempts done or error: what the attempts explorer lists.")
    errors = models.PositiveIntegerField()
    out_of_scope = models.PositiveIntegerField()
    counted = models.PositiveIntegerField(help_text="Counted attempts, unverified ones included (?unverified=1).")
    passes = models.PositiveIntegerField()
    counted_verified = models.PositiveIntegerField(help_text="Counted attempts under the default rule: re-executed only.")
    passes_verified = models.PositiveIntegerField()
    choices = models.JSONField(
        default=dict, help_text="Verifier label -> [chosen attempt pk, its run pk], the newest run's choice."
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["standing", "sample"], name="unique_sample_standing")]
        indexes = [models.Index(fields=["standing", "n", "paper", "sample_name", "sample"], name="system_sample_order")]


class SystemRunStanding(models.Model):
    """A system's attempts of one of its runs at one n, as of its last refresh: how many have each
    status, and the counts the system page adds up over the runs that are public now (so that a run
    hidden since is left out at once, whatever the refresh)."""

    standing = models.ForeignKey(SystemStanding, on_delete=models.CASCADE, related_name="runs")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    n = models.PositiveSmallIntegerField()
    by_status = models.JSONField(help_text="Attempt status -> how many.")
    not_reexecuted = models.PositiveIntegerField(help_text="Done attempts the harness has not re-executed.")
    out_of_scope = models.PositiveIntegerField()
    near_misses = models.PositiveIntegerField(help_text="Near misses counting unverified attempts too.")
    near_misses_verified = models.PositiveIntegerField(help_text="Near misses among re-executed attempts.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["standing", "run", "n"], name="unique_run_standing_per_n")]


class SystemNearMiss(models.Model):
    """One of a system's nearest near misses at one n under one counting rule (at most
    leaderboard.rules.NEAR_MISS_LIMIT of each, nearest first), as of its last refresh: the page
    reads the nearest of these, never its attempts."""

    standing = models.ForeignKey(SystemStanding, on_delete=models.CASCADE, related_name="near_misses")
    verified_only = models.BooleanField()
    n = models.PositiveSmallIntegerField()
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    index = models.PositiveSmallIntegerField(help_text="The attempt's index among its run's attempts at the sample.")
    sample_name = models.CharField(max_length=300)
    tolerance_ratio = models.FloatField()
    verified = models.BooleanField(help_text="Re-executed by the harness.")

    class Meta:
        indexes = [models.Index(fields=["standing", "verified_only", "tolerance_ratio"], name="system_near_miss_order")]


class SystemFailureStanding(models.Model):
    """A system's failure analysis and error taxonomy at one n under one counting rule, as of its last
    refresh (leaderboard.failure_analysis: what its page builds them from, so that a view reads no
    attempt): its counted and failed attempts by status and outcome, its crash and recovery figures,
    and how many of its attempts raised exceptions (the patterns kept are SystemExceptionStanding's)."""

    standing = models.ForeignKey(SystemStanding, on_delete=models.CASCADE, related_name="failures")
    verified_only = models.BooleanField()
    n = models.PositiveSmallIntegerField()
    outcomes = models.JSONField(help_text="[status, shown outcome, count] of its counted attempts and errors.")
    trajectory = models.JSONField(null=True, help_text="Crash, recovery and the way to a working run (None: no counted attempt).")
    exception_attempts = models.PositiveIntegerField(default=0)
    exception_occurrences = models.PositiveIntegerField(default=0)
    patterns = models.PositiveIntegerField(default=0, help_text="Distinct (exception type, pattern) at this n.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["standing", "verified_only", "n"], name="unique_failure_standing_per_variant_and_n")
        ]


class SystemExceptionStanding(models.Model):
    """One of a system's most frequent exception patterns at one n under one counting rule, as of its
    last refresh, with its newest example attempts (each [attempt pk, step, message, run pk])."""

    standing = models.ForeignKey(SystemStanding, on_delete=models.CASCADE, related_name="exception_patterns")
    verified_only = models.BooleanField()
    n = models.PositiveSmallIntegerField()
    exception_type = models.CharField(max_length=200)
    pattern = models.CharField(max_length=300)
    attempts = models.PositiveIntegerField()
    occurrences = models.PositiveIntegerField()
    examples = models.JSONField(default=list)

    class Meta:
        indexes = [models.Index(fields=["standing", "verified_only", "n"], name="system_exception_lookup")]
