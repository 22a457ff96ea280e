"""How ``in_actor=subproc`` puts each actor's infos (a dict of its rows, gymnasium's layout) into
the whole batch, without starting a Ray: the same dict, dtypes and key order as merging every
env's info in env order with gymnasium's ``VectorEnv._add_info`` (what ``dummy`` does)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from envfactory.vectorizers.remote import keep_rows, merge_block


class Batch(gym.vector.VectorEnv):
    """Only what ``VectorEnv._add_info`` needs: ``num_envs``."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs


def merged(rows: list[tuple[int, dict]], n: int) -> dict:
    infos: dict = {}
    for i, info in rows:
        infos = Batch(n)._add_info(infos, info, i)
    return infos


def assert_same(a: Any, b: Any, path: str = "infos") -> None:
    """Equal key by key, in the same key order, with the same dtypes and values."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), (path, list(a), list(b))
        for k in a:
            assert_same(a[k], b[k], f"{path}[{k!r}]")
        return
    assert a.dtype == b.dtype and a.shape == b.shape, (path, a.dtype, b.dtype)
    if a.dtype == object:
        for x, y in zip(a, b):
            assert (x is None and y is None) or np.array_equal(x, y), (path, x, y)
    else:
        assert np.array_equal(a, b), (path, a, b)


ROWS: list[dict] = [
    {"a": 1, "flag": True, "episode_stats": {"r": 9.0, "l": 9}},
    {},
    {"final_obs": np.ones(2, np.float32), "final_info": {"x": 1.5, "ok": np.bool_(True)}},
    {"a": 2.5, "s": "text", "arr": np.arange(3)},
    {"final_obs": np.zeros(2, np.float32), "final_info": {"x": 2}, "flag": False},
]


def test_each_actor_s_block_merges_as_every_env_s_info_in_env_order() -> None:
    expected = merged(list(enumerate(ROWS)), 5)
    infos: dict = {}
    for start, stop in [(0, 3), (3, 5)]:  # two actors: 3 + 2 envs
        block = merged([(i - start, ROWS[i]) for i in range(start, stop)], stop - start)
        infos = merge_block(infos, block, start, 5)
    assert_same(infos, expected)
    assert infos["flag"].dtype == np.bool_ and infos["a"].tolist() == [1, 0, 0, 2, 0]


def test_an_actor_without_infos_adds_nothing_and_rows_keep_their_place() -> None:
    block = merged([(1, {"lives": 3})], 2)
    infos = merge_block({}, block, 4, 6)
    assert infos["lives"].tolist() == [0, 0, 0, 0, 0, 3]
    assert infos["_lives"].tolist() == [False] * 5 + [True]


def test_keep_rows_clears_the_other_rows_and_drops_keys_no_kept_row_has() -> None:
    infos = merged(list(enumerate(ROWS)), 5)
    kept = keep_rows(infos, np.array([True, True, False, False, False]))
    assert_same(kept, merged([(0, ROWS[0]), (1, ROWS[1])], 5))
    assert "final_obs" not in kept and "s" not in kept


def test_a_block_over_rows_an_earlier_block_set_merges_as_its_envs_after_theirs() -> None:
    """Side by side a block's rows are one slice copy; over rows already set (the masked
    path) it is still every env's info merged in order, the earlier rows' values kept."""
    first = [(0, {"a": 1}), (1, {"a": 2, "b": 0.5}), (2, {"a": 3})]
    second = [(1, {"a": 7}), (2, {"b": 1.5})]  # rows 1 and 2 again
    infos = merge_block({}, merged(first, 3), 0, 3)
    infos = merge_block(infos, merged([(k - 1, i) for k, i in second], 2), 1, 3)
    assert_same(infos, merged(first + second, 3))
    assert infos["a"].tolist() == [1, 7, 3] and infos["b"].tolist() == [0.0, 0.5, 1.5]
