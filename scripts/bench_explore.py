#!/usr/bin/env python
"""Server time of the failure-analysis pages (attempts explorer, search across steps, paired
comparison) on 100,000 attempts of 30 steps each.

Creates the Postgres database `bench_explore`, migrates it and loads, in SQL (generate_series, no
ORM objects per row): a suite of 20 papers, 200 functions and 2,300 samples (n = 1..3); 50 systems
(three of them in hidden runs, seen by their owner only), 100,000 attempts with their outcome,
3,000,000 StepText rows (300 to 600 characters of thought, command and observation each, tracebacks
in about 30% of them, their tsvector to_tsvector('simple', text)), the attempts' AttemptAnalysis
rows and one AttemptException per traceback. Then it times requests through Django's test Client
(in process: server time only, no network, as an anonymous visitor) and prints the median and 95th
percentile and the queries per request of:

  - the explorer with three filters: /explore/?system=<slug>&n=2&outcome=wrong_answer
  - a search for a rare phrase (in 5 steps): /explore/?q="cuda device-side assert"
  - a search for a common word (in ~30% of steps): /explore/?q=Traceback
  - the paired comparison of two systems sharing most samples: /compare/?a=<slug>&b=<slug>

each marked ok (95th percentile under 200 ms) or OVER; lines starting "+" time pages not asked for
(a search narrowed by filters, an exception filter, a deep page, comparisons of pairs never compared
before, which no memoised bootstrap helps). The first request of each page is reported apart: the
process's first of a kind pays for its warm-up (templates, Plotly) and the comparison's for its
bootstrap, memoised after. Then EXPLAIN ANALYZE of every query that took longer than
--explain-over milliseconds in a timed request. A page not there yet (404) is reported as
"not available yet". The database is dropped at the end unless --keep (keep it to EXPLAIN there);
--reuse skips the loading when `bench_explore` already holds the data (it still migrates).

    .venv/bin/python scripts/bench_explore.py [--attempts 100000] [--steps 30] [--systems 50]
        [--requests 30] [--keep] [--reuse] [--explain-over 200] [--redis-db 6]

Postgres: BENCH_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432), a role that may create
databases; Redis: REDIS_URL's server, database --redis-db (default BENCH_REDIS_DB, else 6), emptied first. Loading
takes a few minutes on two cores (the tsvectors and the GIN index are most of it).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
from itertools import product
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchlib import create_database, drop_database, flush_redis, percentile, url_with_path, with_defaults  # noqa: E402
from benchsuite import AGENTS, CONTEXTS, MODELS, load_suite  # noqa: E402

SERVER = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432").rstrip("/")
# Fixed, so the pages' authors can EXPLAIN ANALYZE there after --keep (BENCH_EXPLORE_DB: another).
DB_NAME = os.environ.get("BENCH_EXPLORE_DB", "bench_explore")
DB_URL = f"{SERVER}/{DB_NAME}"
REDIS_DB = int(os.environ.get("BENCH_REDIS_DB", "6"))
os.environ["DATABASE_URL"] = DB_URL
# DEBUG serves static files without collectstatic; nothing measured depends on it.
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "autoexperiment_site.settings")
os.environ.setdefault("LOG_LEVEL", "WARNING")

SUITE = "bench_explore"
CONFIGS = [{}, {"history": "window", "window": 5}]
HIDDEN_SYSTEMS = 3  # the last ones: hidden runs of one owner
RARE_PHRASE = "cuda device-side assert"
RARE_STEPS = 5
BUDGET = 200  # ms: the bound on each page's 95th percentile

# --- step texts ------------------------------------------------------------------------------------
# Templates with {a} {b} {c} (numbers), {f} (a source file), {seed}, {e} (epochs), {x} {y} (digits):
# many distinct tokens per step, as real outputs have, so the GIN index is as large as a real one.

FILES = ["gmm.py", "model.py", "layers.py", "train_utils.py", "data.py", "losses.py", "optim.py", "evaluate.py",
         "attention.py", "encoder.py", "sampler.py", "metrics.py"]
THOUGHTS = [
    "The loss is off by a factor of {a}; I suspect the bias correction in src/{f} is applied twice. Let me look at the update step around line {b} before changing anything.",
    "The masked function should return a tensor of shape [{a}, {b}]. I will implement it following Section {c} of the paper, using the log-sum-exp trick for numerical stability.",
    "Tests pass but the accuracy is {x}.{y} percent instead of the reported value. Maybe the learning rate schedule differs: the paper warms up for {a} steps. Checking the config.",
    "I need to see how the data loader batches samples before I implement the collate function in src/{f}; the experiment script calls it with batch size {a}.",
    "The previous run finished. Now I run the full experiment with seed {seed} and compare the printed metrics against Table {c} of the paper.",
    "The responsibilities must sum to one over the components. I will normalise with softmax over dimension 1 and keep the covariance regularisation of 1e-{c}.",
    "Let me list the repository first to find the experiment entry point and the file holding the masked function {f}.",
    "The error suggests a dimension mismatch between the projection and the attention heads: {a} heads of size {b}. Let me inspect the forward pass in src/{f}.",
    "Implementing the EM update: compute the weighted means, then the covariances, then the mixing weights, each as in equations {c} to {a} of the method section.",
    "The numbers are close to the paper now ({x}.{y} against {y}.{x}). I will run the remaining experiments and submit the final answer as JSON.",
    "I edited src/{f} but forgot to handle the padding mask. Adding it, then rerunning the experiment for {e} epochs.",
    "The script expects a checkpoint at out/ckpt_{a}.pt which does not exist. I will train from scratch with the default configuration instead.",
]
COMMANDS = [
    "execute_python_script {{\"path\": \"train.py\", \"args\": \"--seed {seed}\"}}\n$ python3 train.py --seed {seed}",
    "command_line {{\"command\": \"python3 run_experiment.py --config configs/exp{c}.yaml\"}}\n$ python3 run_experiment.py --config configs/exp{c}.yaml",
    "command_line {{\"command\": \"python3 main.py --epochs {e} --lr 0.00{x}\"}}\n$ python3 main.py --epochs {e} --lr 0.00{x}",
    "execute_python_script {{\"path\": \"evaluate.py\", \"args\": \"--split test --batch-size {a}\"}}\n$ python3 evaluate.py --split test --batch-size {a}",
    "command_line {{\"command\": \"bash run_all.sh {c}\"}}\n$ bash run_all.sh {c}",
]
READS = [
    "inspect_file_lines {{\"path\": \"code/src/{f}\", \"start\": {b}, \"end\": {c}}}\n"
    "{b}  def forward(self, x, mask=None):\n{c}      h = self.norm(x)\n{a}      q, k, v = self.qkv(h).chunk(3, dim=-1)\n"
    "{e}      scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)\n{x}      raise NotImplementedError\n",
    "understand_file {{\"path\": \"code/src/{f}\"}}\nThe file defines class Mixture{c} with methods fit, e_step, m_step and log_likelihood; "
    "m_step is masked. It imports numpy as np and scipy.special.logsumexp, and reads {a} components from the config.",
    "inspect_file_lines {{\"path\": \"code/configs/exp{c}.yaml\", \"start\": 1, \"end\": {e}}}\n"
    "model:\n  hidden: {a}\n  layers: {c}\n  dropout: 0.{x}\ntrain:\n  epochs: {e}\n  lr: 0.00{y}\n  batch_size: {b}\n  seed: {seed}\n",
]
EDITS = [
    "edit_file {{\"path\": \"code/src/{f}\", \"start\": {b}, \"end\": {c}}}\nEdited code/src/{f}.\n--- a/src/{f}\n+++ b/src/{f}\n"
    "@@ -{b},3 +{b},5 @@\n-        raise NotImplementedError\n+        weights = torch.softmax(logits, dim=1)\n"
    "+        means = weights.T @ x / weights.sum(0, keepdim=True).T\n+        return means, weights\n",
    "edit_file {{\"path\": \"code/src/{f}\", \"start\": {a}, \"end\": {b}}}\nEdited code/src/{f}.\n--- a/src/{f}\n+++ b/src/{f}\n"
    "@@ -{a},2 +{a},4 @@\n-    return x\n+    h = torch.relu(self.fc{c}(x))\n+    h = self.dropout(h)\n+    return self.out(h) + x\n",
]
LISTS = [
    "list_files {{\"path\": \"code\"}}\nREADME.md\nconfigs/exp{c}.yaml\ndata/train_{a}.npy\ndata/test_{a}.npy\nrun_all.sh\nmain.py\ntrain.py\n"
    "evaluate.py\nsrc/__init__.py\nsrc/{f}\nsrc/model.py\nsrc/data.py\ntests/test_{f}\n",
]
OUTPUTS = [  # a run that worked
    "Loading data/train_{a}.npy: {b} samples, {c} features\nEpoch 1/{e}: loss={x}.{y}{c} acc=0.{a}\nEpoch 2/{e}: loss=0.{y}{b} acc=0.{b}\n"
    "Epoch {e}/{e}: loss=0.{c}{x} acc=0.{y}{a}\nExperiment {c}: {{\"accuracy\": 0.{a}, \"loss\": 0.{b}}}\nexit code 0",
    "Fitting {c} components on {a} points\niter {x}: log-likelihood -{b}.{y}\niter {e}: log-likelihood -{a}.{x} (converged)\n"
    "Experiment 1: {{\"nll\": {c}.{y}, \"bic\": {b}.{x}}}\nexit code 0",
    "seed {seed}: test accuracy 0.{a}, f1 0.{b}, ece 0.0{c}\nsaved out/results_{seed}.json\nExperiment 2: {{\"accuracy\": 0.{a}, \"f1\": 0.{b}}}\nexit code 0",
]
EXCEPTIONS = [  # the last line of a traceback
    "RuntimeError: shape mismatch: value tensor of shape [{a}, {b}] cannot be broadcast to indexing result of shape [{a}, {c}]",
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied ({a}x{b} and {c}x{a})",
    "ValueError: operands could not be broadcast together with shapes ({a},{b}) ({c},)",
    "KeyError: 'layer_{c}'",
    "AttributeError: 'NoneType' object has no attribute 'shape'",
    "IndexError: index {a} is out of bounds for dimension 0 with size {b}",
    "TypeError: forward() missing 1 required positional argument: 'mask'",
    "ModuleNotFoundError: No module named 'sklearn'",
    "FileNotFoundError: [Errno 2] No such file or directory: 'data/split_{c}.npy'",
    "ZeroDivisionError: division by zero",
    "AssertionError: expected {a} features, got {b}",
    "NameError: name 'np' is not defined",
    "numpy.linalg.LinAlgError: Singular matrix",
    "RuntimeError: The size of tensor a ({a}) must match the size of tensor b ({b}) at non-singleton dimension 1",
]
TRACEBACK = (
    "Loading data/train_{a}.npy: {b} samples\nTraceback (most recent call last):\n"
    "  File \"/workspace/code/train.py\", line {c}, in <module>\n    main(args)\n"
    "  File \"/workspace/code/src/{f}\", line {b}, in forward\n    out = self.proj(x) @ weights\n"
)
RARE_LINE = "RuntimeError: CUDA device-side assert triggered at /workspace/code/src/{f}:{b}"
# Step kinds (per mille): list, read, edit, a run that worked, a run that raised (~30%: "Traceback").
KINDS = [("list", 80), ("read", 220), ("edit", 200), ("run", 200), ("crash", 300)]


def fill(template_sql: str) -> str:
    """SQL substituting the placeholders of a template expression from the plan row `p`."""
    values = {
        "{a}": "(16 + mod(p.r1, 1009))::text", "{b}": "(2 + mod(p.r2, 997))::text", "{c}": "(1 + mod(p.r3, 97))::text",
        "{f}": f"(ARRAY{FILES!r})[1 + mod(p.r4, {len(FILES)})]", "{seed}": "(mod(p.r5, 10000))::text",
        "{e}": "(5 + mod(p.r6, 96))::text", "{x}": "(mod(p.r1, 10))::text", "{y}": "(mod(p.r6, 100))::text",
    }
    expression = template_sql
    for token, value in values.items():
        expression = f"replace({expression}, '{token}', {value})"
    return expression


def pick(templates: list[str], column: str) -> str:
    """SQL choosing one of `templates` by the plan row's `column`, placeholders filled."""
    array = "ARRAY[" + ", ".join(sql_string(t) for t in templates) + "]"
    return fill(f"({array})[1 + mod(p.{column}, {len(templates)})]")


