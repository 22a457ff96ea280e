"""The common VecEnv base: a real ``gymnasium.vector.VectorEnv`` with envfactory's
contract (seeding, ``reset_mask``, checked async halves, SB3-style ``indices=``, render,
idempotent close, context manager). Backends implement the ``_do_*`` methods."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ..errors import AsyncCallError, ClosedError, ConfigError, SpaceMismatchError
from .runner import InfoCalls

__all__ = ["MODE_NAMES", "VecEnvBase", "autoreset_mode", "check_spaces", "tile_images"]

_MODES = {
    "next_step": AutoresetMode.NEXT_STEP,
    "same_step": AutoresetMode.SAME_STEP,
    "disabled": AutoresetMode.DISABLED,
}
MODE_NAMES = {m: name for name, m in _MODES.items()}


def autoreset_mode(value: Any) -> AutoresetMode:
    """gymnasium's AutoresetMode from ``next_step``/``same_step``/``disabled`` (or itself)."""
    if isinstance(value, AutoresetMode):
        return value
    v = str(getattr(value, "value", value))
    for m in AutoresetMode:
        if v == m.value:
            return m
    try:
        return _MODES[v]
    except KeyError:
        raise ConfigError(
            f"autoreset_mode must be one of {', '.join(_MODES)}; got {value!r}"
        ) from None


def check_spaces(
    spaces: Sequence[tuple[gym.Space, gym.Space]], env_id: str = ""
) -> tuple[gym.Space, gym.Space]:
    """All envs must share one observation and one action space; name the first that
    differs and both spaces."""
    obs0, act0 = spaces[0]
    for i, (obs, act) in enumerate(spaces[1:], start=1):
        for kind, a, b in (("observation", obs0, obs), ("action", act0, act)):
            if a != b:
                raise SpaceMismatchError(
                    f"env {i}{f' ({env_id})' if env_id else ''} has {kind} space {b}, but env 0 "
                    f"has {a}; every env of one vectorized env must have the same {kind} "
                    f"space (check per-env options and wrappers)"
                )
    return obs0, act0


def tile_images(frames: Sequence[np.ndarray], ncols: int | None = None) -> np.ndarray:
    """Tile ``N`` frames of shape (H, W[, C]) into one image, row-major, padding with black.

    Example:
        >>> import numpy as np
        >>> tile_images([np.zeros((2, 3, 3), np.uint8)] * 3).shape
        (4, 6, 3)
    """
    if len(frames) == 0:
        raise ValueError("tile_images needs at least one frame")
    arrs = [np.asarray(f) for f in frames]
    n = len(arrs)
    ncols = ncols or int(np.ceil(np.sqrt(n)))
    nrows = int(np.ceil(n / ncols))
    h, w = arrs[0].shape[:2]
    rest = arrs[0].shape[2:]
    out = np.zeros((nrows * h, ncols * w, *rest), dtype=arrs[0].dtype)
    for k, a in enumerate(arrs):
        r, c = divmod(k, ncols)
        out[r * h : (r + 1) * h, c * w : (c + 1) * w] = a
    return out


