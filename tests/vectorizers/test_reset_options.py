"""What ``options`` an env's ``reset`` receives (issue 38): what the caller gave, as gymnasium's
``SyncVectorEnv`` passes them (a masked reset's without ``reset_mask``, so ``{}`` when only the
mask was given), and no ``options`` keyword when the caller gave none, so an env whose
``reset`` takes no ``options`` (SB3's and Tianshou's test envs have such) works under every
vectorizer. For an env with gymnasium's ``reset(*, seed=None, options=None)`` that is the same
call as gymnasium's ``options=None``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import SyncVectorEnv

import envfactory

ABSENT = "absent"


class SeesOptions(gym.Env):
    """Reports in its reset info whether ``reset`` got an ``options`` keyword, and which."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, **kwargs: Any) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {"options": repr(kwargs.get("options", ABSENT))}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.zeros(1, np.float32), 1.0, self.t >= 2, False, {}


class NoOptions(gym.Env):
    """``reset(seed=None)`` only, as SB3's ``NanAndInfEnv`` (test_vec_check_nan.py)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict]:  # type: ignore[override]
        super().reset(seed=seed)
        self.t = 0
        return np.full(1, 0.5, np.float32), {"seed": seed}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.zeros(1, np.float32), 1.0, self.t >= 2, False, {}


def build(vectorizer: str, env_cls: type, n: int = 3, **options: Any) -> gym.vector.VectorEnv:
    rec = envfactory.get_registry().vectorizer(vectorizer)
    return rec.build([env_cls] * n, **options)


def seen(infos: dict) -> list[str | None]:
    """Per env: what its reset saw (None: not reset by this call)."""
    return [str(v) if m else None for v, m in zip(infos["options"], infos["_options"])]


#: (call, its options, what each of 3 envs sees: the caller's options; None: not reset)
CALLS: list[tuple[str, dict[str, Any] | None, list[str | None]]] = [
    ("no options", None, ["'absent'"] * 3),
    ("empty options", {}, ["{}"] * 3),
    ("some options", {"low": -0.01}, ["{'low': -0.01}"] * 3),
    ("a mask alone", {"reset_mask": np.array([True, False, True])}, ["{}", None, "{}"]),
    (
        "a mask with options",
        {"reset_mask": np.array([False, True, False]), "low": 0.0},
        [None, "{'low': 0.0}", None],
    ),
]


@pytest.mark.parametrize("vectorizer", ["dummy", "subproc"])
def test_an_env_gets_the_options_the_caller_gave_as_gymnasium(vectorizer: str) -> None:
    """Per call, each env's ``options`` are those gymnasium's SyncVectorEnv gives it, except
    that with none given the keyword is left out where gymnasium passes ``options=None`` (the
    same value for an env with gymnasium's signature)."""
    ours, theirs = build(vectorizer, SeesOptions), SyncVectorEnv([SeesOptions] * 3)
    try:
        for what, options, expected in CALLS:
            got = seen(ours.reset(seed=1, options=_copy(options))[1])
            gymnasiums = seen(theirs.reset(seed=1, options=_copy(options))[1])
            assert got == expected, what
            assert gymnasiums == [None if w is None else w.replace("'absent'", "None") for w in got]
    finally:
        ours.close()
        theirs.close()


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
@pytest.mark.parametrize("vectorizer", ["dummy", "subproc"])
def test_an_env_whose_reset_takes_no_options_runs(vectorizer: str, mode: str) -> None:
    """Before issue 38 every reset passed ``options=None``: a ``TypeError`` from such an env
    (gymnasium's SyncVectorEnv raises it too; SB3's and Tianshou's vector envs do not). Its
    autoresets pass nothing, as gymnasium's; a masked reset passes ``{}``, as gymnasium's, so
    under ``disabled`` such an env is reset whole here."""
    envs = build(vectorizer, NoOptions, autoreset_mode=mode)
    try:
        obs, infos = envs.reset(seed=[3, 4, 5])
        assert obs.tolist() == [[0.5]] * 3 and infos["seed"].tolist() == [3, 4, 5]
        for t in range(6):
            obs, _, term, _, _ = envs.step(np.zeros(3, np.int64))
            # episodes of 2 steps; next_step spends a step on each autoreset
            assert term.all() == (t % 3 == 1 if mode == "next_step" else t % 2 == 1), t
            if mode == "disabled" and term.all():
                obs, infos = envs.reset()
                assert obs.tolist() == [[0.5]] * 3 and infos["seed"].tolist() == [None] * 3
    finally:
        envs.close()


def _copy(options: dict[str, Any] | None) -> dict[str, Any] | None:
    """gymnasium's reset pops ``reset_mask`` from the caller's dict: give each its own."""
    return None if options is None else dict(options)
