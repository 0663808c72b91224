"""The benchmark's pure logic: what a sample is, what its workspace holds and how an answer scores.

- `masking`, `mutation`, `python_ast`: masking functions by AST, and plausible wrong bodies;
- `sampling`: which sets of functions make the samples (a seeded, reproducible draw);
- `workspace`: leak-free workspaces built from a plain `WorkspaceSpec`, and the leak audit;
- `patches`, `scope`: the one unified-diff parser and applier, and what of a patch re-execution keeps;
- `execution`: running a workspace's experiments in a sandbox and reading what they print;
- `scoring`, `statistics`: scoring an answer against gold, Pass@k and bootstrap intervals;
- `text`: text and JSON as Postgres and the model providers take them.

The bottom layer of `runs`: it imports no other package of `runs` and nothing of Django, RQ or
`runs.models` (contract "sandbox and runs.benchmark import no Django"), so workers, scripts and
tests use it without a database. The one product package it may import is `sandbox`.
"""