def sql_string(text: str) -> str:
    """A Postgres string literal of `text` ({{ and }} in a template are literal braces)."""
    text = text.replace("{{", "{").replace("}}", "}")
    return "E'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def step_text_sql() -> str:
    """The text of the plan row `p`'s step: thought, tool call (and command), observation."""
    observation = (
        f"CASE p.kind WHEN 0 THEN {pick(LISTS, 'r2')} WHEN 1 THEN {pick(READS, 'r3')} WHEN 2 THEN {pick(EDITS, 'r5')}"
        f" WHEN 3 THEN {pick(COMMANDS, 'r2')} || E'\\n' || {pick(OUTPUTS, 'r3')}"
        f" ELSE {pick(COMMANDS, 'r2')} || E'\\n' || {fill(sql_string(TRACEBACK))} || p.exception_line END"
    )
    return f"{pick(THOUGHTS, 'r1')} || E'\\n' || {observation}"


# --- loading ---------------------------------------------------------------------------------------


ATTEMPT_SQL = """
INSERT INTO runs_attempt (
    run_id, sample_id, index, status, exit_status, exit_message, failure_label, failure_detail, tries, infra_failures,
    infra_history, job_id, claimed_by, reported_passed, reexecution_passed, reexecution_error, reexecution_output,
    reexecution_score, out_of_scope_edits, passed, outcome, mismatch, input_tokens, output_tokens, cost, agent_seconds, timings,
    final_patch, created_at, finished_at, final_answer_raw{more_columns})
SELECT %(run)s, d.sample_id, d.idx,
    CASE WHEN d.outcome = '' THEN 'error' ELSE 'done' END,
    CASE d.outcome WHEN 'budget_exhausted' THEN 'step_limit' WHEN '' THEN 'model_error' ELSE 'submitted' END,
    '', CASE d.outcome WHEN 'passed' THEN '' WHEN '' THEN d.error_label
        WHEN 'no_answer' THEN 'no_answer' WHEN 'unparseable_answer' THEN 'unparseable_answer'
        WHEN 'budget_exhausted' THEN 'budget_exhausted' ELSE 'wrong_answer' END,
    '', 1, 0, '[]', '', '',
    CASE WHEN d.outcome = '' THEN NULL ELSE d.outcome = 'passed' OR d.mismatch END,
    CASE WHEN d.outcome = '' THEN NULL ELSE d.outcome = 'passed' END,
    '', CASE WHEN d.outcome = 'reexecution_failed' THEN 'Traceback (most recent call last):\n  File "train.py", line 12\n' || d.reexec_line ELSE '' END,
    -- What runs.analysis.outcomes reads to tell these two outcomes from a wrong answer.
    CASE WHEN d.outcome = 'reexecution_failed' THEN '{"error": null, "experiments": [{"name": "Experiment 1", "error": "no result"}]}'::jsonb END,
    CASE WHEN d.outcome = 'out_of_scope' THEN '[{"path": "src/other.py", "reason": "outside the masked functions", "diff": ""}]'::jsonb
         ELSE '[]'::jsonb END, d.outcome = 'passed', d.outcome, d.mismatch,
    20000 + (random() * 380000)::int, 2000 + (random() * 28000)::int,
    CASE WHEN random() < 0.05 THEN NULL ELSE 0.02 + random() * 0.9 END, 60 + random() * 1500, '{}',
    '', now() - d.age, now() - d.age + interval '20 minutes', '{"Experiment 1": {"loss": 0.25}}'{more_values}
FROM (
    SELECT u.sample_id, u.idx, u.age,
        CASE WHEN u.v < 0.03 THEN ''
             WHEN u.w < (CASE u.n WHEN 1 THEN %(p1)s WHEN 2 THEN %(p2)s ELSE %(p3)s END) THEN 'passed'
             WHEN u.m < 0.40 THEN 'wrong_answer' WHEN u.m < 0.70 THEN 'no_answer' WHEN u.m < 0.82 THEN 'reexecution_failed'
             WHEN u.m < 0.92 THEN 'budget_exhausted' WHEN u.m < 0.97 THEN 'unparseable_answer' ELSE 'out_of_scope' END AS outcome,
        CASE WHEN u.m < 0.5 THEN 'infrastructure' ELSE 'model_provider' END AS error_label,
        u.m > 0.76 AND u.m < 0.82 AS mismatch,
        'RuntimeError: shape mismatch: value tensor of shape [' || (16 + (u.m * 1000)::int) || ', 64] cannot be broadcast' AS reexec_line
    FROM (  -- random() in a select list: one draw per row
        SELECT s.id AS sample_id, s.n, idx, random() AS v, random() AS w, random() AS m, random() * interval '60 days' AS age
        FROM (SELECT id, n FROM runs_sample WHERE n = ANY(%(n_values)s) ORDER BY md5(id::text || %(salt)s) LIMIT %(samples)s) s
        CROSS JOIN generate_series(0, %(k)s - 1) idx
        LIMIT %(wanted)s
    ) u
) d
"""


