"""Re-execution runs only what the task allows: masked bodies, plus new imports and helpers in their files.

Each test attacks the scope as an agent would and checks what the harness would run.
"""
import ast
import contextlib
import io
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs.benchmark.locating import list_functions
from runs.benchmark.masking import MaskTarget, function_body_source, mask_source, replace_function_body
from runs.benchmark.scope import MAX_FILE_CHARS, MAX_REASONS, OutOfScopeEdit, restrict_to_scope
from tests.benchmark.forging import FORGING_FORMS, assert_every_form_dropped, with_every_form, with_form

PATH = "code/model.py"
SUITE = Path(__file__).resolve().parents[2] / "runs" / "suites" / "builtin"


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def scope_one(masked: str, names: list[str], agent: str | None, path: str = PATH) -> tuple[str, list[OutOfScopeEdit]]:
    """What the harness runs of one file with masked functions, and what it listed as dropped."""
    result = restrict_to_scope(masked={path: masked}, functions={path: names}, patched={path: agent})
    assert set(result.files) <= {path}
    text = result.files.get(path, masked)
    compile(text, path, "exec")  # whatever the agent did, the harness's file is valid Python
    assert all(edit.path == path for edit in result.out_of_scope)
    return text, result.out_of_scope


def run_module(text: str, name: str = "model") -> dict:
    namespace = {"__name__": name}
    exec(compile(text, f"{name}.py", "exec"), namespace)  # noqa: S102 - the test's own code
    return namespace


def body(text: str, name: str) -> str:
    return function_body_source(text, name)


MASKED = src(
    '''
    """A toy model."""
    import math

    SCALE = 3


    class Loss:
        """Scaled squares."""

        def __init__(self, factor):
            self.factor = factor

        def __call__(self, x):
            """Returns factor * x ** 2."""
            raise NotImplementedError

        def describe(self):
            return f"loss x{self.factor}"


    def train(steps):
        return [Loss(SCALE)(step) for step in range(steps)]


    if __name__ == "__main__":
        print(train(3))
    '''
)
STUB = '        """Returns factor * x ** 2."""\n        raise NotImplementedError\n'
IMPLEMENTED = MASKED.replace(STUB, STUB.replace("raise NotImplementedError", "return self.factor * x ** 2"))
assert IMPLEMENTED != MASKED


def test_the_implementation_alone_is_kept_as_written():
    text, dropped = scope_one(MASKED, ["Loss.__call__"], IMPLEMENTED)
    assert text == IMPLEMENTED
    assert dropped == []
    assert run_module(text)["train"](3) == [0, 3, 12]


def test_masked_files_the_patch_did_not_touch_are_not_in_the_result():
    result = restrict_to_scope(
        masked={PATH: MASKED, "code/other.py": "def f():\n    raise NotImplementedError\n"},
        functions={PATH: ["Loss.__call__"], "code/other.py": ["f"]},
        patched={PATH: IMPLEMENTED},
    )
    assert set(result.files) == {PATH}
    assert result.out_of_scope == []


# --- files without masked functions never run ------------------------------------------------------


def test_an_edited_experiment_script_is_dropped():
    original = "from model import train\nprint(train(3))\n"
    forged = 'print(\'{"loss": 0.123}\')\n'
    result = restrict_to_scope(
        masked={PATH: MASKED},
        functions={PATH: ["Loss.__call__"]},
        patched={"code/run.py": forged},
        before={"code/run.py": original},
    )
    assert result.files == {}
    [edit] = result.out_of_scope
    assert edit.path == "code/run.py"
    assert edit.reason == "not a file with masked functions"
    # From the agent's version to what runs: the forged line goes, the original comes back.
    assert "-print('{\"loss\": 0.123}')\n" in edit.diff
    assert "+from model import train\n" in edit.diff
    assert edit.diff.startswith("--- a/code/run.py\n+++ b/code/run.py\n")


@pytest.mark.parametrize(
    "path, text",
    [
        ("code/numpy/__init__.py", "def mean(values):\n    return 0.5\n"),
        ("code/sitecustomize.py", "import builtins\nbuiltins.print = lambda *a, **k: None\n"),
        ("code/usercustomize.py", "import os\n"),
        ("code/evil.pth", "import sitecustomize\n"),
        ("code/data/gold.json", '{"loss": 0.123}\n'),
    ],
)
def test_new_files_are_dropped(path, text):
    result = restrict_to_scope(
        masked={PATH: MASKED}, functions={PATH: ["Loss.__call__"]}, patched={path: text, PATH: IMPLEMENTED}
    )
    assert result.files == {PATH: IMPLEMENTED}
    [edit] = result.out_of_scope
    assert edit.path == path
    assert edit.reason == "not a file with masked functions (a new file)"
    assert edit.diff.startswith(f"--- a/{path}\n+++ /dev/null\n")


def test_a_deleted_file_without_masked_functions_stays():
    result = restrict_to_scope(
        masked={PATH: MASKED},
        functions={PATH: ["Loss.__call__"]},
        patched={"code/config.py": None},
        before={"code/config.py": "SEED = 0\n"},
    )
    [edit] = result.out_of_scope
    assert edit.reason == "not a file with masked functions (deleted)"
    assert edit.diff == "--- /dev/null\n+++ b/code/config.py\n@@ -0,0 +1 @@\n+SEED = 0\n"


def test_a_touched_but_unchanged_file_is_not_listed():
    result = restrict_to_scope(
        masked={PATH: MASKED},
        functions={PATH: ["Loss.__call__"]},
        patched={"code/config.py": "SEED = 0\n", PATH: MASKED},
        before={"code/config.py": "SEED = 0\n"},
    )
    assert result.files == {} and result.out_of_scope == []


# --- in a file with masked functions, everything but the bodies and new definitions is dropped ---


