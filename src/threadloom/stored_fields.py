"""One pydantic fields set shared by every stored record of a kind (``AllFieldsSet``).

Kept apart from ``records.py``: it is how the store builds records, not what they are.
"""

from __future__ import annotations

from typing import Any

from threadloom.records import Message

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


__all__ = ["MESSAGE_FIELDS_SET", "AllFieldsSet"]
