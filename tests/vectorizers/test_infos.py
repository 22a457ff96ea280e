"""A batch's infos merged at once (`envfactory.vectorizers.front.infos.merge_infos`, the
async pool's): the same dict as gymnasium's ``VectorEnv._add_info`` merging one env's info
at a time, for every kind of info (its fast path only takes flat infos of plain scalars)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

import gymnasium as gym
import numpy as np
import psutil
import pytest
from faulty_envs import InfoMaker

from envfactory import _compat
from envfactory.vectorizers.asyncpool.pool import SubprocPool
from envfactory.vectorizers.dummy import DummyVecEnv
from envfactory.vectorizers.front.infos import merge_infos
from envfactory.vectorizers.subproc import SubprocVecEnv, merge_columns
from envfactory.vectorizers.transport.infocols import INFO_KEYS, InfoColumns, fits, learn, schema_of


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
    "nested dicts that differ": [
        (0, {"e": {"r": 1.0, "l": 3}, "lives": 1}),
        (2, {"lives": 2, "e": {"l": 4, "x": np.float32(2)}}),
        (3, {"e": {}}),
    ],
    "a nested value of another type": [(0, {"e": {"r": 1.0}}), (1, {"e": {"r": 2}})],
    "a dict subclass": [(0, {"e": __import__("collections").OrderedDict(r=1.0)})],
    "a dict, then a scalar": [(0, {"e": {"r": 1.0}}), (1, {"e": 2})],
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


# -- scalar infos through shared memory (envfactory.vectorizers.transport.infocols) ----------------
def test_schema_of_takes_plain_scalars_and_dicts_of_them_dense_or_sparse() -> None:
    atari = [(k, dict(ATARI, frame_number=k)) for k in range(3)]
    lives, efn, fn = (("lives", False, ((None, int, False),)),
                      ("episode_frame_number", False, ((None, int, False),)),
                      ("frame_number", False, ((None, int, False),)))  # fmt: skip
    assert schema_of(atari, 3) == (lives, efn, fn)
    sparse = tuple((key, True, leaves) for key, _, leaves in (lives, efn, fn))
    assert schema_of(atari, 4) == sparse  # env 3 without infos: every key sparse
    assert schema_of(atari[:1] + atari[2:], 3) == sparse  # env 1's infos missing
    stats = {"r": 1.5, "l": 3, "t": np.float32(0.25)}
    ended = [(0, dict(ATARI)), (1, dict(ATARI, episode_stats=stats)), (2, dict(ATARI))]
    stats_entry = ("episode_stats", True,
                   (("r", float, True), ("l", int, False), ("t", np.float32, True)))  # fmt: skip
    schema = schema_of(ended, 3)
    assert schema == (lives, efn, fn, stats_entry)
    assert schema is not None and fits(schema, atari, 3)  # no episode end: it fits too
    assert not fits(schema, atari, 4) and not fits(schema, atari[:2], 3)  # a dense key missing
    assert learn(schema, atari, 3) is schema and learn(None, ended, 3) == schema
    assert learn(schema, [(0, {"x": "s"})], 3) is schema  # nothing to learn: kept
    assert schema_of([(2, {"episode_stats": stats})], 4) == (stats_entry,)
    differ = [(0, {"a": 1}), (1, {"a": 1.5})]
    assert schema_of(differ, 2) is None  # another type
    assert schema_of([(0, {"a": 1, "b": 2}), (1, {"b": 2, "a": 1})], 2) is None  # key order
    assert schema_of([(0, {"a": 1}), (0, {"b": 2})], 2) is None  # two infos for one env
    assert schema_of([(1, {"a": 1}), (0, {"a": 2})], 2) is None  # out of order
    bad_infos = [{"_a": 1}, {"a": "s"}, {"a": np.uint64(1)}, {"a": np.ones(2)}, {1: 2}]
    bad_infos += [{"e": {"r": "s"}}, {"e": {"r": {"x": 1}}}, {"e": {}}, {"e": {"_r": 1}}]
    for bad in bad_infos:
        assert schema_of([(0, bad)], 1) is None, bad
    assert schema_of([(0, {f"k{i}": i for i in range(INFO_KEYS + 1)})], 1) is None
    too_many = {"e": {f"k{i}": i for i in range(INFO_KEYS)}}  # a presence column too
    assert schema_of([(0, too_many)], 1) is None


def test_info_columns_give_back_the_same_values_and_types() -> None:
    cols = InfoColumns(np.zeros((INFO_KEYS, 5), np.int64))
    calls = [
        (i, {"t": i * 10**12, "x": i / 3, "ok": bool(i % 2), "f": np.float32(i / 7),
             "n": np.int32(-i), "b": np.bool_(i == 1)})
        for i in range(3)
    ]  # fmt: skip
    schema = schema_of(calls, 3)
    assert schema is not None and cols.write(schema, calls, 2, 3)
    back = cols.read(schema, 2, 3)
    assert back == calls
    assert [type(v) for _, info in back for v in info.values()] == [
        type(v) for _, info in calls for v in info.values()
    ]
    too_big = [(0, {"t": 2**70})]
    assert not cols.write((("t", False, ((None, int, False),)),), too_big, 0, 1)  # by pipe
    stats = [(1, {"lives": 2, "episode_stats": {"r": 7.0, "l": 7, "t": np.float32(0.5)}}),
             (3, {"lives": 1})]  # fmt: skip
    schema = schema_of(stats, 4)
    assert schema is not None and cols.write(schema, stats, 1, 4)
    back = cols.read(schema, 1, 4)
    assert back == stats and type(back[0][1]["episode_stats"]["t"]) is np.float32
    assert cols.write(schema, stats[1:], 1, 4) and cols.read(schema, 1, 4) == stats[1:]


def _random_step(rng: np.random.Generator, n: int) -> list[tuple[int, dict]]:
    """A worker's step infos of ``n`` envs: dense scalars, or sparse keys (an episode's
    statistics among them) that some envs report, of every column type."""
    dense = rng.random() < 0.3
    pairs = []
    for i in range(n):
        info: dict = {}
        if dense or rng.random() < 0.5:
            info["lives"] = int(rng.integers(0, 5))
        if not dense and rng.random() < 0.3:
            info["flag"] = bool(rng.random() < 0.5)
        if not dense and rng.random() < 0.1:  # (gymnasium merges these as objects)
            info["hit"] = np.bool_(rng.random() < 0.5)
        if dense or rng.random() < 0.4:
            info["x"] = np.float32(rng.random())
        if not dense and rng.random() < 0.3:
            info["episode"] = {"r": float(rng.random()), "l": int(rng.integers(1, 500)),
                               "t": np.float32(rng.random())}  # fmt: skip
        if info:
            pairs.append((i, info))
    return pairs


@pytest.mark.parametrize("seed", range(40))
def test_a_batch_merged_from_the_columns_equals_the_pairs_merged(seed: int) -> None:
    """`merge_columns` (the synchronous step's one pass over the columns) gives what
    gymnasium's one-by-one merge makes of the pairs: keys in order of first appearance,
    each array's dtype, the masks; with rows of workers that report nothing this step
    (``have``), and with rows picked by env id."""
    rng = np.random.default_rng(seed)
    workers, per = 3, 4
    n = workers * per
    cols = InfoColumns(np.full((INFO_KEYS, n), 7, np.int64))  # (stale values: ignored)
    rows: list = []
    have = np.zeros(n, np.bool_)
    schema = None
    for k in range(workers):
        pairs = _random_step(rng, per)
        schema = schema or schema_of(pairs, per)
        if not pairs or schema is None or not fits(schema, pairs, per) or rng.random() < 0.2:
            continue  # this worker reports nothing (no infos, or by pipe)
        assert cols.write(schema, pairs, k * per, per)
        rows += [(k * per + i, info) for i, info in cols.read(schema, k * per, per)]
        have[k * per : (k + 1) * per] = True
    if schema is None:
        return
    want = _one_by_one(rows, n)
    got = merge_columns(cols, schema, slice(0, n), None if have.all() else have)
    if any(t is np.bool_ for _, _, leaves in schema for _, t, _ in leaves):
        assert got is None  # (the caller merges the pairs: gymnasium's object arrays)
        return
    _assert_same(got, want)
    ids = rng.permutation(n)[: n // 2]
    picked = [(r, info) for r, i in enumerate(ids.tolist()) for j, info in rows if j == i]
    _assert_same(merge_columns(cols, schema, ids, have[ids]), _one_by_one(picked, len(ids)))


def test_dense_scalars_merged_from_the_columns_equal_the_pairs_merged() -> None:
    """Atari's infos (every env reports the same scalars): the whole columns, cast; and
    with a worker that reports nothing this step."""
    cols = InfoColumns(np.full((INFO_KEYS, 6), 3, np.int64))
    pairs = [(i, dict(ATARI, frame_number=100 + i, lives=np.int32(i))) for i in range(3)]
    schema = schema_of(pairs, 3)
    assert schema is not None and not any(sparse for _, sparse, _ in schema)
    assert cols.write(schema, pairs, 0, 3) and cols.write(schema, pairs, 3, 3)
    rows = [(k * 3 + i, info) for k in range(2) for i, info in pairs]
    _assert_same(merge_columns(cols, schema, slice(0, 6)), _one_by_one(rows, 6))
    have = np.array([True] * 3 + [False] * 3)
    _assert_same(merge_columns(cols, schema, slice(0, 6), have), _one_by_one(rows[:3], 6))
    ids = np.array([4, 1])
    _assert_same(
        merge_columns(cols, schema, ids), _one_by_one([(0, rows[4][1]), (1, rows[1][1])], 2)
    )


class _BoolInfoEnv(gym.Env):
    """Reports ``hit`` as a numpy bool (a distance check's result) on some steps."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, k: int) -> None:
        self.k, self.t = k, 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> tuple:
        self.t += 1
        info = {"hit": np.bool_(self.t % 2 == 0)} if (self.t + self.k) % 3 else {}
        return np.zeros(2, np.float32), 0.0, False, self.t >= 7, info


def test_numpy_bool_infos_through_the_columns_equal_dummys() -> None:
    """gymnasium keeps a ``np.bool_`` info in an object array (it is no ``np.number``),
    ``None`` where an env did not report it: so does ``subproc``, whose columns carry it."""
    fns = [lambda k=k: _BoolInfoEnv(k) for k in range(4)]
    with DummyVecEnv(fns) as dummy:
        dummy.reset(seed=0)
        want = [dummy.step(np.zeros(4, np.int64))[4] for _ in range(20)]
    with SubprocVecEnv(fns, in_series=2, context="fork") as envs:
        envs.reset(seed=0)
        got = [envs.step(np.zeros(4, np.int64))[4] for _ in range(20)]
        assert all(w.schemas >= 1 for w in envs.group.workers)
    assert any("hit" in infos for infos in want)
    for a, b in zip(want, got):
        _assert_same(a, b)


def _infos_per_env(batches: list[dict], n: int) -> list[list[dict]]:
    """Each env's infos, batch by batch, as ``{key: (repr, dtype)}`` (the pool's batches
    come in any order)."""
    out: list[list[dict]] = [[] for _ in range(n)]
    for infos in batches:
        ids = infos.get("env_id", np.arange(n)).tolist()
        for row, i in enumerate(ids):
            keys = [k for k in infos if not k.startswith("_") and k != "env_id"]
            out[i].append(
                {k: (repr(infos[k][row]), infos[k].dtype) for k in keys if infos[f"_{k}"][row]}
            )
    return out


def test_subproc_infos_through_the_columns_equal_dummys() -> None:
    """Keys that come and go, a type that changes, episode ends (``episode``): every step's
    infos equal ``dummy``'s, and most steps' infos came through the columns."""
    fns = [InfoMaker(k) for k in range(4)]
    actions = [np.array([t % 2] * 4) for t in range(60)]
    with DummyVecEnv(fns) as dummy:
        dummy.reset(seed=0)
        want = [dummy.step(a)[4] for a in actions]
    with SubprocVecEnv(fns, in_series=2) as envs:
        envs.reset(seed=0)
        got = [envs.step(a)[4] for a in actions]
        schemas = [w.schemas for w in envs.group.workers]
    for t, (a, b) in enumerate(zip(want, got)):
        assert list(a) == list(b), t
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"step {t} {key}")
            assert a[key].dtype == b[key].dtype, (t, key)
    # the schema changes at each new shape of infos (extra, float t), and back
    assert all(s >= 3 for s in schemas), schemas


def test_pool_infos_through_the_columns_equal_dummys() -> None:
    fns = [InfoMaker(k) for k in range(4)]
    with DummyVecEnv(fns) as dummy:
        dummy.reset(seed=0)
        # (an env is in at most every batch: as many steps of dummy's as batches, or more)
        want = [dummy.step(np.zeros(4, np.int64))[4] for _ in range(601)]
    with SubprocPool(fns, 2, in_series=2) as envs:
        envs.async_reset(seed=0)
        got: list[dict] = []
        steps = np.zeros(4, np.int64)
        # (the pool takes whichever worker answers first: on a loaded machine one worker's
        # envs can fill most batches, so step until each env has had its share, not 60 times)
        while steps.min() <= 11 and len(got) < 600:
            infos = envs.recv()[4]
            got.append(infos)
            steps[infos["env_id"]] += 1
            envs.send(np.zeros(2, np.int64), infos["env_id"])
        assert all(w.schemas >= 2 for w in envs.group.workers)
    mine, ref = _infos_per_env(got, 4), _infos_per_env(want, 4)
    for i in range(4):
        steps = mine[i][1:]  # (after its reset's)
        assert len(steps) > 10 and steps == ref[i][: len(steps)], i


def test_a_rebuilt_worker_starts_its_info_schema_afresh() -> None:
    """``restart=true``: the new process and the parent both start with no schema, so the
    columns are read by the new worker's schema, never the old one's."""
    fns = [InfoMaker(k) for k in range(4)]
    with SubprocVecEnv(fns, in_series=2, restart=True) as envs:
        envs.reset(seed=0)
        for t in range(20):
            envs.step(np.array([t % 2] * 4))
        old = envs.pids[0]
        os.kill(old, signal.SIGKILL)
        while not _gone(old):
            time.sleep(0.01)
        with pytest.warns(RuntimeWarning, match="restarting after"):
            infos = envs.step(np.zeros(4, np.int64))[4]
        assert infos["_restarted"].tolist() == [True, True, False, False]
        for t in range(30):
            infos = envs.step(np.array([t % 2] * 4))[4]
            assert infos["k"].dtype == np.int32 and infos["k"].tolist() == [0, 1, 2, 3], t
            assert infos["_t"].all() and infos["_x"].all(), t
        assert envs.group.workers[0].schemas >= 2 and envs.pids[0] != old


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie counts: it runs no more)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