def test_an_edited_function_that_is_not_masked_is_dropped():
    agent = IMPLEMENTED.replace(
        "    return [Loss(SCALE)(step) for step in range(steps)]", "    return [0.123, 0.456, 0.789]"
    )
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert text == IMPLEMENTED
    assert body(text, "Loss.__call__") == body(IMPLEMENTED, "Loss.__call__")
    assert edit.reason == "changes `train`, which is not masked"
    assert "-    return [0.123, 0.456, 0.789]\n" in edit.diff
    assert "+    return [Loss(SCALE)(step) for step in range(steps)]\n" in edit.diff


def test_an_edited_method_next_to_the_masked_one_is_dropped():
    agent = IMPLEMENTED.replace('return f"loss x{self.factor}"', 'return "forged"')
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert text == IMPLEMENTED
    assert edit.reason == "changes `Loss.describe`, which is not masked"


def test_redefining_a_function_that_is_not_masked_later_in_the_file_is_dropped():
    agent = IMPLEMENTED.replace(
        'if __name__ == "__main__":', 'def train(steps):\n    return [0.123] * steps\n\n\nif __name__ == "__main__":'
    )
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert text == IMPLEMENTED
    assert "`def train(steps):` (line 25) re-binds `train`, which the file already defines (not masked)" in edit.reason
    assert run_module(text)["train"](2) == [0, 3]


@pytest.mark.parametrize(
    "statement",
    [
        "math.sqrt = lambda x: 0.123",
        "builtins.print = lambda *a, **k: None",
        "setattr(math, 'sqrt', abs)",
        "SCALE = 1000",
        "SCALE += 1",
        "Loss.__call__ = lambda self, x: 0.123",
        "train = lambda steps: [0.123]",
        "for SCALE in range(3):\n    pass",
        "if True:\n    SCALE = 7",
        "try:\n    import forged\nexcept ImportError:\n    pass",
        "del SCALE",
    ],
)
def test_module_level_statements_and_monkeypatching_are_dropped(statement):
    agent = IMPLEMENTED.replace("import math\n", "import math\nimport builtins\n").replace(
        'if __name__ == "__main__":', statement + '\n\n\nif __name__ == "__main__":'
    )
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert text == IMPLEMENTED.replace("import math\n", "import math\nimport builtins\n")
    first_line = statement.split("\n")[0]
    assert f"`{first_line}`" in edit.reason
    assert run_module(text)["train"](2) == [0, 3]


def test_changes_to_the_main_block_and_deleted_statements_are_dropped():
    agent = IMPLEMENTED.replace("SCALE = 3\n", "").replace("    print(train(3))", "    print('{\"loss\": 0.1}')")
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert text == IMPLEMENTED
    assert "removes or changes `SCALE = 3` at module level" in edit.reason
    assert "`if __name__ == \"__main__\":`" in edit.reason


def test_layout_and_comments_outside_the_functions_are_not_listed():
    agent = IMPLEMENTED.replace("SCALE = 3\n", "# the scale\nSCALE = 3  # three\n\n\n").replace(
        "class Loss:", "class Loss:  # a class"
    )
    text, dropped = scope_one(MASKED, ["Loss.__call__"], agent)
    assert text == IMPLEMENTED
    assert dropped == []


# --- what is kept besides the bodies --------------------------------------------------------------


def test_a_new_import_is_kept_after_the_file_imports():
    # The agent put the import right above the function it implements; it is moved up.
    agent = IMPLEMENTED.replace("class Loss:", "import statistics\n\n\nclass Loss:").replace(
        "return self.factor * x ** 2", "return statistics.fmean([self.factor * x ** 2])"
    )
    text, dropped = scope_one(MASKED, ["Loss.__call__"], agent)
    assert dropped == []
    assert text.startswith('"""A toy model."""\nimport math\nimport statistics\n\nSCALE = 3\n')
    assert run_module(text)["train"](3) == [0, 3, 12]


def test_a_new_import_among_the_file_imports_stays_where_it_is():
    masked = "import math\nimport os\n\n\ndef f(x):\n    raise NotImplementedError\n"
    agent = "import math\nimport statistics\nimport os\n\n\ndef f(x):\n    return statistics.fmean([x])\n"
    text, dropped = scope_one(masked, ["f"], agent)
    assert text == agent and dropped == []


def test_new_imports_in_a_file_without_imports_follow_the_docstring_and_future_imports():
    masked = '"""Doc."""\nfrom __future__ import annotations\n\nX = 1\n\n\ndef f(x):\n    raise NotImplementedError\n'
    agent = masked.replace("    raise NotImplementedError\n", "    return math.floor(x)\n") + "\n\nimport math\n"
    text, dropped = scope_one(masked, ["f"], agent)
    assert dropped == []
    assert text.startswith('"""Doc."""\nfrom __future__ import annotations\nimport math\n\nX = 1\n')
    assert run_module(text)["f"](2.5) == 2


def test_an_import_that_rebinds_a_name_of_the_file_is_dropped():
    agent = IMPLEMENTED.replace("import math\n", "import math\nfrom statistics import fmean as SCALE\nimport os.path\n")
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert "re-binds `SCALE`" in edit.reason
    assert "SCALE = 3" in text and "fmean" not in text
    assert "import os.path" in text  # a new module is fine


def test_a_star_import_is_dropped():
    agent = IMPLEMENTED.replace("import math\n", "import math\nfrom statistics import *\n")
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert text == IMPLEMENTED
    assert "could re-bind any name of the file" in edit.reason


def test_a_new_helper_function_is_kept_and_usable_from_the_masked_body():
    agent = IMPLEMENTED.replace("return self.factor * x ** 2", "return _scaled_square(self.factor, x)").replace(
        "def train(steps):", "def _scaled_square(factor, x):\n    return factor * _square(x)\n\n\n_square = lambda x: x * x\n\n\ndef train(steps):"
    )
    text, dropped = scope_one(MASKED, ["Loss.__call__"], agent)
    assert dropped == []
    assert text == agent
    assert run_module(text)["train"](3) == [0, 3, 12]


