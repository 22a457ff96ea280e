"""envfactory's envs by gymnasium id. Importing this module registers them in gymnasium's
registry; nothing else does (``import envfactory`` registers nothing).

Example:
    >>> import gymnasium as gym
    >>> import envfactory.gym_ids
    >>> envs = gym.make_vec("envfactory/CartPole-v1", num_envs=4,
    ...                     vectorization_mode="vector_entry_point", vectorizer="subproc")
    >>> type(envs).__name__, envs.num_envs
    ('SubprocVecEnv', 4)
    >>> envs.close()

In a process that has not imported it (an RLlib env runner, a gymnasium ``AsyncVectorEnv``
worker), give the id with the module in front, as gymnasium's ``module:id`` spelling:
``gym.make_vec("envfactory.gym_ids:envfactory/CartPole-v1", ...)`` imports this module first.

The ids, all in the ``envfactory`` namespace:

- ``envfactory/<id>`` for every gymnasium id without a namespace that is registered when this
  module is imported (``CartPole-v1``, ``Acrobot-v1``, ``LunarLander-v3``, ...; ale-py's own
  ``v0``/``v4`` ids excepted): the ``gym`` family, ``env=gym env.id=<id>``.
- ``envfactory/<Game>-v5`` for every Atari game of ale-py (``ALE/<Game>-v5``): the ``atari``
  family, ``env=atari env.id=ALE/<Game>-v5``, with DeepMind's preprocessing (84x84 grayscale,
  4 frames stacked, ...; every step an option under ``env``).
- ``envfactory/Config-v0``: the config the keyword arguments describe, envfactory's defaults
  otherwise (``env="atari"``, ``vectorizer="subproc"``, ``env={"id": "ALE/Pong-v5"}``, ...):
  any family, preset or plugin's env.

Each id has both entry points: ``vectorization_mode="vector_entry_point"`` builds one
envfactory VectorEnv with ``envfactory.make_vec`` (its vectorizer: ``vectorizer="subproc"``,
...); ``sync`` / ``async`` (gymnasium's default ``make_vec``, and ``gym.make``) builds each env
with ``envfactory.make_env`` and lets gymnasium vectorize. The keyword arguments of
``gym.make_vec`` / ``gym.make`` are envfactory's config keys, read as
[`envfactory.make_vec`][envfactory.make_vec]'s (`envfactory.config.keywords`): envfactory's
``wrappers`` list goes in ``overrides=["wrappers=[...]"]``, since gymnasium takes ``wrappers=``
for its own. Ids registered after the import: call `register_gym_ids` again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from .errors import ConfigError

__all__ = ["NAMESPACE", "GymId", "register_gym_ids"]

NAMESPACE = "envfactory"
"""The namespace of every id registered here."""


@dataclass(frozen=True)
class GymId:
    """The two entry points of one registered id: ``vec`` (gymnasium's
    ``vector_entry_point``) and ``env`` (its ``entry_point``), over the overrides that fix
    the id's family and env (none for ``envfactory/Config-v0``)."""

    id: str
    base: tuple[str, ...] = ()

    def vec(
        self, num_envs: int = 1, *, overrides: Sequence[str] | None = None, **options: Any
    ) -> gym.vector.VectorEnv:
        from .factory import make_vec

        return make_vec(overrides=self._overrides(overrides, options), num_envs=num_envs, **options)

    def env(self, *, overrides: Sequence[str] | None = None, **options: Any) -> gym.Env:
        from .factory import make_env

        return make_env(overrides=self._overrides(overrides, options), **options)

    def _overrides(self, overrides: Sequence[str] | None, options: dict[str, Any]) -> list[str]:
        if self.base and isinstance(options.get("env"), str):
            raise ConfigError(
                f"{self.id} is env={self.base[0].split('=', 1)[1]} with "
                f"{self.base[1]}: it takes no env={options['env']!r}; use "
                f"{NAMESPACE}/Config-v0 to pick the env, or env={{...}} for this env's options"
            )
        if isinstance(overrides, str):
            raise TypeError(f"overrides must be a list of strings, got the string {overrides!r}")
        return [*self.base, *(overrides or [])]


def register_gym_ids() -> list[str]:
    """Register the ids this module describes that are not registered yet (an id already
    there is left as it is); return those it registered. Called when this module is
    imported; call it again for gymnasium ids registered since."""
    new: list[str] = []

    def add(env_id: str, base: tuple[str, ...]) -> None:
        if env_id in gym.registry:
            return
        maker = GymId(env_id, base)
        # the family's gym.make already ran gymnasium's env checker on the env inside
        gym.register(
            env_id, entry_point=maker.env, vector_entry_point=maker.vec, disable_env_checker=True
        )
        new.append(env_id)

    add(f"{NAMESPACE}/Config-v0", ())
    for env_id, spec in list(gym.registry.items()):
        entry = spec.entry_point
        if spec.namespace is not None or entry is None:
            continue
        if isinstance(entry, str) and entry.startswith("ale_py"):
            continue  # ale-py's v0/v4 ids: its games are the v5 ids below
        add(f"{NAMESPACE}/{env_id}", ("env=gym", f"env.id={env_id}"))
    for game in _atari_games():
        add(f"{NAMESPACE}/{game}-v5", ("env=atari", f"env.id=ALE/{game}-v5"))
    return new


def _atari_games() -> list[str]:
    """The names of ale-py's v5 games (``Pong``, ...); none without ale-py."""
    try:
        import ale_py  # noqa: F401  # registers its ids with gymnasium
    except ImportError:
        return []
    return [
        spec.name
        for spec in gym.registry.values()
        if spec.namespace == "ALE" and spec.version == 5 and not spec.name.endswith("-ram")
    ]


register_gym_ids()
