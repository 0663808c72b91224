"""Importers: a suite's metadata from disk into the suite tables, idempotently.

- `native`: a suite in our own format (suite.json, and per paper paper.md, paper.json, gold.json);
- `upstream`: the upstream AutoExperiment release's CSV and JSONL metadata, with its gold code;
- `common`: what both share: the import report (every skipped or repaired row, with its place)
  and the idempotent writes.

Part of `runs.suites`: they import `runs.models` and `runs.benchmark` (masking, sampling ids),
nothing of the evaluation machinery. Samples (beyond those the upstream release lists) are drawn
afterwards by `runs.suites.services.samples_ensure`.
"""