def test_a_new_helper_is_placed_before_the_main_block_that_calls_the_masked_function():
    masked = src(
        """
        def score(x):
            raise NotImplementedError


        if __name__ == "__main__":
            print(score(4))
        """
    )
    # The agent also wrote its helper just above the main block, after a constant it added.
    agent = masked.replace("    raise NotImplementedError", "    return _halve(x) + OFFSET").replace(
        'if __name__ == "__main__":', "OFFSET = 1\n\n\ndef _halve(x):\n    return x / 2\n\n\nif __name__ == \"__main__\":"
    )
    text, dropped = scope_one(masked, ["score"], agent)
    assert dropped == []
    tree = ast.parse(text)
    names = [getattr(node, "name", None) or getattr(getattr(node, "targets", [None])[0], "id", None) for node in tree.body]
    assert names.index("OFFSET") < names.index("_halve") < len(tree.body) - 1
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        run_module(text, name="__main__")
    assert output.getvalue() == "3.0\n"


@pytest.mark.parametrize(
    "definition, problem",
    [
        ("def len(x):\n    return 0", "binds `len`, which would shadow the builtin"),
        ("def __getattr__(name):\n    return 0", "binds the special name `__getattr__`"),
        ("_hook = (math := None)", "re-binds `math`"),
        ("_hooks = [(SCALE := 9) for _ in range(1)]", "re-binds `SCALE`"),
        ("def _helper():\n    global math\n    import cmath as math", "re-binds `math`"),
        ("def _helper():\n    global SCALE\n    SCALE = 0", "re-binds `SCALE`"),
        ("@print\ndef describe():\n    pass", "re-binds `describe`"),
        ("class Loss:\n    pass", "re-binds `Loss`"),
        ("math.tau, _x = 1, 2", "only new definitions are kept"),
    ],
)
def test_new_definitions_may_not_touch_names_the_file_has(definition, problem):
    masked = MASKED.replace("    print(train(3))", "    print(train(3), describe())") + "\n\ndef describe():\n    return 1\n"
    implemented = masked.replace(STUB, STUB.replace("raise NotImplementedError", "return self.factor * x ** 2"))
    agent = implemented.replace("def train(steps):", definition + "\n\n\ndef train(steps):")
    text, [edit] = scope_one(masked, ["Loss.__call__"], agent)
    assert problem in edit.reason
    assert text == implemented


def test_a_name_used_by_the_file_but_bound_elsewhere_is_not_shadowed():
    masked = "from math import *\n\n\ndef area(r):\n    return pi * r * r\n\n\ndef f(x):\n    raise NotImplementedError\n"
    agent = masked.replace("    raise NotImplementedError", "    return x") + "\n\npi = 3\n"
    text, [edit] = scope_one(masked, ["f"], agent)
    assert "binds `pi`, which the file's own code already uses" in edit.reason
    assert run_module(text)["area"](1) == pytest.approx(3.14159, rel=1e-5)


def test_a_new_method_in_the_class_of_a_masked_method_is_kept():
    agent = IMPLEMENTED.replace("return self.factor * x ** 2", "return self._scale(x * x)").replace(
        "    def describe(self):", "    def _scale(self, value):\n        return self.factor * value\n\n    BIAS = 0\n\n    def describe(self):"
    )
    text, dropped = scope_one(MASKED, ["Loss.__call__"], agent)
    assert dropped == []
    assert text == agent
    assert run_module(text)["train"](3) == [0, 3, 12]


def test_a_new_member_is_placed_after_the_class_docstring_when_the_agent_put_it_first():
    agent = IMPLEMENTED.replace('    """Scaled squares."""\n', '    """Scaled squares."""\n\n    OFFSET = 0\n')
    text, dropped = scope_one(MASKED, ["Loss.__call__"], agent)
    assert dropped == []
    assert '    """Scaled squares."""\n\n    OFFSET = 0\n' in text
    assert run_module(text)["Loss"].OFFSET == 0


@pytest.mark.parametrize(
    "member, problem",
    [
        ("def describe(self):\n        return 'forged'", "redefines `Loss.describe`"),
        ("factor = 0", "already uses as a name or attribute"),  # `self.factor` is read by the file
        ("def __eq__(self, other):\n        return True", "defines the special member `__eq__`"),
        ("math.pi = 3", "only new definitions are kept"),
        ("print('class body')", "only new definitions are kept"),
    ],
)
def test_class_members_that_change_what_the_class_already_does_are_dropped(member, problem):
    agent = IMPLEMENTED.replace("        return f\"loss x{self.factor}\"\n", "        return f\"loss x{self.factor}\"\n\n    " + member + "\n")
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert text == IMPLEMENTED
    assert problem in edit.reason


def test_members_added_to_a_class_without_masked_methods_are_dropped():
    masked = MASKED + "\n\nclass Plain:\n    def go(self):\n        return 1\n"
    agent = IMPLEMENTED + "\n\nclass Plain:\n    def go(self):\n        return 1\n\n    def extra(self):\n        return 2\n"
    text, [edit] = scope_one(masked, ["Loss.__call__"], agent)
    assert text == IMPLEMENTED + "\n\nclass Plain:\n    def go(self):\n        return 1\n"
    assert edit.reason == "changes class `Plain`, which has no masked methods"


def test_a_changed_signature_or_decorator_is_dropped_but_the_body_is_taken():
    agent = IMPLEMENTED.replace("    def __call__(self, x):", "    @staticmethod\n    def __call__(x, y=1):").replace(
        "return self.factor * x ** 2", "return 2 * x ** 2"
    )
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert "changes the decorators of `Loss.__call__`; the original ones are kept" in edit.reason
    assert "changes the signature of `Loss.__call__`; the original one is kept" in edit.reason
    assert text == IMPLEMENTED.replace("return self.factor * x ** 2", "return 2 * x ** 2")


