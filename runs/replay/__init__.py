"""Replay: an attempt's stored trajectory, patch and scores as pages, alone or beside another.

- `pages`: reading one page of a stored trajectory without loading the rest (sliced by Postgres);
- `presenters`: the attempt, its steps, diffs and verdicts turned into plain, escaped view data;
- `functions`: its masked functions one by one: each judged alone (its transplant), and each
  final implementation beside the gold body;
- `views`, `urls`: the replay and comparison pages and the final patch's download.

A web feature at the top of `runs`, independent of `runs.submissions` (neither imports the other):
it may import `runs.evaluation` and every layer below it, and `runs.limits` (page bounds) and
`runs.visibility` (who may see an attempt, and its gold code). It writes nothing.
"""