def load_runs(suite, *, total: int, systems: int) -> list[dict]:
    """Runs and their attempts (one INSERT ... SELECT per run); returns one dict per system."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from leaderboard.rules import canonical_config, system_slug
    from runs.models import Attempt, Run

    owner = get_user_model().objects.create_user("bench-owner", password="bench-owner-password")
    rng = random.Random(11)
    keys = list(product(MODELS, AGENTS, CONTEXTS, CONFIGS))
    rng.shuffle(keys)
    per_system = total // systems
    n_choices = [(1, 2, 3), (1, 2, 3), (2, 3), (1, 2)]
    made, described = 0, []
    attempt_sql, defaults = with_defaults(ATTEMPT_SQL, Attempt)
    for number, ((model, strength), agent, context, config) in enumerate(keys[:systems]):
        k = 3 if number % 5 == 2 else 1
        n_values = n_choices[number % len(n_choices)]
        hidden = number >= systems - HIDDEN_SYSTEMS
        factor = (0.35 if agent == "agentless" else 1.0) * {"full": 1.0, "none": 0.6, "oracle": 1.15}[context]
        wanted = per_system if number < systems - 1 else total - made
        system = {"number": number, "k": k, "n_values": n_values, "hidden": hidden, "attempts": wanted,
                  "slug": system_slug(suite=SUITE, agent=agent, model=model, config_json=canonical_config(config), context=context)}
        described.append(system)
        run_number = 0
        while wanted > 0:
            run = Run.objects.create(
                suite=suite, agent=agent, model=model, agent_config=config, context=context, n_values=list(n_values),
                attempts_per_sample=k, sandbox_backend="bubblewrap", hidden=hidden, created_by=owner if hidden else None,
                description=f"bench_explore system {number} run {run_number}",
            )
            with connection.cursor() as cursor:
                cursor.execute(attempt_sql, {
                    **defaults, "run": run.pk, "n_values": list(n_values), "salt": f"{number % 4}-{run_number}", "k": k,
                    "samples": -(-wanted // k), "wanted": wanted,
                    **{f"p{n}": min(0.95, strength * factor * 0.45 ** (n - 1)) for n in (1, 2, 3)},
                })
                wanted -= cursor.rowcount
                made += cursor.rowcount
            run_number += 1
    return described


PLAN_SQL = """
CREATE UNLOGGED TABLE bench_step_plan AS
SELECT attempt_id, step, CASE {kind_case} END AS kind, r1, r2, r3, r4, r5, r6, NULL::text AS exception_line
FROM (  -- random() in a select list: one draw per row
    SELECT a.id AS attempt_id, step, (random() * 1000)::int AS dice,
        (random() * 1000000)::int AS r1, (random() * 1000000)::int AS r2, (random() * 1000000)::int AS r3,
        (random() * 1000000)::int AS r4, (random() * 1000000)::int AS r5, (random() * 1000000)::int AS r6
    FROM runs_attempt a CROSS JOIN generate_series(1, %(steps)s) step
) r
"""


def kind_case() -> str:
    whens, bound = [], 0
    for number, (_, share) in enumerate(KINDS):
        bound += share
        whens.append(f"WHEN r.dice < {bound} THEN {number}")
    return " ".join(whens[:-1]) + f" ELSE {len(KINDS) - 1}"


def load_steps(*, steps: int, workers: int = 2) -> None:
    """The plan of every step (kind and random numbers), then StepText in `workers` parallel
    connections (to_tsvector is most of the time), AttemptException per traceback and AttemptAnalysis."""
    import psycopg
    from django.db import connection

    from runs.models import AttemptAnalysis, AttemptException, StepText

    exception_array = "ARRAY[" + ", ".join(sql_string(t) for t in EXCEPTIONS) + "]"
    lap = Laps()
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS bench_step_plan")
        cursor.execute(PLAN_SQL.replace("{kind_case}", kind_case()), {"steps": steps})
        cursor.execute(f"UPDATE bench_step_plan p SET exception_line = {fill(f'({exception_array})[1 + mod(p.r5, {len(EXCEPTIONS)})]')} WHERE kind = 4")
        # The rare phrase, in RARE_STEPS steps of public attempts (their 7th, or last when fewer).
        cursor.execute(
            f"UPDATE bench_step_plan p SET kind = 4, exception_line = {fill(sql_string(RARE_LINE))} "
            "WHERE (attempt_id, step) IN (SELECT p2.attempt_id, p2.step FROM bench_step_plan p2 JOIN runs_attempt a ON a.id = p2.attempt_id "
            "JOIN runs_run r ON r.id = a.run_id WHERE NOT r.hidden AND p2.step = %s ORDER BY md5(p2.attempt_id::text) LIMIT %s)",
            [min(7, steps), RARE_STEPS],
        )
        cursor.execute("CREATE INDEX ON bench_step_plan (attempt_id)")
        cursor.execute("ANALYZE bench_step_plan")
        cursor.execute("SELECT min(id), max(id) FROM runs_attempt")
        low, high = cursor.fetchone()
        dropped = drop_secondary_indexes(cursor, ["runs_steptext", "runs_attemptexception", "runs_attemptanalysis"])
    lap("plan")

    text = step_text_sql()
    insert, step_defaults = with_defaults(
        "INSERT INTO runs_steptext (attempt_id, step, text, document{more_columns}) "
        "SELECT attempt_id, step, t, to_tsvector('simple', t){more_values} "
        f"FROM (SELECT p.attempt_id, p.step, {text} AS t FROM bench_step_plan p WHERE p.attempt_id BETWEEN %(first)s AND %(last)s) x",
        StepText,
    )
    bounds = [low + (high - low + 1) * i // workers for i in range(workers + 1)]
    errors = []

    def insert_range(first: int, last: int) -> None:
        try:
            with psycopg.connect(DB_URL, autocommit=True) as own:
                own.execute("SET synchronous_commit = off")
                own.execute(insert, {**step_defaults, "first": first, "last": last})
        except Exception as error:  # noqa: BLE001 - re-raised below, in the main thread
            errors.append(error)

    threads = [threading.Thread(target=insert_range, args=(bounds[i], bounds[i + 1] - 1)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    lap("step texts and tsvectors")

    with connection.cursor() as cursor:
        cursor.execute(*with_defaults(
            "INSERT INTO runs_attemptexception (attempt_id, step, exception_type, pattern, message{more_columns}) "
            "SELECT attempt_id, step, split_part(exception_line, ':', 1), "
            "left(regexp_replace(substr(exception_line, strpos(exception_line, ': ') + 2), '[0-9]+', 'N', 'g'), 300), "
            "left(exception_line, 500){more_values} FROM bench_step_plan WHERE kind = 4",
            AttemptException,
        ))
        cursor.execute(*with_defaults(
            "INSERT INTO runs_attemptexception (attempt_id, step, exception_type, pattern, message{more_columns}) "
            "SELECT id, NULL, 'RuntimeError', 'shape mismatch: value tensor of shape [N, N] cannot be broadcast', "
            "split_part(reexecution_output, E'\\n', 3){more_values} FROM runs_attempt WHERE outcome = 'reexecution_failed'",
            AttemptException,
        ))
        first_line = "left(exception_line, 300)"
        cursor.execute(*with_defaults(f"""
            INSERT INTO runs_attemptanalysis (attempt_id, rules_version, steps, experiment_runs, first_run_step, first_run_crashed,
                working_run_step, seconds_to_working, cost_to_working, first_error_step, first_error_line, analysed_at{{more_columns}})
            SELECT attempt_id, 1, count(*), count(*) FILTER (WHERE kind >= 3), min(step) FILTER (WHERE kind >= 3),
                (array_agg(kind = 4 ORDER BY step) FILTER (WHERE kind >= 3))[1],
                min(step) FILTER (WHERE kind = 3), min(step) FILTER (WHERE kind = 3) * 37.5,
                min(step) FILTER (WHERE kind = 3) * 0.004, min(step) FILTER (WHERE kind = 4),
                coalesce((array_agg({first_line} ORDER BY step) FILTER (WHERE kind = 4))[1], ''), now(){{more_values}}
            FROM bench_step_plan GROUP BY attempt_id
        """, AttemptAnalysis))
        lap("exceptions and analyses")
        for statement in dropped:
            cursor.execute(statement)
        cursor.execute("DROP TABLE bench_step_plan")
        lap("indexes")
    print("    " + lap.summary(), flush=True)


class Laps:
    """Seconds per phase: `lap("name")` ends one; `summary()` lists them."""

    def __init__(self):
        self.last, self.phases = time.perf_counter(), []

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.phases.append((name, now - self.last))
        self.last = now

    def summary(self) -> str:
        return ", ".join(f"{name} {seconds:.0f} s" for name, seconds in self.phases)


def drop_secondary_indexes(cursor, tables: list[str]) -> list[str]:
    """Drop the tables' indexes that back no constraint (faster to build once after the load than
    to maintain row by row); returns the statements recreating them, as the migrations made them."""
    cursor.execute(
        "SELECT i.indexname, i.indexdef FROM pg_indexes i WHERE i.tablename = ANY(%s) AND NOT EXISTS "
        "(SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)",
        [tables],
    )
    rows = cursor.fetchall()
    for name, _ in rows:
        cursor.execute(f'DROP INDEX "{name}"')
    return [definition for _, definition in rows]


def load(options) -> list[dict]:
    from django.db import connection

    clock = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute("SET synchronous_commit = off")
    suite, _ = load_suite(name=SUITE, file_of=lambda f: f"src/{FILES[f % len(FILES)]}")
    systems = load_runs(suite, total=options.attempts, systems=options.systems)
    print(f"  {options.attempts:,} attempts across {len(systems)} systems in {time.perf_counter() - clock:.1f} s", flush=True)
    clock = time.perf_counter()
    load_steps(steps=options.steps)
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE IF NOT EXISTS bench_explore_meta (systems jsonb, attempts int, steps int)")
        cursor.execute("DELETE FROM bench_explore_meta")
        cursor.execute("INSERT INTO bench_explore_meta VALUES (%s, %s, %s)", [json.dumps(systems), options.attempts, options.steps])
        cursor.execute("VACUUM ANALYZE")
    print(f"  {options.attempts * options.steps:,} steps (text, tsvector, GIN index), exceptions and analyses in "
          f"{time.perf_counter() - clock:.1f} s", flush=True)
    return systems


def describe_data() -> None:
    """What the searches run on: how many steps hold each phrase, the sizes of the step table and its GIN index."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT count(*) FROM runs_steptext), "
            "(SELECT count(*) FROM runs_steptext WHERE document @@ websearch_to_tsquery('simple', %s)), "
            "(SELECT count(*) FROM runs_steptext WHERE document @@ websearch_to_tsquery('simple', 'Traceback')), "
            "(SELECT avg(length(text)) FROM (SELECT text FROM runs_steptext TABLESAMPLE SYSTEM (1) UNION ALL (SELECT text FROM runs_steptext LIMIT 100)) sampled), "
            "pg_total_relation_size('runs_steptext'), "
            "coalesce((SELECT pg_relation_size(indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = 'step_text_document'), 0)",
            [f'"{RARE_PHRASE}"'],
        )
        steps, rare, common, length, table, gin = cursor.fetchone()
    print(f"  {steps:,} steps of {float(length or 0):.0f} characters on average; \"{RARE_PHRASE}\" in {rare} of them, "
          f"Traceback in {common:,} ({common / max(steps, 1):.0%}); step table {table / 2**30:.2f} GiB with its "
          f"indexes, GIN index {gin / 2**20:.0f} MiB", flush=True)


