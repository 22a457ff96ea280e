"""Wrappers whose constructor takes an env they then fail on: the check made when the
wrapper is applied, so the mistake is one line naming the config entry and the fix
(`envfactory.factory.applied`), not an exception at the first reset.

Every built-in wrapper was tried on every built-in family (``tests/wrappers/
test_wrapper_family_table.py``); all but one either work or refuse the env in their
constructor. The exception is gymnasium's ``AtariPreprocessing``: it reads the screen
straight from the ALE, sized by the observation space of the env it wraps, so on
``env=atari`` (which already preprocesses, with this very wrapper, to 84x84 frames) its
constructor succeeds and the first reset dies with ``RuntimeError: Invalid shape (84, 84),
expecting shape (210, 160)``; and on a non-Atari env gymnasium says "Disable frame-skipping
in the original env", which points the wrong way.

Decisions:
    * What the config alone rules out is refused at compose time, in this process
      (`family_misfit`: ``atari_preprocessing`` on envfactory's ``env=atari``), so the
      line is the same under every vectorizer; the rest when the wrapper is applied to an
      env (`misfit`), in the process that builds it (a worker under ``subproc``), as a
      wrapper whose constructor refuses the env.
    * The check keys on the wrapper's class, however it is registered (a
      [`LazyWrapper`][envfactory.wrappers.LazyWrapper] of gymnasium's, or the class
      itself), and reads only the env's wrapper chain and spaces: nothing is reset.
    * A misfit is a [`ConfigError`][envfactory.ConfigError] (exit 2 on the command line), as a
      wrapper that refuses the env in its constructor is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

__all__ = ["family_misfit", "misfit"]


def _wrapper_class(wrap: Any) -> type | None:
    """The class ``wrap`` builds: a `LazyWrapper`'s (loaded: it is about to be built
    anyway), or ``wrap`` itself when it is a wrapper class."""
    load = getattr(wrap, "load", None)
    if callable(load) and hasattr(wrap, "attr"):
        try:
            cls = load()
        except Exception:  # its own import error is reported by the call itself
            return None
        return cls if isinstance(cls, type) else None
    return wrap if isinstance(wrap, type) else None


def _in_chain(env: Any, cls: type) -> bool:
    while True:
        if isinstance(env, cls):
            return True
        if not isinstance(env, gym.Wrapper):
            return False
        env = env.env


def _atari_preprocessing(env: Any, options: Mapping[str, Any]) -> str | None:
    unwrapped = getattr(env, "unwrapped", env)
    if not hasattr(unwrapped, "ale"):
        return (
            "gymnasium's AtariPreprocessing needs an Atari (ALE) env, and this is not one; "
            "remove it from wrappers (for Atari games, env=atari preprocesses the frames "
            "itself)"
        )
    shape = tuple(getattr(env.observation_space, "shape", None) or ())
    if _in_chain(env, gym.wrappers.AtariPreprocessing):
        return (
            "the env is preprocessed already by gymnasium's AtariPreprocessing (as env=atari "
            f"is): its observations are {shape}, not the raw screen that a second one would "
            "read; remove atari_preprocessing from wrappers (on env=atari, set the family's "
            "options instead: env.frame_skip, env.image_size, env.obs_type, ...)"
        )
    skip = getattr(unwrapped, "_frameskip", None)
    if skip != 1 and options.get("frame_skip", 4) != 1:
        return (
            f"the ALE env skips frames itself (frameskip={skip}) and gymnasium's "
            "AtariPreprocessing would skip again; set env.kwargs.frameskip=1 (the wrapper's "
            "frame_skip then does it, max-pooling the last two frames)"
        )
    screen = getattr(unwrapped, "screen_dims", None) or unwrapped.ale.getScreenDims()
    if tuple(shape[:2]) != tuple(screen):
        return (
            f"gymnasium's AtariPreprocessing reads the ALE's raw {tuple(screen)} screen, and "
            f"the env it wraps gives observations {shape} (a wrapper below it changes them); "
            "put atari_preprocessing first in wrappers"
        )
    return None


_CHECKS: dict[str, Callable[[Any, Mapping[str, Any]], str | None]] = {
    "gymnasium.wrappers.atari_preprocessing.AtariPreprocessing": _atari_preprocessing,
}


def family_misfit(
    family: Any, env_options: Mapping[str, Any], wrappers: Sequence[tuple[Any, Any]]
) -> str | None:
    """The line for a ``wrappers`` entry that the chosen family rules out, known from the
    config alone (checked at compose time, in this process, before any env is built):
    ``atari_preprocessing`` on envfactory's ``env=atari``. None when there is none."""
    if getattr(family.make, "__module__", "") != "envfactory.families.atari":
        return None
    for i, (rec, _) in enumerate(wrappers):
        if _wrapper_class(rec.wrap) is gym.wrappers.AtariPreprocessing:
            size = env_options.get("image_size")
            h, w = (size, size) if isinstance(size, int) else tuple(size or (84, 84))[:2]
            game = env_options.get("id") or "ALE/Pong-v5"
            return (
                f"wrappers[{i}] (atari_preprocessing): env=atari already preprocesses the "
                "frames with gymnasium's AtariPreprocessing (DeepMind's steps), and a second "
                f"one would read its {h}x{w} frames as the raw screen; remove "
                "atari_preprocessing from wrappers and set the family's options instead "
                "(env.frame_skip, env.noop_max, env.image_size, env.obs_type, env.num_stack, "
                f"...), or use gymnasium's on the raw game: env=gym env.id=ale_py:{game} "
                "env.kwargs.frameskip=1 wrappers=[atari_preprocessing]"
            )
    return None


def misfit(wrap: Any, env: Any, options: Mapping[str, Any]) -> str | None:
    """Why ``wrap`` (a wrapper record's ``wrap``) with ``options`` would build on ``env`` and
    then fail on it, or point the wrong way (the fix included); None when nothing is known
    against it."""
    cls = _wrapper_class(wrap)
    if cls is None:
        return None
    check = _CHECKS.get(f"{cls.__module__}.{cls.__qualname__}")
    return None if check is None else check(env, options)
