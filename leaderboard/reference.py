"""Numbers reported in the AutoExperiment paper (arXiv 2506.19724), as data.

They were measured on the upstream suite with the upstream harness, which trusts the agent's
reported numbers (no re-execution). They are shown beside our measurements, clearly marked and
never sorted with them: they are not reproduced here. Percentages as the paper gives them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

SOURCE = "AutoExperiment, arXiv 2506.19724"
SOURCE_URL = "https://arxiv.org/abs/2506.19724"
SUITE = "upstream (paper)"


@dataclass(frozen=True)
class ReferenceResult:
    """One reported number: Pass@k (in percent) of a model with an agent harness at one n."""

    model: str
    agent: str  # "react" (the paper's dynamic ReAct agent) or "agentless" (its fixed harness)
    n: int
    k: int
    percent: float
    note: str = ""


@dataclass(frozen=True)
class ReferenceRow:
    """A model + harness as the paper reports it, with its numbers by n (Pass@1 and Pass@k)."""

    model: str
    agent: str
    pass1: dict[int, float] = field(default_factory=dict)
    passk: dict[int, tuple[int, float]] = field(default_factory=dict)  # n -> (k, percent)
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.model} · {self.agent}"

    def as_dict(self) -> dict:
        """The export's shape: like a measured system's row, rates as fractions, flagged as reference."""
        by_n = {}
        for n in sorted(set(self.pass1) | set(self.passk)):
            k, passk = self.passk.get(n, (None, None))
            by_n[str(n)] = {
                "n": n,
                "pass1": _fraction(self.pass1.get(n)),
                "k": k,
                "passk": _fraction(passk),
            }
        return {
            "reference": True,
            "name": self.name,
            "suite": SUITE,
            "agent": self.agent,
            "model": self.model,
            "by_n": by_n,
            "note": self.note or "Reported in the paper (upstream suite), not reproduced here.",
            "source": SOURCE,
            "source_url": SOURCE_URL,
        }


def _fraction(percent: float | None) -> float | None:
    return None if percent is None else round(percent / 100, 6)


_AGENTLESS_NOTE = "Agentless vs ReAct comparison; n=1 inferred (GPT-4o's ReAct figure equals its n=1 Pass@1)."

RESULTS: list[ReferenceResult] = [
    # Pass@1 with the ReAct agent, n = 1 and n = 2.
    ReferenceResult("Claude-3.7-sonnet", "react", 1, 1, 36.5),
    ReferenceResult("Claude-3.7-sonnet", "react", 2, 1, 9.6),
    ReferenceResult("GPT-4o", "react", 1, 1, 35.3),
    ReferenceResult("GPT-4o", "react", 2, 1, 8.5),
    ReferenceResult("Claude-3.5-sonnet", "react", 1, 1, 31.8),
    ReferenceResult("Claude-3.5-sonnet", "react", 2, 1, 9.6),
    ReferenceResult("GPT-4o-mini", "react", 1, 1, 27.1),
    ReferenceResult("GPT-4o-mini", "react", 2, 1, 2.1),
    # Pass@5 at n = 1.
    ReferenceResult("GPT-4o", "react", 1, 5, 48.2),
    ReferenceResult("Claude-3.5-sonnet", "react", 1, 5, 42.2),
    # The fixed (agentless) harness against the dynamic ReAct agent.
    ReferenceResult("GPT-4o", "agentless", 1, 1, 8.3, _AGENTLESS_NOTE),
    ReferenceResult("o3-mini", "agentless", 1, 1, 27.8, _AGENTLESS_NOTE),
    ReferenceResult("o3-mini", "react", 1, 1, 33.3, _AGENTLESS_NOTE),
]



@dataclass(frozen=True)
class ReferenceFailureAnalysis:
    """The paper's error analysis of one model with its ReAct agent at one n (percentages as the
    paper gives them): the outcome split of its attempts, how often the first run of an experiment
    crashed and how often a run recovered to working code. Shown beside the same numbers computed
    for a system (leaderboard.failure_analysis)."""

    model: str
    agent: str
    n: int
    passed: float
    wrong_answer: float
    no_answer: float
    first_run_crashed: float
    recovered: float
    source: str = SOURCE

    @property
    def label(self) -> str:
        return f"Paper ({self.model}, n = {self.n})"


# The paper reports its error analysis for GPT-4o (ReAct agent) at n = 1 only.
FAILURE_ANALYSIS = ReferenceFailureAnalysis(
    model="GPT-4o", agent="react", n=1, passed=35.3, wrong_answer=31.4, no_answer=33.3, first_run_crashed=69.4, recovered=29.1,
)

# Findings that are not a pass rate of one system: shown as text under the reference rows.
FINDINGS: list[dict] = [
    {
        "finding": "Outcome split, GPT-4o, n=1",
        "values": {
            "correct": FAILURE_ANALYSIS.passed, "wrong answer": FAILURE_ANALYSIS.wrong_answer,
            "no answer": FAILURE_ANALYSIS.no_answer,
        },
        "unit": "percent of samples",
    },
    {
        "finding": "Crash recovery",
        "values": {
            "first attempt crashes": FAILURE_ANALYSIS.first_run_crashed,
            "runs that recover to working code": FAILURE_ANALYSIS.recovered,
        },
        "unit": "percent",
    },
]


def reference_rows(*, agent: str | None = None, n_min: int | None = None, n_max: int | None = None) -> list[ReferenceRow]:
    """The reported results grouped by model and harness, optionally narrowed by agent and n.

    The paper's order (strongest ReAct model first) is kept: these rows are never sorted.
    """
    rows: dict[tuple[str, str], ReferenceRow] = {}
    for result in RESULTS:
        if agent and result.agent != agent:
            continue
        if (n_min is not None and result.n < n_min) or (n_max is not None and result.n > n_max):
            continue
        row = rows.setdefault((result.model, result.agent), ReferenceRow(result.model, result.agent, {}, {}, result.note))
        if result.k == 1:
            row.pass1[result.n] = result.percent
        else:
            row.passk[result.n] = (result.k, result.percent)
    return list(rows.values())
