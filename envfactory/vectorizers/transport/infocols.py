"""A step's scalar infos through the region's *info columns* (``INFO_KEYS`` words per env).
The *schema* (`schema_of`) maps each key's *leaves* (a scalar, or a dict of them) to columns,
*dense* or *sparse* (a presence column first); both sides `learn` it from the same answers
(never sent, none after a restart). Infos that do not `fits` it go by pipe."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import numpy as np

from ..front.infos import plain_key

__all__ = [
    "INFO_KEYS", "IN_COLUMNS", "ColumnRows", "InfoColumns", "Schema", "fits", "learn", "relearn",
    "schema_of"
]  # fmt: skip

#: the most scalar info keys a step may carry through the columns
INFO_KEYS = 8
#: the control slot's ``msg`` word for an answer whose infos are in the columns
IN_COLUMNS = 2

#: one value of an info key: (sub-key or None for a scalar, type, stored as float)
Leaf = tuple[str | None, type, bool]
#: the info keys in order: (key, sparse, leaves); a sparse key has a presence column first
Schema = tuple[tuple[str, bool, tuple[Leaf, ...]], ...]

_FLOAT_TYPES = (float, np.float16, np.float32, np.float64)
_INT_TYPES = (int, bool, np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
              np.uint32)  # fmt: skip
_KINDS: dict[type, bool] = {**dict.fromkeys(_FLOAT_TYPES, True), **dict.fromkeys(_INT_TYPES, False)}


def _leaves(value: Any) -> tuple[Leaf, ...] | None:
    """A value's leaves (a plain scalar's one, a dict's one per key), or None."""
    t = type(value)
    as_float = _KINDS.get(t)
    if as_float is not None:
        return ((None, t, as_float),)
    if t is not dict or not value or len(value) > INFO_KEYS:
        return None
    leaves = []
    for key, v in value.items():
        as_float = _KINDS.get(type(v))
        if as_float is None or not plain_key(key):
            return None
        leaves.append((key, type(v), as_float))
    return tuple(leaves)


def fits(schema: Schema, calls: list[tuple[int, dict[str, Any]]], n: int) -> bool:
    """Whether a step's ``(env, info)`` pairs (``n`` envs) fit ``schema``: at most one
    non-empty info per env, in order, every dense key and any sparse ones, in its order."""
    if len(calls) != n and any(not sparse for _, sparse, _ in schema):
        return False
    prev = -1
    for i, info in calls:
        if not prev < i < n or not info:
            return False
        prev = i
        keys, j = list(info), 0
        for key, sparse, leaves in schema:
            if j < len(keys) and keys[j] == key:
                if _leaves(info[key]) != leaves:
                    return False
                j += 1
            elif not sparse:
                return False
        if j != len(keys):
            return False
    return True


def schema_of(calls: list[tuple[int, dict[str, Any]]], n: int) -> Schema | None:
    """The schema a step's ``(env, info)`` pairs teach (the keys in the order of the env
    that has the most; a scalar every env reports dense, any other sparse), or None."""
    template = max((info for _, info in calls), key=len)
    counts = dict.fromkeys(template, 0)
    for _, info in calls:
        for key in info:
            if key not in counts:
                return None
            counts[key] += 1
    schema = []
    for key, value in template.items():
        leaves = _leaves(value)
        if leaves is None or not plain_key(key):
            return None
        dense = len(calls) == n and counts[key] == n and leaves[0][0] is None
        schema.append((key, not dense, leaves))
    if sum(sparse + len(leaves) for _, sparse, leaves in schema) > INFO_KEYS:
        return None
    return tuple(schema) if fits(tuple(schema), calls, n) else None


def learn(schema: Schema | None, calls: list[tuple[int, dict[str, Any]]], n: int) -> Schema | None:
    """The schema after a step whose infos went by pipe (both sides run this on the same
    pairs): ``schema`` if they fit it, else the one they teach, else ``schema``."""
    if schema is not None and fits(schema, calls, n):
        return schema
    return schema_of(calls, n) or schema


def relearn(side: Any, calls: list[tuple[int, dict[str, Any]]], n: int) -> bool:
    """`learn` into ``side.schema`` (a worker, or its handle), a new one counted in
    ``side.schemas``: True if it changed."""
    new = learn(side.schema, calls, n)
    if new == side.schema:
        return False
    side.schema, side.schemas = new, side.schemas + 1
    return True


class InfoColumns:
    """The info columns: ``INFO_KEYS`` 8-byte words per env, int64 or float64 by the schema."""

    def __init__(self, words: np.ndarray) -> None:
        self.ints = words  # (INFO_KEYS, num_envs) int64
        self.floats = words.view(np.float64)

    def write(
        self, schema: Schema, calls: list[tuple[int, dict[str, Any]]], start: int, n: int
    ) -> bool:
        """Put a step's infos into the columns of envs ``start:start + n`` (False: a value
        does not fit, as an int past int64)."""
        c = 0
        try:
            for key, sparse, leaves in schema:
                if sparse:
                    present = self.ints[c]
                    present[start : start + n] = 0
                    for i, info in calls:
                        if key in info:
                            present[start + i] = 1
                    c += 1
                for sub, _, as_float in leaves:
                    column = self.floats[c] if as_float else self.ints[c]
                    for i, info in calls:
                        if key in info:
                            value = info[key]
                            column[start + i] = value if sub is None else value[sub]
                    c += 1
        except (OverflowError, ValueError, TypeError):
            return False
        return True

    def read(self, schema: Schema, start: int, n: int) -> list[tuple[int, dict[str, Any]]]:
        """The ``(env, info)`` pairs the columns hold for envs ``start:start + n``."""
        c, keys = 0, []
        for key, sparse, leaves in schema:
            present = None
            if sparse:
                present = self.ints[c, start : start + n].tolist()
                c += 1
            values = []
            for sub, t, as_float in leaves:
                column = self.floats if as_float else self.ints
                values.append((sub, t, column[c, start : start + n].tolist()))
                c += 1
            keys.append((key, present, values))
        pairs = []
        for i in range(n):
            info: dict[str, Any] = {}
            for key, present, values in keys:
                if present is not None and not present[i]:
                    continue
                sub, t, v = values[0]
                if sub is None:
                    info[key] = t(v[i])
                else:
                    info[key] = {sub: t(v[i]) for sub, t, v in values}
            if info:
                pairs.append((i, info))
        return pairs


class ColumnRows(tuple):
    """A worker's step infos in the columns, ``(columns, schema, start, n)``, iterated as its
    ``(env, info)`` pairs; valid until its next step is posted (a tuple: no Python call)."""

    __slots__ = ()
    columns: InfoColumns = property(itemgetter(0))  # type: ignore[assignment]
    schema: Schema = property(itemgetter(1))  # type: ignore[assignment]
    start: int = property(itemgetter(2))  # type: ignore[assignment]
    n: int = property(itemgetter(3))  # type: ignore[assignment]

    def __iter__(self) -> Any:
        return iter(self.columns.read(self.schema, self.start, self.n))

    def __reduce__(self) -> Any:  # (copy/pickle: its fields, not its pairs)
        return ColumnRows, (self[:],)
