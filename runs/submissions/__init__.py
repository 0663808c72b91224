"""Submissions: results produced elsewhere, uploaded as a JSONL file (or a zip with trajectories).

- `uploads`, `json_limits`: receiving an upload, and reading its JSON, within bounded limits.
- `schema`: the format's pydantic models (`SubmissionHeader`, `AttemptRecord`), its versions and
  the upgrade of older ones; the upload page's format section is rendered from them.
- `validation`: reading an upload and checking all of it (`submission_validate`), with `archive`
  (the zip), `jsonl` (each line's JSON), `cross_checks` (the records together, the database),
  `problems` (what is wrong, and where) and `upload_limits`.
- `services`: storing a valid upload as a run in one transaction, requesting re-execution,
  API tokens.
- `reexecution`: the harness's own run of each uploaded patch, a kind of work on the evaluation
  package's claim / fence / retry / recovery path (runs.evaluation.kinds).
- `selectors`: reads (who may see or act on a submission: runs.visibility).
- `views`, `api`, `forms`, `urls`, `jobs`: thin layers over the ones above.

The format is documented in `schema` and on the upload page.

A web feature at the top of `runs`, independent of `runs.replay` (neither imports the other): it
may import `runs.evaluation` and every layer below it, `runs.limits`, `runs.visibility` and the
site's rate limits (`autoexperiment_site.abuse`).
"""
