"""Submissions: results produced elsewhere, uploaded as a JSONL file (or a zip with trajectories).

- `validation`: reading the upload and collecting every problem with its line and field.
- `services`: storing a valid upload as a run in one transaction, re-executing its patches,
  API tokens.
- `selectors`: reads (who may see or act on a submission: runs.visibility).
- `views`, `api`, `forms`, `urls`, `jobs`: thin layers over the two above.

The format is documented in `validation` and on the upload page.
"""
