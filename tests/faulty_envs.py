"""Envs that misbehave on purpose, for the subprocess vectorizer's fault tests.

This is an importable module (``tests/`` is on ``sys.path`` under pytest, and
``multiprocessing`` hands ``sys.path`` to spawn and forkserver workers), so its classes
pickle by reference and its ``Faulty-v0`` registration runs in any process that imports
it: ``faulty_envs:Faulty-v0`` works as a gymnasium id everywhere.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = [
    "FAULTS",
    "BigActionEnv",
    "BigActionMaker",
    "CtrlCStorm",
    "FaultyEnv",
    "InfoEnv",
    "InfoMaker",
    "Maker",
    "UnpicklableError",
    "interrupt_after_next_read",
    "interrupt_after_next_write",
    "interrupt_next_send",
    "run_in_daemon",
    "unpicklable_maker",
]

FAULTS = ("none", "raise", "raise-timeout", "raise-unpicklable", "hang", "exit", "sigkill")
ENV_ID = "Faulty-v0"


class UnpicklableError(RuntimeError):
    """An exception that cannot be pickled back to the parent (it holds a lock)."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg)
        self.lock = threading.Lock()


class FaultyEnv(gym.Env):
    """A tiny deterministic env that misbehaves on its ``at_step``-th ``step`` call.

    Args:
        fault: ``none``; ``raise`` (ValueError); ``raise-timeout`` (TimeoutError, as a
            simulator's own); ``raise-unpicklable`` (an exception
            that cannot be pickled); ``hang`` (sleeps forever); ``exit``
            (``os._exit(3)``); ``sigkill`` (SIGKILLs its own process).
        at_step: the step call (1-based, counted since construction) that misbehaves;
            0 makes ``reset`` misbehave instead (on its first call).
        once_file: if set, misbehave only if this file does not exist yet (it is created
            first), so a rebuilt env behaves: used to test ``restart``.
        obs_dim: observation size (vary it to get a space mismatch).
        step_sleep: seconds each step takes (a slow simulator).
        episode_len: steps per episode (then ``terminated``).
        at_reset: misbehave on this reset call (1-based, since construction) instead.
        every: misbehave on every ``every``-th step call (an env that fails now and then).
        helper: start a helper process (``sleep 600``, pid in ``helper_pid``), as some
            simulators do.
        act_dim: 0: ``Discrete(2)`` actions; else a float32 ``Box`` of that size (a
            float64 batch of it goes to the workers by pipe, as a large message).
        reset_sleep: seconds each reset takes.
        init_sleep: seconds the constructor takes (an env slow to start).
        mark_file: a file the env appends a line to when it is constructed (``init``,
            before ``init_sleep``) and when a reset starts (``reset``): a test waits for it.
        rebuild_file: if this file exists when the env is constructed (a rebuild, the test
            having created it after the start), ``rebuild_fault`` applies: ``raise`` (the
            constructor raises), ``obs5`` (observation size 5) or ``hang-reset``.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        fault: str = "none",
        at_step: int = 3,
        once_file: str | None = None,
        obs_dim: int = 4,
        step_sleep: float = 0.0,
        episode_len: int = 50,
        at_reset: int = 0,
        every: int = 0,
        rebuild_file: str | None = None,
        rebuild_fault: str = "raise",
        helper: bool = False,
        act_dim: int = 0,
        reset_sleep: float = 0.0,
        init_sleep: float = 0.0,
        mark_file: str | None = None,
    ) -> None:
        if fault not in FAULTS:
            raise ValueError(f"fault must be one of {FAULTS}, got {fault!r}")
        self.mark_file = mark_file
        self._mark("init")
        if init_sleep:
            time.sleep(init_sleep)
        self.at_reset, self.every = at_reset, every
        self.helper: Any = None
        if helper:  # a simulator's own helper process
            import subprocess

            self.helper = subprocess.Popen(["sleep", "600"])
            self.helper_pid = self.helper.pid
        self.hang_reset = False
        if rebuild_file is not None and os.path.exists(rebuild_file):
            if rebuild_fault == "raise":
                raise RuntimeError("FaultyEnv cannot be rebuilt, on purpose")
            if rebuild_fault == "obs5":
                obs_dim = 5
            self.hang_reset = rebuild_fault == "hang-reset"
        self.fault, self.at_step, self.once_file = fault, at_step, once_file
        self.step_sleep, self.episode_len = step_sleep, episode_len
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (obs_dim,), np.float32)
        self.action_space: gym.Space = (
            gym.spaces.Box(-1.0, 1.0, (act_dim,), np.float32) if act_dim else gym.spaces.Discrete(2)
        )
        self.reset_sleep = reset_sleep
        self.steps = 0  # step calls since construction
        self.t = 0  # steps in this episode
        self.resets = 0

    def _mark(self, what: str) -> None:
        if self.mark_file is not None:
            with open(self.mark_file, "a") as f:
                f.write(f"{what}\n")

    def _obs(self) -> np.ndarray:
        return np.full(self.observation_space.shape, self.t / 1000.0, np.float32)

    def _misbehave(self) -> None:
        if self.fault == "none":
            return
        if self.once_file is not None:
            try:
                os.close(os.open(self.once_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return
        if self.fault == "raise":
            raise ValueError(f"FaultyEnv fails on purpose at step {self.steps}")
        if self.fault == "raise-timeout":  # the env's own TimeoutError, not a worker's
            raise TimeoutError(f"FaultyEnv's simulator timed out on purpose at step {self.steps}")
        if self.fault == "raise-unpicklable":
            raise UnpicklableError("carries a lock")
        if self.fault == "hang":
            while True:
                time.sleep(3600)
        if self.fault == "exit":
            os._exit(3)
        if self.fault == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(3600)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        self.resets += 1
        self._mark("reset")
        if self.reset_sleep:
            time.sleep(self.reset_sleep)
        if self.hang_reset:
            time.sleep(3600)
        if (self.at_step == 0 and self.resets == 1) or self.resets == self.at_reset:
            self._misbehave()
        self.t = 0
        return self._obs(), {}

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.step_sleep:
            time.sleep(self.step_sleep)
        if (self.at_step and self.steps == self.at_step) or (
            self.every and self.steps % self.every == 0
        ):
            self._misbehave()
        self.t += 1
        reward = float(action) if np.ndim(action) == 0 else float(np.mean(action))
        return self._obs(), reward, self.t >= self.episode_len, False, {}


@dataclass
class Maker:
    """A picklable env constructor (as `envfactory.factory.EnvThunk`); ``label`` is
    the env id the vectorizer reports in its errors."""

    fault: str = "none"
    at_step: int = 3
    once_file: str | None = None
    obs_dim: int = 4
    step_sleep: float = 0.0
    label: str = ENV_ID
    episode_len: int = 50
    at_reset: int = 0
    every: int = 0
    rebuild_file: str | None = None
    rebuild_fault: str = "raise"
    helper: bool = False
    act_dim: int = 0
    reset_sleep: float = 0.0
    rebuild_sleep: float = 0.0  # seconds the constructor takes once ``once_file`` exists

    def __call__(self) -> gym.Env:
        rebuilt = self.once_file is not None and os.path.exists(self.once_file)
        return FaultyEnv(
            self.fault, self.at_step, self.once_file, self.obs_dim, self.step_sleep,
            self.episode_len, self.at_reset, self.every, self.rebuild_file, self.rebuild_fault,
            self.helper, self.act_dim, self.reset_sleep, self.rebuild_sleep if rebuilt else 0.0,
        )  # fmt: skip


def unpicklable_maker() -> Any:
    """An env constructor that cannot be pickled (a closure over a lock)."""
    lock = threading.Lock()

    def make() -> gym.Env:
        with lock:
            return FaultyEnv()

    return make


def run_in_daemon(contexts: list[str], queue: Any) -> None:
    """Target of a daemonic ``multiprocessing.Process``: build a subproc vec env under each
    start method, step it, and put ``(context, result or error text)`` on ``queue``."""
    import multiprocessing as mp

    from envfactory.vectorizers.subproc import SubprocVecEnv

    queue.put(("daemon", mp.current_process().daemon))
    for ctx in contexts:
        try:
            envs = SubprocVecEnv([Maker() for _ in range(4)], in_series=2, context=ctx, timeout=30)
            try:
                envs.reset(seed=0)
                for _ in range(10):
                    obs, *_ = envs.step(np.ones(4, np.int64))
                queue.put((ctx, (obs.shape, len(envs.pids))))
            finally:
                envs.close()
        except BaseException:
            queue.put((ctx, traceback.format_exc()))


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point="faulty_envs:FaultyEnv", max_episode_steps=200)


class AttrEnv(gym.Env):
    """A well-behaved env with an unpicklable attribute and a method taking ``indices``."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> Any:
        return np.zeros(2, np.float32), 0.0, False, False, {}

    def pick(self, indices: list[int]) -> str:
        return f"got {indices}"


