"""The fault suite of a vectorizer backend whose envs live in workers (a
[`RemoteVecEnv`][envfactory.vectorizers.remote.RemoteVecEnv]: processes, threads, actors), as
envfactory's fault model says (docs/concepts/faults.md):

* an env that raises in ``step`` raises in the caller as its own exception type and as
  [`RemoteEnvError`][envfactory.errors.RemoteEnvError], with the env's message; the vectorized
  env is unusable from then on ([`VecEnvBrokenError`][envfactory.errors.VecEnvBrokenError]),
  and ``close()`` still works, twice;
* an env that raises in ``call`` raises the same way, and the vectorized env stays usable;
* a step slower than ``timeout`` raises [`WorkerTimeoutError`][envfactory.errors.WorkerTimeoutError]
  (a ``multiprocessing.TimeoutError``) within ``timeout`` and a margin, and ``close()`` then
  works, twice (the worker that timed out was killed: closing must not ask it again);
* with ``restart=true``, a worker whose env raised is rebuilt: the step returns, and the
  failed env's episode ends truncated with ``infos["restarted"]``.

[`check_faults`][envfactory.testing.faults.check_faults] runs them against the backend's build
function, over [`FailingEnv`][envfactory.testing.faults.FailingEnv]s (module-level, so they pickle
by reference into any worker).
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import tempfile
import time
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

from ..errors import RemoteEnvError, VecEnvBrokenError
from .spaces import BuildVecEnv

__all__ = ["EnvFault", "FailingEnv", "check_faults"]


class EnvFault(ValueError):
    """What a [`FailingEnv`][envfactory.testing.faults.FailingEnv] raises (a ``ValueError``)."""


class FailingEnv(gym.Env):
    """A small deterministic env (``Box(-1, 1, (4,))`` observations, ``Discrete(2)`` actions,
    episodes of 50 steps) that raises [`EnvFault`][envfactory.testing.faults.EnvFault] on cue.

    Args:
        fail_step: the ``step`` call (1-based, since construction) that raises; 0: none.
        once_file: raise only if this file does not exist yet (it is created first), so the
            env a restart rebuilds behaves.
        slow_step: the ``step`` call that takes ``slow_seconds`` (a hung simulator); 0: none.
        slow_seconds: how long that step sleeps.
    """

    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(
        self,
        fail_step: int = 0,
        once_file: str | None = None,
        slow_step: int = 0,
        slow_seconds: float = 2.0,
    ) -> None:
        self.fail_step, self.once_file = fail_step, once_file
        self.slow_step, self.slow_seconds = slow_step, slow_seconds
        self.steps = self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(4, np.float32), {}

    def step(self, action: Any) -> Any:
        self.steps += 1
        self.t += 1
        if self.steps == self.slow_step:
            time.sleep(self.slow_seconds)
        if self.steps == self.fail_step and self._fails_now():
            raise EnvFault(f"FailingEnv fails on purpose at step {self.steps}")
        obs = np.full(4, (self.t % 10) / 10, np.float32)
        return obs, 1.0, self.t >= 50, False, {}

    def boom(self) -> None:
        """A method that raises (for ``envs.call("boom")``)."""
        raise EnvFault("FailingEnv.boom fails on purpose")

    def _fails_now(self) -> bool:
        if self.once_file is None:
            return True
        try:
            with open(self.once_file, "x"):
                return True
        except FileExistsError:
            return False


def _expect_env_fault(what: str, fn: Any, message: str) -> BaseException:
    try:
        fn()
    except EnvFault as err:
        assert isinstance(err, RemoteEnvError), (
            f"{what}: the env's exception must arrive as envfactory's RemoteEnvError (of the env's "
            f"own type too), got a bare {type(err).__name__}: {err}"
        )
        assert message in str(err), f"{what}: the env's message {message!r} is lost: {err}"
        return err
    except Exception as err:
        raise AssertionError(
            f"{what} must raise the env's EnvFault (a RemoteEnvError), got "
            f"{type(err).__name__}: {err}"
        ) from err
    raise AssertionError(f"{what} must raise the env's EnvFault, but nothing was raised")


def check_faults(
    build: BuildVecEnv,
    *,
    num_envs: int = 2,
    restart: bool = False,
    timeout: bool = True,
    **options: Any,
) -> None:
    """Run the fault suite (see the module) against ``build(env_fns, **options)``, the
    backend's build function (e.g. a `VectorizerPlugin`'s ``build``, or the vectorized env's
    class with its other arguments bound).

    Args:
        build: makes a vectorized env of the given env constructors.
        num_envs: how many envs (the last one fails).
        restart: also check ``restart=True`` (a backend that can rebuild a worker).
        timeout: also check ``timeout`` (a backend that takes the fault option).
        **options: passed to ``build`` (``restart``, and ``timeout`` in its check, are set
            here).
    """
    n, last = num_envs, num_envs - 1
    acts = np.zeros(n, np.int64)
    fns: list[Any] = [FailingEnv] * last + [functools.partial(FailingEnv, fail_step=3)]
    envs: Any = build(fns, **{**options, "restart": False})  # (call(): envfactory's VecEnvs)
    try:
        envs.reset(seed=0)
        envs.step(acts)
        envs.step(acts)
        _expect_env_fault("step() whose env raises", lambda: envs.step(acts), "at step 3")
        try:
            envs.step(acts)
        except VecEnvBrokenError:
            pass
        else:
            raise AssertionError("after an env raised in step(), the next step() must raise "
                                 "VecEnvBrokenError: its worker is out of step")  # fmt: skip
    finally:
        envs.close()
    envs.close()  # idempotent, also after a fault

    envs = build([FailingEnv] * n, **{**options, "restart": False})
    try:
        envs.reset(seed=0)
        _expect_env_fault('call("boom")', lambda: envs.call("boom"), "boom fails on purpose")
        obs, *_ = envs.step(acts)  # the env is still usable
        assert np.asarray(obs).shape == (n, 4), "a step after a failed call() must work"
    finally:
        envs.close()

    if timeout:
        _check_timeout(build, n, options)
    if not restart:
        return
    with tempfile.TemporaryDirectory() as folder:
        once = os.path.join(folder, "failed-once")
        fns = [FailingEnv] * last + [functools.partial(FailingEnv, fail_step=3, once_file=once)]
        envs = build(fns, **{**options, "restart": True})
        try:
            envs.reset(seed=0)
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                for _ in range(2):
                    envs.step(acts)
                _, _, _, truncated, infos = envs.step(acts)  # env `last` fails and is rebuilt
                envs.step(acts)  # and steps on
            assert truncated[last] and infos.get("restarted", np.zeros(n, bool))[last], (
                "with restart=true the failed env's episode must end truncated with "
                f'infos["restarted"]; got truncated={truncated}, infos={infos}'
            )
            assert any("restarting after" in str(w.message) for w in seen), (
                "a restart must warn RuntimeWarning('restarting after: ...')"
            )
        finally:
            envs.close()


#: the ``timeout`` the suite sets, and how late past it the error may come (a loaded machine)
TIMEOUT, TIMEOUT_SLACK = 0.3, 0.7


def _check_timeout(build: BuildVecEnv, n: int, options: dict[str, Any]) -> None:
    """A step slower than ``timeout``: a ``multiprocessing.TimeoutError`` in time, then a
    ``close()`` that works (twice) although the late worker was killed."""
    fns: list[Any] = [FailingEnv] * (n - 1) + [
        functools.partial(FailingEnv, slow_step=2, slow_seconds=TIMEOUT + TIMEOUT_SLACK + 1.0)
    ]
    envs: Any = build(fns, **{**options, "restart": False, "timeout": TIMEOUT})
    try:
        envs.reset(seed=0)
        acts = np.zeros(n, np.int64)
        envs.step(acts)
        t0 = time.monotonic()
        try:
            envs.step(acts)
        except multiprocessing.TimeoutError:
            took = time.monotonic() - t0
            assert took < TIMEOUT + TIMEOUT_SLACK, (
                f"a step slower than timeout={TIMEOUT} s must fail within the timeout; it "
                f"failed after {took:.3f} s"
            )
        else:
            raise AssertionError(
                f"a step slower than timeout={TIMEOUT} s must raise WorkerTimeoutError (a "
                "multiprocessing.TimeoutError); it returned"
            )
    finally:
        envs.close()
    envs.close()
