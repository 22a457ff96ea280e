"""Run-time placement of ``subproc``'s envs (envfactory.vectorizers.placement): the
decision from measured step costs, and the moves of envs between the workers and the
parent, which change no trajectory, lose nothing, and stop cleanly where an env cannot
move. Real worker processes, compared bit for bit with ``dummy``."""

from __future__ import annotations

import itertools
import os
import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from test_equivalence import CARTPOLE, MOUNTAINCAR, RICH, _compose, _run, dummy_rollout

import envfactory
from envfactory.testing import assert_rollouts_equal
from envfactory.vectorizers.placement import MAX_GAP, Placement


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def feed(p: Placement, clock: FakeClock, cost: dict[bool, float], steps: int) -> list[bool]:
    """``steps`` steps costing ``cost[p.local]`` each; where the envs were, step by step."""
    where = []
    for _ in range(steps):
        where.append(p.local)
        clock.now += cost[p.local]
        p.record(cost[p.local])
    return where


def test_the_cheaper_placement_is_kept_and_the_other_tried_less_often() -> None:
    clock = FakeClock()
    p = Placement(clock=clock, window=0.01, min_steps=4, settle=2)
    where = feed(p, clock, {False: 0.002, True: 0.001}, 3000)  # the parent is cheaper
    assert p.local and p.cost == pytest.approx([0.002, 0.001])
    assert where[-200:].count(False) < 20  # tries of the workers are short and rare
    clock = FakeClock()
    p = Placement(clock=clock, window=0.01, min_steps=4, settle=2)
    where = feed(p, clock, {False: 0.001, True: 0.003}, 4000)  # the workers are cheaper
    assert not p.local
    tries = sum(1 for a, b in itertools.pairwise(where) if not a and b)
    assert 1 <= tries <= 8  # the gap doubled: 0.5, 1, 2, 4 s over 4 s of steps
    assert p._gap > 1.0


def test_a_costly_try_waits_longer_for_the_next() -> None:
    """Tries of a placement 4x as slow take at most TRY_SHARE of the time: fewer tries
    than with a 10% slower one over the same time."""
    counts = []
    for worse in (0.0011, 0.004):
        clock = FakeClock()
        p = Placement(clock=clock, window=0.05, min_steps=4, settle=0, local=True)
        where = feed(p, clock, {False: worse, True: 0.001}, 8000)
        counts.append(sum(1 for a, b in itertools.pairwise(where) if a and not b))
        in_tries = sum(1 for w in where if not w) * worse
        assert p.local and in_tries < 0.15 * clock.now
    assert counts[1] < counts[0]


def test_a_try_must_win_by_the_margin() -> None:
    clock = FakeClock()
    p = Placement(clock=clock, window=0.01, min_steps=4, settle=0, margin=0.1)
    feed(p, clock, {False: 0.001, True: 0.00095}, 200)  # 5% cheaper: not enough
    assert not p.local


@pytest.mark.parametrize("start_local", [False, True])
def test_the_workers_win_a_near_tie(start_local: bool) -> None:
    """Within the margin of each other, the envs end in the workers, wherever they start."""
    clock = FakeClock()
    p = Placement(clock=clock, window=0.01, min_steps=4, settle=0, local=start_local)
    feed(p, clock, {False: 0.00102, True: 0.001}, 3000)
    assert not p.local


def test_a_change_of_cost_is_found_within_the_longest_gap() -> None:
    clock = FakeClock()
    p = Placement(clock=clock, window=0.01, min_steps=4, settle=0, first_gap=0.5)
    feed(p, clock, {False: 0.001, True: 0.003}, 20000)  # 20 s: the gap grows to the most
    assert not p.local and p._gap == MAX_GAP
    # a busy core: the workers now cost 4x; the parent is cheaper, found within MAX_GAP
    start = clock.now
    where = feed(p, clock, {False: 0.004, True: 0.003}, 4000)
    assert p.local
    assert where.index(True) * 0.004 <= MAX_GAP + 0.1 + (start % MAX_GAP)


