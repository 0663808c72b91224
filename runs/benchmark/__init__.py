"""The benchmark's pure logic: what a sample is, what its workspace holds and how an answer scores.

- `locating`, `masking`, `mutation`, `python_ast`, `source_lines`: finding functions and masking them by
  AST, plausible wrong bodies, source lines and positions;
- `sampling`: which sets of functions make the samples (a seeded, reproducible draw);
- `workspace`: leak-free workspaces built from a plain `WorkspaceSpec`, and the leak audit;
- `patch_parsing`, `patches`: the one unified-diff parser, and applying and writing diffs;
- `scope`, `scope_merge`, `scope_import_time`: what of a patch re-execution keeps, file by file;
- `execution`: running a workspace's experiments in a sandbox and reading what they print;
- `answers`, `scoring`, `tolerance_ratios`, `statistics`: reading an answer, scoring it against gold,
  how far a verdict is from passing, Pass@k and bootstrap intervals;
- `text`: text and JSON as Postgres and the model providers take them.

The bottom layer of `runs`: it imports no other package of `runs` and nothing of Django, RQ or
`runs.models` (contract "sandbox and runs.benchmark import no Django"), so workers, scripts and
tests use it without a database. The one product package it may import is `sandbox`.
"""
