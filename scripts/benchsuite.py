"""The synthetic suite and systems the page benchmarks load (bench_pages, bench_explore): 20 papers of
10 functions, 2,300 samples at n = 1 to 3, and the models, agents and contexts systems are drawn from.

Imported by the scripts beside it, after they have pointed Django at their scratch database.
"""
from __future__ import annotations

import random
from collections.abc import Callable
from itertools import combinations

PAPERS = 20
FUNCTIONS_PER_PAPER = 10
SAMPLES_CAP = {1: 10, 2: 45, 3: 60}  # per paper: 2,300 samples in all
MODELS = [  # (spec, strength: pass probability of an easy n=1 sample)
    ("anthropic:claude-3-7-sonnet", 0.42), ("openai:gpt-4o", 0.40), ("anthropic:claude-3-5-sonnet", 0.36),
    ("openai:gpt-4o-mini", 0.30), ("openai:o3-mini", 0.38), ("openai-compatible:llama3.1:70b", 0.22),
    ("openai-compatible:qwen2.5-coder:32b", 0.25), ("openai:gpt-4.1", 0.45), ("anthropic:claude-3-5-haiku", 0.27),
    ("openai-compatible:deepseek-v3", 0.35),
]
AGENTS = ["react", "agentless"]
CONTEXTS = ["full", "none", "oracle"]


def load_suite(*, name: str, file_of: Callable[[int], str]):
    """The suite `name`, its papers, functions (function f in file `file_of(f)`) and samples, bulk
    loaded. Returns (suite, samples)."""
    from runs.models import Function, Paper, Sample, Suite

    suite = Suite.objects.create(name=name, version="1", gold_root="/nonexistent", description=f"Synthetic suite for {name}")
    papers = Paper.objects.bulk_create(
        [Paper(suite=suite, paper_id=f"bench-{p:02d}", title=f"Bench paper {p}", text="Method. " * 200) for p in range(PAPERS)]
    )
    functions = Function.objects.bulk_create([
        Function(paper=paper, func_id=f, file=file_of(f), name=f"Model{f}.forward", description="Does it.")
        for paper in papers for f in range(FUNCTIONS_PER_PAPER)
    ])
    by_paper = {}
    for function in functions:
        by_paper.setdefault(function.paper_id, []).append(function)
    rng = random.Random(7)
    samples = []
    for paper in papers:
        for n, cap in SAMPLES_CAP.items():
            combos = list(combinations(range(FUNCTIONS_PER_PAPER), n))
            for ids in sorted(rng.sample(combos, min(cap, len(combos)))):
                samples.append((Sample(paper=paper, sample_id=f"{paper.paper_id}_{','.join(map(str, ids))}", n=n), paper, ids))
    created = Sample.objects.bulk_create([sample for sample, _, _ in samples])
    through = Sample.functions.through
    links = [through(sample_id=sample.pk, function_id=by_paper[paper.pk][i].pk)
             for sample, (_, paper, ids) in zip(created, samples) for i in ids]
    through.objects.bulk_create(links, batch_size=5000)
    return suite, created
