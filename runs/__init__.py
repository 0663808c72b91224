"""The `runs` app: the benchmark, the evaluation of agents on it and the results uploaded to it.

Layered packages, each importing only from the layers below it (the contracts in pyproject.toml
[tool.importlinter]; docs/architecture.md draws the tree and the path of one sample through it):

- `replay`, `submissions`: web features, independent of each other;
- `evaluation`: run services, the queue, the harness, recovery, the worker, the queue pages;
- `suites`: suites' services and selectors, their importers, gold results and suite validation;
- `models`: the app's models (the app label stays `runs`, and so do its migrations);
- `agents`: agents, tools, trajectories and LLM adapters, with no ORM;
- `benchmark`: the benchmark's pure logic, with no Django.

Beside them, policy read across layers: `limits` (how much a trajectory and a replay page may hold;
Django settings only, so `agents` reads it too) and `visibility` (who may see or act on a run; it
reads `models`, so only the layers above those do). `admin`, `management` and `templatetags` are
Django's entry points over the layers. The app may import `sandbox` and the site's shared abuse
limits (`autoexperiment_site.abuse`), never `leaderboard` nor the site's routing, accounts or health.
"""
