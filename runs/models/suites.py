"""The benchmark: suites, papers, maskable functions, experiments and samples.

Gold code never lives in the database: a paper only records where its gold codebase is on the
server (`Paper.code_dir`), and workspaces are built from it by masking, never by copying blindly.
"""

from django.db import models


class Suite(models.Model):
    class Format(models.TextChoices):
        NATIVE = "native", "Our suite format"
        UPSTREAM = "upstream", "Upstream AutoExperiment metadata"

    name = models.SlugField(max_length=100, unique=True)
    version = models.CharField(max_length=50, blank=True)
    description = models.TextField(blank=True)
    source_format = models.CharField(max_length=20, choices=Format, default=Format.NATIVE)
    gold_root = models.CharField(max_length=1000, help_text="Directory holding the papers' gold code on this server.")
    # What scoring does with an experiment whose repeated gold runs disagree by more than half its
    # tolerance (Experiment.gold_unstable): recorded with the suite, shown on the leaderboard.
    class UnstablePolicy(models.TextChoices):
        WIDEN = "widen", "scored with a tolerance widened to cover the gold spread"
        EXCLUDE = "exclude", "excluded from scoring"

    unstable_policy = models.CharField(max_length=10, choices=UnstablePolicy, default=UnstablePolicy.WIDEN)
    # Whether everyone may read the gold bodies beside an agent's implementations on the replay
    # (staff always may): declared by the suite (suite.json "gold_public"); never for upstream suites.
    gold_public = models.BooleanField(default=False, help_text="Its gold code is public: replays show it to everyone.")
    # What its papers' sandboxes run with (runs.suites.environments): {"requirements": [...],
    # "debian_packages": [...]}; null: the host's /usr (bubblewrap) or the base image (Docker).
    environment = models.JSONField(null=True, blank=True, help_text="Declared environment of every paper without its own.")
    imported_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"{self.name} {self.version}".strip()


class Paper(models.Model):
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="papers")
    paper_id = models.CharField(max_length=100)
    title = models.CharField(max_length=500)
    text = models.TextField(blank=True, help_text="The paper without its numeric results.")
    code_dir = models.CharField(max_length=1000, blank=True, help_text="Gold codebase; empty when none was found.")
    source_url = models.URLField(max_length=500, blank=True)
    environment = models.JSONField(null=True, blank=True, help_text="Declared environment; replaces the suite's (no merge).")
    data = models.JSONField(
        default=list, blank=True, help_text='Declared data files: [{"name", "source", "sha256", "size"}], at /data/<name>.'
    )

    class Gpu(models.TextChoices):
        NONE = "none", "needs no GPU"
        OPTIONAL = "optional", "may use a GPU"
        REQUIRED = "required", "needs a GPU"

    gpu = models.CharField(max_length=10, choices=Gpu, default=Gpu.NONE)
    gpus = models.PositiveSmallIntegerField(default=1, help_text="GPUs one attempt uses when it gets any.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["suite", "paper_id"], name="unique_paper_per_suite")]
        ordering = ["suite", "paper_id"]

    def __str__(self):
        return self.paper_id


class Function(models.Model):
    """A maskable function, found in its file by qualified name; the line is only a hint."""

    paper = models.ForeignKey(Paper, on_delete=models.CASCADE, related_name="functions")
    func_id = models.PositiveIntegerField()
    file = models.CharField(max_length=500, help_text="Path relative to the paper's code directory.")
    name = models.CharField(max_length=300, help_text="Qualified name, e.g. RRRBBMultipleLoss.__call__.")
    description = models.TextField(blank=True, help_text="Becomes the masked stub's docstring.")
    relevant_paper = models.TextField(blank=True, help_text="Paper excerpt given in the oracle context condition.")
    line_hint = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["paper", "func_id"], name="unique_function_per_paper")]
        ordering = ["paper", "func_id"]

    def __str__(self):
        return f"{self.paper.paper_id}#{self.func_id} {self.file}:{self.name}"


class Experiment(models.Model):
    paper = models.ForeignKey(Paper, on_delete=models.CASCADE, related_name="experiments")
    exp_id = models.PositiveIntegerField()
    description = models.TextField()
    command = models.TextField(help_text="Shell command run from the code directory.")
    answer_format = models.JSONField(default=dict)
    gold_result = models.JSONField(null=True, blank=True, help_text="Produced by running the gold code.")
    gold_spread = models.FloatField(
        null=True, blank=True, help_text="Largest relative difference between repeated gold runs (noise)."
    )
    gold_repeats = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="How many fresh-sandbox gold runs gold_spreads was measured over."
    )
    gold_spreads = models.JSONField(
        default=dict, blank=True, help_text='Per flattened number key: {"min": ..., "max": ...} over the gold runs.'
    )
    gold_unstable = models.BooleanField(
        default=False, help_text="Some number's gold runs differ by more than half its tolerance."
    )
    dependencies = models.ManyToManyField(Function, related_name="experiments", blank=True)
    rtol = models.FloatField(null=True, blank=True, help_text="Overrides the default relative tolerance.")
    atol = models.FloatField(null=True, blank=True, help_text="Overrides the default absolute tolerance.")
    timeout_seconds = models.PositiveIntegerField(default=600)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["paper", "exp_id"], name="unique_experiment_per_paper")]
        ordering = ["paper", "exp_id"]

    def __str__(self):
        return f"{self.paper.paper_id} experiment {self.exp_id}"


class HeldOutCheck(models.Model):
    """A hidden variant of an experiment: the same kind of command with another seed or
    configuration, whose gold `make_gold` computes (and checks for stability) like the experiment's.

    Its command, gold and outputs never leave the server: no workspace, task export, trajectory,
    page, export, search index or error text holds them; staff see them in the admin. Re-execution
    runs every variant of a sample's experiments, and an attempt passes only when they all pass too
    (runs.evaluation.verdicts). Tolerances and timeout are the experiment's.
    """

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="held_out_checks")
    variant_id = models.PositiveSmallIntegerField()
    command = models.TextField(help_text="Shell command run from the code directory.")
    gold_result = models.JSONField(null=True, blank=True, help_text="Produced by running the gold code.")
    gold_spread = models.FloatField(null=True, blank=True)
    gold_repeats = models.PositiveSmallIntegerField(null=True, blank=True)
    gold_spreads = models.JSONField(default=dict, blank=True)
    gold_unstable = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["experiment", "variant_id"], name="unique_variant_per_experiment")]
        ordering = ["experiment", "variant_id"]

    def __str__(self):
        return f"{self.experiment} held-out variant {self.variant_id}"

    # What scoring and stability read of an experiment, so a variant is judged as its experiment is.
    @property
    def rtol(self):
        return self.experiment.rtol

    @property
    def atol(self):
        return self.experiment.atol

    @property
    def timeout_seconds(self):
        return self.experiment.timeout_seconds

    @property
    def paper(self):
        return self.experiment.paper


class Sample(models.Model):
    """A paper with a set of masked functions. Its experiments are those depending on any of them."""

    paper = models.ForeignKey(Paper, on_delete=models.CASCADE, related_name="samples")
    sample_id = models.CharField(max_length=300, help_text="{paper_id}_{sorted function ids}")
    n = models.PositiveSmallIntegerField()
    functions = models.ManyToManyField(Function, related_name="samples", blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["paper", "sample_id"], name="unique_sample_per_paper")]
        ordering = ["paper", "n", "sample_id"]

    def __str__(self):
        return self.sample_id
