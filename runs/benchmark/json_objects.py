"""Reading one JSON object through a pydantic model, keeping what is sound when something is not.

The strict formats (uploads, native suites) report every problem at once and keep checking with the
fields that are sound (a record's valid sample id still names it when its cost is wrong).
`read_object` gives both: pydantic's errors, and the validated value of every field without one.
`refused_as` gives a field one message of its own for whatever is wrong with it.
No Django imports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError, WrapValidator
from pydantic_core import ErrorDetails, PydanticCustomError
from pydantic_core.core_schema import ValidatorFunctionWrapHandler

Model = TypeVar("Model", bound=BaseModel)


@dataclass
class ObjectRead(Generic[Model]):
    """What a model made of one object: the instance when the object is sound; in any case the
    values of its sound fields (defaults for absent optional ones) and pydantic's errors."""

    instance: Model | None
    values: dict[str, Any] = field(default_factory=dict)
    errors: list[ErrorDetails] = field(default_factory=list)


def read_object(model: type[Model], data: dict[str, Any], *, context: dict[str, Any] | None = None) -> ObjectRead[Model]:
    """`data` validated by `model`; on errors, each field without one is validated on its own."""
    try:
        instance = model.model_validate(data, context=context)
    except ValidationError as error:
        errors = error.errors()
    else:
        return ObjectRead(instance, {name: getattr(instance, name) for name in model.model_fields})
    wrong = {error["loc"][0] for error in errors if error["loc"]}
    values: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        if name in wrong:
            continue
        if name in data:
            # Validating one field as an assignment runs the same type, constraints and validators.
            checked = model.__pydantic_validator__.validate_assignment(model.model_construct(), name, data[name], context=context)
            values[name] = getattr(checked, name)
        elif not info.is_required():
            values[name] = info.get_default(call_default_factory=True)
    return ObjectRead(None, values, errors)


def refused_as(describe: Callable[[Any], str]) -> WrapValidator:
    """Annotation: any failure of the annotated type (its JSON type or its constraints) is reported
    as `describe(value)`, for fields whose one message says more than pydantic's several would."""

    def wrap(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError("invalid", describe(value)) from None

    return WrapValidator(wrap)
