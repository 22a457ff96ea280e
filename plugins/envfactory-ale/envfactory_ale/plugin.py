"""The plugin module named by the ``envfactory`` entry point: vectorizer ``ale-vector``.

It uses only envfactory's public API. ``build`` receives envfactory's env constructors;
each carries its env node as ``options`` and its family's ``make`` (documented in the
``envfactory_vectorizers`` hookspec), so ``ale-vector`` reads the ``atari`` family's node
from them and builds one native ``AtariVectorEnv`` instead of calling them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import envfactory

from .names import ALTERNATIVE, NAME

__all__ = ["ALEVectorConfig", "ale_options", "build_ale_vector"]


@dataclass
class ALEVectorConfig:
    """Schema of ``vectorizer=ale-vector`` (the env options come from ``env=atari``).

    Attributes:
        name: always ``ale-vector``.
        batch_size: envs returned per ``recv()``; null = all (``step()`` then works as
            usual); below ``num_envs`` it is an async pool (``async_reset``, ``recv``,
            ``send(actions, env_ids)``).
        num_threads: C++ worker threads; 0 = one per core (ALE's choice).
        thread_affinity_offset: pin threads to cores from this one on; -1 = no pinning.
    """

    name: str = NAME
    batch_size: Optional[int] = None  # noqa: UP045 (OmegaConf needs Optional on 3.10)
    num_threads: int = 0
    thread_affinity_offset: int = -1


def _refuse(what: str, alternative: str) -> envfactory.ConfigError:
    return envfactory.ConfigError(f"vectorizer={NAME} cannot honour {what}; {alternative}")


def _family_name(thunk: Any) -> str | None:
    """The name of the env family whose ``make`` this env constructor calls."""
    make = getattr(thunk, "make", None)
    if make is None:
        return None
    reg = envfactory.get_registry()
    for name, entry in reg.families.items():
        if entry.record.make is make:
            return name
    return None


def _game(env_id: str) -> str:
    import ale_py
    import gymnasium as gym

    gym.register_envs(ale_py)

    try:
        spec = gym.spec(env_id)
    except gym.error.Error as e:
        raise envfactory.ConfigError(
            f"vectorizer={NAME}: env.id={env_id!r} is not a registered ALE id ({e}); use an "
            "id such as 'ALE/Pong-v5'"
        ) from None
    game = (spec.kwargs or {}).get("game")
    if not isinstance(game, str):
        raise _refuse(f"env.id={env_id!r} (not an ALE game)", "use an id such as 'ALE/Pong-v5'")
    for key in ("mode", "difficulty", "obs_type"):
        if (spec.kwargs or {}).get(key) not in (None, "rgb", "grayscale"):
            raise _refuse(f"env.id={env_id!r} (its {key})", f"use {ALTERNATIVE}")
    return game


def ale_options(node: dict[str, Any], num_envs: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Map the atari family's node onto ``AtariVectorEnv`` keyword arguments.

    Returns:
        ``(ale_kwargs, python_side)``: what ``AtariVectorEnv`` takes, and what
        [`ALEVectorEnv`][envfactory_ale.vector.ALEVectorEnv] does itself (layout, clipping, life
        loss, grayscale).

    Raises:
        envfactory.ConfigError: naming an option it cannot honour and the alternative.
    """
    node = dict(node)
    node.pop("family", None)
    obs_type = node.pop("obs_type", "grayscale")
    if obs_type not in ("grayscale", "rgb"):
        raise _refuse(
            f"env.obs_type={obs_type!r} (AtariVectorEnv renders only screens)",
            f"use env.obs_type=grayscale or rgb, or {ALTERNATIVE}",
        )
    render_mode = node.pop("render_mode", None)
    if render_mode is not None:
        raise _refuse(
            f"env.render_mode={render_mode!r} (AtariVectorEnv does not render)",
            f"use env.render_mode=null, or {ALTERNATIVE}",
        )
    for key, default in (("mode", None), ("difficulty", None), ("ram_info", False)):
        value = node.pop(key, default)  # the family's game mode / difficulty, info["ram"]
        if value != default:
            what = f"env.{key}={value!r} (no AtariVectorEnv equivalent)"
            raise _refuse(what, f"use {ALTERNATIVE}")
    size = node.pop("image_size", 84)
    height, width = (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))
    frame_skip = int(node.pop("frame_skip", 4))
    max_steps = node.pop("max_episode_steps", None)
    layout = node.pop("layout", "hwc")
    if layout not in ("hwc", "chw"):
        raise _refuse(f"env.layout={layout!r}", "use env.layout=hwc or chw")
    ale = {
        "game": _game(str(node.pop("id", "ALE/Pong-v5"))),
        "num_envs": num_envs,
        "noop_max": int(node.pop("noop_max", 30)),
        "frameskip": frame_skip,
        "maxpool": True,  # the Python family max-pools the last two frames, always
        "use_fire_reset": bool(node.pop("fire_reset", True)),
        # the family's episodic life: a lost life ends the learner's episode, the game
        # goes on (ALE's episodic_life would restart the game: not the same)
        "episodic_life": False,
        "life_loss_info": bool(node.get("episodic_life", True)),
        "img_height": height,
        "img_width": width,
        "grayscale": obs_type == "grayscale",
        "stack_num": int(node.pop("num_stack", 4)),
        "repeat_action_probability": float(node.pop("repeat_action_probability", 0.0)),
        "full_action_space": bool(node.pop("full_action_space", False)),
        "reward_clipping": False,  # clipped in Python: the statistics keep the raw score
        "max_num_frames_per_episode": 108_000 if max_steps is None else int(max_steps) * frame_skip,
    }
    python = {
        "layout": layout,
        "grayscale": obs_type == "grayscale",
        "clip_reward": bool(node.pop("clip_reward", True)),
        "episodic_life": bool(node.pop("episodic_life", True)),
    }
    if node:
        key = sorted(node)[0]
        what = f"env.{key}={node[key]!r} (no AtariVectorEnv equivalent)"
        raise _refuse(what, f"use {ALTERNATIVE}")
    return ale, python


