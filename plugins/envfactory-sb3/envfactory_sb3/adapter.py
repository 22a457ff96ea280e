"""A Stable-Baselines3 ``VecEnv`` over any gymnasium ``VectorEnv`` (envfactory's above all).

SB3 wants a 4-tuple ``step`` (``dones = terminated | truncated``), one info dict per env,
and *same-step* autoreset: the observation returned for a finished env is already the
new episode's first one, and the finished episode's last observation is in
``infos[i]["terminal_observation"]``. How each envfactory ``autoreset_mode`` gets there:

- ``same_step``: the vectorizer already does it; ``infos["final_obs"]`` becomes
  ``terminal_observation`` and ``infos["final_info"]`` the env's info dict for that step
  (the new episode's reset info goes to ``reset_infos[i]``, as in SB3). No extra calls.
- ``next_step`` (gymnasium's default) and ``disabled``: the step returns the final
  observation itself; the adapter takes it as ``terminal_observation`` and at once resets
  the finished envs with ``reset(options={"reset_mask": dones})`` (their own random
  generators, no new seed: what an autoreset does), so nothing is lost or misattributed
  and the next ``step`` is a real step for every env. It costs one more round trip to the
  workers on steps where an episode ends; ``autoreset_mode=same_step`` avoids it.

All three give the same trajectories for the same seed (tested).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import concatenate, create_empty_array
from stable_baselines3.common import env_util
from stable_baselines3.common.vec_env import VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs

from envfactory.vectorizers.remote import split_infos

__all__ = ["SB3VecEnv", "dict_infos_to_list", "to_sb3"]

_ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


#: gymnasium's vector infos as one dict per env (``DictInfoToList``'s rows): the core's
#: [`split_infos`][envfactory.vectorizers.remote.split_infos]
dict_infos_to_list = split_infos


def _index(space: gym.Space, batch: Any, i: int) -> Any:
    """Env ``i``'s observation in a batch of ``space`` (a copy for arrays)."""
    if isinstance(space, spaces.Dict):
        return {k: _index(s, batch[k], i) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(_index(s, b, i) for s, b in zip(space.spaces, batch))
    item = batch[i]
    return item.copy() if isinstance(item, np.ndarray) else item


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # options holding arrays: compare by identity
        return a is b


class SB3VecEnv(VecEnv):
    """Stable-Baselines3's ``VecEnv`` over a gymnasium ``VectorEnv`` (see the module
    docstring for autoreset). Made by [`to_sb3`][envfactory_sb3.adapter.to_sb3].

    Attributes:
        venv: the wrapped gymnasium ``VectorEnv``; closed by
            [`close`][envfactory_sb3.adapter.SB3VecEnv.close].
        autoreset_mode: ``venv``'s ``metadata["autoreset_mode"]``.
        episode_key: the info key copied to SB3's ``info["episode"]`` (or None).
    """

    def __init__(self, venv: VectorEnv, episode_key: str | None = "episode_stats") -> None:
        if not isinstance(venv, VectorEnv):
            raise TypeError(
                f"to_sb3(venv): venv must be a gymnasium.vector.VectorEnv (what "
                f"envfactory.make_vec returns), got {type(venv).__name__}"
            )
        self.venv = venv
        self.episode_key = episode_key
        self.autoreset_mode = AutoresetMode(
            venv.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        )
        self._base = venv.unwrapped
        self._indices_api = hasattr(self._base, "env_method")  # envfactory's spelling
        self._closed = False
        self._was_reset = False
        self._stepping = False
        self._actions: Any = None
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        envs = getattr(self._base, "envs", None)
        if envs is not None and len({id(e.unwrapped) for e in envs}) != len(envs):
            venv.close()
            raise ValueError(
                "to_sb3: two envs of this VectorEnv are the same object (an env_fn returned "
                "one instance twice, e.g. [lambda: env] * n); every env_fn must make a new env"
            )

    # -- SB3's VecEnv API -------------------------------------------------------------
    @property
    def envs(self) -> list[gym.Env]:
        """The env objects of an in-process vectorizer (``dummy``), as SB3's DummyVecEnv."""
        envs = getattr(self._base, "envs", None)
        if envs is None:
            raise AttributeError(f"{type(self._base).__name__} keeps its envs in other processes")
        return list(envs)

    def reset(self) -> VecEnvObs:
        """Reset every env with the seeds of `seed` and the options of
        `set_options` (both used once, as SB3); infos go to ``reset_infos``. As SB3, an env's
        ``reset`` gets ``options`` only when they are non-empty (so an env whose ``reset``
        takes no ``options`` works); its seed always, None when none was set."""
        self._check_open("reset")
        if self._stepping:  # SB3: a reset cancels a step in flight
            self._finish_step()
        n = self.num_envs
        seeds = self._seeds if any(s is not None for s in self._seeds) else None
        groups: list[tuple[dict | None, np.ndarray]] = []
        for i, opts in enumerate(self._options):
            o = opts or None
            for g, mask in groups:
                if _same(g, o):
                    mask[i] = True
                    break
            else:
                mask = np.zeros(n, dtype=np.bool_)
                mask[i] = True
                groups.append((o, mask))
        # one full reset (with the options of envs that have none, if any), then a masked
        # reset per other option set (the same seeds again, so seeded resets stay exact)
        groups.sort(key=lambda g: g[0] is not None)
        first, *rest = groups
        obs, infos = self.venv.reset(seed=seeds, options=first[0])
        self.reset_infos = dict_infos_to_list(infos, n)
        for opts, mask in rest:
            obs, infos = self.venv.reset(seed=seeds, options={**(opts or {}), "reset_mask": mask})
            for i, info in enumerate(dict_infos_to_list(infos, n)):
                if mask[i]:
                    self.reset_infos[i] = info
        self._reset_seeds()
        self._reset_options()
        self._was_reset = True
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        self._check_open("step_async")
        if self._stepping:
            raise RuntimeError("step_async() called twice; call step_wait() first")
        if not self._was_reset:
            # SB3's own VecEnvs step an env that was never reset; gymnasium's vector envs
            # (and envfactory's) need a reset first, so do it now, with the seeds/options set
            warnings.warn(
                "to_sb3: step() before reset(); resetting every env first",
                UserWarning,
                stacklevel=2,
            )
            self.reset()
        actions = self._batch(actions)
        if hasattr(self._base, "step_async") and self.venv is self._base:
            self.venv.step_async(actions)
            self._actions = None
        else:
            self._actions = actions
        self._stepping = True

    def step_wait(self) -> tuple[VecEnvObs, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        self._check_open("step_wait")
        if not self._stepping:
            raise RuntimeError("step_wait() called without step_async(actions) first")
        return self._finish_step()

    def _finish_step(self) -> tuple[VecEnvObs, np.ndarray, np.ndarray, list[dict[str, Any]]]:
        self._stepping = False
        if self._actions is None:
            obs, rew, term, trunc, infos = self.venv.step_wait()
        else:
            actions, self._actions = self._actions, None
            obs, rew, term, trunc, infos = self.venv.step(actions)
        n = self.num_envs
        term = np.asarray(term, dtype=np.bool_)
        trunc = np.asarray(trunc, dtype=np.bool_)
        dones = term | trunc
        listed = dict_infos_to_list(infos, n)
        if dones.any():
            if self.autoreset_mode is AutoresetMode.SAME_STEP:
                for i in np.flatnonzero(dones):
                    info = listed[i]
                    final = info.pop("final_info", {})
                    terminal = info.pop("final_obs")
                    self.reset_infos[i] = info
                    listed[i] = final
                    listed[i]["terminal_observation"] = terminal
            else:  # next_step / disabled: the obs are the final ones; reset those envs now
                for i in np.flatnonzero(dones):
                    listed[i]["terminal_observation"] = _index(self.observation_space, obs, i)
                obs, rinfos = self.venv.reset(options={"reset_mask": dones})
                for i, info in enumerate(dict_infos_to_list(rinfos, n)):
                    if dones[i]:
                        self.reset_infos[i] = info
        for i in range(n):
            info = listed[i]
            info["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
            if self.episode_key and "episode" not in info and self.episode_key in info:
                ep = info[self.episode_key]
                info["episode"] = {"r": float(ep["r"]), "l": int(ep["l"]), "t": float(ep["t"])}
        return obs, np.asarray(rew, dtype=np.float32), dones, listed

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.venv.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        self._check_open("get_attr")
        if self._indices_api:
            return list(self._base.get_attr(attr_name, indices=self._idx(indices)))
        values = self._base.get_attr(attr_name)
        return [values[i] for i in self._idx(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set ``attr_name`` to ``value`` (the same value, whatever its type) on each env
        of ``indices``."""
        self._check_open("set_attr")
        idx = self._idx(indices)
        if self._indices_api:
            self._base.set_attr(attr_name, [value] * len(idx), indices=idx)
        elif idx == list(range(self.num_envs)):
            self._base.set_attr(attr_name, [value] * len(idx))
        else:
            for i in idx:
                self.envs[i].set_wrapper_attr(attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        self._check_open("env_method")
        idx = self._idx(indices)
        if self._indices_api:
            return list(
                self._base.env_method(method_name, *method_args, indices=idx, **method_kwargs)
            )
        values = self._base.call(method_name, *method_args, **method_kwargs)
        return [values[i] for i in idx]

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        """SB3's ``is_wrapped`` run on each env where it lives (in its worker process)."""
        self._check_open("env_is_wrapped")
        idx = self._idx(indices)
        if self._indices_api:
            return list(self._base.env_method(env_util.is_wrapped, wrapper_class, indices=idx))
        if getattr(self._base, "envs", None) is None:  # a wrapper vectorizer (gymnasium-async)
            found = self._base.call(env_util.is_wrapped, wrapper_class)
            return [bool(found[i]) for i in idx]
        return [env_util.is_wrapped(self.envs[i], wrapper_class) for i in idx]

    def get_images(self) -> Sequence[np.ndarray | None]:
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but this method assumes it is "
                "`rgb_array` to obtain images (set env.render_mode=rgb_array)",
                stacklevel=2,
            )
            return [None] * self.num_envs
        return list(self._base.render())

    # -- helpers ----------------------------------------------------------------------
    def _idx(self, indices: VecEnvIndices) -> list[int]:
        return [int(i) % self.num_envs for i in self._get_indices(indices)]

    def _check_open(self, what: str) -> None:
        if self._closed:
            from envfactory import ClosedError

            raise ClosedError(f"{what}() on a closed SB3VecEnv; make a new one with to_sb3(...)")

    def _batch(self, actions: Any) -> Any:
        """SB3 hands one action per env (an array, or a list of samples): one batch of the
        vector env's ``action_space``; integer/float arrays cast to the space's dtype when
        numpy calls that safe or same-kind (float64 -> float32, say)."""
        space = self.action_space
        if isinstance(space, _ARRAY_SPACES):
            a = np.asarray(actions)
            dtype = np.dtype(space.dtype) if space.dtype is not None else a.dtype
            if a.dtype != dtype and np.can_cast(a.dtype, dtype, casting="same_kind"):
                a = a.astype(dtype)
            return a
        if isinstance(actions, (list, tuple)) and len(actions) == self.num_envs:
            out = create_empty_array(space, n=self.num_envs)
            return concatenate(space, actions, out)
        return actions

    def __repr__(self) -> str:
        return f"SB3VecEnv({self.venv!r})"

    def __getstate__(self) -> Any:
        """Refused, under every vectorizer: the adapter holds live envs (in worker processes
        under ``subproc`` or ``ray``), which no pickle can carry. Pickling worked only by
        accident under ``dummy`` (and failed there on a local function), so one clear
        ``TypeError`` for all. SB3 never pickles a ``VecEnv``: ``model.save`` leaves the
        env out and ``VecNormalize.save`` drops its ``venv``."""
        raise TypeError(
            "cannot pickle an SB3VecEnv: it holds live envs (and under subproc or ray their "
            "worker processes), which do not travel. Pickle what builds it instead (the "
            "config or overrides) and call to_sb3(envfactory.make_vec(...)) where it is "
            "needed; model.save() and VecNormalize.save() leave the VecEnv out and work as "
            "they are"
        )


def to_sb3(venv: VectorEnv, *, episode_key: str | None = "episode_stats") -> SB3VecEnv:
    """Stable-Baselines3's ``VecEnv`` over an envfactory (or any gymnasium) ``VectorEnv``.

    Args:
        venv: what ``envfactory.make_vec`` returns, in any ``autoreset_mode``
            (``same_step`` is the fastest: no extra reset call when an episode ends).
        episode_key: the info key of envfactory's episode statistics
            (``episode_stats_key``), copied into SB3's ``info["episode"]`` so SB3 logs
            ``rollout/ep_rew_mean`` without a ``Monitor`` (for Atari: the real game score).
            None leaves infos alone; a ``VecMonitor`` on top overrides it either way.

    Example:
        >>> import envfactory, numpy as np
        >>> from envfactory_sb3 import to_sb3
        >>> venv = to_sb3(envfactory.make_vec(overrides=["num_envs=2"]))
        >>> obs = venv.reset()
        >>> obs, rewards, dones, infos = venv.step(np.array([0, 1]))
        >>> obs.shape, sorted(infos[0])
        ((2, 4), ['TimeLimit.truncated'])
        >>> venv.close()
    """
    return SB3VecEnv(venv, episode_key=episode_key)


def _build(
    vectorizer: str,
    env_fns: Sequence[Callable[[], gym.Env]],
    autoreset_mode: str,
    options: dict[str, Any],
) -> SB3VecEnv:
    import dataclasses

    import envfactory

    rec = envfactory.get_registry().vectorizer(vectorizer, key="vectorizer")
    if rec.config is not None:  # the schema checks the options (envfactory.OptionError)
        fields = {f.name for f in dataclasses.fields(rec.config)} - {"name"}
        unknown = sorted(set(options) - fields)
        if unknown:
            raise envfactory.ConfigError(
                f"unknown option(s) {unknown} for vectorizer {vectorizer!r}; valid options: "
                f"{', '.join(sorted(fields))}"
            )
        cfg = rec.config(**options)
        options = {f: getattr(cfg, f) for f in fields}
    return to_sb3(rec.build(list(env_fns), autoreset_mode=autoreset_mode, **options))


def dummy_vec_env(
    env_fns: Sequence[Callable[[], gym.Env]], *, autoreset_mode: str = "same_step", **options: Any
) -> SB3VecEnv:
    """Drop-in for SB3's ``DummyVecEnv(env_fns)``: envfactory's ``dummy`` vectorizer over
    ``env_fns``, through [`to_sb3`][envfactory_sb3.adapter.to_sb3]
    (``make_vec_env(..., vec_env_cls=dummy_vec_env)``). ``options`` are the vectorizer's
    (``copy``)."""
    return _build("dummy", env_fns, autoreset_mode, options)


def subproc_vec_env(
    env_fns: Sequence[Callable[[], gym.Env]],
    start_method: str | None = None,
    *,
    autoreset_mode: str = "same_step",
    **options: Any,
) -> SB3VecEnv:
    """Drop-in for SB3's ``SubprocVecEnv(env_fns, start_method=None)``: envfactory's
    ``subproc`` vectorizer over ``env_fns``, through [`to_sb3`][envfactory_sb3.adapter.to_sb3].
    ``start_method`` is its ``context`` (None: envfactory's default, forkserver); ``options`` are
    the vectorizer's (``in_series``, ``shared_memory``, ``timeout``, ``restart``, ...; SB3's
    SubprocVecEnv is ``in_series=1``)."""
    import multiprocessing

    if start_method is not None:
        valid = multiprocessing.get_all_start_methods()
        if start_method not in valid:
            raise ValueError(
                f"cannot find context for {start_method!r}: start_method must be one of "
                f"{', '.join(valid)} (or None for forkserver)"
            )
        options["context"] = start_method
    return _build("subproc", env_fns, autoreset_mode, options)
