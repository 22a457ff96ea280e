"""`EnvRunner`, the one per-env autoreset implementation, and `EnvHost`, every backend's worker
side."""

from __future__ import annotations

import contextlib
import difflib
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from .protocol import Cmd
from .recovery import LOST, REDONE, RESET, RESET_FLAGGED, after_reset, after_step, recovered_step

__all__ = ["EnvHost", "EnvRunner", "InfoCalls", "call_env"]

# (local env index, info dict) in the order SyncVectorEnv passes them to ``_add_info``.
InfoCalls = list[tuple[int, dict[str, Any]]]

NEXT_STEP, SAME_STEP = AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP


class EnvRunner:
    """Steps a list of envs with gymnasium's autoreset semantics; infos come back as
    ``InfoCalls``."""

    def __init__(self, envs: Sequence[gym.Env], autoreset_mode: AutoresetMode) -> None:
        n = len(envs)
        self.envs: list[Any] = list(envs)
        self.mode = autoreset_mode
        self.obs: list[Any] = [None] * n
        self.rewards = np.zeros(n, dtype=np.float64)
        self.terminations = np.zeros(n, dtype=np.bool_)
        self.truncations = np.zeros(n, dtype=np.bool_)
        self.autoreset = np.zeros(n, dtype=np.bool_)

    def reset(
        self,
        seeds: Sequence[int | None],
        options: dict[str, Any] | None,
        mask: np.ndarray | None = None,
    ) -> InfoCalls:
        """Reset every env (or those of ``mask``): reward 0, flags False. ``options`` reach an
        env as given (None: the keyword is left out, for an env whose ``reset`` takes none)."""
        calls: InfoCalls = []
        which = slice(None) if mask is None else mask
        for flags in (self.rewards, self.terminations, self.truncations, self.autoreset):
            flags[which] = 0
        kwargs = {} if options is None else {"options": options}
        for i, env in enumerate(self.envs):
            if mask is not None and not mask[i]:
                continue
            self.obs[i], info = env.reset(seed=seeds[i], **kwargs)
            if info:
                calls.append((i, info))
        return calls

    def step(
        self, actions: Sequence[Any], only: Sequence[int] | None = None, envs: Any = None
    ) -> InfoCalls:
        """Step every env (``actions[i]``), or the envs ``only`` (``actions[k]`` for
        ``only[k]``); ``envs``: stand-ins for the envs, this step only."""
        calls: InfoCalls = []
        mode, obs, rewards = self.mode, self.obs, self.rewards
        terms, truncs, autoreset = self.terminations, self.truncations, self.autoreset
        envs = self.envs if envs is None else envs
        which = range(len(envs)) if only is None else only
        for i, action in zip(which, actions):
            env = envs[i]
            if mode == NEXT_STEP and autoreset[i]:
                obs[i], info = env.reset()
                rewards[i], terms[i], truncs[i] = 0.0, False, False
            else:
                obs[i], rewards[i], terms[i], truncs[i], info = env.step(action)
                if mode == SAME_STEP and (terms[i] or truncs[i]):
                    calls.append((i, {"final_obs": obs[i], "final_info": info}))
                    obs[i], info = env.reset()
            if info:
                calls.append((i, info))
        np.logical_or(terms, truncs, out=autoreset)
        return calls

    def close(self) -> None:
        for env in self.envs:
            env.close()


