"""The paper's agentless harness: a fixed pipeline instead of an agent loop.

For each masked function (file by file, bottom up):

1. retrieve: paper paragraphs and code chunks relevant to the function (BM25 by default, or an
   embedding model when `embedding_model` is configured; see `runs.agents.retrieval`), recorded
   as a step with the pseudo-tool `retrieve`;
2. infill: one model call with the stub, its file, and what was retrieved; the body in the
   reply's ```python block is written in with `write_file` (the step's thought is the model's
   reply). A reply without a usable body is recorded as an error step and the stub is kept.

Then every experiment is run once with `command_line` and what each printed is submitted with
`final_answer`. There is no feedback: a crash is not seen, let alone fixed. That is the point of
the comparison with ReAct (the paper: GPT-4o 8.3% agentless vs 35.3% ReAct at n=1).

Budgets: wall time and cost, as for ReAct. Past either, nothing else runs and nothing is
submitted.
"""

from __future__ import annotations

import ast
import re
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field

from runs.benchmark import python_ast
from runs.benchmark.locating import MaskingError, locate_function
from runs.benchmark.masking import function_body_source, replace_function_body
from sandbox import Sandbox

from .base import Agent, AgentExit, AgentResult, ModelFailed
from .baselines import PipelineRun, functions_in_edit_order
from .llm import ChatModel, Completion, Message, ModelError
from .retrieval import (
    Chunk,
    Embedder,
    EmbeddingRetriever,
    LexicalRetriever,
    Retrieval,
    Retriever,
    code_chunks,
    embedder_from_name,
    function_query,
    paper_chunks,
)
from .settings import AgentSettings
from .tools import DEFAULT_COMMAND_TIMEOUT, DEFAULT_MAX_OBSERVATION_CHARS, truncate
from .trajectory import Step

__all__ = ["AgentlessAgent", "AgentlessConfig", "extract_body", "infill_prompt"]

RETRIEVE = "retrieve"  # the pseudo-tool name of retrieval steps in the trajectory


class AgentlessConfig(AgentSettings):
    """Settings of one agentless run (recorded in the trajectory header).

    `paper_k` / `code_k` are how many paper paragraphs and code chunks are retrieved per function;
    `max_paper_chars` / `max_code_chars` bound how much of them goes into the prompt, and
    `max_file_chars` how much of the function's own file (beyond it, the part around the stub).
    `embedding_model` is an embedder spec (`openai:text-embedding-3-small`,
    `openai-compatible:<model>@<base_url>`); None retrieves lexically (BM25).
    """

    max_seconds: float = Field(default=1800.0, gt=0)
    max_cost: float = Field(default=1.0, gt=0)
    command_timeout: float = Field(default=DEFAULT_COMMAND_TIMEOUT, gt=0)
    max_observation_chars: int = Field(default=DEFAULT_MAX_OBSERVATION_CHARS, gt=0)
    temperature: float = 0.0
    max_tokens: int = Field(default=4096, gt=0)
    paper_k: int = Field(default=4, ge=0)
    code_k: int = Field(default=4, ge=0)
    max_paper_chars: int = Field(default=8_000, ge=0)
    max_code_chars: int = Field(default=8_000, ge=0)
    max_file_chars: int = Field(default=12_000, gt=0)
    embedding_model: str | None = None


SYSTEM_PROMPT = """\
You are an expert research engineer re-implementing a function of a machine learning paper's
code from the paper's description. The function's body was removed: only its signature and
docstring are left, and its body raises NotImplementedError. You are given the function, the file
it is in, and excerpts of the paper and of the codebase that were retrieved as relevant.

Write the function's body so that it does exactly what the paper and the docstring describe and
fits the surrounding code: use the names the file already imports or defines, the same
conventions (shapes, argument names, return types) as the code around it, and no new
dependencies. You cannot run anything and will get no feedback, so be careful.

Reply with a brief explanation, then the body in one ```python code block: only the statements
inside the function, without the `def` line.
"""


@dataclass
class _Target:
    """A masked function as the pipeline sees it in the current file."""

    file: str
    name: str
    line: int | None
    source: str  # the file's current text
    stub: str  # the def line through the stub body
    docstring: str
    def_line: int


def _target(function: dict, source: str) -> _Target:
    location = locate_function(source, function["name"], line_hint=function.get("line"))
    lines = re.split(r"\r\n|\r|\n", source[: location.body_end])
    stub = "\n".join(lines[location.def_line - 1 :])
    body = function_body_source(source, function["name"], line_hint=location.def_line)
    try:
        docstring = ast.get_docstring(python_ast.parse(body)) or ""
    except SyntaxError:
        docstring = ""
    return _Target(function["file"], function["name"], function.get("line"), source, stub, docstring, location.def_line)


def _take(lines: list[str], indices: range, budget: int) -> tuple[list[int], int]:
    """The leading `indices` whose lines fit in `budget` characters, and the budget left."""
    taken = []
    for index in indices:
        if len(lines[index]) + 1 > budget:
            break
        taken.append(index)
        budget -= len(lines[index]) + 1
    return taken, budget


