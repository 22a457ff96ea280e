"""A step's scalar infos through shared memory instead of a pickled pipe message.

Most envs report the same few scalar infos every step (an Atari step: ``lives``,
``episode_frame_number``, ``frame_number``). A ``subproc`` worker would pickle them and
send them by pipe after each step, and the parent would wake for the pipe, read and
unpickle them: ~40 us of the parent's time per batch of 4 Pongs, while the worker that
waits for its next actions idles. Here they are written into *info columns* of the
shared region (``INFO_KEYS`` words per env) and the pipe stays quiet.

Which key goes in which column is the worker's *schema*: the keys and value types of a
step whose every env reported the same plain scalar keys (`schema_of`). Both sides learn
it from the same answers by the same rule, so it never has to be sent:

- the worker: a step's infos whose schema equals the last one it sent go into the
  columns (the control slot's ``msg`` word says `IN_COLUMNS`); any other infos go by
  pipe as before, and a schema of theirs (not None) becomes the one sent;
- the parent: a step answer that came by pipe sets the worker's schema the same way, and
  an answer `IN_COLUMNS` is read back into the very same ``(env, info)`` pairs (the same
  keys, order, values and types), so everything after it is unchanged.

A new worker process (a restart) starts with no schema on both sides. Infos with a key
that is not a string, a ``_``-prefixed key, a value that is not a plain ``int``,
``float`` or ``bool`` or numpy scalar of at most 8 bytes (not ``uint64``), or envs that
differ in keys, always go by pipe (an episode's end, say, which adds ``episode``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["INFO_KEYS", "IN_COLUMNS", "InfoColumns", "Schema", "schema_of"]

#: the most scalar info keys a step may carry through the columns
INFO_KEYS = 8
#: the control slot's ``msg`` word for an answer whose infos are in the columns
IN_COLUMNS = 2

#: ((key, type, stored as float), ...) for the columns in order
Schema = tuple[tuple[str, type, bool], ...]

_FLOAT_TYPES = (float, np.float16, np.float32, np.float64)
_INT_TYPES = (
    int,
    bool,
    np.bool_,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
)
_KINDS: dict[type, bool] = {**dict.fromkeys(_FLOAT_TYPES, True), **dict.fromkeys(_INT_TYPES, False)}


def schema_of(calls: list[tuple[int, dict[str, Any]]], n: int) -> Schema | None:
    """The schema of a step's ``(env, info)`` pairs when every one of the ``n`` envs, in
    order, has the same keys in the same order with values of the same plain scalar
    types; else None."""
    if len(calls) != n or not n:
        return None
    first = calls[0][1]
    if len(first) > INFO_KEYS:
        return None
    schema = []
    for key, value in first.items():
        t = type(value)
        as_float = _KINDS.get(t)
        if as_float is None or type(key) is not str or key.startswith("_"):
            return None
        schema.append((key, t, as_float))
    keys, types = list(first), [t for _, t, _ in schema]
    for k, (i, info) in enumerate(calls):
        if i != k or list(info) != keys or list(map(type, info.values())) != types:
            return None
    return tuple(schema)


class InfoColumns:
    """The info columns of the shared region: ``INFO_KEYS`` 8-byte words per env, read
    as int64 or float64 by the schema."""

    def __init__(self, words: np.ndarray) -> None:
        self.ints = words  # (INFO_KEYS, num_envs) int64
        self.floats = words.view(np.float64)

    def write(self, schema: Schema, calls: list[tuple[int, dict[str, Any]]], start: int) -> bool:
        """Put a step's infos (of the worker whose first env is ``start``) into the
        columns; False if a value does not fit (an int past int64: then by pipe)."""
        try:
            for c, (key, _, as_float) in enumerate(schema):
                column = self.floats[c] if as_float else self.ints[c]
                for i, info in calls:
                    column[start + i] = info[key]
        except (OverflowError, ValueError, TypeError):
            return False
        return True

    def read(self, schema: Schema, start: int, n: int) -> list[tuple[int, dict[str, Any]]]:
        """The ``(env, info)`` pairs the columns hold for envs ``start:start + n``."""
        values = [
            (key, t, (self.floats if as_float else self.ints)[c, start : start + n].tolist())
            for c, (key, t, as_float) in enumerate(schema)
        ]
        return [(i, {key: t(v[i]) for key, t, v in values}) for i in range(n)]