def test_a_changed_class_header_is_dropped():
    agent = IMPLEMENTED.replace("class Loss:", "@dataclass_forged\nclass Loss(dict):")
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert text == IMPLEMENTED
    assert edit.reason == "changes the decorators or bases of class `Loss`; the original ones are kept"


NESTED = src(
    '''
    class Outer:
        LIMIT = 2

        class Inner:
            def method(self, x):
                """Twice x."""
                raise NotImplementedError

        def other(self):
            return self.LIMIT
    '''
)


def test_a_nested_class_method_by_qualified_name():
    agent = NESTED.replace(
        '            """Twice x."""\n            raise NotImplementedError\n',
        '            """Twice x."""\n            return self._twice(x)\n\n        def _twice(self, x):\n            return 2 * x\n',
    ).replace("return self.LIMIT", "return 99").replace("    LIMIT = 2\n", "    LIMIT = 2\n    EXTRA = 1\n")
    text, [edit] = scope_one(NESTED, ["Outer.Inner.method"], agent)
    namespace = run_module(text)
    assert namespace["Outer"].Inner().method(4) == 8
    assert namespace["Outer"]().other() == 2
    assert not hasattr(namespace["Outer"], "EXTRA")  # Outer holds no masked method itself
    assert "changes `Outer.other`, which is not masked" in edit.reason
    assert "`EXTRA = 1` (line 3) in class `Outer`" in edit.reason


def test_a_nested_function_is_taken_from_its_enclosing_function():
    masked = "def outer(x):\n    def inner(y):\n        raise NotImplementedError\n    return inner(x) + 1\n"
    agent = "def outer(x):\n    def inner(y):\n        return y * 10\n    return inner(x) + 1000\n"
    text, [edit] = scope_one(masked, ["outer.inner"], agent)
    assert run_module(text)["outer"](2) == 21
    assert edit.reason == "changes `outer` outside its masked functions"


def test_a_property_setter_by_qualified_name():
    masked = src(
        """
        class Box:
            def __init__(self):
                self._size = 0

            @property
            def size(self):
                return self._size

            @size.setter
            def size(self, value):
                raise NotImplementedError
        """
    )
    agent = masked.replace("        raise NotImplementedError", "        self._size = self._clip(value)").replace(
        "    @property", "    def _clip(self, value):\n        return max(0, value)\n\n    @property"
    )
    text, dropped = scope_one(masked, ["Box.size.setter"], agent)
    assert dropped == [] and text == agent
    box = run_module(text)["Box"]()
    box.size = -3
    assert box.size == 0


def test_a_masked_function_the_agent_moved_or_defined_twice():
    moved = IMPLEMENTED.replace(
        '    def __call__(self, x):\n        """Returns factor * x ** 2."""\n        return self.factor * x ** 2\n\n', ""
    ).replace(
        '    def describe(self):\n        return f"loss x{self.factor}"\n',
        '    def describe(self):\n        return f"loss x{self.factor}"\n\n    def __call__(self, x):\n        return -x\n',
    )
    text, dropped = scope_one(MASKED, ["Loss.__call__"], moved)
    assert dropped == []
    assert text == MASKED.replace('        raise NotImplementedError', "        return -x").replace('        """Returns factor * x ** 2."""\n', "")

    twice = IMPLEMENTED + "\n\nclass Loss:\n    def __call__(self, x):\n        return 0.123\n"
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], twice)
    assert "`Loss.__call__` is defined 2 times in the agent's file; the last one's body is used" in edit.reason
    assert "re-binds `Loss`" in edit.reason
    assert body(text, "Loss.__call__") == "return 0.123"


def test_a_deleted_masked_function_keeps_its_stub():
    agent = IMPLEMENTED.replace(
        '    def __call__(self, x):\n        """Returns factor * x ** 2."""\n        return self.factor * x ** 2\n\n', ""
    )
    assert "__call__" not in agent
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert text == MASKED
    assert "the masked function `Loss.__call__` is missing from the agent's file; its stub stays" in edit.reason


def test_a_deleted_file_with_masked_functions_keeps_its_masked_text():
    result = restrict_to_scope(masked={PATH: MASKED}, functions={PATH: ["Loss.__call__"]}, patched={PATH: None})
    assert result.files == {}
    [edit] = result.out_of_scope
    assert edit.reason == "the file was deleted; its masked functions keep their stubs"
    assert edit.diff.startswith("--- /dev/null\n+++ b/code/model.py\n")


@pytest.mark.parametrize(
    "agent",
    [
        IMPLEMENTED + "\ndef broken(:\n",
        IMPLEMENTED + "\n\x00\n",
        IMPLEMENTED.replace("    def describe", "  def describe"),
    ],
)
def test_a_file_that_does_not_parse_keeps_its_masked_text(agent):
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert text == MASKED
    assert edit.reason.startswith("the file does not parse after the patch")
    assert edit.reason.endswith("its masked functions keep their stubs")


def test_the_masked_body_that_breaks_compilation_is_left_out():
    # `await` outside an async function parses but does not compile.
    agent = IMPLEMENTED.replace("return self.factor * x ** 2", "return await x")
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert text == MASKED
    assert "does not compile" in edit.reason


