"""Markers of hidden things: none of them may appear in what an outsider receives."""

HIDDEN_MODEL = "secret:hidden-model-q7"  # a hidden run in a system of its own
HIDDEN_DESCRIPTION = "secret: the description of a hidden run"
SUBMITTED_MODEL = "secret:uploaded-model-z3"  # a hidden submission