class VecEnvBase(VectorEnv):
    """Shared front half of envfactory's vectorizers.

    Subclasses set spaces through :meth:`_init_spaces` and implement ``_do_reset``,
    ``_do_step``, ``_do_call``, ``_do_set_attr`` and ``_do_close``.
    """

    env_id: str = ""

    def __init__(self, num_envs: int, mode: Any, seeding: str = "offset") -> None:
        super().__init__()
        if num_envs < 1:
            raise ConfigError(f"num_envs must be >= 1, got {num_envs}")
        self.num_envs = num_envs
        self.autoreset_mode = autoreset_mode(mode)
        if seeding not in ("offset", "spawn"):
            raise ConfigError(f"seeding must be 'offset' or 'spawn', got {seeding!r}")
        self.seeding = seeding
        self._pending: str | None = None
        self._pending_args: Any = None
        self._done = np.zeros(num_envs, dtype=np.bool_)
        self.closed = False

    # -- set-up ---------------------------------------------------------------------
    def _init_spaces(self, obs_space: gym.Space, act_space: gym.Space, metadata: dict) -> None:
        self.single_observation_space = obs_space
        self.single_action_space = act_space
        self.observation_space = batch_space(obs_space, self.num_envs)
        self.action_space = batch_space(act_space, self.num_envs)
        self.metadata = dict(metadata)
        self.metadata["autoreset_mode"] = self.autoreset_mode

    # -- helpers ----------------------------------------------------------------------
    def _check_open(self, what: str) -> None:
        if self.closed:
            raise ClosedError(
                f"{what}() on a closed {type(self).__name__}; make a new one with "
                "envfactory.make_vec(...)"
            )

    def seeds_for(self, seed: int | Sequence[int | None] | None) -> list[int | None]:
        """Per-env seeds: int -> ``seed + i`` (or ``SeedSequence.spawn`` streams with
        ``seeding='spawn'``); a list must have ``num_envs`` entries."""
        n = self.num_envs
        if seed is None:
            return [None] * n
        if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            if self.seeding == "spawn":
                children = np.random.SeedSequence(int(seed)).spawn(n)
                return [int(c.generate_state(1, dtype=np.uint64)[0]) for c in children]
            return [int(seed) + i for i in range(n)]
        seeds = list(seed)  # type: ignore[arg-type]  # not an int here: a sequence
        if len(seeds) != n:
            raise ValueError(
                f"reset(seed=[...]) needs one seed per env: got {len(seeds)} seeds for "
                f"num_envs={n}; pass an int (env i gets seed+i) or a list of {n}"
            )
        return seeds

    def _reset_mask(self, options: dict[str, Any] | None) -> tuple[dict | None, np.ndarray | None]:
        if not options or "reset_mask" not in options:
            return options, None
        options = dict(options)
        mask = options.pop("reset_mask")
        if not isinstance(mask, np.ndarray) or mask.dtype != np.bool_:
            raise TypeError(
                f"options['reset_mask'] must be a numpy bool array of shape ({self.num_envs},),"
                f" got {type(mask).__name__} {getattr(mask, 'dtype', '')}"
            )
        if mask.shape != (self.num_envs,):
            raise ValueError(
                f"options['reset_mask'] must have shape ({self.num_envs},), got {mask.shape}"
            )
        if not mask.any():
            raise ValueError("options['reset_mask'] must select at least one env (all False)")
        return options, mask

    def check_actions(self, actions: Any) -> None:
        """Reject a wrong action batch before anything is stepped."""
        space = self.action_space
        if isinstance(space, (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
            shape = np.shape(actions)
            if shape != space.shape:
                raise ValueError(
                    f"actions have shape {shape}, but this vectorized env expects "
                    f"{space.shape} (num_envs={self.num_envs}, single_action_space="
                    f"{self.single_action_space}); pass one action per env, e.g. "
                    "envs.action_space.sample()"
                )
        elif (
            isinstance(space, gym.spaces.Tuple)
            and not isinstance(self.single_action_space, gym.spaces.Tuple)
            and len(actions) != self.num_envs
        ):
            raise ValueError(
                f"got {len(actions)} actions for num_envs={self.num_envs}; pass one action per env"
            )

    def _merge_infos(self, calls: InfoCalls, offset: int = 0, infos: dict | None = None) -> dict:
        infos = {} if infos is None else infos
        for i, info in calls:
            infos = self._add_info(infos, info, offset + i)
        return infos

    def _indices(self, indices: int | Sequence[int] | None) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, (int, np.integer)):
            indices = [int(indices)]
        out = [int(i) for i in indices]
        bad = [i for i in out if not -self.num_envs <= i < self.num_envs]
        if bad:
            raise IndexError(f"env indices {bad} out of range for num_envs={self.num_envs}")
        return [i % self.num_envs for i in out]

    # -- public API -------------------------------------------------------------------
    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        self._check_open("reset")
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def reset_async(self, seed: Any = None, options: dict[str, Any] | None = None) -> None:
        self._check_open("reset_async")
        self._expect_idle("reset_async")
        seeds = self.seeds_for(seed)
        options, mask = self._reset_mask(options)
        self._start_reset(seeds, options, mask)
        self._pending = "reset"
        self._pending_args = mask

    def reset_wait(self, timeout: float | None = None) -> tuple[Any, dict]:
        self._check_open("reset_wait")
        self._expect_pending("reset", "reset_wait", "reset_async(seed=..., options=...)")
        mask = self._pending_args
        try:
            obs, infos = self._finish_reset(timeout)
        finally:
            self._pending = None
        if mask is None:
            self._done[:] = False
        else:
            self._done[mask] = False
        return obs, infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        self._check_open("step")
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: Any) -> None:
        self._check_open("step_async")
        self._expect_idle("step_async")
        self.check_actions(actions)
        if self.autoreset_mode is AutoresetMode.DISABLED and self._done.any():
            idx = np.flatnonzero(self._done).tolist()
            raise AsyncCallError(
                f"envs {idx} finished an episode and autoreset_mode is 'disabled': reset them "
                "with envs.reset(options={'reset_mask': mask}) before stepping them again"
            )
        self._start_step(actions)
        self._pending = "step"

    def step_wait(
        self, timeout: float | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        self._check_open("step_wait")
        self._expect_pending("step", "step_wait", "step_async(actions)")
        try:
            obs, rew, term, trunc, infos = self._finish_step(timeout)
        finally:
            self._pending = None
        np.logical_or(term, trunc, out=self._done)
        return obs, rew, term, trunc, infos

    def _expect_idle(self, what: str) -> None:
        if self._pending is not None:
            raise AsyncCallError(
                f"{what}() called while a {self._pending}_async() is pending; call "
                f"{self._pending}_wait() first"
            )

    def _expect_pending(self, kind: str, what: str, first: str) -> None:
        if self._pending != kind:
            now = f"a {self._pending}_async() is pending" if self._pending else "nothing is pending"
            raise AsyncCallError(f"{what}() called but {now}; call {first} first")

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` (or get attribute ``name``) of every env; every keyword
        argument goes to the method, as in gymnasium."""
        return self._call("call", name, args, kwargs, None)

    def env_method(self, name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
        """Stable-Baselines3 spelling of :meth:`call`, with ``indices=``."""
        return list(self._call("env_method", name, args, kwargs, indices))

    def _call(self, what: str, name: str, args: Any, kwargs: Any, indices: Any) -> tuple:
        self._check_open(what)
        self._expect_idle(what)
        return tuple(self._do_call(name, args, kwargs, self._indices(indices)))

    def get_attr(self, name: str, indices: Any = None) -> tuple[Any, ...]:
        """Attribute ``name`` of every env (or of ``indices``), via ``get_wrapper_attr``."""
        self._check_open("get_attr")
        self._expect_idle("get_attr")
        return tuple(self._do_call(name, None, None, self._indices(indices)))

    def set_attr(self, name: str, values: Any, indices: Any = None) -> None:
        """Set attribute ``name``: one value for all, or a list with one per index."""
        self._check_open("set_attr")
        self._expect_idle("set_attr")
        idx = self._indices(indices)
        if not isinstance(values, (list, tuple)):
            values = [values] * len(idx)
        if len(values) != len(idx):
            raise ValueError(
                f"set_attr({name!r}) got {len(values)} values for {len(idx)} envs; pass one "
                "value, or a list with one value per env"
            )
        self._do_set_attr(name, list(values), idx)

    def render(self) -> tuple[Any, ...]:
        """One frame per env (as gymnasium's vector envs); see :func:`tile_images`."""
        self._check_open("render")
        return self.call("render")

    def close(self, timeout: float | None = None, terminate: bool = False, **kwargs: Any) -> None:
        """Close every env and release every resource; safe to call twice."""
        if self.closed:
            return
        try:
            self._do_close(timeout=timeout, terminate=terminate)
        finally:
            self.closed = True
            self._pending = None

    def __enter__(self) -> VecEnvBase:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close(terminate=exc[0] is not None)

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            try:
                self.close(terminate=True)
            except Exception:
                pass

    def __repr__(self) -> str:
        env = f"{self.env_id}, " if self.env_id else ""
        return f"{type(self).__name__}({env}num_envs={self.num_envs})"

    # -- backend --------------------------------------------------------------------
    def _start_reset(self, seeds: list, options: dict | None, mask: np.ndarray | None) -> None:
        raise NotImplementedError

    def _finish_reset(self, timeout: float | None) -> tuple[Any, dict]:
        raise NotImplementedError

    def _start_step(self, actions: Any) -> None:
        raise NotImplementedError

    def _finish_step(self, timeout: float | None) -> tuple[Any, Any, Any, Any, dict]:
        raise NotImplementedError

    def _do_call(self, name: str, args: Any, kwargs: Any, indices: list[int]) -> list[Any]:
        raise NotImplementedError

    def _do_set_attr(self, name: str, values: list[Any], indices: list[int]) -> None:
        raise NotImplementedError

    def _do_close(self, timeout: float | None, terminate: bool) -> None:
        raise NotImplementedError