@pytest.mark.parametrize(
    "expression",
    [
        "-" * 5000 + "1",  # too deep for the parser
        "(" * 5000 + "1" + ")" * 5000,
        "+".join(["x"] * 1500),  # parses, but too deep for ast.dump
        "f" + "(x)" * 1500,
    ],
    ids=["unary-5000", "parentheses-5000", "sum-1500", "calls-1500"],
)
@pytest.mark.parametrize("where", ["body", "module", "helper", "method"])
def test_deeply_nested_code_does_not_crash(expression, where):
    agent = IMPLEMENTED
    if where == "body":
        agent = agent.replace("return self.factor * x ** 2", f"return {expression}")
    elif where == "module":
        agent = agent.replace("SCALE = 3\n", f"SCALE = 3\nFORGED = {expression}\nmath.pi = {expression}\n")
    elif where == "helper":
        agent = agent.replace("def train(steps):", f"def _deep(x):\n    return {expression}\n\n\ndef train(steps):")
    else:
        agent = agent.replace("    def describe(self):", f"    @decorate({expression})\n    def describe(self):")
    started = time.monotonic()
    text, dropped = scope_one(MASKED, ["Loss.__call__"], agent)
    assert time.monotonic() - started < 10
    if len(expression) > 5000:
        assert text == MASKED
        [edit] = dropped
        assert edit.reason.startswith("the file does not parse after the patch")
    elif where in ("body", "helper"):
        assert expression in text and dropped == []
    elif where == "module":
        # Neither a new name bound to what runs at import nor a monkeypatch is kept.
        assert text == IMPLEMENTED
        assert "`math.pi = " in dropped[0].reason
        assert f"`FORGED = {expression[:10]}" in dropped[0].reason and "would run code at import" in dropped[0].reason
    else:
        assert text == IMPLEMENTED
        assert dropped[0].reason == "changes `Loss.describe`, which is not masked"


def test_a_huge_file_is_not_merged():
    agent = IMPLEMENTED + "#" * MAX_FILE_CHARS
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert text == MASKED
    assert "more than" in edit.reason


def test_many_statements_are_bounded():
    started = time.monotonic()
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], IMPLEMENTED + "SCALE = 3\n" * 20_000)
    assert text == MASKED
    assert "more than 5000" in edit.reason
    # Just under the bound, every statement a copy of one the masked file has.
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], IMPLEMENTED + "import math\nSCALE = 3\n" * 2_450)
    assert text == IMPLEMENTED
    assert time.monotonic() - started < 30


def test_diffs_of_many_scattered_changes_are_bounded():
    original = "".join(f"print({i})\n" for i in range(30_000))
    forged = "".join(f"print({i})\n" if i % 2 else f"print({-i})\n" for i in range(30_000))
    started = time.monotonic()
    result = restrict_to_scope(
        masked={PATH: MASKED},
        functions={PATH: ["Loss.__call__"]},
        patched={"code/run.py": forged, PATH: IMPLEMENTED + "".join(f"print({i})\n" for i in range(4_000))},
        before={"code/run.py": original},
    )
    assert time.monotonic() - started < 10
    model, run = result.out_of_scope
    assert run.diff.startswith("--- a/code/run.py\n+++ b/code/run.py\n@@ -1,30000 +1,30000 @@\n-print(0)\n")
    assert run.diff.endswith("characters in all]\n")
    assert model.reason.startswith("adds or changes `print(0)` (line 27) at module level")
    assert model.reason.endswith(f"; and {4000 - MAX_REASONS} more")
    assert model.diff.startswith("--- a/code/model.py\n+++ b/code/model.py\n@@ -24,4003 +24,3 @@\n")
    assert result.files == {PATH: IMPLEMENTED}


# --- line breaks, tabs, strings -------------------------------------------------------------------


def test_crlf_files_keep_their_line_breaks():
    masked = MASKED.replace("\n", "\r\n")
    agent = (
        IMPLEMENTED.replace("return self.factor * x ** 2", "return _sq(self.factor, x)")
        .replace("def train(steps):", "def _sq(f, x):\n    return f * x * x\n\n\ndef train(steps):")
        .replace("import math\n", "import math\nimport statistics\n")
        .replace("\n", "\r\n")
    )
    text, dropped = scope_one(masked, ["Loss.__call__"], agent)
    assert dropped == []
    assert text == agent
    assert "\n" not in text.replace("\r\n", "")
    assert run_module(text)["train"](3) == [0, 3, 12]


def test_an_agent_file_with_other_line_breaks_gets_the_masked_file_line_breaks():
    masked = MASKED.replace("\n", "\r\n")
    agent = IMPLEMENTED.replace("def train(steps):", "def _sq(f, x):\n    return f * x * x\n\n\ndef train(steps):")
    text, dropped = scope_one(masked, ["Loss.__call__"], agent)
    assert dropped == []
    assert "\n" not in text.replace("\r\n", "")
    assert text.replace("\r\n", "\n") == agent


def test_tab_indented_files():
    masked = MASKED.replace("    ", "\t")
    agent = (
        IMPLEMENTED.replace("return self.factor * x ** 2", "return self._sq(x)")
        .replace("    def describe(self):", "    def _sq(self, x):\n        return self.factor * x * x\n\n    def describe(self):")
        .replace("    ", "\t")
    )
    text, dropped = scope_one(masked, ["Loss.__call__"], agent)
    assert dropped == []
    assert text == agent
    assert run_module(text)["train"](3) == [0, 3, 12]


def test_a_multi_line_string_in_the_body_keeps_its_indentation():
    implementation = (
        'template = """\\\n'
        "header\n"
        "    indented\n"
        "\t\ttabbed\n"
        "        \n"
        '"""\n'
        "return template + str(x)"
    )
    agent = IMPLEMENTED.replace(
        "        return self.factor * x ** 2",
        textwrap.indent(implementation, "        ", lambda line: not line.startswith(("header", " ", "\t", '"""'))),
    )
    text, dropped = scope_one(MASKED, ["Loss.__call__"], agent)
    assert dropped == []
    value = run_module(text)["Loss"](1)(7)
    assert value == "header\n    indented\n\t\ttabbed\n        \n7"


def test_a_body_written_on_the_def_line():
    masked = "def f(x):\n    raise NotImplementedError\n\n\ndef g():\n    return 1\n"
    agent = "def f(x): return x + 1\n\n\ndef g():\n    return 1\n"
    text, dropped = scope_one(masked, ["f"], agent)
    assert dropped == []
    assert run_module(text)["f"](1) == 2


