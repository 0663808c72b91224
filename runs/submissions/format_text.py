"""The upload format as Markdown, for the README of a task export (runs.suites.export).

Rendered from the same pydantic models the validator reads and the upload page shows
(runs.submissions.schema), so the exported README cannot promise a field the site refuses.
"""
from runs.submissions.schema import (
    FORMAT,
    HEADER_EXAMPLE,
    RECORD_EXAMPLE,
    AttemptRecord,
    SubmissionHeader,
    example_json,
    format_fields,
)


def upload_format_markdown() -> str:
    """The "Upload format" section of an export's README: both line types, field by field, with examples."""
    lines = [
        "## Upload format",
        "",
        f"Upload a JSONL file (format `{FORMAT}`) on the site's upload page or through its API: the first",
        "line is a header, every other line one attempt at one sample. `final_patch` is a unified diff of",
        "your changes to the workspace with paths `a/code/...` and `b/code/...`. One way: unpack the",
        "sample twice, rename the pristine copy `a` and the one you changed `b`, and from their parent",
        "directory run either of",
        "",
        "```",
        "diff -ruN a/code b/code",
        "git diff --no-index --no-prefix a/code b/code",
        "```",
        "",
        "The site applies the patch to a fresh copy of the workspace, runs the experiments again and",
        "scores what they print (the attempt is then verified).",
        "",
    ]
    for title, model, example in (("Header", SubmissionHeader, HEADER_EXAMPLE), ("Attempt record", AttemptRecord, RECORD_EXAMPLE)):
        lines += [f"### {title}", "", "| field | type | required | meaning |", "|---|---|---|---|"]
        lines += [
            f"| `{field.name}` | {field.type} | {'yes' if field.required else 'no'} | {field.description} |"
            for field in format_fields(model)
        ]
        lines += ["", "Example:", "", "```json", example_json(example), "```", ""]
    return "\n".join(lines)
