"""Hard-coded gold numbers in an agent's implementations (runs.benchmark.gold_literals).

Each test writes a masked body as an agent that knows the published gold numbers would, and checks
what the detector reports; honest bodies (the built-in suite's gold code among them) report nothing.
"""
import json
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runs.benchmark.gold_literals import (
    MAX_FOUND,
    GoldLiteral,
    GoldNumber,
    Implementation,
    gold_literals_in,
    gold_numbers_of,
    implementations_of,
    significant_digits,
)
from runs.benchmark.masking import MaskTarget, mask_source
from runs.benchmark.scoring import score_experiment

SUITE = Path(__file__).resolve().parents[2] / "runs" / "suites" / "builtin"
GOLD = [GoldNumber(0.8123, 0.05, 1e-8), GoldNumber(-41.52, 0.01, 0.0), GoldNumber(1234.0, 0.0, 0.0)]

GOLD_FILE = textwrap.dedent(
    """
    import json


    class Model:
        def score(self, values):
            return sum(values) / len(values)


    def report(values):
        print(json.dumps({"score": Model().score(values)}))
    """
).lstrip()
# The task's description of the function, which the masked stub holds as its docstring.
DESCRIPTION = "The mean; the paper reports 0.81227."


def agent_file(body: str) -> str:
    """The gold file with `Model.score`'s body replaced by `body`."""
    return GOLD_FILE.replace("        return sum(values) / len(values)\n", textwrap.indent(body, "        "))


def found_in(body: str, gold=GOLD) -> list[str]:
    """The literals reported for `Model.score` with this body, as written."""
    masked = mask_source(GOLD_FILE, [MaskTarget("Model.score", description=DESCRIPTION)]).text
    assert DESCRIPTION in masked
    implementations = implementations_of(
        files={"code/model.py": agent_file(body)}, functions={"code/model.py": ["Model.score"]}, stubs={"code/model.py": masked}
    )
    return [record.literal for record in gold_literals_in(implementations=implementations, gold=gold)]


@pytest.mark.parametrize(
    "body, literals",
    [
        ("return 0.8123\n", ["0.8123"]),
        ("return 0.8124\n", ["0.8124"]),  # within 5 %, as scoring judges it
        ("return -41.52\n", ["-41.52"]),
        ("return - 41.52\n", ["-41.52"]),
        ("return 0 - 41.52\n", ["-41.52"]),  # after a minus: either sign
        ("return 8123e-4\n", ["8123e-4"]),
        ("return 0.812_3\n", ["0.812_3"]),
        ("return 0.8123j.imag\n", ["0.8123j"]),
        ("return 0.8123.real\n", ["0.8123"]),
        ("return 0.8123if values else 0\n", ["0.8123"]),
        ("return 1234\n", ["1234"]),
        ("print('{\"score\": 0.8123}')\n", ["0.8123"]),
        ("print(json.dumps(json.loads('{\"score\": -41.52}')))\n", ["-41.52"]),
        ("return float(b'0.8123'.decode())\n", ["0.8123"]),
        ('return float(f"{0.8123:.4f}")\n', ["0.8123"]),
        ("return float('x_0.8123'[2:])\n", ["0.8123"]),
        ('return float("""\n# 0.8123\n""".strip("# \\n"))\n', ["0.8123"]),  # a '#' inside a string is no comment
        ('return ("#", 0.8123)[1]\n', ["0.8123"]),
        ('return 0.8123 if"#" else 0\n', ["0.8123"]),
        ("x = 0.8123  # and again 0.8123\nreturn x + 0.81230\n", ["0.8123", "0.81230"]),
    ],
)
@pytest.mark.filterwarnings("ignore:invalid decimal literal:SyntaxWarning")  # `0.8123if`, valid all the same
def test_hard_coded_gold_numbers_are_found(body, literals):
    assert found_in(body) == literals


@pytest.mark.parametrize(
    "body",
    [
        "return sum(values) / len(values)\n",
        "return 0.812\n",  # three significant digits
        "return 0.0008\n",
        "return 1200 + 0.9\n",
        "return 0.7000\n",  # outside tolerance
        "return 41.52\n",  # the wrong sign, and no minus before it
        "return 1235\n",  # 1234 must be exact (rtol = atol = 0)
        "# the paper reports 0.8123\nreturn sum(values)  # not -41.52\n",
        "return x1234\n",
        "return 0x4D2\n",  # 1234 in hexadecimal: read as written
        "return 0.7978845608 * x + 3.14159 + 0.6931 + 3.1415\n",  # well-known constants (sqrt(2/pi), pi, ln 2), cut or rounded
        "return x * 1.000 + 100.0\n",  # trailing zeros are no precision
    ],
)
def test_honest_bodies_and_near_misses_are_not_reported(body):
    assert found_in(body) == []


def test_the_stubs_own_numbers_are_not_the_agents():
    # The stub's docstring (the task's description) quotes 0.81227: the agent did not write it, and may keep it.
    assert found_in(f'"""{DESCRIPTION}"""\nreturn sum(values) / len(values)\n') == []
    assert found_in(f'"""{DESCRIPTION}"""\nreturn 0.81227\n') == []  # the same text: a known limit
    assert found_in(f'"""{DESCRIPTION}"""\nreturn 0.8123\n') == ["0.8123"]


def test_records_name_the_file_function_and_line():
    body = "x = 1\n\nreturn -41.52\n"
    files = {"code/model.py": agent_file(body)}
    [record] = gold_literals_in(
        implementations=implementations_of(files=files, functions={"code/model.py": ["score"]}), gold=GOLD
    )
    assert record == GoldLiteral(path="code/model.py", function="Model.score", literal="-41.52", line=8)
    assert files["code/model.py"].splitlines()[record.line - 1].strip() == "return -41.52"
    assert record.as_dict() == {"path": "code/model.py", "function": "Model.score", "literal": "-41.52", "line": 8}


