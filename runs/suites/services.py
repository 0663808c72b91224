"""Writes to the benchmark tables. Plain functions with keyword-only arguments; views, jobs and
management commands call these rather than touching the models themselves."""
import shutil
import tempfile
from pathlib import Path

from django.db import transaction

from runs.benchmark.masking import function_body_source
from runs.benchmark.sampling import DEFAULT_CAP, draw_combinations, sample_id
from runs.benchmark.workspace import AuditResult, Context, WorkspaceError, WorkspaceManifest, audit_workspace, build_workspace
from runs.models import Sample, Suite
from runs.suites.selectors import SampleTask, workspace_spec


@transaction.atomic
def samples_ensure(*, suite: Suite, n_values: list[int], seed: int = 0, cap: int = DEFAULT_CAP) -> list[Sample]:
    """Make sure the samples of `suite` for each n exist (at most `cap` per paper and n) and return them.

    Papers without gold code and n larger than a paper's function count are passed over: they have
    no sample to give. Existing samples are kept, so ids already referenced by runs stay valid.
    """
    samples = []
    for paper in suite.papers.exclude(code_dir="").prefetch_related("functions"):
        functions = {function.func_id: function for function in paper.functions.all()}
        for n in n_values:
            if n > len(functions):
                continue
            for ids in draw_combinations(list(functions), n, cap=cap, seed=seed):
                sample, created = Sample.objects.get_or_create(
                    paper=paper, sample_id=sample_id(paper.paper_id, ids), defaults={"n": n}
                )
                if created:
                    sample.functions.set([functions[i] for i in ids])
                samples.append(sample)
    return samples


def workspace_build(*, sample: Sample, dest: Path, context: str = Context.FULL, task: SampleTask | None = None) -> WorkspaceManifest:
    """Build the workspace of a sample into `dest` (see runs.benchmark.workspace for what it holds);
    from `task` (runs.suites.selectors.sample_task) when the caller has read it already."""
    if not sample.paper.code_dir:
        raise WorkspaceError(f"paper {sample.paper.paper_id} has no gold code on this server")
    return build_workspace(task.spec if task is not None else workspace_spec(sample=sample, context=context), dest)


def sample_audit_leaks(*, sample: Sample, scratch_dir: Path) -> AuditResult:
    """Build the sample's workspace under `scratch_dir` and audit it for original bodies and gold numbers."""
    spec = workspace_spec(sample=sample, context=Context.FULL)
    dest = Path(tempfile.mkdtemp(prefix="audit-", dir=scratch_dir))
    try:
        build_workspace(spec, dest)
        code_dir = Path(sample.paper.code_dir)
        originals = {}
        for function in spec.masked:
            source = (code_dir / function.file).read_text(encoding="utf-8")
            body = function_body_source(source, function.name, line_hint=function.line_hint)
            originals[f"{function.file}:{function.name}"] = body
        gold = [experiment.gold_result for experiment in sample.paper.experiments.all() if experiment.gold_result]
        return audit_workspace(dest, original_bodies=originals, gold_results=gold)
    finally:
        shutil.rmtree(dest, ignore_errors=True)
