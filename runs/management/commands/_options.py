"""Argument types shared by the management commands."""
from argparse import ArgumentTypeError


def int_list(value: str) -> list[int]:
    """`"1,2"` → `[1, 2]`; an empty string is an empty list."""
    try:
        return [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise ArgumentTypeError(f"{value!r} is not a comma-separated list of integers (for example 1,2)") from None
