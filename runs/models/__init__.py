"""The `runs` app's models, one module per area; Django loads them all from here.

- `suites`: the benchmark (suites, papers, maskable functions, experiments, samples);
- `evaluation`: runs and their attempts;
- `analysis`: what failure analysis reads of an attempt, derived when it is stored;
- `submissions`: uploaded results, the original files of converted trajectories, and the API tokens
  that upload them.

Models import only Django and each other. In the layers of `runs` they sit under `runs.suites`
and over `runs.agents` and `runs.benchmark`, which must never import them.
"""
from runs.models.analysis import AttemptAnalysis, AttemptException, StepText
from runs.models.evaluation import Attempt, Run, Transplant
from runs.models.submissions import ApiToken, Submission, TrajectorySource
from runs.models.suites import Experiment, Function, HeldOutCheck, Paper, Sample, Suite

__all__ = [
    "ApiToken", "Attempt", "AttemptAnalysis", "AttemptException", "Experiment", "Function", "HeldOutCheck", "Paper", "Run", "Sample", "StepText", "Submission", "Suite",
    "TrajectorySource", "Transplant",
]
