"""``VecEnvBase``: a ``gymnasium.vector.VectorEnv`` with envfactory's contract."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, suppress
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ...errors import ConfigError, InvalidActionError, ResetNeededError
from ..record import RunRecord, Split, run_record_of
from ..transport.ctrl_c import HOLD, PendingCall
from ..transport.shared import obs_copier
from .checks import (
    autoreset_mode,
    check_spaces,
    composite_checker,
    reset_needed,
    seeds_for,
    split_reset_mask,
)
from .env_calls import EnvCalls, PoolOnly

__all__ = ["VecEnvBase", "action_checker"]

_NUMERIC, _INTS = frozenset("biuf"), frozenset("iu")


def _array(
    path: str, actions: Any, shape: tuple[int, ...], single: gym.Space, kinds: frozenset[str]
) -> np.ndarray:
    a = actions if type(actions) is np.ndarray else np.asarray(actions)
    if a.shape != shape:
        raise InvalidActionError(
            f"actions{path} have shape {a.shape}, but this vectorized env expects {shape} "
            f"(num_envs={shape[0]}, single_action_space={single}); pass one action per env, "
            "e.g. envs.action_space.sample()"
        )
    if a.dtype.kind not in kinds:
        need = "integers" if kinds == _INTS else "numbers"
        raise InvalidActionError(
            f"actions{path} must be {need} for single_action_space {single}, got dtype "
            f"{a.dtype} (e.g. {a.reshape(-1)[:1].tolist()})"
        )
    return a


def _value_error(path: str, a: np.ndarray, bad: Any, single: gym.Space, valid: str) -> None:
    i = int(np.argwhere(bad)[0][0])
    raise InvalidActionError(
        f"actions{path}[{i}] = {a[i].tolist()!r} (env {i}) is not in single_action_space "
        f"{single}: valid values are {valid}"
    )


def action_checker(space: gym.Space, n: int, path: str = "") -> Callable[[Any], Any]:
    """``check(actions)`` for batches of ``space``: the batch (lists as numpy arrays), or an
    [`InvalidActionError`][envfactory.errors.InvalidActionError] naming the env and value."""
    if isinstance(space, gym.spaces.Discrete):
        lo, hi = int(space.start), int(space.start + space.n)
        shape: tuple[int, ...] = (n,)
        small = n <= 64  # a numpy reduction costs more than min/max of a short list

        def check_discrete(actions: Any) -> Any:
            a = actions  # (an int array of the right shape, the step loop's: no call)
            if type(a) is not np.ndarray or a.shape != shape or a.dtype.kind not in _INTS:
                a = _array(path, actions, shape, space, _INTS)
            if small:
                values = a.tolist()
                bad = min(values) < lo or max(values) >= hi
            else:
                bad = a.min() < lo or a.max() >= hi
            if bad:
                _value_error(path, a, (a < lo) | (a >= hi), space, f"{lo}..{hi - 1}")
            return a

        return check_discrete
    if isinstance(space, gym.spaces.MultiDiscrete | gym.spaces.MultiBinary | gym.spaces.Box):
        shape, kinds, valid, bad_of = (n, *space.shape), _NUMERIC, "", None
        if isinstance(space, gym.spaces.MultiDiscrete):
            start, stop = space.start, space.start + space.nvec
            kinds = _INTS
            valid = f"start <= x < start + nvec, start={start.tolist()}, nvec={space.nvec.tolist()}"
            bad_of = lambda a: (a < start) | (a >= stop)  # noqa: E731
        elif isinstance(space, gym.spaces.MultiBinary):
            valid, bad_of = "0 or 1", lambda a: (a != 0) & (a != 1)

        def check_array(actions: Any) -> Any:  # (Box actions are not bounds-checked)
            a = _array(path, actions, shape, space, kinds)
            if bad_of is not None and (bad := bad_of(a)).any():
                _value_error(path, a, bad.reshape(n, -1).any(axis=1), space, valid)
            return a

        return check_array
    return composite_checker(space, n, path, action_checker)


_IDLE = PendingCall.NONE  # (a module global: read without any call)


class VecEnvBase(EnvCalls, VectorEnv, AbstractContextManager):
    """The front half of envfactory's vectorizers: a ``gymnasium.vector.VectorEnv``
    (`reset`, `reset_async`, `reset_wait`, `step`, `step_async`, `step_wait`, `call`,
    `env_method`, `get_attr`, `set_attr`, `render`, `close`) that checks every argument
    before anything reaches an env. A backend calls `_init_spaces` once its envs are built
    and fills in the ``_start_*``/``_finish_*`` halves and ``_do_close``.

    Example:
        >>> import envfactory, gymnasium
        >>> envs = envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=2"])
        >>> isinstance(envs, gymnasium.vector.VectorEnv), envs.num_envs
        (True, 2)
        >>> envs.close()
    """

    env_id: str = ""
    _holds = False  # (True while this env uses the Ctrl-C hold)

    #: how the envs were placed and why ([`Split`][envfactory.vectorizers.record.Split])
    split: Split | None = None
    #: `action_checker` of ``single_action_space`` (set by `_init_spaces`)
    check_actions: Callable[[Any], Any]
    # a backend's halves (`_finish_step` finishes a reset too, while ``_pending`` is RESET)
    _start_reset: Callable[[list, dict | None, np.ndarray | None], None]
    _start_step: Callable[[Any], None]
    _finish_step: Callable[[float | None], tuple[Any, Any, Any, Any, dict]]
    _do_close: Callable[[float | None, bool], None]

    def __init__(self, num_envs: int, mode: Any, seeding: str = "offset") -> None:
        super().__init__()
        if num_envs < 1:
            raise ConfigError(f"num_envs must be >= 1, got {num_envs}")
        self.num_envs = num_envs
        self.autoreset_mode = autoreset_mode(mode)
        self._disabled = self.autoreset_mode is AutoresetMode.DISABLED
        if seeding not in ("offset", "spawn"):
            raise ConfigError(f"seeding must be 'offset' or 'spawn', got {seeding!r}")
        self.seeding = seeding
        self._done = np.zeros(num_envs, dtype=np.bool_)  # (the call state: `CallState`)
        self.closed = False

    # the pool's own (PoolVecEnv): here, a clear error
    async_reset, recv, send = PoolOnly(), PoolOnly(), PoolOnly()

    def _init_spaces(self, envs: Sequence[Any]) -> None:
        """Take the spaces of ``envs`` (or of their `EnvInfo`s), which `check_spaces` checks to
        be one set, and env 0's metadata and render mode."""
        spaces = [(e.observation_space, e.action_space) for e in envs]
        obs_space, act_space = check_spaces(spaces, self.env_id)
        self.render_mode = envs[0].render_mode
        self.single_observation_space = obs_space
        self.single_action_space = act_space
        self.observation_space = batch_space(obs_space, self.num_envs)
        self.action_space = batch_space(act_space, self.num_envs)
        self.metadata = dict(envs[0].metadata)
        self.metadata["autoreset_mode"] = self.autoreset_mode
        self._copy_obs = obs_copier(obs_space)
        self.check_actions = action_checker(act_space, self.num_envs)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[Any, dict]:
        """Reset every env (or those of ``options["reset_mask"]``): ``(observations, infos)``.
        ``seed``: None, an int (env ``i`` gets ``seed + i``) or one per env. Raises
        ``InvalidSeedError`` (a negative or non-int seed, a list of the wrong length),
        ``ResetNeededError`` (a ``reset_mask`` before the first full reset), ``ClosedError``."""
        if self.closed:
            self._check_ready("reset", "reset")
        self.reset_async(seed=seed, options=options)
        return self.reset_wait()

    def reset_async(self, seed: Any = None, options: dict[str, Any] | None = None) -> None:
        """Start a [`reset`][envfactory.VecEnvBase.reset]; `reset_wait` returns its result
        (``AlreadyPendingError``, gymnasium's ``AlreadyPendingCallError``: a call is pending)."""
        self._check_ready("reset_async", "reset")
        seeds = seeds_for(seed, self.num_envs, self.seeding)
        options, mask = split_reset_mask(options, self.num_envs)
        if mask is not None and not self._ready:
            raise ResetNeededError(
                "reset(options={'reset_mask': ...}) before the first full reset: a masked "
                "reset keeps the other envs' observations, and these have none yet; call "
                "envs.reset(seed=...) without a mask first"
            )
        self._pending_mask = mask
        self._start_for(PendingCall.RESET, self._start_reset, seeds, options, mask)

    def reset_wait(self, timeout: float | None = None) -> tuple[Any, dict]:
        """The pending reset's ``(observations, infos)``; ``timeout`` as `step_wait`'s."""
        batch = self._wait_for(PendingCall.RESET, self._finish_step, timeout, "reset_wait")
        return batch[0], batch[4]  # (a reset's batch: rewards and flags are None)

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step every env with its action (checked first); finished envs autoreset per
        ``autoreset_mode``: ``(observations, rewards, terminations, truncations, infos)``.
        Raises ``InvalidActionError`` (a wrong batch or an action outside the space, naming the
        env and value; the env stays usable), ``ResetNeededError`` (before the first reset, or
        a finished env in ``disabled`` mode)."""
        if self.closed or self._broken is not None or self._pending is not _IDLE:
            self._check_ready("step" if self.closed else "step_async", "step")
        actions = self.check_actions(actions)  # (step_async's, inlined: one call fewer)
        if not self._ready or (self._disabled and self._done.any()):
            raise reset_needed(self._ready, self._done)
        self._start_for(PendingCall.STEP, self._start_step, actions)
        return self._wait_for(PendingCall.STEP, self._finish_step, None)

    def step_async(self, actions: Any) -> None:
        """Start a [`step`][envfactory.VecEnvBase.step]; `step_wait` returns its result
        (``AlreadyPendingError``: a call is pending)."""
        if self.closed or self._broken is not None or self._pending is not _IDLE:
            self._check_ready("step_async", "step")
        actions = self.check_actions(actions)
        if not self._ready or (self._disabled and self._done.any()):
            raise reset_needed(self._ready, self._done)
        self._start_for(PendingCall.STEP, self._start_step, actions)

    def step_wait(
        self, timeout: float | None = None
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """What the pending `step` returns; ``timeout``: seconds for the workers (None: the
        vectorizer's own), a worker that misses it is killed (``WorkerTimeoutError``); no step
        pending: ``NoPendingCallError``. A step a Ctrl-C cut is pending: ``step_wait()``
        returns it, other calls raise ``AlreadyPendingError``, ``close()`` abandons it."""
        return self._wait_for(PendingCall.STEP, self._finish_step, timeout, "step_wait")

    @property
    def run_record(self) -> RunRecord:
        """What this env did and how it was built (the summary prints it)."""
        return run_record_of(self)

    @property
    def np_random_seed(self) -> tuple[int | None, ...]:  # type: ignore[override]
        """Each env's ``np_random_seed``, as gymnasium's Sync/AsyncVectorEnv."""
        return self.get_attr("np_random_seed")

    @property  # type: ignore[misc]
    def np_random(self) -> tuple[np.random.Generator, ...]:  # type: ignore[override]
        """Each env's ``np_random`` (copies, under worker processes)."""
        return self.get_attr("np_random")

    def close(self, timeout: float | None = None, terminate: bool = False, **kwargs: Any) -> None:
        """Close every env (the workers get ``timeout`` seconds, none with ``terminate``);
        safe twice. A call still pending is dropped with a warning, as gymnasium does."""
        if self.closed:
            return
        if self._pending is not PendingCall.NONE and not self._interrupted:
            p = self._pending.value
            warnings.warn(
                f"close() called while a {p}_async() is pending: its result is dropped "
                f"(call {p}_wait() before close() to keep it)",
                stacklevel=2,
            )
        try:
            if self._holds:  # (the Ctrl-C hold this env used: `HOLD.use`)
                self._holds = False
                HOLD.unuse()
            self._do_close(timeout, terminate)
        finally:
            self.closed = True
            self._pending, self._interrupted = PendingCall.NONE, False

    def __exit__(self, *exc: Any) -> None:
        self.close(terminate=exc[0] is not None)

    def __del__(self) -> None:
        if not getattr(self, "closed", True):
            self._pending = PendingCall.NONE  # no warning from the garbage collector
            with suppress(Exception):
                self.close(terminate=True)

    def __repr__(self) -> str:
        env = f"{self.env_id}, " if self.env_id else ""
        return f"{type(self).__name__}({env}num_envs={self.num_envs})"