def test_a_function_that_cannot_be_found_has_nothing_to_check():
    files = {"code/model.py": "def f(:\n", "code/other.py": "def g():\n    return 0.8123\n"}
    functions = {"code/model.py": ["f"], "code/other.py": ["g", "missing"], "code/absent.py": ["h"]}
    [implementation] = implementations_of(files=files, functions=functions)
    assert (implementation.path, implementation.function, implementation.line) == ("code/other.py", "g", 2)


@pytest.mark.parametrize(
    "literal, digits",
    [("0.001234", 4), ("1200", 2), ("1200.", 2), ("1200.0", 2), ("1.000", 1), ("0.7978845608", 10), ("1.5e-3", 2), ("8123E-4", 4), ("1_234", 4),
     ("0.8123j", 4), ("-0.8123", 4), ("0", 0), ("000120", 2), (".5", 1)],
)
def test_significant_digits_as_written(literal, digits):
    assert significant_digits(literal) == digits


def test_gold_numbers_carry_the_tolerance_scoring_gives_them():
    result = {"acc": 0.9, "losses": [1.5, "2.5"], "nested": {"nan": float("nan"), "flag": True, "name": "x"}}
    numbers = gold_numbers_of(gold_result=result, rtol=0.1, atol=0.0, number_tolerances={"losses[1]": (0.5, 1.0)})
    assert numbers == [GoldNumber(0.9, 0.1, 0.0), GoldNumber(1.5, 0.1, 0.0), GoldNumber(2.5, 0.5, 1.0)]
    assert gold_numbers_of(gold_result={"a": 1}) == [GoldNumber(1.0, 0.05, 1e-8)]  # the scoring defaults


def test_a_bad_tolerance_is_named():
    with pytest.raises(ValueError, match=r"gold number 1 \(2.0\): atol must be a finite number >= 0, got -1.0"):
        gold_literals_in(implementations=[], gold=[(1.0, 0.1, 0.0), (2.0, 0.1, -1.0)])


@settings(max_examples=200, deadline=None)
@given(
    gold=st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
    literal=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    negative=st.booleans(),
    rtol=st.sampled_from([0.0, 1e-4, 0.05, 0.5]),
    atol=st.sampled_from([0.0, 1e-8, 1.0]),
)
def test_a_literal_is_reported_exactly_when_scoring_would_pass_it(gold, literal, negative, rtol, atol):
    written = f"{literal:.6g}"
    value = -float(written) if negative else float(written)
    body = f"return {'-' if negative else ''}{written}\n"
    reported = gold_literals_in(implementations=[Implementation("code/m.py", "f", body)], gold=[(gold, rtol, atol)])
    passes = score_experiment(gold={"x": gold}, predicted={"x": value}, rtol=rtol, atol=atol).passed
    expected = passes and significant_digits(written) >= 4
    if negative and not expected:  # after a minus either sign counts
        positive = score_experiment(gold={"x": gold}, predicted={"x": float(written)}, rtol=rtol, atol=atol).passed
        expected = positive and significant_digits(written) >= 4
    assert bool(reported) == expected


def test_the_builtin_suites_gold_code_holds_none_of_its_gold_numbers():
    for paper in json.loads((SUITE / "suite.json").read_text())["papers"]:
        spec = json.loads((SUITE / paper / "paper.json").read_text())
        results = json.loads((SUITE / paper / "gold.json").read_text())["results"]
        files, functions = {}, {}
        for function in spec["functions"]:
            files[f"code/{function['file']}"] = (SUITE / paper / "code" / function["file"]).read_text()
            functions.setdefault(f"code/{function['file']}", []).append(function["name"])
        gold = [
            number
            for experiment in spec["experiments"]
            if str(experiment["id"]) in results
            for number in gold_numbers_of(gold_result=results[str(experiment["id"])], rtol=experiment.get("rtol"), atol=experiment.get("atol"))
        ]
        implementations = implementations_of(files=files, functions=functions)
        assert gold and len(implementations) == len(spec["functions"])
        assert gold_literals_in(implementations=implementations, gold=gold) == [], paper
        # The control: one gold number written into a gold body is found.
        planted = [Implementation(i.path, i.function, i.body + f"\nreturn {gold[0].value!r}\n") for i in implementations[:1]]
        assert [r.literal for r in gold_literals_in(implementations=planted, gold=gold)] == [repr(gold[0].value)]


@pytest.mark.parametrize(
    "padding",
    [
        lambda i: f"{10_000 + i % 90_000}.5",  # many distinct numbers, none gold
        lambda i: "'a'",  # many strings
        lambda i: "1",  # many short numbers
    ],
    ids=["distinct-numbers", "strings", "short-numbers"],
)
def test_a_body_of_hundreds_of_thousands_of_literals_is_quick(padding):
    body = "x = [" + ", ".join(padding(i) for i in range(200_000)) + "]\n# 0.8123\nreturn 0.8123\n"
    gold = [(0.8123 + i * 1e-3, 0.0, 0.0) for i in range(1000)]
    started = time.process_time()
    found = gold_literals_in(implementations=[Implementation("code/m.py", "f", body)], gold=gold)
    assert time.process_time() - started < 5
    assert found == [GoldLiteral("code/m.py", "f", "0.8123", 3)]


def test_the_records_are_bounded():
    body = "x = [" + ", ".join("0.8123" for _ in range(100_000)) + "]\n"
    implementations = [Implementation("code/m.py", name, body) for name in ("f", "g")]
    found = gold_literals_in(implementations=implementations, gold=GOLD)
    assert len(found) == MAX_FOUND and {record.function for record in found} == {"f"}
