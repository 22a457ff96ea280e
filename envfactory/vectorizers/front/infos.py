"""The merge rule, one for every backend: a batch's infos in gymnasium's ``SyncVectorEnv``
layout (an array and a ``_key`` mask per key, nested dicts alike)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import _compat

__all__ = ["keep_rows", "merge_block", "merge_infos", "plain_key", "split_infos"]

_PLAIN = (int, float, bool)


def plain_key(key: Any) -> bool:
    """Whether a plain scalar under ``key`` becomes an array of its type: a string, not a
    ``_key`` mask's name, not ``final_obs`` (an object array); every fast merge follows it."""
    return type(key) is str and not key.startswith("_") and key != "final_obs"


def merge_infos(rows: Sequence[tuple[int, dict[str, Any]]], n: int) -> dict[str, Any]:
    """The infos of a batch of ``n`` rows from ``(row, info)`` pairs, equal to merging them
    one by one with gymnasium's ``VectorEnv._add_info`` (one array per key at once when every
    value is a plain scalar or a dict of them)."""
    infos = _merge_plain(rows, n)
    if infos is None:
        infos = {}
        for k, info in rows:
            infos = _compat.add_info(infos, info, k, n)
    return infos


def _merge_plain(rows: Sequence[tuple[int, dict[str, Any]]], n: int) -> dict[str, Any] | None:
    """`merge_infos` of rows in order whose values are plain scalars or dicts of them, or None."""
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


def _is_mask(infos: dict, key: Any) -> bool:
    return isinstance(key, str) and key.startswith("_") and key[1:] in infos


def merge_block(infos: dict, block: dict, start: int, n: int) -> dict:
    """Merge ``block``, the merged infos of rows ``start ..``, into ``infos`` (of ``n`` rows)
    and return it, as merging each env's info in env order would."""
    for key, value in block.items():
        if _is_mask(block, key):
            continue
        mask = block[f"_{key}"]
        stop = start + len(mask)
        full = infos.get(f"_{key}")
        if full is None:
            full, fresh = np.zeros(n, dtype=np.bool_), True
        else:  # (count_nonzero: a third of any()'s cost)
            fresh = not np.count_nonzero(full[start:stop])  # (rows no block set: one copy)
        merged: Any
        if isinstance(value, dict):
            merged = merge_block(infos.get(key, {}), value, start, n)
        else:
            merged = infos.get(key)
            if merged is None:
                merged = (
                    np.full(n, None, dtype=object)
                    if value.dtype == object
                    else np.zeros(n if value.ndim == 1 else (n, *value.shape[1:]), value.dtype)
                )
            if fresh:
                merged[start:stop] = value
            else:
                merged[start:stop][mask] = value[mask]  # (a slice is a view)
        full[start:stop] |= mask  # (rows no block set are False: as a copy)
        infos[key], infos[f"_{key}"] = merged, full
    return infos


def keep_rows(infos: dict, keep: np.ndarray) -> dict:
    """``infos`` of the rows of ``keep`` only, as a merge of those rows alone would be."""
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
    """The merge rule backwards: each of ``n`` rows' own info, as gymnasium's
    ``DictInfoToList`` gives them (an env's own ``_`` key that masks nothing is kept)."""
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