def _file_excerpt(source: str, def_line: int, max_chars: int) -> tuple[str, bool]:
    """The whole file if it fits in `max_chars`, else its head (imports) and the lines around
    `def_line`, with markers where lines are left out."""
    if len(source) <= max_chars:
        return source, False
    lines = source.splitlines()
    head, head_left = _take(lines, range(def_line - 1), max_chars // 4)
    below, below_left = _take(lines, range(def_line - 1, len(lines)), max_chars // 2)
    floor = head[-1] + 1 if head else 0
    above, _ = _take(lines, range(def_line - 2, floor - 1, -1), max_chars // 4 + head_left + below_left)
    shown: list[str] = []
    previous = -1
    for index in sorted(head + above + below):
        if index != previous + 1:
            shown.append(f"# ... (lines {previous + 2}-{index} not shown)")
        shown.append(lines[index])
        previous = index
    if previous + 1 < len(lines):
        shown.append(f"# ... (lines {previous + 2}-{len(lines)} not shown)")
    return "\n".join(shown), True


def _bounded(sections: list[str], max_chars: int) -> list[str]:
    """As many sections as fit in `max_chars` (the first one always, cut if it must be)."""
    kept: list[str] = []
    used = 0
    for section in sections:
        if used + len(section) > max_chars:
            if not kept and max_chars > 0:
                kept.append(truncate(section, max_chars)[0])
            break
        kept.append(section)
        used += len(section)
    return kept


def _paper_section(chunk: Chunk) -> str:
    return f"### {chunk.title or 'Paper'} ({chunk.source}, line {chunk.line})\n\n{chunk.text}\n"


def _code_section(chunk: Chunk) -> str:
    return f"### {chunk.source}: {chunk.title} (line {chunk.line})\n\n```python\n{chunk.text}\n```\n"


def infill_prompt(*, task: dict, target: _Target, retrieval: Retrieval, config: AgentlessConfig, has_paper: bool) -> str:
    """The user prompt asking for one function's body."""
    file_text, cut = _file_excerpt(target.source, target.def_line, config.max_file_chars)
    code_hits = retrieval.code
    if not cut:
        # The whole file is shown already; its chunks would only repeat it.
        code_hits = [hit for hit in code_hits if hit.chunk.source != target.file]
    paper = _bounded([_paper_section(hit.chunk) for hit in retrieval.paper], config.max_paper_chars)
    code = _bounded([_code_section(hit.chunk) for hit in code_hits], config.max_code_chars)
    if not has_paper:
        paper_part = "(The paper is not available for this task.)"
    else:
        paper_part = "\n".join(paper) or "(Nothing in the paper matched this function.)"
    title = task.get("paper_title", "")
    parts = [
        f"# Task\n\nPaper: {title}\n\nImplement `{target.name}` in `{target.file}` (line {target.def_line}).",
        f"## The function\n\n```python\n{textwrap.dedent(target.stub)}\n```",
        f"## The file it is in: {target.file}{' (excerpt)' if cut else ''}\n\n```python\n{file_text.rstrip()}\n```",
        f"## Paper excerpts (retrieved)\n\n{paper_part}",
        f"## Related code (retrieved)\n\n{chr(10).join(code) or '(none)'}",
        f"Reply with the body of `{target.name}` in one ```python code block.",
    ]
    return "\n\n".join(parts)


_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+-]*)[^\n]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)


def extract_body(reply: str, name: str) -> tuple[str | None, str]:
    """The function body in a model's reply, or None and why not.

    The first ```python block (else the first code block) is the body. A block holding the whole
    function instead (`def name(...):` and its body) is accepted too: its body is taken. Whether
    the body is valid Python is checked when it is put in place.
    """
    blocks = _FENCE.findall(reply)
    if not blocks:
        return None, "the reply has no ``` code block"
    tagged = [code for language, code in blocks if language.lower() in ("python", "py", "python3")]
    code = (tagged or [blocks[0][1]])[0]
    short = name.rsplit(".", 1)[-1]
    try:
        tree = python_ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return code, ""  # a body with `return` at top level parses; this does not, and will be refused
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == short]
    if len(defs) == 1:
        return function_body_source(textwrap.dedent(code), short, line_hint=defs[0].lineno), ""
    return code, ""


class AgentlessAgent(Agent):
    """The agentless harness. Create with `agent_from_name("agentless", **settings)`.

    `embedder` overrides the embedder `embedding_model` names (tests, or an embedder that is not
    OpenAI-compatible); with neither, retrieval is lexical.
    """

    name = "agentless"
    config_class = AgentlessConfig

    def __init__(self, config: AgentlessConfig | None = None, *, embedder: Embedder | None = None, **settings: Any) -> None:
        self.config = (config or AgentlessConfig()).replaced(**settings)
        if embedder is None and self.config.embedding_model:
            # Built now, so a missing key or bad spec fails when the run is configured.
            embedder = embedder_from_name(self.config.embedding_model)
        self.embedder = embedder

    def run(
        self,
        *,
        model: ChatModel | None,
        sandbox: Sandbox,
        workspace: Path,
        trajectory_path: Path,
        clock: Callable[[], float] = time.monotonic,
        on_step: Callable[[Step], None] | None = None,
    ) -> AgentResult:
        """Run the pipeline on a freshly built workspace (see the module docstring)."""
        model = self.required_model(model)
        config = self.config.as_dict()
        if self.embedder is not None:
            config["embedding_model"] = self.embedder.name
        run = PipelineRun(
            agent=self.name,
            model=model,
            config=config,
            sandbox=sandbox,
            workspace=Path(workspace),
            trajectory_path=Path(trajectory_path),
            clock=clock,
            on_step=on_step,
            max_seconds=self.config.max_seconds,
            max_cost=self.config.max_cost,
            command_timeout=self.config.command_timeout,
            max_observation_chars=self.config.max_observation_chars,
        )
        return run.execute(lambda r: _Pipeline(self, r, model).run())


