"""Pydantic records built or copied without validation, for values already of their
fields' types (what the engine, the providers and the store build from their own typed
records; never for user or provider input).

``trusted(cls, values)`` is ``cls(**values)``; ``copy_with(model, update)`` is
``model.model_copy(update=update)``: the same instance each time (fields, field order,
``model_fields_set``, extra), without pydantic's generic paths.

Records of a :class:`SharingModel` class built by ``trusted`` share their fields set with
every other built from the same names (:class:`SharedFieldsSet`) instead of holding a set
of their own: a set is a few hundred bytes and an object the garbage collector tracks, and
the engine keeps request forms of every message of a warm history (engine/request/context_cache).
An assignment to a field the shared set lacks first gives the record a set of its own.

``AllFieldsSet`` is the fields set shared by every stored record of a kind (what the store
gives each message it reads back or writes): how the store builds records, not what they
are (it was ``stored_fields.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from sys import getsizeof
from typing import Any, TypeVar

from pydantic import BaseModel

from threadloom.records.message import Message

_REITERABLE: tuple[type, ...] = (dict, set, frozenset, tuple, list, type({}.keys()))


class AllFieldsSet(set[str]):
    """The ``__pydantic_fields_set__`` shared by every record that has all its fields set,
    as a stored message has (read back, or as a write returns it). A set of Message's 27
    names is 1.2 KB and an object the garbage collector tracks, for every message a history
    keeps otherwise (about a quarter of a warm message's memory). Sharing it is safe:
    pydantic only adds names to a fields set (an assignment, ``model_copy(update=…)``), and
    this one holds every name already, so an addition changes nothing; a copy is itself; any
    other change is refused."""

    __slots__ = ()

    def __copy__(self) -> AllFieldsSet:
        return self

    def __deepcopy__(self, memo: Any) -> AllFieldsSet:
        return self

    def add(self, name: str) -> None:
        if name not in self:
            raise TypeError(f"{name!r} is not a field of these records")

    def update(self, *others: Any) -> None:
        for other in others:
            names = other if type(other) in _REITERABLE else tuple(other)
            if not self.issuperset(names):  # the usual case, every name held: one C call
                for name in names:
                    self.add(name)

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("the shared fields set of stored records is not changed")

    discard = remove = pop = clear = _refuse
    difference_update = intersection_update = symmetric_difference_update = _refuse
    __isub__ = __iand__ = __ixor__ = _refuse

    def __ior__(self, other: Any) -> AllFieldsSet:  # type: ignore[override,misc]
        self.update(other)
        return self


MESSAGE_FIELDS_SET = AllFieldsSet(Message.model_fields)
"""The fields set of every stored Message (``AllFieldsSet``)."""


_M = TypeVar("_M", bound=BaseModel)
_setattr = object.__setattr__
_new_object = object.__new__
_Plan = tuple[dict[str, Any], tuple[tuple[str, Callable[[], Any]], ...], frozenset[str]]
_PLANS: dict[type[Any], _Plan] = {}


class SharedFieldsSet(AllFieldsSet):
    """The ``__pydantic_fields_set__`` shared by the ``trusted`` records of one
    :class:`SharingModel` class built from the same field names. It changes as an
    ``AllFieldsSet`` does — not at all: adding a name it holds is a no-op (what pydantic
    does on an assignment), anything else is refused, and :class:`SharingModel` swaps in a
    set of the record's own before an assignment adds a name — but, as it may lack names, a
    copy is a plain set of the copy's own (``model_copy``, ``copy``), to which pydantic
    then adds the update's names."""

    __slots__ = ()

    def __copy__(self) -> set[str]:  # type: ignore[override]
        return set(self)

    def __deepcopy__(self, memo: Any) -> set[str]:  # type: ignore[override]
        return set(self)


class SharingModel(BaseModel):
    """A pydantic model whose ``trusted`` records share their fields set
    (:class:`SharedFieldsSet`). Assigning a field that the shared set lacks first gives
    the record a set of its own, so records never see each other's assignments."""

    def __setattr__(self, name: str, value: Any) -> None:
        fields = self.__pydantic_fields_set__
        if type(fields) is SharedFieldsSet and name not in fields:
            _setattr(self, "__pydantic_fields_set__", set(fields))
        super().__setattr__(name, value)


_SHARED: dict[tuple[type[Any], tuple[str, ...]], SharedFieldsSet] = {}
_SHARED_LIMIT = 4096
"""At most this many shared sets (distinct (class, names) pairs); past it, records get sets
of their own, as other records do."""


def _fields_set(cls: type[BaseModel], names: tuple[str, ...]) -> set[str]:
    """The shared fields set of ``cls`` for ``names`` (a ``SharingModel``), else a new set."""
    key = (cls, names)
    shared = _SHARED.get(key)
    if shared is None:
        if not issubclass(cls, SharingModel) or len(_SHARED) >= _SHARED_LIMIT:
            return set(names)
        shared = _SHARED[key] = SharedFieldsSet(names)
    return shared


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
    plan = _PLANS[cls] = (_split(cls, template), tuple(factories), frozenset(required))
    return plan


def _split(cls: type[BaseModel], template: dict[str, Any]) -> dict[str, Any]:
    """``template`` as an instance dictionary of ``cls`` that shares its keys with the
    class (CPython's key-sharing dictionary, PEP 412), where the interpreter makes one: a
    copy of it (``dict.copy``, what ``trusted`` and ``copy_with`` do) shares the keys too,
    and holds only its values — 288 bytes for a Message's 27 fields, against 832 for a
    dictionary of its own (issue 40: memory per active thread). An update of its own keys
    keeps it shared; a new key gives the copy keys of its own. Where the interpreter makes
    no such dictionary, it is an ordinary copy of ``template``: the same values."""
    probe = _new_object(cls)
    for name, value in template.items():
        _setattr(probe, name, value)
    shared: dict[str, Any] = probe.__dict__
    if list(shared) != list(template) or getsizeof(shared) >= getsizeof(template):
        return dict(template)  # the class shares no keys (any more): a dictionary of its own
    return shared


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
    data = template.copy()
    data.update(values)
    for name, factory in factories:
        if name not in values:
            data[name] = factory()
    model = _new_object(cls)
    _setattr(model, "__dict__", data)
    _setattr(model, "__pydantic_fields_set__", _fields_set(cls, tuple(values)))
    _setattr(model, "__pydantic_extra__", None)
    _setattr(model, "__pydantic_private__", None)
    return model


def blank(cls: type[BaseModel]) -> dict[str, Any]:
    """A new instance dictionary of ``cls`` (a model ``trusted`` can build) holding every
    field's default — a required field's is pydantic's ``PydanticUndefined``, a default
    factory's ``None``: the caller sets them — whose keys are shared with the class where
    the interpreter makes such a dictionary (see ``_split``): what a record kept for long
    is built on (a stored row read back, a history's copy)."""
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _plan(cls)
    return plan[0].copy()


def copy_with(
    model: _M,
    update: Mapping[str, Any],
    fields_set: set[str] | None = None,
    *,
    shared_keys: bool = False,
) -> _M:
    """``model.model_copy(update=update)``: the same copy (values, extra, fields set),
    without pydantic's generic path, for models without private attributes whose config
    does not allow extra fields (the others take that path). ``fields_set``: the copy's
    fields set as given (a shared ``AllFieldsSet``), not the model's with the update's;
    a shared ``AllFieldsSet`` stays shared (as ``model_copy`` keeps it: its copy is
    itself). ``shared_keys``: the copy's dictionary is built on :func:`blank` (its keys
    shared with the class) whatever the model's is — for a copy kept long (a history's
    record: 288 bytes instead of 832 for a Message); otherwise it is a copy of the
    model's, which shares its keys only if the model's does."""
    if model.__pydantic_private__ is not None or model.model_config.get("extra") == "allow":
        copied = model.model_copy(update=update)
        if fields_set is not None:
            _setattr(copied, "__pydantic_fields_set__", fields_set)
        return copied
    cls = type(model)
    copied = _new_object(cls)
    if shared_keys:
        plan = _PLANS.get(cls)
        values = (plan[0] if plan is not None else _plan(cls)[0]).copy()
        values.update(model.__dict__)
    else:
        values = model.__dict__.copy()
    values.update(update)
    _setattr(copied, "__dict__", values)
    extra = model.__pydantic_extra__
    _setattr(copied, "__pydantic_extra__", None if extra is None else dict(extra))
    fields = model.__pydantic_fields_set__ if fields_set is None else fields_set
    kind = type(fields)
    if kind is AllFieldsSet:  # a shared full set stays shared (update: a no-op)
        fields.update(update)
    elif kind is SharedFieldsSet:
        if not fields.issuperset(update):  # the shared set of the names with the update's
            fields = _fields_set(cls, (*fields, *(n for n in update if n not in fields)))
    else:
        fields = set(fields)  # the copy's own
        fields.update(update)
    _setattr(copied, "__pydantic_fields_set__", fields)
    _setattr(copied, "__pydantic_private__", None)
    return copied


_plan(Message)
"""Planned on import: the class's shared keys are made from its fields, in their order,
before any other code sets an attribute of a Message (CPython stops sharing a class's keys
for good once one instance adds them in another order)."""

__all__ = ["SharedFieldsSet", "SharingModel", "blank", "copy_with", "trusted"]
