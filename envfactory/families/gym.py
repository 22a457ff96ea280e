"""The ``gym`` family: any registered gymnasium id."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Optional

import gymnasium as gym

from ..errors import ConfigError, did_you_mean

__all__ = ["GymConfig", "make_gym", "render_modes", "resolve_spec"]


@dataclass
class GymConfig:
    """Schema of ``env=gym``.

    Attributes:
        family: always ``gym``.
        id: a registered gymnasium id; ``module:Env-v0`` imports ``module`` first (in
            worker processes too).
        kwargs: keyword arguments for ``gymnasium.make``.
        max_episode_steps: overrides the id's time limit; null keeps the registered one.
        render_mode: null, or one of the env's ``metadata["render_modes"]`` (``rgb_array``
            gives ``render()`` frames; classic-control envs need ``pip install
            envfactory[render]``, i.e. pygame).
    """

    family: str = "gym"
    id: str = "CartPole-v1"
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_episode_steps: Optional[int] = None  # noqa: UP045
    render_mode: Optional[str] = None  # noqa: UP045


def resolve_spec(env_id: str) -> gym.envs.registration.EnvSpec:
    """The EnvSpec of ``env_id`` (importing ``module:`` prefixes), or a ConfigError that
    suggests the closest registered id."""
    try:
        if ":" in env_id:  # gymnasium.make's "module:Env-v0": import module, which registers
            module, _, env_id = env_id.partition(":")
            importlib.import_module(module)
        return gym.spec(env_id)
    except (gym.error.Error, ModuleNotFoundError, ImportError) as exc:
        ids = list(gym.registry)
        raise ConfigError(
            f"env.id {env_id!r} is not a registered gymnasium id ({type(exc).__name__}: "
            f"{exc}).{did_you_mean(env_id, ids)} Register it with gymnasium.register, use a "
            f"'module:Env-v0' id whose module registers it, or pick a registered id such as "
            f"{', '.join(sorted(ids)[:8])}, ..."
        ) from None


def make_gym(
    id: str,
    kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    render_mode: str | None = None,
) -> gym.Env:
    """``gymnasium.make(id, **kwargs)`` with optional time-limit and render-mode
    overrides."""
    extra: dict[str, Any] = dict(kwargs or {})
    if max_episode_steps is not None:
        extra["max_episode_steps"] = max_episode_steps
    if render_mode is not None:
        if extra.get("render_mode", render_mode) != render_mode:
            raise ConfigError(
                f"env.render_mode={render_mode!r} and env.kwargs.render_mode="
                f"{extra['render_mode']!r} disagree; set only env.render_mode"
            )
        extra["render_mode"] = render_mode
    mode = extra.get("render_mode")
    if mode is not None:
        modes = render_modes(id)
        if modes is not None and mode not in modes:
            raise ConfigError(
                f"env.render_mode={mode!r} is not supported by {id!r}; valid choices: "
                f"{', '.join(map(str, modes)) or '(none: it cannot render)'}, or null"
            )
    return gym.make(id, **extra)


def render_modes(env_id: str) -> list[str] | None:
    """The ``metadata["render_modes"]`` of ``env_id``'s env class (None when its entry
    point is a function without metadata), without building the env."""
    try:
        spec = resolve_spec(env_id)
        creator: Any = spec.entry_point
        if isinstance(creator, str):
            creator = gym.envs.registration.load_env_creator(creator)
    except Exception:  # gym.make reports an unknown id or a broken entry point
        return None
    metadata = getattr(creator, "metadata", None)
    if not isinstance(metadata, dict):
        return None
    return [str(m) for m in metadata.get("render_modes") or []]
