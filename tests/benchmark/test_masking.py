"""Masking by AST: every masked file must parse and equal the original outside the replaced bodies."""
import ast
import itertools
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs.benchmark.locating import AmbiguousFunction, FunctionNotFound, MaskingError, list_functions, locate_function
from runs.benchmark.masking import (
    MaskedFile,
    MaskTarget,
    function_body_source,
    mask_source,
    normalise_code,
    replace_function_body,
    verify_masked,
)


def src(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def assert_masked_ok(original: str, masked: MaskedFile) -> None:
    """Parses, and equals the original outside the spans; each span became a stub."""
    ast.parse(masked.text)
    assert len(masked.spans) == len(masked.replacements) == len(masked.locations)
    order = sorted(range(len(masked.spans)), key=lambda i: masked.spans[i])
    rebuilt, cursor = "", 0
    for i in order:
        start, end = masked.spans[i]
        assert cursor <= start <= end
        rebuilt += original[cursor:start] + masked.replacements[i]
        cursor = end
        assert "raise NotImplementedError" in masked.replacements[i]
    assert rebuilt + original[cursor:] == masked.text


def mask(original: str, *targets: MaskTarget) -> MaskedFile:
    masked = mask_source(original, list(targets), filename="model.py")
    assert_masked_ok(original, masked)
    return masked


def function_node(text: str, qualified_name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    line = locate_function(text, qualified_name).def_line
    return next(
        n for n in ast.walk(ast.parse(text)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno == line
    )


def is_stub(text: str, qualified_name: str, description: str | None = None) -> bool:
    node = function_node(text, qualified_name)
    last = node.body[-1]
    stubbed = (
        isinstance(last, ast.Raise) and isinstance(last.exc, ast.Name) and last.exc.id == "NotImplementedError"
    )
    if description is not None:
        stubbed = stubbed and ast.get_docstring(node) == description and len(node.body) == 2
    return stubbed and len(node.body) <= 2


TWO_LOSSES = src(
    '''
    import numpy as np


    class EnergyLoss:
        """Energy pointing game as a loss."""

        def __call__(self, attributions, mask):
            """Return minus the energy inside the mask."""
            positive = np.clip(attributions, 0, None)
            return -(positive * mask).sum() / positive.sum()


    class RRRLoss:
        def __init__(self, weight=1.0):
            self.weight = weight

        def __call__(self, attributions, mask):
            # gradients outside the mask
            return self.weight * ((attributions * (1 - mask)) ** 2).sum()
    '''
)


# --- locating ------------------------------------------------------------------------------------


def test_list_functions_gives_qualified_names_and_def_lines():
    assert list_functions(TWO_LOSSES) == [
        ("EnergyLoss.__call__", 7),
        ("RRRLoss.__init__", 14),
        ("RRRLoss.__call__", 17),
    ]


def test_class_method_by_qualified_name_masks_only_that_method():
    masked = mask(TWO_LOSSES, MaskTarget("RRRLoss.__call__", "Penalise gradients outside the mask."))
    assert is_stub(masked.text, "RRRLoss.__call__", "Penalise gradients outside the mask.")
    assert not is_stub(masked.text, "EnergyLoss.__call__")
    assert "return -(positive * mask).sum()" in masked.text
    assert "gradients outside the mask\n" not in masked.text  # the body's comment went with it
    location = masked.locations[0]
    assert (location.qualified_name, location.def_line, location.hint_status) == ("RRRLoss.__call__", 17, "none")
    assert location.body_indent == "        "


def test_same_name_methods_are_chosen_by_line_hint():
    for hint, expected in [(7, "EnergyLoss.__call__"), (17, "RRRLoss.__call__"), (10, "EnergyLoss.__call__")]:
        location = locate_function(TWO_LOSSES, "__call__", line_hint=hint)
        assert (location.qualified_name, location.hint_status, location.note) == (expected, "exact", "")
    masked = mask(TWO_LOSSES, MaskTarget("__call__", "Energy.", line_hint=7))
    assert is_stub(masked.text, "EnergyLoss.__call__", "Energy.")
    assert not is_stub(masked.text, "RRRLoss.__call__")


def test_bare_name_with_exact_hint():
    location = locate_function(TWO_LOSSES, "__init__", line_hint=14)
    assert (location.qualified_name, location.hint_status) == ("RRRLoss.__init__", "exact")


def test_stale_hint_is_reported_not_obeyed():
    location = locate_function(TWO_LOSSES, "__init__", line_hint=3)
    assert location.qualified_name == "RRRLoss.__init__" and location.def_line == 14
    assert location.hint_status == "stale"
    assert "line hint 3 does not match" in location.note and "`RRRLoss.__init__` is defined at line 14" in location.note
    masked = mask(TWO_LOSSES, MaskTarget("__init__", "Store the weight.", line_hint=3))
    assert masked.notes == [location.note]
    assert is_stub(masked.text, "RRRLoss.__init__")


BOTH_CALLS = "2 definitions of `__call__` (`EnergyLoss.__call__` at line 7, `RRRLoss.__call__` at line 17)"


def test_a_hint_in_no_candidate_is_ambiguous_not_resolved_to_the_nearest():
    for hint in (1, 12, 30):
        with pytest.raises(AmbiguousFunction) as caught:
            locate_function(TWO_LOSSES, "__call__", line_hint=hint)
        assert str(caught.value) == (
            "`__call__` is ambiguous: 2 definitions match (`EnergyLoss.__call__` at line 7, `RRRLoss.__call__` at "
            f"line 17) and no evidence picks one (line hint {hint} is in none of them nor on the statement of a class "
            "defining one; no span); give the qualified name or the def line as hint"
        )


def test_a_hint_on_a_class_line_selects_the_method_of_that_class():
    location = locate_function(TWO_LOSSES, "__call__", line_hint=13)  # `class RRRLoss:`
    assert (location.qualified_name, location.def_line, location.hint_status, location.rule, location.scope) == (
        "RRRLoss.__call__", 17, "stale", "class line", ("RRRLoss",))
    assert location.note == (f"chose `RRRLoss.__call__` at line 17: of the {BOTH_CALLS}, the method of class "
                             "`RRRLoss`, on whose statement line hint 13 falls")
    assert locate_function(TWO_LOSSES, "__call__", line_hint=4).qualified_name == "EnergyLoss.__call__"
    masked = mask(TWO_LOSSES, MaskTarget("__call__", "RRR.", line_hint=13))
    assert masked.notes == [location.note] and is_stub(masked.text, "RRRLoss.__call__", "RRR.")


CALLABLES = src(
    '''
    class Base:
        def __call__(self, x):
            raise NotImplementedError


    @register
    class A(Base):
        def __call__(self, x):
            return x


    class B(
        Base,
    ):
        """B."""

        def __call__(self, x):
            return 2 * x

        class Inner:
            def __call__(self, x):
                return 3 * x


    class Empty:
        pass
    '''
)


@pytest.mark.parametrize("hint, expected", [
    (1, "Base.__call__"),
    (6, "A.__call__"),  # the class's decorator
    (13, "B.__call__"),  # inside a multi-line class header; not B.Inner.__call__, which is not directly in B
    (20, "B.Inner.__call__"),
])
def test_class_line_rule_takes_the_method_defined_directly_in_the_class(hint, expected):
    location = locate_function(CALLABLES, "__call__", line_hint=hint)
    assert (location.qualified_name, location.rule, location.hint_status) == (expected, "class line", "stale")


def test_class_line_rule_beats_an_enclosing_function_of_the_same_name():
    # The hint is inside B.forward, but on the statement of class C, which defines a forward itself.
    source = src(
        """
        class B:
            def forward(self):
                class C:
                    def forward(self):
                        return 1
                return C

            def other(self):
                return 2
        """
    )
    location = locate_function(source, "forward", line_hint=3)
    assert (location.qualified_name, location.rule) == ("B.forward.C.forward", "class line")
    assert locate_function(source, "forward", line_hint=6).rule == "inside"  # in B.forward, on no class line


def test_class_line_rule_on_a_class_without_the_method_or_with_a_property():
    with pytest.raises(AmbiguousFunction) as caught:
        locate_function(CALLABLES, "__call__", line_hint=25)
    assert "(line hint 25 is in none of them and on class `Empty`, which defines none; no span)" in str(caught.value)
    # A decorator of the class's first method is that method's line, not the class statement's.
    decorated_first = src(
        """
        class C:
            @staticmethod
            def helper():
                return 0

            def __call__(self):
                return 1


        class D:
            def __call__(self):
                return 2
        """
    )
    assert locate_function(decorated_first, "__call__", line_hint=1).qualified_name == "C.__call__"
    with pytest.raises(AmbiguousFunction, match="line hint 2 is in none of them nor on the statement of a class"):
        locate_function(decorated_first, "__call__", line_hint=2)
    # The class defines the getter, setter and deleter of `size`: the name means the getter.
    assert (locate_function(PROPERTY, "size", line_hint=1).qualified_name,
            locate_function(PROPERTY, "size", line_hint=1).rule) == ("Box.size", "class line")


def test_span_rule_takes_the_candidate_in_the_span_over_a_nearer_one():
    # Hint 12 is nearer EnergyLoss.__call__ (line 7) than RRRLoss.__call__ (17); the span decides.
    location = locate_function(TWO_LOSSES, "__call__", line_hint=12, span=(18, 19))
    assert (location.qualified_name, location.hint_status, location.rule) == ("RRRLoss.__call__", "stale", "span")
    assert location.note == (f"chose `RRRLoss.__call__` at line 17: of the {BOTH_CALLS}, the one in the span 18-19 "
                             "(line hint 12 matches none of them)")
    no_hint = locate_function(TWO_LOSSES, "__call__", span=(5, 10))
    assert (no_hint.qualified_name, no_hint.hint_status, no_hint.rule) == ("EnergyLoss.__call__", "none", "span")
    # A hint that falls inside a candidate is stronger evidence than the span.
    inside = locate_function(TWO_LOSSES, "__call__", line_hint=9, span=(18, 19))
    assert (inside.qualified_name, inside.hint_status, inside.rule) == ("EnergyLoss.__call__", "exact", "inside")


def test_span_rule_with_nested_definitions_takes_the_innermost_containing_the_span():
    source = src(
        """
        def step(x):
            def step(y):
                return y
            return step(x)
        """
    )
    assert locate_function(source, "step", span=(3, 3)).qualified_name == "step.step"
    assert locate_function(source, "step", span=(2, 4)).qualified_name == "step"


@pytest.mark.parametrize("span, overlap", [((8, 18), "2"), ((1, 3), "none")])
def test_a_span_that_does_not_single_out_a_candidate_is_ambiguous(span, overlap):
    with pytest.raises(AmbiguousFunction) as caught:
        locate_function(TWO_LOSSES, "__call__", line_hint=12, span=span)
    assert str(caught.value) == (
        "`__call__` is ambiguous: 2 definitions match (`EnergyLoss.__call__` at line 7, `RRRLoss.__call__` at "
        "line 17) and no evidence picks one (line hint 12 is in none of them nor on the statement of a class "
        f"defining one; the span {span[0]}-{span[1]} overlaps {overlap} of them); give the qualified name or the "
        "def line as hint"
    )


@pytest.mark.parametrize("span", [(5, 4), (0, 3), ("a", 3), (3,)])
def test_a_span_that_is_not_a_range_of_lines_is_a_masking_error(span):
    with pytest.raises(MaskingError, match="span .* for `__call__` is not"):
        locate_function(TWO_LOSSES, "__call__", span=span)


NESTED = src(
    """
    def outer(values):
        scale = 2

        def inner(x):
            return x * scale

        return [inner(v) for v in values]


    class Outer:
        class Inner:
            def method(self):
                return 1
    """
)


@pytest.mark.parametrize("name", ["outer.inner", "outer.<locals>.inner", "inner"])
def test_nested_function_by_any_spelling(name):
    masked = mask(NESTED, MaskTarget(name, "Scale x."))
    assert is_stub(masked.text, "outer.inner", "Scale x.")
    assert "return [inner(v) for v in values]" in masked.text and "scale = 2" in masked.text


def test_nested_class_method_and_partial_names():
    assert locate_function(NESTED, "Outer.Inner.method").def_line == 12
    assert locate_function(NESTED, "Inner.method").qualified_name == "Outer.Inner.method"
    assert locate_function(NESTED, "method").qualified_name == "Outer.Inner.method"
    with pytest.raises(FunctionNotFound):
        locate_function(NESTED, "ner.method")  # a suffix must be whole name components


PROPERTY = src(
    """
    class Box:
        @property
        def size(self):
            return self._size

        @size.setter
        def size(self, value):
            self._size = max(0, value)

        @size.deleter
        def size(self):
            del self._size
    """
)


def test_property_name_means_the_getter_and_accessors_are_selectable():
    assert list_functions(PROPERTY) == [("Box.size", 3), ("Box.size.setter", 7), ("Box.size.deleter", 11)]
    assert locate_function(PROPERTY, "Box.size").def_line == 3
    assert locate_function(PROPERTY, "size").hint_status == "none"
    assert locate_function(PROPERTY, "Box.size.getter").def_line == 3
    assert locate_function(PROPERTY, "Box.size.setter").def_line == 7
    assert locate_function(PROPERTY, "size.deleter").def_line == 11
    by_hint = locate_function(PROPERTY, "Box.size", line_hint=6)  # the setter's decorator line
    assert (by_hint.qualified_name, by_hint.hint_status) == ("Box.size.setter", "exact")
    masked = mask(PROPERTY, MaskTarget("Box.size.setter", "Clamp at zero."), MaskTarget("Box.size", "The size."))
    assert "@size.setter\n    def size(self, value):\n" in masked.text
    assert is_stub(masked.text, "Box.size", "The size.") and is_stub(masked.text, "Box.size.setter", "Clamp at zero.")
    assert "del self._size" in masked.text


def test_overloads_resolve_to_the_implementation():
    source = src(
        """
        from typing import overload

        @overload
        def f(x: int) -> int: ...
        @overload
        def f(x: str) -> str: ...
        def f(x):
            return x
        """
    )
    assert locate_function(source, "f").def_line == 7


SIGNATURES = src(
    '''
    import functools


    def register(name):
        return lambda f: f


    @register(
        "loss",
    )
    @functools.lru_cache(maxsize=None)
    def weighted(
        values: list[float],  # the values: not a body
        weights: dict[str, float] = {"a": 1.0},
        *,
        key=lambda item: item[0],
    ) -> "dict[str, float]":  # returns: a mapping
        """Weighted sum."""
        total = 0.0
        for value in values:
            total += value
        return {"total": total}
    '''
)


def test_multiline_signature_and_decorators_are_kept_whole():
    original_header = SIGNATURES[SIGNATURES.index("@register(") : SIGNATURES.index('    """Weighted sum."""')]
    masked = mask(SIGNATURES, MaskTarget("weighted", "Sum of values."))
    assert original_header in masked.text
    assert masked.text.endswith(original_header + '    """Sum of values."""\n    raise NotImplementedError\n')
    node = function_node(masked.text, "weighted")
    assert [ast.unparse(d) for d in node.decorator_list] == ["register('loss')", "functools.lru_cache(maxsize=None)"]
    assert ast.unparse(node.returns) == "'dict[str, float]'"


def test_several_masks_in_any_order_give_the_same_file():
    targets = [
        MaskTarget("EnergyLoss.__call__", "A."),
        MaskTarget("RRRLoss.__init__", "B."),
        MaskTarget("RRRLoss.__call__", "C."),
    ]
    results = set()
    for order in itertools.permutations(targets):
        masked = mask(TWO_LOSSES, *order)
        assert [loc.qualified_name for loc in masked.locations] == [t.name for t in order]
        results.add(masked.text)
    assert len(results) == 1
    (text,) = results
    for target in targets:
        assert is_stub(text, target.name, target.description)


def test_async_def_and_function_without_docstring():
    source = src(
        """
        async def fetch(session, url):
            async with session.get(url) as response:
                return await response.json()

        def plain(x):
            y = x + 1
            return y
        """
    )
    masked = mask(source, MaskTarget("fetch", "Fetch JSON."), MaskTarget("plain", "Add one."))
    assert masked.text.startswith('async def fetch(session, url):\n    """Fetch JSON."""\n    raise NotImplementedError\n')
    assert is_stub(masked.text, "plain", "Add one.")
    assert isinstance(function_node(masked.text, "fetch"), ast.AsyncFunctionDef)


def test_original_docstring_is_replaced_not_kept():
    masked = mask(TWO_LOSSES, MaskTarget("EnergyLoss.__call__", "Energy."))
    assert "Return minus the energy" not in masked.text
    assert '"""Energy pointing game as a loss."""' in masked.text  # the class docstring is not the body


def test_empty_description_gives_a_bare_raise():
    masked = mask(TWO_LOSSES, MaskTarget("RRRLoss.__init__", "   "))
    node = function_node(masked.text, "RRRLoss.__init__")
    assert len(node.body) == 1 and ast.get_docstring(node) is None
    assert "    def __init__(self, weight=1.0):\n        raise NotImplementedError\n" in masked.text


def test_one_line_bodies_become_indented_blocks():
    source = src(
        """
        class Ops:
          def double(self, x): return 2 * x  # twice
          def half(self, x):
            return x / 2

        def square(x): return x ** 2
        """
    )
    masked = mask(source, MaskTarget("double", "Twice x."), MaskTarget("square", "x squared."))
    assert '  def double(self, x):\n    """Twice x."""\n    raise NotImplementedError\n' in masked.text
    assert masked.text.endswith('def square(x):\n  """x squared."""\n  raise NotImplementedError\n')
    assert masked.locations[0].inline and masked.locations[0].body_indent == "    "
    assert "2 * x" not in masked.text and "twice" not in masked.text


def test_one_line_body_after_a_multiline_signature():
    source = "def f(a,\n      b=1): return a + b\n\nx = f(1)\n"
    masked = mask(source, MaskTarget("f", "Sum."))
    assert masked.text == 'def f(a,\n      b=1):\n    """Sum."""\n    raise NotImplementedError\n\nx = f(1)\n'


def test_tab_indented_file_keeps_tabs():
    source = "class A:\n\tdef f(self, x):\n\t\tif x:\n\t\t\treturn 1\n\t\treturn 2\n\n\tdef g(self): return 3\n"
    masked = mask(source, MaskTarget("A.f", "One or two."), MaskTarget("A.g", "Three."))
    assert '\tdef f(self, x):\n\t\t"""One or two."""\n\t\traise NotImplementedError\n' in masked.text
    assert masked.text.endswith('\tdef g(self):\n\t\t"""Three."""\n\t\traise NotImplementedError\n')
    assert not any(line.startswith(" ") for line in masked.text.splitlines())


def test_crlf_file_keeps_its_line_endings():
    source = TWO_LOSSES.replace("\n", "\r\n")
    masked = mask(source, MaskTarget("EnergyLoss.__call__", "Line one.\nLine two."), MaskTarget("RRRLoss.__call__", ""))
    assert "\n" not in masked.text.replace("\r\n", "")
    assert is_stub(masked.text, "EnergyLoss.__call__", "Line one.\nLine two.")
    body = function_body_source(source, "RRRLoss.__call__")
    assert "\r" not in body
    assert replace_function_body(mask(source, MaskTarget("RRRLoss.__call__", "x")).text, "RRRLoss.__call__", body) == source


@pytest.mark.parametrize(
    "description",
    [
        'Uses """triple quotes""" inside.',
        'Ends with a quote "',
        'Ends with three quotes """',
        "Backslashes: \\n is not a newline, C:\\path\\ and a final \\",
        "LaTeX $$\\label{eq:epg} \\text{EPG}_k = \\frac{a}{b}$$",
        "Several lines.\n\n    Indented example: x = '''y'''\nLast line with ''' and \"\"\"\"",
        "A NUL \0 byte",
    ],
)
def test_descriptions_are_escaped_so_the_file_parses(description):
    masked = mask(TWO_LOSSES, MaskTarget("RRRLoss.__call__", description))
    node = function_node(masked.text, "RRRLoss.__call__")
    docstring = node.body[0].value.value
    if "\n" not in description:
        assert docstring == description
    else:
        assert ast.get_docstring(node) == ast.get_docstring(ast.parse(f"def f():\n    {description!r}\n").body[0])


def test_body_comments_after_the_last_statement_are_masked_but_the_next_comment_is_kept():
    source = src(
        """
        class Model:
            def forward(self, x):
                return self.layer(x)
                # return self.layer(x) * self.secret_scale
            # helpers below
            def helper(self):
                pass
        """
    )
    masked = mask(source, MaskTarget("Model.forward", "Forward pass."))
    assert "secret_scale" not in masked.text and "    # helpers below\n" in masked.text


# --- bodies and round trips ----------------------------------------------------------------------

ROUND_TRIP = src(
    '''
    import re


    def query(table, limit=10):  # builds SQL
        """Build a query."""
        sql = """
    SELECT *
      FROM {table}
    """.format(table=table)
        values = [1,
                  2, 3]  # a continuation line
        return sql + f"""
    LIMIT {limit}"""


    class Parser:
        pattern = re.compile(r"\\d+")

        def parse(self, text):
            for match in self.pattern.finditer(text):
                if match:
                    yield int(match.group())

        async def aparse(self, text):
            return [x async for x in self.stream(text)]
    '''
)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("name", ["query", "Parser.parse", "Parser.aparse"])
def test_mask_then_replace_with_the_original_body_round_trips(name, newline):
    source = ROUND_TRIP.replace("\n", newline)
    masked = mask(source, MaskTarget(name, "Do the thing."))
    body = function_body_source(source, name)
    assert replace_function_body(masked.text, name, body) == source


def test_round_trip_with_every_function_masked():
    names = [name for name, _ in list_functions(ROUND_TRIP)]
    masked = mask(ROUND_TRIP, *[MaskTarget(name, f"Implement {name}.") for name in reversed(names)])
    text = masked.text
    for name in names:
        text = replace_function_body(text, name, function_body_source(ROUND_TRIP, name))
    assert text == ROUND_TRIP


def test_lines_left_of_the_body_indentation_come_back_indented_but_equivalent():
    # PyCharm comments code out at column zero; such lines cannot be told apart from body-level
    # lines once dedented, so the round trip keeps the meaning rather than the bytes.
    source = "def f(x):\n    y = [1,\n2]\n#    y = [3]\n    return y\n"
    body = function_body_source(source, "f")
    assert body == "y = [1,\n2]\n#    y = [3]\nreturn y"
    restored = replace_function_body(mask(source, MaskTarget("f", "")).text, "f", body)
    assert ast.dump(ast.parse(restored)) == ast.dump(ast.parse(source))
    assert restored == "def f(x):\n    y = [1,\n    2]\n    #    y = [3]\n    return y\n"


def test_function_body_source_dedents_code_but_not_strings():
    body = function_body_source(ROUND_TRIP, "query")
    assert body.startswith('"""Build a query."""\nsql = """\nSELECT *\n  FROM {table}\n"""')
    assert "\nreturn sql" in body
    assert function_body_source(ROUND_TRIP, "Parser.parse") == (
        "for match in self.pattern.finditer(text):\n    if match:\n        yield int(match.group())"
    )
    assert function_body_source("def f(x): return x  # same\n", "f") == "return x  # same"


def test_replace_function_body_indents_and_accepts_an_indented_body():
    new = "total = 0\nfor v in values:\n    total += v\nreturn total\n"
    replaced = replace_function_body(SIGNATURES, "weighted", new)
    assert replaced.endswith("    total = 0\n    for v in values:\n        total += v\n    return total\n")
    assert replace_function_body(SIGNATURES, "weighted", textwrap.indent(new, "        ")) == replaced
    one_liner = replace_function_body("def f(x): return x\n", "f", "y = x\nreturn y")
    assert one_liner == "def f(x):\n    y = x\n    return y\n"


def test_replace_function_body_rejects_bad_bodies():
    with pytest.raises(MaskingError, match="does not parse"):
        replace_function_body(TWO_LOSSES, "RRRLoss.__init__", "return (")
    with pytest.raises(MaskingError, match="empty"):
        replace_function_body(TWO_LOSSES, "RRRLoss.__init__", "\n  \n")


def test_normalise_code_ignores_formatting_comments_and_docstrings():
    a = '"""Doc."""\nx = (1 +\n     2)  # three\nreturn x'
    b = "x = 1 + 2\n\n\nreturn (x)"
    assert normalise_code(a) == normalise_code(b)
    assert normalise_code("    y = f( a )\n    return y\n") == normalise_code("y = f(a)\nreturn y")
    assert normalise_code('"""Only a docstring."""\nraise NotImplementedError') == normalise_code(
        "raise NotImplementedError"
    )
    # Fragments that do not parse still compare without comments and whitespace.
    assert normalise_code("x = (1 +  # c\n  2") == normalise_code("x=(1+2")
    assert normalise_code("else:\n    y = 2  # z") == "else:y=2"


# --- errors --------------------------------------------------------------------------------------


def test_not_found_suggests_close_names():
    with pytest.raises(FunctionNotFound) as caught:
        mask_source(TWO_LOSSES, [MaskTarget("__cal__", "x", line_hint=12)], filename="losses.py")
    message = str(caught.value)
    assert message.startswith("losses.py: ") and "`__cal__`" in message and "line hint 12" in message
    assert "`EnergyLoss.__call__` at line 7" in message and "`RRRLoss.__call__` at line 17" in message
    with pytest.raises(FunctionNotFound, match="did you mean `RRRLoss.__init__` at line 14"):
        locate_function(TWO_LOSSES, "RRRLos.__init__")


def test_ambiguous_name_without_hint_lists_candidates():
    with pytest.raises(AmbiguousFunction) as caught:
        locate_function(TWO_LOSSES, "__call__")
    assert "`EnergyLoss.__call__` at line 7" in str(caught.value) and "`RRRLoss.__call__` at line 17" in str(caught.value)
    assert isinstance(caught.value, MaskingError)


def test_nested_target_is_rejected():
    with pytest.raises(MaskingError, match=r"`outer.inner` \(line 4\) is inside `outer` \(line 1\).*already removes it"):
        mask_source(NESTED, [MaskTarget("outer.inner", "a"), MaskTarget("outer", "b")], filename="nested.py")


def test_duplicate_targets_are_rejected():
    with pytest.raises(MaskingError, match="twice"):
        mask_source(TWO_LOSSES, [MaskTarget("RRRLoss.__init__", "a"), MaskTarget("__init__", "b")])
    with pytest.raises(MaskingError, match="twice"):
        mask_source(TWO_LOSSES, [MaskTarget("__call__", "a", line_hint=7), MaskTarget("__call__", "a", line_hint=8)])


def test_unparseable_source_and_bad_names_are_masking_errors():
    with pytest.raises(MaskingError, match="does not parse"):
        mask_source("def f(:\n", [MaskTarget("f", "")], filename="broken.py")
    with pytest.raises(FunctionNotFound):
        locate_function(TWO_LOSSES, "RRRLoss.")
    with pytest.raises(FunctionNotFound, match="no function `EnergyLoss`"):
        locate_function(TWO_LOSSES, "EnergyLoss")  # a class is not maskable


def test_verify_masked_catches_changes_outside_the_spans_and_broken_files():
    masked = mask(TWO_LOSSES, MaskTarget("RRRLoss.__call__", "x"))
    tampered = MaskedFile(
        text=masked.text.replace("import numpy", "import numpx"),
        locations=masked.locations,
        spans=masked.spans,
        notes=[],
        replacements=masked.replacements,
    )
    with pytest.raises(MaskingError, match="differs from the original"):
        verify_masked(TWO_LOSSES, tampered)
    start, end = masked.spans[0]
    broken_stub = "        raise NotImplementedError("
    broken = MaskedFile(
        text=TWO_LOSSES[:start] + broken_stub + TWO_LOSSES[end:],
        locations=masked.locations,
        spans=masked.spans,
        replacements=[broken_stub],
    )
    with pytest.raises(MaskingError, match="does not parse"):
        verify_masked(TWO_LOSSES, broken)
    without_replacements = MaskedFile(text=masked.text, locations=masked.locations, spans=masked.spans, replacements=[])
    with pytest.raises(MaskingError, match="1 masked spans but 0 replacements"):
        verify_masked(TWO_LOSSES, without_replacements)
    verify_masked(TWO_LOSSES, masked)


# --- property-based: random modules --------------------------------------------------------------

STATEMENTS = [
    ["x = 1"],
    ["# a comment"],
    ["y = [1,", "     2]  # continued"],
    ["if x:", "{u}x += 1", "else:", "{u}x -= 1"],
    ["s = '''first", "~at column zero", "~  indented inside the string'''"],
    [""],
]


@st.composite
def modules(draw):
    """A random module and its functions: (qualified name, def line, ancestors, inline body)."""
    unit = draw(st.sampled_from(["    ", "  ", "\t"]))
    counter = itertools.count()
    lines: list[str] = []
    functions: list[tuple[str, int, tuple[str, ...], bool]] = []

    def statements(indent: str) -> None:
        for statement in draw(st.lists(st.sampled_from(STATEMENTS), max_size=3)):
            for line in statement:
                if line.startswith("~"):
                    lines.append(line[1:])  # inside a string: no indentation
                elif line:
                    lines.append(indent + line.replace("{u}", unit))
                else:
                    lines.append("")

    def function(indent: str, scope: tuple[str, ...], depth: int) -> None:
        name = f"f{next(counter)}"
        for decorator in range(draw(st.integers(0, 2))):
            lines.append(f"{indent}@decorator{decorator}" + draw(st.sampled_from(["", "(1, 'x')"])))
        qualified = ".".join((*scope, name))
        if draw(st.integers(0, 4)) == 0:
            functions.append((qualified, len(lines) + 1, scope, True))
            lines.append(f"{indent}def {name}(x): return x + 1" + draw(st.sampled_from(["", "  # one"])))
            return
        functions.append((qualified, len(lines) + 1, scope, False))
        keyword = draw(st.sampled_from(["def", "async def"]))
        if draw(st.booleans()):
            lines.append(f"{indent}{keyword} {name}(self, a=1, *args, **kwargs) -> int:" + draw(st.sampled_from(["", "  # h"])))
        else:
            lines.extend([f"{indent}{keyword} {name}(", f"{indent}{unit}a: int = 1,  # a", f"{indent}{unit}b=(1, 2),", f"{indent}):"])
        body = indent + unit
        if draw(st.booleans()):
            lines.append(f'{body}"""Docstring of {name}."""')
        statements(body)
        if depth < 2 and draw(st.booleans()):
            function(body, (*scope, name), depth + 1)
        lines.append(f"{body}return x")

    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            class_name = f"C{next(counter)}"
            lines.append(f"class {class_name}:")
            if draw(st.booleans()):
                lines.append(f'{unit}"""A class."""')
            for _ in range(draw(st.integers(1, 3))):
                function(unit, (class_name,), 1)
                lines.append("")
        else:
            function("", (), 0)
        lines.append("")
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return newline.join(lines) + newline, functions


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_modules_mask_cleanly_and_round_trip(data):
    source, functions = data.draw(modules())
    assert [(name, line) for name, line, _, _ in functions] == list_functions(source)
    chosen = data.draw(st.lists(st.sampled_from(functions), unique=True, max_size=len(functions)))
    chosen_names = {name for name, _, _, _ in chosen}
    # Masking an enclosing function already removes the nested one.
    chosen = [f for f in chosen if not any(".".join(f[2][: i + 1]) in chosen_names for i in range(len(f[2])))]
    descriptions = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
    targets = []
    for name, line, _, _ in chosen:
        spelled = data.draw(st.sampled_from([name, name.rsplit(".", 1)[-1]]))
        hint = data.draw(st.sampled_from([None, line, line + 40]))
        targets.append(MaskTarget(spelled, data.draw(descriptions), line_hint=hint))

    masked = mask_source(source, targets)
    assert_masked_ok(source, masked)
    for (name, _, _, _), location in zip(chosen, masked.locations):
        assert location.qualified_name == name
        assert is_stub(masked.text, name)

    text = masked.text
    for name, _, _, _ in chosen:
        text = replace_function_body(text, name, function_body_source(source, name))
    if not any(inline for _, _, _, inline in chosen):
        assert text == source
    else:
        assert ast.dump(ast.parse(text)) == ast.dump(ast.parse(source))
