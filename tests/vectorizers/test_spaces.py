"""Observations of every space gymnasium ships (Box, Discrete, MultiDiscrete, MultiBinary,
Text, Graph with and without edges, Sequence stacked and not, OneOf, Dict, Tuple and
nestings) come out of every built-in vectorizer exactly as out of gymnasium's
``SyncVectorEnv``: same values and types, in every autoreset mode, with ``copy`` on and
off, and with ``copy=True`` never overwritten later. The checks are the conformance
suite's ([`envfactory.testing.SpacesConformance`][envfactory.testing.SpacesConformance]), as a
third-party vectorizer would run them. ``subproc-atari`` takes only uint8 Box observations and is
left out.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv

from envfactory.errors import ObservationError
from envfactory.testing import SpacesConformance, check_space, gymnasium_spaces
from envfactory.vectorizers.builtin import build_subproc
from envfactory.vectorizers.dummy import build_dummy
from envfactory.vectorizers.transport.shared import supports_shared_memory

EnvFns = Sequence[Callable[[], gym.Env]]
ALL = gymnasium_spaces()
#: the spaces that go through shared memory when it is on (the others are pickled)
SHM = {k: v for k, v in ALL.items() if supports_shared_memory(v)}
QUICK = {k: ALL[k] for k in ("text", "graph_no_edges", "oneof", "nested", "dict")}


class TestSyncVectorEnvSpaces(SpacesConformance):
    """The reference passes its own suite (the suite asks nothing gymnasium does not do)."""

    spaces = QUICK

    def build_vecenv(self, env_fns: EnvFns, **options: Any) -> VectorEnv:
        return SyncVectorEnv(env_fns, **options)


class TestDummySpaces(SpacesConformance):
    def build_vecenv(self, env_fns: EnvFns, **options: Any) -> VectorEnv:
        return build_dummy(env_fns, **options)


class TestSubprocSpaces(SpacesConformance):
    """Pickled observations (non-array spaces) and shared memory (array spaces), over two
    workers (``fork``: quick; every start method in the slow tests below)."""

    copies = (True,)

    def build_vecenv(self, env_fns: EnvFns, **options: Any) -> VectorEnv:
        return build_subproc(env_fns, in_series=2, context="fork", **options)


class TestSubprocNoCopySpaces(TestSubprocSpaces):
    """``copy=False``: the batch buffers themselves (every space in the slow variant)."""

    spaces = QUICK
    copies = (False,)


@pytest.mark.slow
class TestSubprocNoCopyAllSpaces(TestSubprocSpaces):
    copies = (False,)


class TestSubprocNoSharedMemorySpaces(SpacesConformance):
    """``shared_memory=false``: array spaces pickled too."""

    spaces = SHM

    def build_vecenv(self, env_fns: EnvFns, **options: Any) -> VectorEnv:
        return build_subproc(env_fns, in_series=2, context="fork", shared_memory=False, **options)


@pytest.mark.slow
@pytest.mark.parametrize("context", ["forkserver", "spawn"])
@pytest.mark.parametrize("name", list(ALL))
def test_subproc_spaces_every_start_method(name: str, context: str) -> None:
    build = functools.partial(build_subproc, in_series=2, context=context)
    for mode in AutoresetMode:
        check_space(build, ALL[name], autoreset_mode=mode, copy=True)


def test_the_space_suite_catches_a_vectorizer_that_does_not_copy() -> None:
    """copy=True that hands out its reused buffer is caught."""

    def build(env_fns: EnvFns, **options: Any) -> VectorEnv:
        options["copy"] = False
        return build_dummy(env_fns, **options)

    with pytest.raises(AssertionError, match="changed by a later call"):
        check_space(build, ALL["box"], copy=True)


def test_the_space_suite_catches_a_vectorizer_that_changes_types() -> None:
    """A Graph batch that comes back as plain tuples (not GraphInstance) is caught."""

    class Untyped(gym.vector.VectorWrapper):
        def step(self, actions: Any) -> Any:
            obs, *rest = self.env.step(actions)
            return (tuple(tuple(g) for g in obs), *rest)

    def build(env_fns: EnvFns, **options: Any) -> VectorEnv:
        return Untyped(build_dummy(env_fns, **options))

    with pytest.raises(AssertionError, match=r"GraphInstance vs tuple|not in observation_space"):
        check_space(build, ALL["graph"])


# --------------------------------------------------------------------------------------
# observations outside the declared space are an error under every path, never silently
# broadcast or cast into the batch
# --------------------------------------------------------------------------------------
class BadObsEnv(gym.Env):
    """Box(4,) float32 observations (or a Dict of one); from step ``at`` on, ``bad``."""

    BAD: dict[str, Any] = {
        "shape": np.zeros(3, np.float32),
        "scalar": 123.0,
        "none": None,
        "complex": np.full(4, 1 + 2j),
        "2d": np.zeros((4, 1), np.float32),
    }

    def __init__(self, bad: str = "", at: int = 2, as_dict: bool = False) -> None:
        box = gym.spaces.Box(-1, 1, (4,), np.float32)
        self.observation_space = gym.spaces.Dict({"x": box}) if as_dict else box
        self.action_space = gym.spaces.Discrete(2)
        self.bad, self.at, self.as_dict, self.t = bad, at, as_dict, 0

    def _obs(self) -> Any:
        obs = self.BAD[self.bad] if self.bad and self.t >= self.at else np.zeros(4, np.float32)
        return {"x": obs} if self.as_dict else obs

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        return self._obs(), 0.0, False, False, {}


BUILDS: dict[str, Callable[..., VectorEnv]] = {
    "dummy": build_dummy,
    "subproc": functools.partial(build_subproc, in_series=2),
    "subproc-noshm": functools.partial(build_subproc, in_series=2, shared_memory=False),
}
ACTUAL = {
    "shape": r"shape \(3,\) and dtype float32",
    "scalar": r"shape \(\) and dtype float64",
    "none": "= None",
    "complex": r"shape \(4,\) and dtype complex128",
    "2d": r"shape \(4, 1\) and dtype float32",
}


@pytest.mark.parametrize("as_dict", [False, True], ids=["box", "dict"])
@pytest.mark.parametrize("bad", list(ACTUAL))
@pytest.mark.parametrize("vectorizer", list(BUILDS))
def test_an_observation_outside_the_space_is_an_error(
    vectorizer: str, bad: str, as_dict: bool
) -> None:
    fns = [functools.partial(BadObsEnv, bad if i == 2 else "", as_dict=as_dict) for i in range(3)]
    where = r"\['x'\]" if as_dict else ""
    message = (
        rf"env 2 returned observation{where} (of )?{ACTUAL[bad]}.*expects shape \(4,\) and "
        r"dtype float32"
    )
    with BUILDS[vectorizer](fns) as envs:
        envs.reset(seed=0)
        envs.step(np.zeros(3, np.int64))
        with pytest.raises(ObservationError, match=message):
            envs.step(np.zeros(3, np.int64))


def test_the_observation_check_is_three_attribute_checks_for_a_fitting_array(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shared-memory writer's hot path never runs the full check (nor ``contains``)."""
    from envfactory.vectorizers.transport import shared

    def fail(*args: Any) -> None:
        raise AssertionError("the full check ran for a fitting observation")

    monkeypatch.setattr(shared.np, "asarray", fail)  # (the full check's first call)
    monkeypatch.setattr(shared.np, "can_cast", fail)
    monkeypatch.setattr(gym.spaces.Box, "contains", fail)
    target = {"a": np.zeros((8, 4), np.float32), "b": np.zeros((8, 2, 2), np.uint8)}
    write = shared._make_writer(target)
    write(3, {"a": np.ones(4, np.float32), "b": np.full((2, 2), 7, np.uint8)})
    assert target["a"][3].tolist() == [1.0] * 4 and target["b"][3].sum() == 28
