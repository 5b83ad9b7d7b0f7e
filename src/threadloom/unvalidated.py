"""Pydantic records built or copied without validation, for values already of their
fields' types (what the engine, the providers and the store build from their own typed
records; never for user or provider input).

``trusted(cls, values)`` is ``cls(**values)``; ``copy_with(model, update)`` is
``model.model_copy(update=update)``: the same instance each time (fields, field order,
``model_fields_set``, extra), without pydantic's generic paths.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from threadloom.stored_fields import AllFieldsSet

_M = TypeVar("_M", bound=BaseModel)
_setattr = object.__setattr__
_new_object = object.__new__
_Plan = tuple[dict[str, Any], tuple[tuple[str, Callable[[], Any]], ...], frozenset[str]]
_PLANS: dict[type[Any], _Plan] = {}


def _plan(cls: type[BaseModel]) -> _Plan:
    decorators = cls.__pydantic_decorators__
    if (
        cls.model_config.get("extra") == "allow"
        or cls.__private_attributes__
        or decorators.field_validators
        or decorators.model_validators
        or decorators.validators
        or decorators.root_validators
    ):
        raise TypeError(f"{cls.__name__} cannot be built without validation")
    template: dict[str, Any] = {}
    factories: list[tuple[str, Callable[[], Any]]] = []
    required: set[str] = set()
    for name, info in cls.model_fields.items():
        template[name] = None if info.default_factory is not None else info.default
        if info.default_factory is not None:
            factories.append((name, info.default_factory))  # type: ignore[arg-type]
        elif info.is_required():
            required.add(name)
    plan = _PLANS[cls] = (template, tuple(factories), frozenset(required))
    return plan


def trusted(cls: type[_M], values: dict[str, Any]) -> _M:
    """``cls(**values)`` without validation. Fields not given take their defaults; the
    instance is the one validation would give (fields, field order, ``model_fields_set``).
    A missing required field, and a model with validators, private attributes or
    ``extra="allow"``, are refused (``TypeError``)."""
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _plan(cls)
    template, factories, required = plan
    if not required <= values.keys():
        raise TypeError(f"{cls.__name__}: missing {sorted(required - values.keys())}")
    data = {**template, **values}
    for name, factory in factories:
        if name not in values:
            data[name] = factory()
    model = _new_object(cls)
    _setattr(model, "__dict__", data)
    _setattr(model, "__pydantic_fields_set__", set(values))
    _setattr(model, "__pydantic_extra__", None)
    _setattr(model, "__pydantic_private__", None)
    return model


def copy_with(model: _M, update: Mapping[str, Any], fields_set: set[str] | None = None) -> _M:
    """``model.model_copy(update=update)``: the same copy (values, extra, fields set),
    without pydantic's generic path, for models without private attributes whose config
    does not allow extra fields (the others take that path). ``fields_set``: the copy's
    fields set as given (a shared ``AllFieldsSet``), not the model's with the update's;
    a shared ``AllFieldsSet`` stays shared (as ``model_copy`` keeps it: its copy is
    itself)."""
    if model.__pydantic_private__ is not None or model.model_config.get("extra") == "allow":
        copied = model.model_copy(update=update)
        if fields_set is not None:
            _setattr(copied, "__pydantic_fields_set__", fields_set)
        return copied
    copied = _new_object(type(model))
    values = model.__dict__.copy()
    values.update(update)
    _setattr(copied, "__dict__", values)
    extra = model.__pydantic_extra__
    _setattr(copied, "__pydantic_extra__", None if extra is None else dict(extra))
    fields = model.__pydantic_fields_set__ if fields_set is None else fields_set
    if type(fields) is not AllFieldsSet:  # a shared full set stays shared (update: a no-op)
        fields = set(fields)
    fields.update(update)
    _setattr(copied, "__pydantic_fields_set__", fields)
    _setattr(copied, "__pydantic_private__", None)
    return copied


__all__ = ["copy_with", "trusted"]
