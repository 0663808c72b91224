"""Evaluation: running agents on samples, one attempt at a time, exactly once, through RQ.

- `services`, `selectors`: runs (create, cancel, retry, resume, execute in-process) and reads of them;
- `queue`: the RQ queue, job ids, enqueueing and RQ's failed registry;
- `kinds`: the kinds of work on a claimed row (a run's attempt, a submission's re-execution, a
  transplant), a class each, for the one claim / fence / retry path;
- `claims`: claiming an attempt, its heartbeat, fencing by try number, infrastructure failures;
- `harness`: executing one run attempt (workspace, agent in a sandbox, both verdicts, the record);
- `verdicts`: failure labels, scoring, and the re-execution of a final patch;
- `workdirs`: where a try's workspaces, trajectory and sandboxes live, and their removal;
- `recovery`: self-healing (dead workers, overruns, unstarted jobs, leftovers);
- `jobs`, `worker`: the RQ job functions and the worker class that runs them and heals;
- `supervisor`: starting a dead worker again (the Procfile's `manage.py supervised_worker`);
- `views`, `urls`: the queue pages.

Under the web features (`runs.replay`, `runs.submissions`), over the other layers of `runs`: it
may import `runs.suites`, `runs.models`, `runs.agents`, `runs.benchmark` and `sandbox`, never the
web features. Submissions join its claim / retry path by registering a kind, not by being imported.
"""
