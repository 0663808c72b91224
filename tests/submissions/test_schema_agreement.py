"""The upload format has one source, the pydantic models of runs.submissions.schema: the upload page
documents exactly their fields, and validation accepts what their JSON schema allows and refuses
what it does not, naming the line and the field."""
from __future__ import annotations

import html
import json
from html.parser import HTMLParser

import pytest

from runs.submissions.problems import SubmissionInvalid
from runs.submissions.schema import FORMAT, HEADER_EXAMPLE, RECORD_EXAMPLE, AttemptRecord, SubmissionHeader
from runs.submissions.validation import submission_validate
from tests.submissions.helpers import HEADER, jsonl, record, trajectory

UPLOAD = "/submissions/upload/"

# One JSON value of each type, and the JSON schema types it is an instance of.
VALUES = [
    ("a string", "x", {"string"}),
    ("an integer", 3, {"integer", "number"}),
    ("a fraction", 2.5, {"number"}),
    ("a boolean", True, {"boolean"}),
    ("null", None, {"null"}),
    ("a list", [1], {"array"}),
    ("an object", {"a": 1}, {"object"}),
]


def _types(model, name: str) -> set[str]:
    prop = model.model_json_schema()["properties"][name]
    return {variant["type"] for variant in prop.get("anyOf", [prop])}


def _mistyped(model) -> list[tuple[str, object]]:
    """(field, a value of a JSON type its schema does not allow), for every field and such type."""
    return [
        (name, value)
        for name in model.model_fields
        for _, value, kinds in VALUES
        if not kinds & _types(model, name)
    ]


def _shown(prop: dict) -> list[str]:
    """What the page must show of a property's type: its fixed value(s), or its JSON type(s)."""
    if "const" in prop:
        return [json.dumps(prop["const"])]
    if "enum" in prop:
        return [json.dumps(choice) for choice in prop["enum"]]
    return [kind for variant in prop.get("anyOf", [prop]) for kind in _shown(variant)] if "anyOf" in prop else [prop["type"]]


class _Tables(HTMLParser):
    """The rows of every <table id=...> on a page, each row as its cells' text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = dict(attrs).get("id")
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag == "td" and self._table:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "td" and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


@pytest.mark.parametrize(("table", "model"), [("header-fields", SubmissionHeader), ("record-fields", AttemptRecord)])
def test_the_upload_page_documents_exactly_the_models_fields(builtin, signed_in, table, model):
    parser = _Tables()
    parser.feed(signed_in.get(UPLOAD).content.decode())
    rows = [row for row in parser.tables[table] if row]  # the head row has <th> cells only

    assert [row[0] for row in rows] == list(model.model_fields)
    for name, kind, required, description in rows:
        field = model.model_fields[name]
        assert required == ("required" if field.is_required() else "optional"), name
        assert description == field.description, name
        for shown in _shown(model.model_json_schema()["properties"][name]):
            assert shown in kind, f"{name}: {shown} not in {kind!r}"


def test_the_page_examples_are_lines_the_models_accept(builtin, signed_in):
    page = signed_in.get(UPLOAD).content.decode()
    examples = [json.loads(html.unescape(block.split("</pre>")[0])) for block in page.split("<pre>")[1:3]]

    assert examples == [HEADER_EXAMPLE, RECORD_EXAMPLE]
    SubmissionHeader.model_validate(HEADER_EXAMPLE)
    AttemptRecord.model_validate(RECORD_EXAMPLE)


def test_a_record_the_models_accept_passes_validation(builtin):
    line = record()
    AttemptRecord.model_validate(line)
    SubmissionHeader.model_validate(HEADER)

    validated = submission_validate(data=jsonl(line), filename="r.jsonl")

    # The models' own instances all the way: no second description of a line to drift from them.
    assert isinstance(validated.header, SubmissionHeader)
    assert all(isinstance(item.record, AttemptRecord) for item in validated.records)
    assert [(item.line, item.record.sample_id, item.record.attempt_index) for item in validated.records] == [
        (2, line["sample_id"], line["attempt_index"])
    ]


def _problems(data: bytes) -> list[str]:
    with pytest.raises(SubmissionInvalid) as raised:
        submission_validate(data=data, filename="r.jsonl")
    return raised.value.messages()


# One upload (or one per header) holds every case: the suite is imported once, and a problem
# reported on the wrong line, or not at all, is listed by field and value.


def test_a_record_field_of_a_type_the_schema_refuses_is_refused_on_its_line(builtin):
    cases = _mistyped(AttemptRecord)
    problems = _problems(jsonl(*(record(index=number, **{name: value}) for number, (name, value) in enumerate(cases))))
    unreported = [
        (line, name, value)
        for line, (name, value) in enumerate(cases, start=2)
        if not any(problem.startswith(f"line {line}: {name}: ") for problem in problems)
    ]
    assert not unreported, (unreported, problems)


def test_a_header_field_of_a_type_the_schema_refuses_is_refused_on_its_line(builtin):
    # (not "type": a first line whose type is not "header" is read as a record)
    unreported = [
        (name, value, problems)
        for name, value in _mistyped(SubmissionHeader)
        if name != "type"
        for problems in [_problems(jsonl(record(), header={**HEADER, name: value}))]
        if not any(problem.startswith(f"line 1: {name}: ") for problem in problems)
    ]
    assert not unreported


# Every field with a sound value; trajectory_file is for zips, instead of trajectory.
FULL_RECORD = record(type="attempt", trajectory=trajectory())
FULL_HEADER = {**HEADER, "format": FORMAT}


def test_the_full_lines_hold_every_field():
    assert set(AttemptRecord.model_fields) - set(FULL_RECORD) == {"trajectory_file"}
    assert set(SubmissionHeader.model_fields) == set(FULL_HEADER)


def _without(line: dict, name: str) -> dict:
    return {key: value for key, value in line.items() if key != name}


def _required_disagreements(model, lines_without) -> list[str]:
    """Fields whose absence validation treats otherwise than the schema's `required` says."""
    required = set(model.model_json_schema()["required"])
    wrong = []
    for name, line_number, data in lines_without:
        try:
            submission_validate(data=data, filename="r.jsonl")
            refused = []
        except SubmissionInvalid as invalid:
            refused = [p for p in invalid.messages() if p.startswith(f"line {line_number}: {name}: required field is missing")]
        if bool(refused) != (name in required):
            wrong.append(f"{name}: schema says {'required' if name in required else 'optional'}, validation disagrees")
    return wrong


def test_a_record_field_is_required_exactly_when_the_schema_says(builtin):
    cases = [(name, 2, jsonl(_without(FULL_RECORD, name))) for name in FULL_RECORD]
    assert _required_disagreements(AttemptRecord, cases) == []


def test_a_header_field_is_required_exactly_when_the_schema_says(builtin):
    cases = [(name, 1, jsonl(record(), header=_without(FULL_HEADER, name))) for name in FULL_HEADER if name != "type"]
    assert _required_disagreements(SubmissionHeader, cases) == []
