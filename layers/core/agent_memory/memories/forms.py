"""The forms of a memory and the one conversion between them.

A memory has four forms, each a pydantic model that declares its fields once: the stored record
(``records.MemoryRecord``, times in milliseconds), the API's view (``models.MemoryView``), and
the export and import forms (``transfer_models.ExportedMemory``, ``ImportedMemory``), whose
times are ``datetime``. ``converted`` makes one form from another by field name, field by field:
a time declared ``Millis`` on one side and ``datetime`` on the other is converted (the one rule,
``clock.from_ms`` / ``clock.to_ms``), and a nested form (a memory's source, its versions) is
converted the same way into the target's own nested model. So a new field of a memory is
declared once in each form and copied without another line; ``tests/unit/test_memory_forms.py``
fails when a form leaves out a field the record has, and checks the round trips.

The plan of each pair of forms (which fields, which conversion) is made once per process; the
target is made with ``model_validate``: pydantic-core validates fields that already hold their
types in a few microseconds, about a seventh of ``model_construct``'s Python loop over the
target's fields and defaults (measured with pydantic 2.13: 4.6 against 31 us for a
``MemoryView``), and a target's validators (a record's defaults) always run.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from datetime import datetime
from functools import lru_cache
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel

from agent_memory.clock import from_ms, to_ms


class Milliseconds:
    """Marks an ``int`` field as a moment in milliseconds since the epoch (UTC), the database's
    unit (``Millis``)."""


Millis = Annotated[int, Milliseconds()]
"""A moment as the database keeps it: milliseconds since the epoch (UTC)."""

Target = TypeVar("Target", bound=BaseModel)
Convert = Callable[[Any], Any]


def converted(source: BaseModel, target: type[Target], /, **given: Any) -> Target:
    """``source`` as a ``target`` form: each field of ``target`` that ``source`` has, by name
    and converted (``Millis`` to and from ``datetime``, nested forms into ``target``'s nested
    models), then ``given`` (fields the source lacks or that the caller sets, such as an
    export's ``vector``); the target's other fields take their defaults, and its validators
    run (a record's defaults). pydantic's ``ValidationError`` when a value does not fit the
    target."""
    fields = vars(source)  # a pydantic model keeps its fields' values in its __dict__
    values = {
        name: fields[name] if convert is None else convert(fields[name])
        for name, convert in _plan(type(source), target)
    }
    values.update(given)
    return target.model_validate(values)


@lru_cache(maxsize=64)
def _plan(
    source: type[BaseModel], target: type[BaseModel]
) -> tuple[tuple[str, Convert | None], ...]:
    """Which fields ``target`` takes from ``source``, each with its conversion (``None``: the
    value as it is)."""
    plan = []
    for name, field in target.model_fields.items():
        if name not in source.model_fields:
            continue
        given = source.model_fields[name]
        plan.append(
            (name, _conversion(given.annotation, given.metadata, field.annotation, field.metadata))
        )
    return tuple(plan)


def _conversion(
    given: Any, given_metadata: list[Any], wanted: Any, wanted_metadata: list[Any]
) -> Convert | None:
    """The conversion of a value declared ``given`` into one declared ``wanted`` (``None``:
    none, the value as it is)."""
    given_ms, wanted_ms = _is_millis(given, given_metadata), _is_millis(wanted, wanted_metadata)
    if given_ms and _holds(wanted, datetime):
        return _optional(from_ms)
    if wanted_ms and _holds(given, datetime):
        return _optional(to_ms)
    model = _model_in(wanted)
    if model is not None:
        return _optional(lambda value: converted(value, model))
    listed = _listed_model_in(wanted)
    if listed is not None:
        return _optional(lambda values: [converted(v, listed) for v in values])
    return None


def _optional(convert: Convert) -> Convert:
    return lambda value: None if value is None else convert(value)


def _members(annotation: Any, *, bare: bool = True) -> tuple[Any, ...]:
    """The members of a union (``X | None``), or the annotation itself; ``bare``: each
    without its ``Annotated`` metadata."""
    members = (
        get_args(annotation)
        if get_origin(annotation) in (Union, types.UnionType)
        else (annotation,)
    )
    if not bare:
        return members
    return tuple(get_args(m)[0] if get_origin(m) is Annotated else m for m in members)


def _is_millis(annotation: Any, metadata: list[Any]) -> bool:
    marks = list(metadata)
    for member in _members(annotation, bare=False):
        if get_origin(member) is Annotated:
            marks += get_args(member)[1:]
    return any(isinstance(mark, Milliseconds) for mark in marks)


def _holds(annotation: Any, kind: type) -> bool:
    return any(member is kind for member in _members(annotation))


def _model_in(annotation: Any) -> type[BaseModel] | None:
    for member in _members(annotation):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return member
    return None


def _listed_model_in(annotation: Any) -> type[BaseModel] | None:
    for member in _members(annotation):
        if get_origin(member) is list:
            (item,) = get_args(member)
            if isinstance(item, type) and issubclass(item, BaseModel):
                return item
    return None