def test_a_clearly_worse_try_ends_after_min_steps_a_near_one_waits_its_window() -> None:
    """A try that costs CLEARLY_WORSE times the kept placement per step ends after
    min_steps steps; one only a little dearer runs its whole window."""
    lengths = {}
    for worse in (0.0011, 0.003):  # the workers 10% and 3x dearer than the parent
        clock = FakeClock()
        p = Placement(clock=clock, window=0.05, min_steps=4, settle=0, local=True)
        where = feed(p, clock, {False: worse, True: 0.001}, 200)
        first_try = where[where.index(False) :]
        lengths[worse] = first_try.index(True)
        assert p.local
    assert lengths[0.003] == 4
    assert lengths[0.0011] * 0.0011 >= 0.05


def test_one_slow_window_of_the_kept_placement_does_not_make_a_try_win() -> None:
    """A try is compared with the median of the kept placement's recent windows: the
    workers at 1.0 ms a step with one 1.5 ms window just before a try of the parent at
    1.2 ms keep the envs in the workers (against that one window, the try would win)."""
    clock = FakeClock()
    p = Placement(clock=clock, window=0.01, min_steps=4, settle=0)
    p._next_try = 0.035  # three windows of the workers first, then the hiccup, then a try
    where = []
    while clock.now < 0.2:
        hiccup = 0.03 <= clock.now < 0.04
        cost = 0.0012 if p.local else (0.0015 if hiccup else 0.001)
        where.append(p.local)
        clock.now += cost
        p.record(cost)
    assert p.tries == 1 and True in where  # the parent was tried
    assert not p.local and p.recent[0][-1] == pytest.approx(0.001)


def test_of_two_windows_the_cheaper_is_what_a_try_must_beat() -> None:
    """With only two windows of the kept placement, a slow one is not the reference."""
    p = Placement(clock=FakeClock(), local=True)  # trying the parent: the workers are kept
    p.recent[0] = [0.0010, 0.0015]
    assert p._kept_cost() == pytest.approx(0.0010)
    p.recent[0] = [0.0015, 0.0010, 0.0011]
    assert p._kept_cost() == pytest.approx(0.0011)


def test_it_starts_where_it_is_told_and_tries_the_other_at_once() -> None:
    clock = FakeClock()
    p = Placement(clock=clock, window=0.01, min_steps=4, settle=0, local=True)
    where = feed(p, clock, {False: 0.001, True: 0.003}, 40)
    assert where[0] is True and not p.local  # tried after one window, kept


class Flip(gym.vector.VectorWrapper):
    """Moves the envs (between the workers and the parent) every ``every`` steps."""

    def __init__(self, env: Any, every: int) -> None:
        super().__init__(env)
        self.every, self.t, self.seen = every, 0, set()

    def step(self, actions: Any) -> Any:
        self.t += 1
        p = self.env.placement
        if self.t % self.every == 0 and p is not None:
            p.local = not p.local
        out = self.env.step(actions)
        self.seen.add(all(h.in_process for h in self.env.handles))
        return out


CASES = list(
    itertools.product(
        (("cartpole", CARTPOLE), ("mountaincar", MOUNTAINCAR), ("rich", RICH)),
        ("next_step", "same_step", "disabled"),
        ("true", "false"),
    )
)


@pytest.mark.parametrize(
    ("env", "mode", "shm"), CASES, ids=[f"{e[0]}-{m}-shm{s}" for e, m, s in CASES]
)
def test_moves_keep_dummys_trajectories(env: Any, mode: str, shm: str) -> None:
    """Envs moved into the parent and back every few steps, mid-episode, give dummy's
    trajectories bit for bit (obs, rewards, flags, infos, final obs, masked resets)."""
    _, overrides = env
    env_over, steps = (*overrides, "num_envs=5"), 120
    envs = envfactory.make_vec(
        _compose(
            *env_over, "vectorizer=subproc", f"vectorizer.shared_memory={shm}",
            f"autoreset_mode={mode}",
        )
    )  # fmt: skip
    assert envs.placement is not None
    flip = Flip(envs, every=7)
    records = _run(flip, steps)
    assert flip.seen == {True, False}, "the envs never moved"
    assert envs.placement_stopped is None
    assert_rollouts_equal(dummy_rollout(env_over, mode, steps), records)


