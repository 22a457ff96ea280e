"""A batch's infos merged at once (`envfactory.vectorizers.infos.merge_infos`, the
async pool's): the same dict as gymnasium's ``VectorEnv._add_info`` merging one env's info
at a time, for every kind of info (its fast path only takes flat infos of plain scalars)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from envfactory import _compat
from envfactory.vectorizers.infos import merge_infos


def _one_by_one(rows: list[tuple[int, dict]], n: int) -> dict:
    infos: dict = {}
    for k, info in rows:
        infos = _compat.add_info(infos, info, k, n)
    return infos


def _assert_same(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert list(a) == list(b)  # the same keys, in the same order
        for key in a:
            _assert_same(a[key], b[key])
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert [repr(x) for x in a.tolist()] == [repr(x) for x in b.tolist()]
    else:
        assert a == b


ATARI = {"lives": 0, "episode_frame_number": 1204, "frame_number": 99812}
CASES = {
    "atari, every row": [(k, dict(ATARI, frame_number=k)) for k in range(4)],
    "some rows, different keys": [(0, {"a": 1}), (2, {"b": 2.5, "a": 3}), (3, {"c": True})],
    "numpy scalars": [(0, {"x": np.float32(1.5)}), (1, {"x": np.float32(2.0)})],
    "a later value of another type": [(0, {"x": 1}), (1, {"x": 2.7})],
    "nested dicts": [(0, {"episode": {"r": 1.0, "l": 3}}), (1, {"lives": 2})],
    "arrays": [(0, {"v": np.ones(3)}), (1, {"v": np.zeros(3)})],
    "final_obs": [(1, {"final_obs": np.ones(2), "final_info": {}})],
    "objects": [(0, {"s": "text"}), (1, {"s": None})],
    "a key that starts with _": [(0, {"x": 1, "_x": 5})],
    "two infos for one row": [(0, {"x": 1}), (0, {"x": 2, "y": 3})],
    "rows out of order": [(2, {"x": 1}), (0, {"x": 2})],
    "no rows": [],
}


@pytest.mark.parametrize("case", list(CASES))
def test_merge_infos_equals_gymnasiums_merge_one_by_one(case: str) -> None:
    rows = CASES[case]
    _assert_same(merge_infos(rows, 4), _one_by_one(rows, 4))
