"""Suites: getting benchmark data in, and the services and reads over it.

- `importers`: a suite in our own format (`native`) or the upstream release's metadata
  (`upstream`) into the suite tables, every bad row reported rather than fatal;
- `services`: drawing a suite's samples, building a sample's workspace, the leak audit of one;
- `selectors`: reads of suites, samples and experiments, and the `WorkspaceSpec` of a sample;
- `gold`: producing gold results and validating a suite by running its code in the sandbox;
- `builtin/`: the built-in suite's data (papers and gold code), not Python of ours.

Below `runs.evaluation`: it may import the layers under it (`runs.models`, `runs.agents`,
`runs.benchmark`) and `sandbox`; today it uses models, benchmark and sandbox. It never imports
the evaluation machinery or the web features.
"""