def _subproc(*extra: str) -> Any:
    return envfactory.make_vec(_compose(*CARTPOLE, "num_envs=4", "vectorizer=subproc", *extra))


def _step(envs: Any, n: int = 1) -> None:
    for _ in range(n):
        envs.step(np.zeros(envs.num_envs, dtype=np.int64))


class Recorded(Placement):
    """Keeps the envs where they are and keeps what each step was measured at."""

    def record(self, seconds: float) -> None:
        self.seen = [*getattr(self, "seen", []), seconds]


@pytest.mark.parametrize("local", [False, True])
def test_a_step_is_measured_whole_in_either_placement(
    local: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the placements are compared by is what ``step()`` blocks the caller for,
    its argument checks included, in the workers as in the parent: a 20 ms action check
    shows in both (the workers' cost was once timed from its two halves only, which
    left the checks out and made the workers look cheaper than they were)."""
    envs = _subproc()
    try:
        envs.placement = p = Recorded(local=local)
        envs.reset(seed=0)
        _step(envs, 2)  # (a move, if any)
        assert all(h.in_process for h in envs.handles) == local
        check = envs._check_actions  # (the instance's checker for its action space)

        def slow_check(actions: Any) -> Any:
            time.sleep(0.02)
            return check(actions)

        monkeypatch.setattr(envs, "_check_actions", slow_check)
        _step(envs)
        assert p.seen[-1] >= 0.02
    finally:
        envs.close()


def test_moved_envs_answer_calls_and_attributes_in_the_parent() -> None:
    envs = _subproc()
    try:
        envs.reset(seed=0)
        envs.set_attr("marker", [10, 11, 12, 13])
        envs.placement.local = True
        _step(envs)
        assert all(h.in_process for h in envs.handles)
        assert envs.get_attr("marker") == (10, 11, 12, 13)  # the state moved with them
        assert set(envs.call(lambda env: os.getpid())) == {os.getpid()}
        envs.placement.local = False
        _step(envs)
        pids = set(envs.call(lambda env: os.getpid()))
        assert os.getpid() not in pids or envs.in_parent  # back in a worker
        assert set(envs.pids) <= pids | {os.getpid()}
        assert envs.get_attr("marker") == (10, 11, 12, 13)
    finally:
        envs.close()


class LockedCartPole(gym.Wrapper):
    """CartPole holding a lock: it cannot be pickled, so it cannot move."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(gym.make("CartPole-v1", **kwargs))
        self.lock = threading.Lock()


class HeavyCartPole(gym.Wrapper):
    """CartPole carrying 1 MB of state: too heavy to move every few seconds."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(gym.make("CartPole-v1", **kwargs))
        self.ballast = np.ones(1 << 20, dtype=np.uint8)


for _cls in (LockedCartPole, HeavyCartPole):
    if f"EnvfactoryTests/{_cls.__name__}-v0" not in gym.registry:
        gym.register(f"EnvfactoryTests/{_cls.__name__}-v0", entry_point=_cls)


@pytest.mark.parametrize(
    ("cls", "says"),
    [(LockedCartPole, "pickle"), (HeavyCartPole, "bytes, more than the")],
)
def test_an_env_that_cannot_move_stays_in_its_worker(cls: type, says: str) -> None:
    over = ("env=gym", f"env.id=EnvfactoryTests/{cls.__name__}-v0", "num_envs=3")
    envs = envfactory.make_vec(_compose(*over, "vectorizer=subproc"))
    try:
        envs.reset(seed=1)
        envs.placement.local = True
        _step(envs, 3)
        assert envs.placement is None  # no more moves, the envs where they were
        assert says in envs.placement_stopped
        assert not all(h.in_process for h in envs.handles)
        _step(envs, 30)  # and it keeps stepping
    finally:
        envs.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] != "Z"


def test_close_with_moved_envs_ends_every_worker() -> None:
    envs = _subproc()
    envs.reset(seed=0)
    envs.placement.local = True
    _step(envs)
    pids = envs.pids
    assert pids and all(h.in_process for h in envs.handles)
    envs.close()
    deadline = time.monotonic() + 5
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_alive, pids))


def test_a_worker_dead_while_its_envs_are_in_the_parent_keeps_them_there() -> None:
    """Its envs live on in the parent: the move back fails, the envs stay and step."""
    envs = _subproc()
    try:
        envs.reset(seed=0)
        envs.placement.local = True
        _step(envs)
        for pid in envs.pids:
            os.kill(pid, 9)
        time.sleep(0.2)
        envs.placement.local = False
        _step(envs, 20)
        assert envs.placement is None and "worker 0" in envs.placement_stopped
        assert all(h.in_process for h in envs.handles)
    finally:
        envs.close()


@pytest.mark.parametrize(
    "extra",
    [
        ("vectorizer.in_parent=1",),
        ("vectorizer.in_parent=0",),
        ("vectorizer.in_series=2",),
        ("vectorizer.timeout=5",),
        ("vectorizer.restart=true",),
        ("env.render_mode=rgb_array",),
    ],
)
def test_a_fixed_placement_does_not_move(extra: tuple[str, ...]) -> None:
    """A placement the user chose (in_parent, in_series), or a need only a worker process
    meets (timeout, restart), or rendering, keeps the envs where they were built."""
    envs = _subproc(*extra)
    try:
        assert envs.placement is None
    finally:
        envs.close()


@pytest.mark.skipif((os.cpu_count() or 1) != 2, reason="one busy process fills a core of two")
def test_a_busy_core_at_build_starts_the_envs_in_the_parent_with_the_idle_split() -> None:
    """The split is the one that pays on idle cores (a worker's share in the parent); a
    busy core when the env is built starts every env in the parent at once."""
    from envfactory.cli.measure import busy
    from envfactory.vectorizers.subproc_options import parent_share

    idle_split = parent_share(8, None, None, None, False, False, load=0.0)
    with busy(2):
        envs = envfactory.make_vec(_compose(*CARTPOLE, "num_envs=8", "vectorizer=subproc"))
    try:
        assert envs.in_parent == idle_split > 0
        assert envs.placement.local
        envs.reset(seed=0)
        _step(envs)
        assert all(h.in_process for h in envs.handles)
    finally:
        envs.close()
    envs = envfactory.make_vec(_compose(*CARTPOLE, "num_envs=8", "vectorizer=subproc"))
    try:
        assert envs.in_parent == idle_split
    finally:
        envs.close()


class ParentOnlyFailure(gym.Wrapper):
    """CartPole that cannot be built in the main process (only in a worker)."""

    def __init__(self, **kwargs: Any) -> None:
        import multiprocessing

        if multiprocessing.parent_process() is None:
            raise RuntimeError("this env is built in worker processes only")
        super().__init__(gym.make("CartPole-v1", **kwargs))


if "EnvfactoryTests/ParentOnlyFailure-v0" not in gym.registry:
    gym.register("EnvfactoryTests/ParentOnlyFailure-v0", entry_point=ParentOnlyFailure)


def test_an_env_failing_in_the_parent_is_a_remote_env_error_naming_the_parent() -> None:
    """The parent's own envs fail to build: one RemoteEnvError naming them (as a worker's
    failure would be), not the bare exception; the workers' failure, had they one, first."""
    from envfactory.errors import RemoteEnvError

    over = ("env=gym", "env.id=EnvfactoryTests/ParentOnlyFailure-v0", "num_envs=4")
    parent = r"^the parent process \(in_parent\) .* raised builtins.RuntimeError during start"
    with pytest.raises(RemoteEnvError, match=parent) as err:
        envfactory.make_vec(_compose(*over, "vectorizer=subproc", "vectorizer.in_parent=2"))
    assert isinstance(err.value, RuntimeError)
    with pytest.raises(RemoteEnvError, match=r"(?s)^worker 0 .*unexpected keyword argument"):
        envfactory.make_vec(
            _compose(*CARTPOLE, "num_envs=4", "vectorizer=subproc", "env.kwargs.foo=1")
        )
