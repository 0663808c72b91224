"""Replay: an attempt's stored trajectory, patch and scores as pages, alone or beside another.

- `pages`: reading one page of a stored trajectory without loading the rest (sliced by Postgres);
- `selectors`: the attempt and what its page reads besides its trajectory (its siblings, its live
  state, the whole final patch, the original file of a converted trajectory);
- `presenters`: one attempt's page as plain, escaped view data, built from `steps` (a step's body
  and list line), `calls` (its tool call as people read it), `diffs` (diffs and Python
  highlighting), `scores` (the verdicts against gold) and `text` (stored values as bounded text);
- `comparison`: two attempts at the same sample, steps side by side;
- `functions`: its masked functions one by one: each judged alone (its transplant), and each
  final implementation beside the gold body;
- `views`, `urls`: the replay and comparison pages and the final patch's download.

A web feature at the top of `runs`, independent of `runs.submissions` (neither imports the other):
it may import `runs.evaluation` and every layer below it, and `runs.limits` (page bounds) and
`runs.visibility` (who may see an attempt, and its gold code). It writes nothing.
"""