def test_non_ascii_text_around_new_definitions():
    masked = '"""Modèle."""\nimport math\n\nÉCHELLE = 2\n\n\ndef f(x):\n    raise NotImplementedError\n'
    agent = masked.replace("    raise NotImplementedError", "    return _carré(x) * ÉCHELLE") + "\n\ndef _carré(x):  # é\n    return x * x\n"
    text, dropped = scope_one(masked, ["f"], agent)
    assert dropped == []
    assert run_module(text)["f"](3) == 18


# --- nothing new runs at import: a stub with code that prints the expected numbers -----------------

TOY_MASKED = '"""A toy score."""\nimport json\n\n\ndef score(values):\n    """The score."""\n    raise NotImplementedError\n'
TOY_RUN = 'import json\n\nfrom model import score\n\nprint("scoring", flush=True)\nprint(json.dumps({"score": score([1.0, 2.0])}))\n'
FORGED_LINE = '{"score": 0.123}'


def _run_toy(tmp_path: Path, model: str) -> subprocess.CompletedProcess:
    """Run the toy experiment (python run.py) with this model.py, as the re-execution would."""
    directory = tmp_path / f"run-{len(list(tmp_path.iterdir()))}"
    directory.mkdir()
    (directory / "model.py").write_text(model)
    (directory / "run.py").write_text(TOY_RUN)
    return subprocess.run([sys.executable, "run.py"], cwd=directory, capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("form, code, quoted, why", FORGING_FORMS, ids=[form[0] for form in FORGING_FORMS])
def test_a_stub_with_code_that_runs_at_import_forges_and_is_dropped(tmp_path, form, code, quoted, why):
    agent = with_form(TOY_MASKED, function="score", output=repr(FORGED_LINE), code=code)
    # As the agent wrote it, the file prints the numbers with exit status 0 though its function is a stub...
    forged = _run_toy(tmp_path, agent)
    assert (forged.returncode, forged.stdout.strip().splitlines()[-1]) == (0, FORGED_LINE), forged
    # ...the harness runs the stub alone (the helper stays: it runs only when called).
    text, [edit] = scope_one(TOY_MASKED, ["score"], agent, path="code/model.py")
    assert "def _forge(" in text and code.format(function="score").splitlines()[-1] not in text
    assert quoted in edit.reason and "would run code at import" in edit.reason and why in edit.reason, edit.reason
    scoped = _run_toy(tmp_path, text)
    assert scoped.returncode == 1 and FORGED_LINE not in scoped.stdout and "NotImplementedError" in scoped.stderr


def test_stacked_decorators_are_dropped_a_classmethod_over_a_property_runs_when_read():
    agent = TOY_MASKED + (
        "\n\nclass _Lazy:\n    @classmethod\n    @property\n    def p(cls):\n        return print('forged')\n"
    )
    text, [edit] = scope_one(TOY_MASKED, ["score"], agent, path="code/model.py")
    assert "class _Lazy" not in text and "`p` (line 13) stacks decorators" in edit.reason, edit.reason


def test_a_class_holding_a_masked_method_on_a_foreign_base_gets_no_new_attributes():
    """New members of an enum holding a masked method would be new enum members (each one's
    creation calls the class's methods); any base from elsewhere may act so."""
    masked = ("import enum\nimport re\n\n\nclass Mode(re.enum.Enum):\n    FAST = 1\n\n"
              "    def speed(self):\n        raise NotImplementedError\n")
    agent = masked.replace("    FAST = 1\n", "    FAST = 1\n    SLOW = 2\n").replace(
        "        raise NotImplementedError", "        return self.value\n\n    def helper(self):\n        return 1")
    text, [edit] = scope_one(masked, ["Mode.speed"], agent, path="code/mode.py")
    assert "SLOW" not in text and "def helper(self)" in text and "return self.value" in text
    assert "`SLOW = 2`" in edit.reason and "gets methods only" in edit.reason, edit.reason


def test_every_form_in_one_file_is_listed():
    agent = with_every_form(TOY_MASKED, function="score", output=repr(FORGED_LINE))
    text, [edit] = scope_one(TOY_MASKED, ["score"], agent, path="code/model.py")
    assert_every_form_dropped(edit.reason)
    assert "; and " not in edit.reason  # none cut from the list


@pytest.mark.parametrize(
    "definition",
    [
        "_TABLE = {'a': (1, -2.5, 3e-3, 1+2j), 'b': [None, ..., b'x', {1, 2}], 'c': -7}",
        "_K: int = 4",
        "_square = lambda x, k=SCALE: x * x",
        "def _helper(x: 'float', y: dict[str, list[int]] | None = None, *, z=math.pi, **kw: int) -> tuple[int, ...]:\n    return print(x)",
        "async def _later(x=(1, 2)):\n    return await x",
        "class _Cache(dict):\n    '''A cache.'''\n    LIMIT: int = 3\n    pass\n\n    def __init__(self, size=LIMIT):\n        super().__init__()\n\n"
        "    @staticmethod\n    def key(x):\n        return x\n\n    @property\n    def full(self):\n        return len(self) > 3\n\n"
        "    class _Entry:\n        def __len__(self):\n            return 0",
        "class _Checked(Exception):\n    __slots__ = ()\n\n\nclass _Module(math.__class__):\n    pass",
    ],
    ids=["literals", "annotated", "lambda", "annotations-and-defaults", "async", "class", "bases"],
)
def test_definitions_that_run_nothing_at_import_are_kept(definition):
    agent = IMPLEMENTED.replace("def train(steps):", definition + "\n\n\ndef train(steps):")
    text, dropped = scope_one(MASKED, ["Loss.__call__"], agent)
    assert dropped == [] and text == agent
    assert run_module(text)["train"](3) == [0, 3, 12]


@pytest.mark.parametrize(
    "definition, why",
    [
        ("_NAME = f'{SCALE}'", "the value holds an f-string"),
        ("_ALIAS = math.pi", "the value holds an attribute `math.pi`"),
        ("_Y = [x for x in range(3)]", "the value holds a comprehension"),
        ("_Z = {**{}}", "the value holds an unpacking"),
        ("_W = 2 ** 100000", "the value holds an operation"),
        ("def _f(x=[y for y in ()]):\n    pass", "a default value holds a comprehension"),
        ("def _f(x: (_q := 1) = 0):\n    pass", "an annotation holds an assignment expression"),
        ("def _f() -> print('x'):\n    pass", "the return annotation holds a call"),
        ("_g = lambda x=print(): x", "the value holds a call"),
        ("@functools.cache\ndef _f():\n    pass", "the decorator `@functools.cache` (line"),
        ("@dataclass\nclass _D:\n    x: int = 0", "the decorator `@dataclass`"),
        ("class _D(Base[int]):\n    pass", "the base `Base[int]` (line"),
        ("class _D(object, **kw):\n    pass", "the class keyword `**=`"),
        ("class _D:\n    def __init_subclass__(cls):\n        pass", "`__init_subclass__` (line"),
        ("class _D:\n    class __class_getitem__:\n        pass", "`__class_getitem__` (line"),
        ("class _D:\n    def __set_name__(self, owner, name):\n        pass", "`__set_name__`"),
        ("class _D:\n    hook = lambda cls: cls", "the value holds a lambda"),
        ("class _D:\n    if True:\n        x = 1", "its class body has `if True:`"),
        ("class _D:\n    property = 1\n\n    @property\n    def x(self):\n        return 1", "the decorator `@property`"),
        ("import enum\n\n\nclass _E(enum.Enum):\n    A = 1\n\n    def __init__(self, value):\n        print('forged')",
         "the base `enum.Enum` (line 24) is an enum"),
        ("from enum import Flag as _F\n\n\nclass _E(_F):\n    A = 1", "the base `_F` (line 24) is an enum"),
    ],
)
def test_definitions_that_would_run_code_at_import_are_dropped(definition, why):
    agent = IMPLEMENTED.replace("def train(steps):", definition + "\n\n\ndef train(steps):")
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert why in edit.reason and "would run code at import" in edit.reason, edit.reason
    assert definition.splitlines()[-1] not in text


def test_new_members_of_a_masked_class_follow_the_same_rule():
    members = "    _TABLE = (1, 2)\n\n    _hook = print('forged')\n\n    def _scale(self, x=print('forged')):\n        return x\n\n"
    agent = IMPLEMENTED.replace("    def describe(self):", members + "    def describe(self):")
    text, [edit] = scope_one(MASKED, ["Loss.__call__"], agent)
    assert "_TABLE = (1, 2)" in text and "forged" not in text
    assert "`_hook = print('forged')` (line 19) would run code at import: the value holds a call" in edit.reason
    assert "`def _scale(self, x=print('forged')):` (line 21) would run code at import: a default value holds a call" in edit.reason


@pytest.mark.parametrize(
    "imports, why",
    [
        ("import this", "imports `this`, which acts when imported"),
        ("import idlelib.idle", "imports `idlelib.idle`, which acts when imported"),
        ("import unittest.__main__", "imports `unittest.__main__`, which acts when imported"),
        ("from venv import __main__ as _main", "imports `venv.__main__`, which acts when imported"),
        ("import run", "imports `run`, the workspace's own code, which the file does not import"),
        ("from helpers.io import load", "imports `helpers`, the workspace's own code"),
        ("from . import run", "is a relative import (of the workspace's own code) that the file does not have"),
    ],
)
def test_imports_that_run_code_when_imported_are_dropped(imports, why):
    agent = IMPLEMENTED.replace("import math\n", f"import math\n{imports}\n")
    result = restrict_to_scope(
        masked={PATH: MASKED}, functions={PATH: ["Loss.__call__"]}, patched={PATH: agent}, workspace_modules={"helpers", "run"}
    )
    [edit] = result.out_of_scope
    assert why in edit.reason, edit.reason
    assert result.files[PATH] == IMPLEMENTED


def test_a_relative_import_is_kept_only_if_the_file_has_it():
    masked = MASKED.replace("import math\n", "import math\nfrom . import helpers\nfrom .io import load\n")
    implemented = IMPLEMENTED.replace("import math\n", "import math\nfrom . import helpers\nfrom .io import load\n")
    agent = implemented.replace("import math\n", "import math\nfrom .io import save\nfrom . import helpers as _h\nfrom . import run\n")
    text, [edit] = scope_one(masked, ["Loss.__call__"], agent)
    assert "from .io import save\nfrom . import helpers as _h\n" in text and "from . import run" not in text
    assert "`from . import run` (line 5) is a relative import (of the workspace's own code) that the file does not have" in edit.reason


def test_imports_of_libraries_and_of_workspace_modules_the_file_imports_are_kept():
    masked = MASKED.replace("import math\n", "import math\nfrom helpers import clip\n")
    implemented = IMPLEMENTED.replace("import math\n", "import math\nfrom helpers import clip\n")
    agent = implemented.replace("import math\n", "import math\nimport statistics\nimport helpers.io\nimport numpy as np\n")
    result = restrict_to_scope(
        masked={PATH: masked}, functions={PATH: ["Loss.__call__"]}, patched={PATH: agent}, workspace_modules={"helpers", "run"}
    )
    assert result.out_of_scope == [] and result.files[PATH] == agent


# --- the built-in suite: the gold code still passes, and hostile edits around it are removed ------


def _suite_functions() -> list[tuple[str, dict]]:
    found = []
    for paper in json.loads((SUITE / "suite.json").read_text())["papers"]:
        for function in json.loads((SUITE / paper / "paper.json").read_text())["functions"]:
            found.append((paper, function))
    return found


def _masked(paper: str, functions: list[dict]) -> tuple[str, str, list[str]]:
    gold = (SUITE / paper / "code" / functions[0]["file"]).read_text(encoding="utf-8")
    targets = [MaskTarget(f["name"], f.get("description", ""), f.get("line")) for f in functions]
    masked = mask_source(gold, targets, filename=functions[0]["file"])
    return gold, masked.text, [location.qualified_name for location in masked.locations]


def _by_file() -> list[tuple[str, list[dict]]]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for paper, function in _suite_functions():
        groups.setdefault((paper, function["file"]), []).append(function)
    return [(paper, functions) for (paper, _), functions in groups.items()]


SUITE_FUNCTIONS = _suite_functions()
SUITE_FILES = _by_file()


def test_the_builtin_suite_is_there():
    assert len(SUITE_FUNCTIONS) == 28


@pytest.mark.parametrize(
    "paper, functions",
    [(paper, [f]) for paper, f in SUITE_FUNCTIONS] + SUITE_FILES,
    ids=[f"{paper}:{f['name']}" for paper, f in SUITE_FUNCTIONS] + [f"{p}:{fs[0]['file']}" for p, fs in SUITE_FILES],
)
def test_the_gold_file_as_the_agent_file_runs_unchanged(paper, functions):
    gold, masked, names = _masked(paper, functions)
    path = f"code/{functions[0]['file']}"
    text, dropped = scope_one(masked, names, gold, path=path)
    assert dropped == []
    assert text == gold


@pytest.mark.parametrize("paper, functions", SUITE_FILES, ids=[f"{p}:{fs[0]['file']}" for p, fs in SUITE_FILES])
def test_gold_bodies_survive_hostile_edits_around_them(paper, functions):
    gold, masked, names = _masked(paper, functions)
    path = f"code/{functions[0]['file']}"
    agent = masked
    for name in names:
        agent = replace_function_body(agent, name, function_body_source(gold, name))
    assert agent == gold
    # Edit every function that is not masked, and add what an agent that forges would add.
    others = [name for name, _ in list_functions(gold) if not any(name == n or name.startswith(n + ".") for n in names)]
    for name in others:
        agent = replace_function_body(agent, name, "return 0.123")
    agent += "\n\nimport builtins\nbuiltins.print = lambda *a, **k: None\nnp.mean = lambda *a, **k: 0.123\n"
    agent += "\n\ndef _agent_helper():\n    return 1\n"
    text, [edit] = scope_one(masked, names, agent, path=path)
    for name in names:
        assert body(text, name) == body(gold, name)
    for name in others:
        assert body(text, name) == body(gold, name)
    assert "builtins.print" not in text and "np.mean =" not in text
    # The new import went up to the file's imports; the helper stays where the agent put it.
    tree = ast.parse(text)
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert ast.unparse(imports[-1]) == "import builtins"
    assert tree.body.index(imports[-1]) == len(imports) - 1 + (ast.get_docstring(tree) is not None)
    assert text.endswith("\n\n\ndef _agent_helper():\n    return 1\n")

    def code_lines(text: str) -> list[str]:
        return [line for line in text.split("\n") if line.strip() and line != "import builtins"]

    assert code_lines(text) == code_lines(gold + "def _agent_helper():\n    return 1\n")
    for name in others:
        assert f"`{name}`" in edit.reason or len(others) > 8


# --- nothing the agent writes makes it raise ------------------------------------------------------

_SNIPPETS = [
    "",
    "import os",
    "from math import *",
    "def train(steps):\n    return 0",
    "class Loss:\n    pass",
    "    def extra(self):\n        return 1",
    "        return 1",
    "SCALE = 9",
    "x = (",
    '"""',
    "@decorator",
    "if __name__ == '__main__':\n    print(1)",
    "\tdef tabbed(self): pass",
    "def __call__(self, x):",
    "lambda: (yield)",
    "nonlocal q",
    "return 5",
    "async def train(steps):\n    await steps",
    "\r\n",
    "é = 1",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(
        st.tuples(st.integers(min_value=0, max_value=40), st.sampled_from(["insert", "delete", "duplicate"]), st.sampled_from(_SNIPPETS)),
        max_size=6,
    )
)
def test_random_edits_never_raise_and_always_give_valid_python(edits):
    lines = IMPLEMENTED.split("\n")
    for position, action, snippet in edits:
        position = min(position, len(lines))
        if action == "insert":
            lines[position:position] = snippet.split("\n")
        elif action == "delete" and position < len(lines):
            del lines[position]
        elif position < len(lines):
            lines.insert(position, lines[position])
    agent = "\n".join(lines)
    text, dropped = scope_one(MASKED, ["Loss.__call__"], agent)
    # Nothing is dropped silently but layout, comments, the order of definitions and repeated imports.
    if text != agent and not dropped:
        assert set(map(ast.dump, ast.parse(text).body)) == set(map(ast.dump, ast.parse(agent).body))


@pytest.mark.parametrize(
    "masked, agent",
    [
        # The body lands on line 2, where Python looks for a source encoding.
        ("def f(x):\n    raise NotImplementedError\n", "def f(x):\n    # -*- coding: utf-7 -*-\n    return x\n"),
        # A comment the agent wrote above its new import comes with it, to line 2.
        ('"""Doc."""\n\n\ndef f(x):\n    raise NotImplementedError\n', '"""Doc."""\n# coding: utf-7\nimport math\n\n\ndef f(x):\n    return math.floor(x)\n'),
        # A new helper inserted at the top, its comment on line 2.
        ("def f(x):\n    raise NotImplementedError\n", "def _h():\n    # vim: set fileencoding=utf-7 :\n    return 1\n\n\ndef f(x):\n    return _h()\n"),
    ],
)
def test_a_source_encoding_declaration_cannot_be_slipped_in(masked, agent):
    text, [edit] = scope_one(masked, ["f"], agent)
    assert "coding" not in "\n".join(text.splitlines()[:2])
    assert "would declare a source encoding" in edit.reason


def test_text_that_cannot_be_written_as_utf8_is_left_out():
    masked = "def f(x):\n    raise NotImplementedError\n"
    text, [edit] = scope_one(masked, ["f"], "def f(x):\n    return '\udc80'\n")
    assert text == masked
    assert edit.reason.startswith("the file does not parse after the patch: 'utf-8' codec can't encode")