def call_env(env: Any, name: str | Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """What ``call``/``get_attr`` does to one env (``args`` None: get the attribute)."""
    if callable(name):
        return name(env, *args, **kwargs)
    try:
        attr = env.get_wrapper_attr(name)
    except AttributeError as exc:  # gymnasium's names the outer wrapper, not the env: the
        raise AttributeError(_no_attribute(env, name)) from exc  # env's, with the closest name
    return attr(*args, **kwargs) if args is not None and callable(attr) else attr


def _no_attribute(env: Any, name: str) -> str:
    names: set[str] = set()
    layer = env
    while layer is not None:
        names.update(n for n in dir(layer) if not n.startswith("_"))
        layer = getattr(layer, "env", None)
    close = difflib.get_close_matches(name, sorted(names), n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    env_id = getattr(getattr(env, "spec", None), "id", None) or type(env.unwrapped).__name__
    return (
        f"{env_id} has no attribute {name!r} (nor has any of its wrappers).{hint} "
        f"The env's own are listed by dir(env.unwrapped)"
    )


class EnvHost:
    """The worker side of a remote backend: hosts envs ``start ..`` and answers `Cmd`'s env commands
    (``host.handle(cmd, data)``; ``collect(calls, mask)`` makes a step's answer), recovering a
    rebuilt worker's lost episodes (`recovery`)."""

    def __init__(
        self, envs: Sequence[gym.Env], mode: AutoresetMode, collect: Callable[[InfoCalls, Any], Any]
    ) -> None:
        self.runner = EnvRunner(envs, mode)
        self.envs = self.runner.envs
        self.collect = collect
        self.lost: dict[int, Any] = {}  # envs whose lost episode is yet to end

    def handle(self, cmd: Cmd | str, data: Any) -> Any:
        """Answer one command (a [`Cmd`][envfactory.vectorizers.remote.Cmd] and its record)."""
        run = COMMANDS.get(cmd)
        if run is None:
            raise ValueError(f"unknown command {cmd!r}; expected one of {sorted(COMMANDS)}")
        return run(self, data)

    def step(self, actions: Any) -> Any:
        return self.collect((self._step_lost if self.lost else self.runner.step)(actions), None)

    def step_envs(self, data: tuple[list[int], Any]) -> Any:
        local, actions = data
        calls = (self._step_lost if self.lost else self.runner.step)(actions, local)
        stepped = np.zeros(len(self.envs), dtype=np.bool_)
        stepped[local] = True
        return self.collect(calls, stepped)

    def reset(self, r: Any) -> Any:
        self.lost = {} if r.mask is None else {i: a for i, a in self.lost.items() if not r.mask[i]}
        return self.collect(self.runner.reset(r.seeds, r.options, r.mask), r.mask)

    def restarted(self, rs: Any) -> Any:
        """``Cmd.RESTARTED``: the recovery rule after a lost step (`after_step`)."""
        for i, what in enumerate(after_step(rs.done, self.runner.mode)):
            self.lost[i] = what if what == RESET_FLAGGED else (LOST, rs.last_obs[i])
        return self.collect(self._step_lost([None] * len(rs.done)), None)

    def restart_reset(self, rr: Any) -> Any:
        """``Cmd.RESTART_RESET``: the recovery rule after a lost reset (`after_reset`)."""
        mask, runner = rr.reset.mask, self.runner
        calls = runner.reset(rr.reset.seeds, rr.reset.options, mask)
        self.lost.clear()
        for i, what in enumerate(after_reset(mask, rr.done, runner.mode)):
            if what == REDONE:
                calls.append((i, {"restarted": True}))
                continue
            runner.obs[i] = rr.last_obs[i]
            if what == RESET:
                runner.autoreset[i] = True  # its next step is the autoreset
            elif what == LOST:
                self.lost[i] = (LOST, rr.last_obs[i])
        return self.collect(calls, None)

    def call(self, c: Any) -> list[Any]:
        return [call_env(self.envs[i], c.name, c.args, c.kwargs) for i in c.local]

    def set_attr(self, sa: Any) -> None:
        for i, v in zip(sa.local, sa.values):
            self.envs[i].set_wrapper_attr(sa.name, v)

    def close(self, _: Any = None) -> None:
        """Close every env (errors ignored: the envs are being thrown away)."""
        for env in self.envs:
            with contextlib.suppress(Exception):
                env.close()
        self.envs.clear()

    def _step_lost(self, actions: Any, only: Any = None) -> InfoCalls:
        """``runner.step`` with the lost envs ending their lost episode instead."""
        lost = self.lost
        envs = list(self.envs)  # (an armed env's step is the one the rule arms it with)
        for i, a in lost.items():
            e = envs[i]
            envs[i] = SimpleNamespace(step=lambda _, e=e, a=a: recovered_step(e, a), reset=e.reset)
        calls = self.runner.step(actions, only, envs)
        ended = sorted(lost) if only is None else sorted(i for i in only if i in lost)
        for i in ended:  # also top level in same_step
            if lost.pop(i) != RESET_FLAGGED:
                calls.append((i, {"restarted": True}))
        return calls


#: the env commands an `EnvHost` answers, by `Cmd` value (a backend's worker adds its own)
COMMANDS: dict[str, Callable[[EnvHost, Any], Any]] = {
    c.value: getattr(EnvHost, c.value.replace("-", "_")) for c in Cmd if c is not Cmd.ATTACH
}