class _Pipeline:
    """The state of one agentless run."""

    def __init__(self, agent: AgentlessAgent, run: PipelineRun, model: ChatModel) -> None:
        self.config = agent.config
        self.state = run
        self.model = model
        self.functions = functions_in_edit_order(run.task.get("missing_functions", []))
        paper = run.workspace / "paper.md"
        self.has_paper = paper.is_file()
        chunks = paper_chunks(paper.read_text(encoding="utf-8")) if self.has_paper else []
        # Index the code as built: the stubs are left out, they are what is asked for.
        chunks += code_chunks(run.workspace, exclude=[(f["file"], f["name"]) for f in self.functions])
        self.retriever: Retriever = (
            EmbeddingRetriever(chunks, agent.embedder) if agent.embedder is not None else LexicalRetriever(chunks)
        )

    def run(self) -> None:
        for function in self.functions:
            target = _target(function, self.state.read(function["file"]))
            retrieval = self.retrieve(target)
            self.infill(target, retrieval)
        self.state.run_and_submit_experiments()

    def retrieve(self, target: _Target) -> Retrieval:
        run = self.state
        query = function_query(name=target.name, docstring=target.docstring, file=target.file)
        step = run.new_step(thought=f"Retrieve the paper and code relevant to {target.name} ({self.retriever.method}).")
        started = run.clock()
        try:
            found = self.retriever.search(query, paper_k=self.config.paper_k if self.has_paper else 0, code_k=self.config.code_k)
        except ModelError as error:
            raise ModelFailed(f"embedding call failed: {error}") from error
        step.tool = RETRIEVE
        step.arguments = {"function": target.name, "file": target.file, "query": query, "method": self.retriever.method}
        step.observation, step.truncated = truncate(_describe(found), run.tools.max_observation_chars)
        if found.note:
            step.notes.append(found.note)
        if found.usage.input_tokens or found.cost is None or found.cost:  # lexical search is free
            step.charge(found.usage, found.cost)
            run.budget.charge(input_tokens=found.usage.input_tokens, cost=found.cost)
        run.record(step, started=started)
        return found

    def infill(self, target: _Target, retrieval: Retrieval) -> None:
        run = self.state
        prompt = infill_prompt(task=run.task, target=target, retrieval=retrieval, config=self.config, has_paper=self.has_paper)
        step = run.new_step()
        started = run.clock()
        completion = self._complete(step, [Message.system(SYSTEM_PROMPT), Message.user(prompt)])
        step.thought = completion.text
        try:
            run.budget.check_time_and_cost()
        except AgentExit as exit:
            # Nothing runs once a limit is passed; the reply is still on record.
            step.observation = f"Not applied: {exit}"
            run.record(step, started=started)
            raise
        body, problem = extract_body(completion.text, target.name)
        if body is not None:
            try:
                content = replace_function_body(target.source, target.name, body, line_hint=target.def_line)
            except MaskingError as error:
                problem = str(error)
        if problem:
            step.error = True
            step.observation = f"The body for {target.name} was not written: {problem}. The stub is kept."
            run.record(step, started=started)
            return
        run.run_in_step(step, "write_file", {"path": target.file, "content": content}, started=started)
        run.record(step, started=started)

    def _complete(self, step: Step, messages: list[Message]) -> Completion:
        started = self.state.clock()
        try:
            completion = self.model.complete(
                messages, tools=[], max_tokens=self.config.max_tokens, temperature=self.config.temperature
            )
        except ModelError as error:
            raise ModelFailed(str(error)) from error
        finally:
            step.model_seconds += self.state.clock() - started
        step.charge(completion.usage, completion.cost)
        self.state.budget.charge(
            input_tokens=completion.usage.input_tokens, output_tokens=completion.usage.output_tokens, cost=completion.cost
        )
        return completion


def _describe(found: Retrieval) -> str:
    """A retrieval step's observation: every hit, scored, with its text."""
    lines = []
    for kind, hits in (("Paper", found.paper), ("Code", found.code)):
        lines.append(f"{kind}: {len(hits)} hit(s)")
        for rank, hit in enumerate(hits, start=1):
            chunk = hit.chunk
            lines.append(f"--- {rank}. {chunk.source}: {chunk.title} (line {chunk.line}; score {hit.score:.3f})")
            lines.append(chunk.text)
    return "\n".join(lines)
