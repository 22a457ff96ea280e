"""The ``gym`` family: any registered gymnasium id."""

from __future__ import annotations

import importlib
import inspect
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import gymnasium as gym

from ..config.checks import check_int
from ..errors import ConfigError, OptionError, did_you_mean

__all__ = ["GymConfig", "check_kwargs", "make_gym", "render_modes", "resolve_spec"]


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

    def __post_init__(self) -> None:
        """The checks envfactory runs at compose time (see `envfactory.config.checks`):
        the id exists (a ``module:`` prefix is imported), the time limit is >= 1."""
        if not isinstance(self.id, str) or not self.id:
            raise OptionError("id", self.id, "a registered gymnasium id such as 'CartPole-v1'")
        if not isinstance(self.kwargs, Mapping):
            raise OptionError(
                "kwargs", self.kwargs, "a mapping of gymnasium.make keyword arguments"
            )
        check_int(self, "max_episode_steps", 1, optional=True)
        check_kwargs(resolve_spec(self.id), self.kwargs)


_MAKE_KWARGS = ("max_episode_steps", "disable_env_checker")  # gymnasium.make's own


def check_kwargs(spec: gym.envs.registration.EnvSpec, kwargs: Mapping[str, Any]) -> None:
    """An [`OptionError`][envfactory.OptionError] for a key of ``kwargs`` that neither the
    env's constructor (its registry entry point, imported) nor ``gymnasium.make`` takes, with
    the closest name; nothing when that cannot be known (a constructor taking ``**kwargs``,
    an entry point that cannot be imported here: ``gymnasium.make`` then says what is
    wrong)."""
    if not kwargs:
        return
    try:
        creator: Any = spec.entry_point
        if isinstance(creator, str):
            creator = gym.envs.registration.load_env_creator(creator)
        params = inspect.signature(creator).parameters.values()
    except Exception:  # a missing dependency, a C extension without a signature, ...
        return
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    own = [p.name for p in params if p.kind in kinds]
    name = getattr(creator, "__name__", str(spec.entry_point))
    for key in kwargs:
        if str(key) not in own and key not in _MAKE_KWARGS:
            raise OptionError(
                f"kwargs.{key}",
                kwargs[key],
                f"a keyword argument that {spec.id} takes",
                hint=f"{did_you_mean(str(key), [*own, *_MAKE_KWARGS])} It takes: "
                f"{', '.join(own) or '(none)'} ({name}), {', '.join(_MAKE_KWARGS)} "
                "(gymnasium.make); fix the key under env.kwargs",
            )
    hints = _simple_hints(creator)
    defaults = {p.name: p.default for p in params}
    for key, value in kwargs.items():
        kind = hints.get(str(key))
        if kind is None or (value is None and defaults.get(str(key)) is None):
            continue  # not one of the four plain types, or its own default None
        if not _is_a(value, kind):
            raise OptionError(
                f"kwargs.{key}",
                value,
                f"{_EXPECTED[kind]} ({name}'s {key} is annotated {kind.__name__})",
                hint="Fix the value under env.kwargs",
            )


_EXPECTED = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _simple_hints(creator: Any) -> dict[str, type]:
    """The parameters of an env constructor annotated exactly ``bool``, ``int``, ``float``
    or ``str`` (resolved with ``typing.get_type_hints``; none when that fails)."""
    target = getattr(creator, "__init__", None) if isinstance(creator, type) else creator
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # a name the annotations' module does not define, ...
        return {}
    return {k: v for k, v in hints.items() if k != "return" and v in _EXPECTED}


def _is_a(value: Any, kind: type) -> bool:
    """``value`` fits the annotation ``kind``: an int is a number too, a bool is no int."""
    if kind is bool or isinstance(value, bool):
        return isinstance(value, bool) and kind is bool
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def resolve_spec(env_id: str) -> gym.envs.registration.EnvSpec:
    """The EnvSpec of ``env_id`` (importing a ``module:`` prefix first, as ``gym.make``
    does), or an [`OptionError`][envfactory.OptionError] for ``id`` that says what is wrong: the
    module was not found, the module did not register the id, an Atari id (made by
    ``env=atari``), or an unknown id with the closest registered one."""
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            raise OptionError(
                "id",
                env_id,
                "a 'module:Env-v0' id whose module can be imported",
                hint=f"Module {exc.name or module!r} was not found ({exc}): install it, or fix "
                "the module name before ':'.",
            ) from None
        except Exception as exc:
            raise OptionError(
                "id",
                env_id,
                "a 'module:Env-v0' id whose module can be imported",
                hint=f"Importing {module!r} raised {type(exc).__name__}: {exc}".rstrip(".") + ".",
            ) from None
    try:
        return gym.spec(name)
    except gym.error.Error:
        pass
    atari = _atari_ids(name)
    if atari is not None:
        v5, raw = atari
        raise OptionError(
            "id",
            env_id,
            "a gymnasium id; Atari ids are made by the atari family",
            hint=f"Use env=atari env.id={v5} (DeepMind preprocessing), or "
            f"env.id=ale_py:{raw} for the raw ALE env.",
        )
    ids = list(gym.registry)
    where = f"Module {module!r} did not register it." if module else ""
    raise OptionError(
        "id",
        env_id,
        "a registered gymnasium id",
        hint=f"{where}{did_you_mean(name, ids)} Register it with gymnasium.register, or use a "
        "'module:Env-v0' id whose module registers it.",
    )


_ATARI_FORM = re.compile(r"^(?:ALE/)?(?P<game>\w+?)(?:NoFrameskip|Deterministic)?-v[045]$")


def _atari_ids(name: str) -> tuple[str, str] | None:
    """``(ALE/<Game>-v5, ale_py's id)`` if ``name`` is an Atari id of a ROM ale_py ships:
    ale_py's own (``ALE/Pong-v5``, old gym's ``PongNoFrameskip-v4``, ``Breakout-v4``,
    ``Pong-v0``) or envpool's ``Pong-v5``; else None."""
    from .atari import _ale_games, ale_game

    m = _ATARI_FORM.match(name)
    if m is None or m.group("game") not in _ale_games():
        return None
    v5 = f"ALE/{m.group('game')}-v5"
    return v5, name if ale_game(name) is not None else v5


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