def interrupt_after_next_write(handle: Any) -> None:
    """A real Ctrl-C (SIGINT to this process) right after ``handle``'s next pipe message
    is written (issue 37: a call holds it until its wait, see ``ctrl_c``)."""
    _ctrl_c_after(handle, "flush")


def interrupt_after_next_read(handle: Any) -> None:
    """A real Ctrl-C right after ``handle``'s next pipe read."""
    _ctrl_c_after(handle, "_read_some")


def interrupt_next_send(handle: Any) -> None:
    """A real Ctrl-C as ``handle.send`` begins, before it sends anything, once."""
    _ctrl_c_after(handle, "send", before=True)


def _ctrl_c_after(handle: Any, name: str, before: bool = False) -> None:
    """SIGINT to this process right after (``before``: right before) ``handle``'s next
    call of its method ``name``, once."""
    real = getattr(handle, name)

    def once(*args: Any, **kwargs: Any) -> Any:
        delattr(handle, name)  # (the class's method again)
        if before:
            signal.raise_signal(signal.SIGINT)
        try:
            return real(*args, **kwargs)
        finally:
            if not before:
                signal.raise_signal(signal.SIGINT)

    setattr(handle, name, once)


class InfoEnv(gym.Env):
    """Scalar infos whose keys and types change now and then (the info columns' cases,
    see `envfactory.vectorizers.transport.infocols`): every step ``t`` (int), ``x`` (float), ``ok``
    (bool) and ``k`` (a numpy int32, the env's number); every 7th step an ``extra``
    (a numpy float32); every 11th ``t`` is a float; an episode is 13 steps. Env ``k``'s
    values differ from the others'."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, k: int = 0) -> None:
        self.k, self.t = k, 0
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def _info(self) -> dict[str, Any]:
        t = self.t
        info: dict[str, Any] = {"t": float(t) if t % 11 == 5 else t, "x": t / 3 + self.k}
        info["ok"] = bool((t + self.k) % 2)
        info["k"] = np.int32(self.k)
        if t % 7 == 3:
            info["extra"] = np.float32(t * 0.5)
        return info

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), self._info()

    def step(self, action: Any) -> tuple:
        self.t += 1
        obs = np.full(2, self.t / 100, np.float32)
        return obs, float(action), self.t >= 13, False, self._info()


@dataclass
class InfoMaker:
    k: int = 0

    def __call__(self) -> gym.Env:
        return InfoEnv(self.k)


class BigActionEnv(gym.Env):
    """An env whose action is 400 KB (more than a pipe holds) and whose step takes
    ``step_sleep`` seconds: a message of its action to a worker busy stepping another env
    cannot be written whole until the worker reads it. Its observation is its step count."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, step_sleep: float = 0.0) -> None:
        self.step_sleep, self.t = step_sleep, 0
        self.observation_space = gym.spaces.Box(0.0, 1e6, (1,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (100_000,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: Any) -> tuple:
        time.sleep(self.step_sleep)
        self.t += 1
        return np.full(1, self.t, np.float32), float(action[0]), False, False, {}


@dataclass
class BigActionMaker:
    step_sleep: float = 0.0

    def __call__(self) -> gym.Env:
        return BigActionEnv(self.step_sleep)


class CtrlCStorm:
    """Real SIGINTs at random moments (1-15 ms apart) from a thread, raised as
    KeyboardInterrupt only while the test is inside a call of the vectorized env
    (``armed``): what the env does with an interrupt is under test, not the test's own
    bookkeeping."""

    def __init__(self, seed: int) -> None:
        self.armed = False
        self.raised = 0
        self._stop = threading.Event()
        self._rng = np.random.default_rng(seed)
        self._thread = threading.Thread(target=self._fire, daemon=True)

    def _fire(self) -> None:
        while not self._stop.wait(self._rng.uniform(0.001, 0.015)):
            os.kill(os.getpid(), signal.SIGINT)

    def _handler(self, signum: int, frame: Any) -> None:
        if self.armed:
            self.raised += 1
            raise KeyboardInterrupt

    def __enter__(self) -> CtrlCStorm:
        # the garbage of earlier tests (an old storm and its thread are a cycle) is freed
        # now, not by a collection under the storm: a KeyboardInterrupt in a weakref
        # callback there (threading's WeakSet of threads) is only "ignored", and pytest
        # fails the test that was running
        gc.collect()
        self._old = signal.signal(signal.SIGINT, self._handler)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        signal.signal(signal.SIGINT, self._old)
