"""The merge rule: a batch's infos from its envs' info dicts, as gymnasium's vector envs
merge them (``SyncVectorEnv``'s layout: an array and a ``_key`` mask per key, nested dicts
alike), one rule for every backend: `merge_infos` merges ``(row, info)`` pairs (a worker's
envs, the pool's batch), `merge_block` merges the infos a worker already merged for its rows
(a nested vectorized env, a Ray node), `keep_rows` keeps some rows of a merged batch, and
`plain_key` says which keys a fast merge may put in a column of its own (the info columns of
`infocols` follow it too).

`merge_infos` builds gymnasium's dict with one array per key when every value is a plain
scalar or a dict of them (an Atari step's three scalars, an episode's statistics: 12 us
against 16 us for ``VectorEnv._add_info`` one env at a time, 4 Atari infos), and falls back
to gymnasium's own merge otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import _compat

__all__ = ["keep_rows", "merge_block", "merge_infos", "plain_key", "split_infos"]

_PLAIN = (int, float, bool)


def plain_key(key: Any) -> bool:
    """Whether gymnasium's merge treats an info key like any other (then a plain scalar
    value becomes an array of its type): a string, not a ``_key`` mask's name, and not
    ``final_obs`` (kept in an object array, one observation per env). The one rule of
    every fast merge (`merge_infos`, the info columns of `infocols`)."""
    return type(key) is str and not key.startswith("_") and key != "final_obs"


def merge_infos(rows: Sequence[tuple[int, dict[str, Any]]], n: int) -> dict[str, Any]:
    """The infos of a batch of ``n`` rows from ``(row, info)`` pairs, in the order
    ``VectorEnv._add_info`` would merge them; equal to merging them one by one with it
    (`envfactory._compat.add_info`): the same keys in the same order, each array of
    the dtype of its first value, and its ``_key`` mask."""
    infos = _merge_plain(rows, n)
    return _merge_one_by_one(rows, n) if infos is None else infos


def _merge_plain(rows: Sequence[tuple[int, dict[str, Any]]], n: int) -> dict[str, Any] | None:
    """`merge_infos` of rows in order whose values are plain scalars or dicts of them
    (an episode's statistics), one array per key; None for anything else."""
    columns: dict[Any, tuple[type, list[int], list[Any]]] = {}
    last = -1
    for k, info in rows:
        if k <= last:  # rows out of order, or two infos for one row (merged key by key)
            return None
        last = k
        for key, value in info.items():
            t = type(value)
            column = columns.get(key)
            if column is None:
                if not plain_key(key) or not (t is dict or t in _PLAIN or issubclass(t, np.number)):
                    return None
                columns[key] = column = (t, [], [])
            elif column[0] is not t:  # (cast into the first value's dtype, one by one)
                return None
            column[1].append(k)
            column[2].append(value)
    infos: dict[str, Any] = {}
    for key, (t, where, values) in columns.items():
        if t is dict:  # merged as gymnasium does: its own arrays and masks, recursively
            nested = _merge_plain(list(zip(where, values)), n)
            if nested is None:
                return None
            infos[key] = nested
        else:
            array = np.zeros(n, dtype=t)
            array[where] = values
            infos[key] = array
        mask = np.zeros(n, dtype=np.bool_)
        mask[where] = True
        infos[f"_{key}"] = mask
    return infos


def _merge_one_by_one(rows: Sequence[tuple[int, dict[str, Any]]], n: int) -> dict[str, Any]:
    infos: dict[str, Any] = {}
    for k, info in rows:
        infos = _compat.add_info(infos, info, k, n)
    return infos


def _is_mask(infos: dict, key: Any) -> bool:
    return isinstance(key, str) and key.startswith("_") and key[1:] in infos


def merge_block(infos: dict, block: dict, start: int, n: int) -> dict:
    """Merge ``block``, the merged infos of rows ``start ..`` (a worker's envs, gymnasium's
    layout, every key with its ``_key`` mask), into ``infos``, the infos of a batch of ``n``
    rows, and return it: the same dict as merging each env's info in env order with
    gymnasium's ``VectorEnv._add_info`` (an array is made with the dtype of the first block
    that has its key, the dtype of the first env that has it).

    Example:
        >>> import numpy as np
        >>> a = {"x": np.array([1, 0]), "_x": np.array([True, False])}
        >>> merge_block({}, a, 2, 4)["x"]
        array([0, 0, 1, 0])
    """
    for key, value in block.items():
        if _is_mask(block, key):
            continue
        mask = block[f"_{key}"]
        stop = start + len(mask)
        merged: Any
        if isinstance(value, dict):
            merged = merge_block(infos.get(key, {}), value, start, n)
        else:
            merged = infos.get(key)
            if merged is None:
                merged = (
                    np.full(n, None, dtype=object)
                    if value.dtype == object
                    else np.zeros((n, *value.shape[1:]), dtype=value.dtype)
                )
            rows = merged[start:stop]
            rows[mask] = value[mask]
        full = infos.get(f"_{key}")
        if full is None:
            full = np.zeros(n, dtype=np.bool_)
        full[start:stop] |= mask
        infos[key], infos[f"_{key}"] = merged, full
    return infos


def keep_rows(infos: dict, keep: np.ndarray) -> dict:
    """``infos`` (gymnasium's layout) of the rows of ``keep`` only: the other rows are
    cleared (zero, or None in an object array, as a merge of the kept rows alone would
    leave them) and a key no kept row has is dropped."""
    out: dict = {}
    for key, value in infos.items():
        if _is_mask(infos, key):
            continue
        mask = infos[f"_{key}"] & keep
        if not mask.any():
            continue
        if isinstance(value, dict):
            value = keep_rows(value, keep)
        else:
            value = value.copy()
            value[~keep] = None if value.dtype == object else 0
        out[key], out[f"_{key}"] = value, mask
    return out


def split_infos(infos: dict, n: int) -> list[dict]:
    """The merge rule backwards: each of ``n`` rows' own info from ``infos`` (gymnasium's
    layout: an array and a ``_key`` mask per key, nested dicts alike), as gymnasium's
    ``DictInfoToList`` gives them; a key of the envs' own that starts with ``_`` and masks
    nothing is kept. For an API that wants one dict per env (SB3, the Ray pool's rows).

    Example:
        >>> import numpy as np
        >>> split_infos({"k": np.array([0.0, 0.5]), "_k": np.array([False, True])}, 2)
        [{}, {'k': np.float64(0.5)}]
    """
    out: list[dict] = [{} for _ in range(n)]
    for key, value in infos.items():
        if _is_mask(infos, key):
            continue
        mask = infos.get(f"_{key}")
        rows = split_infos(value, n) if isinstance(value, dict) else value
        for i in range(n):
            if mask is None or mask[i]:
                out[i][key] = rows[i]
    return out
