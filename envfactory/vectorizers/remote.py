"""The vectorizer-author API: what an out-of-process backend builds on.

A backend is two small pieces over this module:

1. a [`WorkerHandle`][envfactory.vectorizers.remote.WorkerHandle] per worker (a process, an actor, a
thread pool): the parent's
   end of one worker that hosts envs ``start:stop``. It sends a command
   ([`Cmd`][envfactory.vectorizers.remote.Cmd] with its record), waits for the answer with a
   deadline, kills the worker, and says its pid;
2. a [`RemoteVecEnv`][envfactory.vectorizers.remote.RemoteVecEnv] subclass that starts the workers
(handing their handles to
   `RemoteVecEnv._set_handles`, then waiting for them with
   `RemoteVecEnv._start`) and turns their answers into batches
   (`RemoteVecEnv._collect`).

[`RemoteVecEnv`][envfactory.vectorizers.remote.RemoteVecEnv] gives it the rest of envfactory's
contract: the synchronous and async ``reset``/``step`` (one command per worker), per-index ``call``
(a name or a function) / ``get_attr`` / ``set_attr``, the failure policy (an env's exception in
``call`` keeps the env usable; any other fault makes it unusable, a
[`VecEnvBrokenError`][envfactory.errors.VecEnvBrokenError] from then on), ``restart=true`` with its
budget (``max_restarts`` per ``restart_window``) and the rebuilt-space check, one call at
a time by the owner process, and ``close``. A step or reset that an interrupt (Ctrl-C)
stops stays pending, to be finished by ``step_wait()``/``reset_wait()`` (every other call
refuses with ``AlreadyPendingError`` until then), when every handle is
[`WorkerHandle.resumable`][envfactory.vectorizers.remote.WorkerHandle.resumable] (see its
docstring).

The worker side answers with [`EnvHost`][envfactory.vectorizers.remote.EnvHost] (every env command,
including the recovery of episodes lost with a rebuilt worker), so every backend steps envs with the
one autoreset implementation, `EnvRunner`; an env's exception travels back as
[`failure_of`][envfactory.vectorizers.remote.failure_of] makes it, and the handle raises it with
[`WorkerHandle.remote_error`][envfactory.vectorizers.remote.WorkerHandle.remote_error].

A sketch (the plugin guide's "Write a vectorizer backend" has a whole one, and the
``threads`` plugin a published one): ``MyHandle(WorkerHandle)`` implements ``pid``,
``send``, ``recv`` and ``kill``; ``MyVecEnv(RemoteVecEnv).__init__`` calls
``super().__init__(num_envs, autoreset_mode, seeding, **faults)``, sets ``env_id``
([`env_label`][envfactory.vectorizers.remote.env_label]) and its handles (``_set_handles``, one per
[`split_envs`][envfactory.vectorizers.remote.split_envs] slice), waits for them (``_start``) and
implements ``_collect`` (abstract: a class without it cannot be instantiated; without
``_respawn`` and ``_last_obs`` it refuses ``restart=true`` when built); its config schema inherits
[`FaultOptions`][envfactory.vectorizers.remote.FaultOptions]. It needs nothing else from envfactory
than this module and the public ``envfactory`` names (errors, ``VecEnvBase``).
"""

from __future__ import annotations

from .checks import FaultOptions, check_fault_options, check_spaces, count_restart
from .handle import CLOSE_TIMEOUT, STARTUP_TIMEOUT, WorkerHandle, env_label, split_envs
from .protocol import (
    Call,
    Cmd,
    EnvInfo,
    Failure,
    Reset,
    Restarted,
    RestartReset,
    SetAttr,
    failure_of,
)
from .remote_env import RemoteVecEnv
from .runner import EnvHost
from .shared import concatenate_checked

__all__ = [
    "CLOSE_TIMEOUT",
    "STARTUP_TIMEOUT",
    "Call",
    "Cmd",
    "EnvHost",
    "EnvInfo",
    "Failure",
    "FaultOptions",
    "RemoteVecEnv",
    "Reset",
    "RestartReset",
    "Restarted",
    "SetAttr",
    "WorkerHandle",
    "check_fault_options",
    "check_spaces",
    "concatenate_checked",
    "count_restart",
    "env_label",
    "failure_of",
    "split_envs",
]