def loaded_systems(options) -> list[dict] | None:
    """The systems of the data already in `bench_explore`, if it was loaded with these options."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('bench_explore_meta') IS NOT NULL")
        if not cursor.fetchone()[0]:
            return None
        cursor.execute("SELECT systems, attempts, steps FROM bench_explore_meta")
        row = cursor.fetchone()
    if row is None or row[1] != options.attempts or row[2] != options.steps:
        return None
    systems = row[0] if isinstance(row[0], list) else json.loads(row[0])
    return systems if len(systems) == options.systems else None


def database_exists() -> bool:
    import psycopg

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as connection:
        return connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DB_NAME]).fetchone() is not None


# --- timing ----------------------------------------------------------------------------------------


def compared_pair(systems: list[dict]) -> tuple[dict, dict]:
    """Two public systems of one attempt per sample, on every n, with different samples drawn: they
    share most samples (about 87%), not all."""
    candidates = [s for s in systems if not s["hidden"] and s["k"] == 1 and list(s["n_values"]) == [1, 2, 3]]
    first = candidates[0]
    second = next((s for s in candidates[1:] if s["number"] % 4 != first["number"] % 4), candidates[1])
    return first, second


def measure(client, urls: list[str], requests: int):
    """Time a first request of urls[0], then `requests` more cycling through `urls` (one URL: the
    same page again; several: nothing memoised helps). Returns (status, None) when a page does not
    answer 200, else (200, (first, times, queries per request, the slowest run of each query's
    SQL as (seconds, sql), size of the last page))."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    started = time.perf_counter()
    response = client.get(urls[0])
    first = time.perf_counter() - started
    if response.status_code != 200:
        return response.status_code, None
    times = []
    with CaptureQueriesContext(connection) as captured:
        for number in range(requests):
            url = urls[(number + 1) % len(urls)]
            started = time.perf_counter()
            response = client.get(url)
            times.append(time.perf_counter() - started)
            if response.status_code != 200:
                return response.status_code, None
    slowest: dict[str, float] = {}
    for query in captured.captured_queries:
        slowest[query["sql"]] = max(slowest.get(query["sql"], 0.0), float(query["time"]))
    ranked = sorted(((seconds, sql) for sql, seconds in slowest.items()), reverse=True)
    return 200, (first, times, len(captured.captured_queries) / max(requests, 1), ranked, len(response.content))


