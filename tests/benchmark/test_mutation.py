"""Mutants: single-point wrong versions of one function, deterministic for a seed."""
import ast
import textwrap

import numpy as np
import pytest

from runs.benchmark.locating import FunctionNotFound, locate_function
from runs.benchmark.masking import function_body_source
from runs.benchmark.mutation import Mutant, function_mutants

MODULE = textwrap.dedent(
    '''\
    """Module docstring: 1 + 2 stays."""
    import numpy as np

    SCALE = 3  # outside every function: never mutated


    def score(x, y):
        """Weighted score; 2 * x is only prose."""
        label = "a-b"  # strings are never touched
        return x * 2 + y - 3


    class Loss:
        def __call__(self, a, b):
            return np.sum((a - b) ** 2, axis=0) / a.shape[0]


    class Other:
        def __call__(self, a, b):
            if a.size >= b.size:
                return -a.mean()
            return b.mean()
    '''
)


def outside_is_unchanged(source: str, mutated: str, name: str) -> bool:
    location = locate_function(source, name)
    tail = len(source) - location.body_end
    return mutated[: location.body_start] == source[: location.body_start] and mutated[len(mutated) - tail :] == source[location.body_end :]


def load(source: str, name: str):
    namespace: dict = {}
    exec(compile(source, "<mutant>", "exec"), namespace)  # noqa: S102 - code written by this test
    return namespace[name]


def test_mutants_are_deterministic_for_a_seed():
    first = function_mutants(MODULE, "score", seed=7)
    again = function_mutants(MODULE, "score", seed=7)
    assert first == again and len(first) >= 6
    other = function_mutants(MODULE, "score", seed=8)
    assert sorted(m.source for m in other) == sorted(m.source for m in first)
    assert [m.description for m in other] != [m.description for m in first]


def test_limit_takes_a_prefix_of_the_same_order():
    everything = function_mutants(MODULE, "score", seed=3)
    assert function_mutants(MODULE, "score", seed=3, limit=2) == everything[:2]
    assert function_mutants(MODULE, "score", limit=0) == []


@pytest.mark.parametrize("name", ["score", "Loss.__call__", "Other.__call__"])
def test_each_mutant_parses_and_changes_only_the_target_body(name):
    mutants = function_mutants(MODULE, name, seed=1)
    assert mutants
    assert len({m.source for m in mutants}) == len(mutants)
    qualified = locate_function(MODULE, name).qualified_name
    for mutant in mutants:
        assert isinstance(mutant, Mutant) and mutant.function == qualified
        ast.parse(mutant.source)
        assert mutant.source != MODULE
        assert outside_is_unchanged(MODULE, mutant.source, name), mutant.description
        assert mutant.body == function_body_source(mutant.source, qualified)
        assert mutant.body != function_body_source(MODULE, qualified)
        assert mutant.description.startswith("line")


def test_docstrings_and_strings_are_never_mutated():
    for mutant in function_mutants(MODULE, "score"):
        assert '"""Weighted score; 2 * x is only prose."""' in mutant.source
        assert 'label = "a-b"' in mutant.source


def test_kinds_of_mutation_on_a_small_function():
    descriptions = {m.description for m in function_mutants(MODULE, "score")}
    assert {
        "line 10: `*` replaced by `/`",
        "line 10: `+` replaced by `-`",
        "line 10: `-` replaced by `+`",
        "line 10: `2` replaced by `3`",
        "line 10: `3` replaced by `4`",
        "line 10: `return x * 2 + y - 3` returns zeros",
    } == descriptions
    other = {m.description for m in function_mutants(MODULE, "Other.__call__")}
    assert "line 20: `>=` replaced by `>`" in other
    assert "line 21: unary minus dropped from `-a.mean()`" in other
    assert "lines 21, 22: every return returns zeros" in other
    loss = {m.description for m in function_mutants(MODULE, "__call__", line_hint=15)}
    assert {"line 15: `2` replaced by `1`", "line 15: `**` replaced by `*`", "line 15: `0` replaced by `1`"} <= loss


def test_mutants_of_a_numeric_function_change_its_result():
    original = load(MODULE, "score")
    mutants = function_mutants(MODULE, "score", seed=0)
    assert mutants
    for mutant in mutants:
        assert load(mutant.source, "score")(5, 7) != original(5, 7), mutant.description


def test_return_zeros_keeps_the_shape_of_arrays_and_tuples():
    source = "import numpy as np\n\ndef pair(a):\n    return a * 2, np.ones(3)\n"
    (zeroed,) = [m for m in function_mutants(source, "pair") if m.description.endswith("returns zeros")]
    assert "return 0 * (a * 2), 0 * (np.ones(3))" in zeroed.source
    first, second = load(zeroed.source, "pair")(np.arange(4.0))
    assert first.shape == (4,) and not first.any() and second.shape == (3,) and not second.any()


def test_float_constants_are_scaled_and_zero_becomes_one():
    source = "def f(x):\n    return x * 0.1 + 0.0 + 1.0\n"
    descriptions = {m.description for m in function_mutants(source, "f")}
    assert {"line 2: `0.1` replaced by `0.05`", "line 2: `0.0` replaced by `1.0`", "line 2: `1.0` replaced by `0.5`"} <= descriptions


def test_unary_minus_after_a_keyword_keeps_a_space():
    source = "def f(x):\n    return-x\n"
    (dropped,) = [m for m in function_mutants(source, "f") if "unary minus" in m.description]
    assert dropped.source == "def f(x):\n    return x\n"


def test_stub_and_unknown_functions():
    assert function_mutants('def f():\n    """Doc."""\n    raise NotImplementedError\n', "f") == []
    with pytest.raises(FunctionNotFound):
        function_mutants(MODULE, "missing")
