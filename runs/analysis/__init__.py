"""Failure analysis: what an attempt's trajectory and re-execution say about how it went.

- `outcomes`: why a done attempt passed or failed (Attempt.outcome), decided on every verdict write.
- `marks`: which steps are errors (the replay's rule, shared).
- `trajectories`: facts of a stored trajectory (experiment runs, first crash, first working run,
  first error) and the exceptions in a text, normalised. Pure: no ORM.
- `public`: what the anonymous replay shows of a step (gold code of the gold baselines left out),
  the text the search across trajectories matches.
- `services`: `attempt_analysis_record`, which rebuilds an attempt's AttemptAnalysis,
  AttemptException and StepText rows whenever its trajectory or re-execution output is written.
- `links`: the replay URL of one step.
"""