def _autoreset(value: Any) -> Any:
    from gymnasium.vector import AutoresetMode

    if isinstance(value, AutoresetMode):
        mode = value
    else:
        raw = getattr(value, "value", value)
        snake = {"next_step": "NextStep", "same_step": "SameStep", "disabled": "Disabled"}
        try:
            mode = AutoresetMode(snake.get(raw, raw))
        except ValueError:
            raise envfactory.ConfigError(
                f"autoreset_mode={value!r} is not valid; valid choices: next_step, same_step"
            ) from None
    if mode is AutoresetMode.DISABLED:
        raise _refuse(
            "autoreset_mode=disabled (AtariVectorEnv always autoresets)",
            f"use autoreset_mode=next_step or same_step, or {ALTERNATIVE}",
        )
    return mode


def build_ale_vector(
    env_fns: Sequence[Any],
    *,
    batch_size: int | None = None,
    num_threads: int = 0,
    thread_affinity_offset: int = -1,
    autoreset_mode: Any = "next_step",
) -> Any:
    """Build one native ``AtariVectorEnv`` for the ``atari`` env node the constructors carry."""
    from .vector import ALEVectorEnv  # (imported when built: loading the plugin stays cheap)

    if not env_fns:
        raise envfactory.ConfigError(f"vectorizer={NAME}: num_envs must be >= 1")
    first = env_fns[0]
    family = _family_name(first)
    if family != "atari":
        raise envfactory.ConfigError(
            f"vectorizer={NAME} runs only env=atari (got env family {family!r}); use "
            "vectorizer=subproc or dummy for other families"
        )
    wrappers = getattr(first, "wrappers", None)
    if wrappers:
        raise _refuse(
            "per-env wrappers (wrappers=[...]): the envs live in C++",
            f"move them to vector_wrappers, or use {ALTERNATIVE}",
        )
    n = len(env_fns)
    if batch_size is not None and not 1 <= batch_size <= n:
        raise envfactory.ConfigError(
            f"vectorizer={NAME}: invalid batch_size={batch_size!r}; expected 1..num_envs "
            f"({n}) or null"
        )
    if num_threads < 0:
        raise envfactory.ConfigError(
            f"vectorizer={NAME}: invalid num_threads={num_threads!r}; expected >= 0 (0 = auto)"
        )
    ale, python = ale_options(dict(getattr(first, "options", {})), n)
    ale.update(
        batch_size=0 if batch_size is None else batch_size,
        num_threads=num_threads,
        thread_affinity_offset=thread_affinity_offset,
    )
    return ALEVectorEnv(
        ale,
        stats_key=getattr(first, "stats_key", "episode"),
        autoreset_mode=_autoreset(autoreset_mode),
        **python,
    )


@envfactory.hookimpl
def envfactory_vectorizers() -> list[envfactory.VectorizerPlugin]:
    return [
        envfactory.VectorizerPlugin(
            NAME,
            build_ale_vector,
            ALEVectorConfig,
            summary="env=atari on ale_py's native C++ AtariVectorEnv (threads)",
        )
    ]
