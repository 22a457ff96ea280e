"""Atari ids under the default ``env=gym`` (issue 28, item 15): envpool's (``Pong-v5``) and
old gym's (``PongNoFrameskip-v4``, ``Breakout-v4``) point to the ``atari`` family's
``ALE/<Game>-v5``, not to the closest gymnasium id (``'Ant-v5'``, ``'FrozenLake-v1'``)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from envfactory.errors import OptionError
from envfactory.families.gym import resolve_spec

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ale_py") is None, reason="needs ale-py's ROMs"
)


@pytest.fixture(autouse=True)
def _as_in_a_fresh_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """ale_py registers its ids with gymnasium when it is imported (another test of this
    process may have): hidden here, as in a fresh process, where ``env=gym`` has none."""
    import gymnasium as gym

    for env_id, spec in list(gym.registry.items()):
        if str(spec.entry_point).startswith("ale_py"):
            monkeypatch.delitem(gym.registry, env_id)


def test_envpools_atari_id_on_the_command_line_points_to_the_atari_family(run: Any) -> None:
    proc = run(["envfactory", "env.id=Pong-v5", "run.progress=false"])
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        "envfactory: error: env.id='Pong-v5': expected a gymnasium id; Atari ids are made by "
        "the atari family. Use env=atari env.id=ALE/Pong-v5 (DeepMind preprocessing), or "
        "env.id=ale_py:ALE/Pong-v5 for the raw ALE env."
    ], proc.stderr
    assert "Ant-v5" not in proc.stderr


@pytest.mark.parametrize(
    ("env_id", "raw"),
    [
        ("Breakout-v5", "ALE/Breakout-v5"),  # envpool's
        ("SpaceInvaders-v5", "ALE/SpaceInvaders-v5"),
        ("PongNoFrameskip-v4", "PongNoFrameskip-v4"),  # old gym's, which ale_py registers
        ("Breakout-v4", "Breakout-v4"),
        ("BreakoutDeterministic-v4", "BreakoutDeterministic-v4"),
        ("Pong-v0", "Pong-v0"),
        ("ALE/Pong-v5", "ALE/Pong-v5"),
    ],
)
def test_each_atari_id_form_names_the_ale_v5_id(env_id: str, raw: str) -> None:
    game = env_id.removeprefix("ALE/").split("-")[0]
    game = game.removesuffix("NoFrameskip").removesuffix("Deterministic")
    with pytest.raises(OptionError) as caught:
        resolve_spec(env_id)
    message = str(caught.value)
    assert f"Use env=atari env.id=ALE/{game}-v5 (DeepMind preprocessing)" in message, message
    assert f"env.id=ale_py:{raw} for the raw ALE env" in message, message
    assert "Did you mean" not in message


def test_a_non_atari_v5_id_still_gets_the_closest_gymnasium_id() -> None:
    with pytest.raises(OptionError, match="Did you mean 'Ant-v5'"):
        resolve_spec("Antt-v5")