def routed(url: str) -> bool:
    """Whether the site has a view at `url`'s path (a page being written may not be there yet)."""
    from django.urls import Resolver404, resolve

    try:
        resolve(url.split("?", 1)[0])
    except Resolver404:
        return False
    return True


def explain(sql: str) -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
        return "\n".join(f"      {row[0]}" for row in cursor.fetchall())


def time_pages(systems: list[dict], options) -> None:
    from urllib.parse import urlencode

    from django.test import Client

    from leaderboard import explorer
    from runs.models import Attempt

    client = Client(HTTP_HOST="localhost")
    a, b = compared_pair(systems)
    three_filters = next(s for s in systems if not s["hidden"] and 2 in s["n_values"])
    others = [s for s in systems if not s["hidden"] and s["slug"] not in (a["slug"], b["slug"])]
    # Page 100, or the last one where fewer attempts were loaded.
    no_answers = Attempt.objects.filter(outcome=Attempt.NO_ANSWER, run__hidden=False).count()
    deep_page = max(1, min(100, -(-no_answers // explorer.PAGE_SIZE)))
    fresh_pairs = ["/compare/?" + urlencode({"a": x["slug"], "b": y["slug"]}) for x, y in zip(others, others[1:] + others[:1])]
    pages = [
        ("explorer, 3 filters", "/explore/?" + urlencode({"system": three_filters["slug"], "n": 2, "outcome": "wrong_answer"})),
        ("search, rare phrase", "/explore/?" + urlencode({"q": f'"{RARE_PHRASE}"'})),
        ("search, common word", "/explore/?" + urlencode({"q": "Traceback"})),
        ("comparison of two", "/compare/?" + urlencode({"a": a["slug"], "b": b["slug"]})),
        # Not asked for, but cheap to know: a search narrowed by filters (the hits of one system
        # among 3M steps), an exception filter, and a deep page.
        ("+ search and filters", "/explore/?" + urlencode({"q": '"shape mismatch"', "system": three_filters["slug"], "n": 3})),
        ("+ exception filter", "/explore/?" + urlencode({"exception": "ZeroDivisionError", "recovered": 0})),
        (f"+ explorer page {deep_page}", "/explore/?" + urlencode({"outcome": "no_answer", "page": deep_page})),
        # Each request a pair not compared before: no memoised bootstrap (the page above repeats one pair).
        ("+ comparison, new pair", fresh_pairs),
    ]
    print(f"\n{'page':<22}{'first':>9}{'p50':>9}{'p95':>9}{'max':>9}{'queries':>9}{'KB':>6}   ({options.requests} requests after the first, "
          f"bound {BUDGET} ms on p95)")
    slow = []
    for name, urls in pages:
        urls = [urls] if isinstance(urls, str) else urls
        status, result = measure(client, urls, options.requests)
        if result is None:
            note = f"answered {status}" if routed(urls[0]) else "not available yet"
            print(f"{name:<22}{note:>51}   {urls[0]}")
            continue
        first, times, queries, ranked, size = result
        p95 = percentile(times, 0.95) * 1000
        verdict = "ok" if p95 < BUDGET else "OVER"
        print(f"{name:<22}{first * 1000:>7.0f}ms{statistics.median(times) * 1000:>7.0f}ms{p95:>7.0f}ms{max(times) * 1000:>7.0f}ms{queries:>9.0f}"
              f"{size / 1024:>6.0f}   {verdict}")
        slow += [(name, seconds, sql) for seconds, sql in ranked if seconds * 1000 >= options.explain_over]
    for name, seconds, sql in slow:
        print(f"\n{name}: a query took {seconds * 1000:.0f} ms:\n    {sql}\n{explain(sql)}")
    print("\nURLs: " + "\n      ".join(urls if isinstance(urls, str) else f"{urls[0]} (and {len(urls) - 1} other pairs)"
                                       for _, urls in pages))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--steps", type=int, default=30, help="steps per attempt")
    parser.add_argument("--systems", type=int, default=50)
    parser.add_argument("--requests", type=int, default=30, help="timed requests per page, after a first one")
    parser.add_argument("--keep", action="store_true", help=f"keep the database {DB_NAME} (to EXPLAIN ANALYZE there)")
    parser.add_argument("--reuse", action="store_true", help=f"skip the loading when {DB_NAME} already holds these data")
    parser.add_argument("--explain-over", type=float, default=BUDGET, help="EXPLAIN ANALYZE queries slower than this (ms)")
    parser.add_argument("--redis-db", type=int, default=REDIS_DB, help=f"Redis database to use and flush (default {REDIS_DB})")
    options = parser.parse_args()
    redis_url = os.environ["REDIS_URL"] = url_with_path(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), f"/{options.redis_db}")
    if options.systems <= HIDDEN_SYSTEMS + 2:
        parser.error(f"--systems must be over {HIDDEN_SYSTEMS + 2}")

    flush_redis(redis_url)
    reusing = options.reuse and database_exists()
    if not reusing:
        drop_database(f"{SERVER}/postgres", DB_NAME)
        create_database(f"{SERVER}/postgres", DB_NAME)
    try:
        import django

        django.setup()
        from django.core.management import call_command

        clock = time.perf_counter()
        call_command("migrate", verbosity=0)
        print(f"database {DB_NAME}: migrated in {time.perf_counter() - clock:.1f} s", flush=True)
        systems = loaded_systems(options) if reusing else None
        if systems is None:
            if reusing:  # there, but other data: start again
                from django.db import connections

                connections.close_all()
                drop_database(f"{SERVER}/postgres", DB_NAME)
                create_database(f"{SERVER}/postgres", DB_NAME)
                call_command("migrate", verbosity=0)
            clock = time.perf_counter()
            systems = load(options)
            print(f"loaded in {time.perf_counter() - clock:.1f} s", flush=True)
        else:
            print(f"reusing the data already in {DB_NAME}")
        describe_data()
        time_pages(systems, options)
    finally:
        if options.keep:
            from django.db import connections

            connections.close_all()
            print(f"\ndatabase {DB_NAME} kept ({DB_URL})")
        else:
            drop_database(f"{SERVER}/postgres", DB_NAME)
            print(f"\ndatabase {DB_NAME} dropped")
        flush_redis(redis_url)


if __name__ == "__main__":
    main()
