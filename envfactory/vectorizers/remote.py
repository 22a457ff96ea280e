"""The vectorizer-author API: what an out-of-process backend builds on.

A backend is two small pieces over this module:

1. a [`WorkerHandle`][envfactory.vectorizers.remote.WorkerHandle] per worker (a process, an actor,
   a thread pool): the parent's end of one worker that hosts envs ``start:stop``. It sends a
   command ([`Cmd`][envfactory.vectorizers.remote.Cmd] with its record), waits for the answer
   with a deadline, kills the worker, and says its pid;
2. a [`WorkerGroup`][envfactory.vectorizers.remote.WorkerGroup] subclass, the backend itself:
   ``start`` starts the workers (handing their handles to ``set_handles``, then waiting for them
   with ``wait_started``) and ``collect`` turns their answers into a batch.

The vectorized env is the front, [`RemoteVecEnv`][envfactory.vectorizers.remote.RemoteVecEnv],
built over the group: ``RemoteVecEnv(MyGroup(env_fns, ...), autoreset_mode, seeding,
**faults)`` (or a subclass whose ``__init__`` only does that, for a class name of its own). It
gives the backend the rest of envfactory's contract: the synchronous and async
``reset``/``step``, per-index ``call`` (a name or a function) / ``get_attr`` / ``set_attr``, one
call at a time by the owner process, and ``close``. The group's own concrete methods apply the
failure policy, written once for every backend: an env's exception in ``call`` keeps the env
usable; any other fault makes it unusable, a
[`VecEnvBrokenError`][envfactory.errors.VecEnvBrokenError] from then on; ``restart=true`` with its
budget (``max_restarts`` per ``restart_window``) and the rebuilt-space check. A step or reset that
an interrupt (Ctrl-C) stops stays pending, to be finished by ``step_wait()``/``reset_wait()``
(every other call refuses with ``AlreadyPendingError`` until then), when every handle is
[`WorkerHandle.resumable`][envfactory.vectorizers.remote.WorkerHandle.resumable] (see its
docstring). A handle whose ``recv`` reads a stream that a Ctrl-C must not cut part-way sets
``own_wait`` and wraps only its blocking waits in ``HOLD.waiting(wait, limit)``: the one place a
held Ctrl-C goes through.

The worker side answers with [`EnvHost`][envfactory.vectorizers.remote.EnvHost] (every env command,
including the recovery of episodes lost with a rebuilt worker), so every backend steps envs with the
one autoreset implementation, `EnvRunner`; an env's exception travels back as
[`failure_of`][envfactory.vectorizers.remote.failure_of] makes it, and the handle raises it with
[`WorkerHandle.remote_error`][envfactory.vectorizers.remote.WorkerHandle.remote_error].

A sketch (the plugin guide's "Write a vectorizer backend" has a whole one, and the
``threads`` plugin a published one): ``MyHandle(WorkerHandle)`` implements ``pid``,
``send``, ``recv`` and ``kill``; ``MyGroup(WorkerGroup).__init__`` sets ``num_envs`` and
``env_id`` ([`env_label`][envfactory.vectorizers.remote.env_label]); its ``start`` makes one handle
per [`split_envs`][envfactory.vectorizers.remote.split_envs] slice, hands them to ``set_handles``
and waits for them (``wait_started``); it implements ``collect`` (abstract: a group without it
cannot be instantiated; without ``respawn`` and ``last_obs`` the front refuses ``restart=true``
when built); its config schema inherits
[`FaultOptions`][envfactory.vectorizers.remote.FaultOptions], the front's options. It needs nothing
else from envfactory than this module and the public ``envfactory`` names (errors,
``VecEnvBase``).
"""

from __future__ import annotations

from .asyncpool.pool_env import PoolVecEnv, take_rows
from .asyncpool.scheduler import PoolBackend, RemoteSite
from .front.answers import check_spaces
from .front.checks import count_restart
from .front.group import Backend, Batch, WorkerGroup
from .front.infos import keep_rows, merge_block, merge_infos, split_infos
from .front.remote_env import FAULT_KEYS, RemoteVecEnv, pop_faults
from .front.supervisor import Outcome, Supervisor
from .plan.options import FaultOptions, check_fault_options
from .plan.plan import plan_split
from .record import Split
from .transport.ctrl_c import HOLD
from .transport.handle import CLOSE_TIMEOUT, STARTUP_TIMEOUT, WorkerHandle, env_label, split_envs
from .transport.shared import concatenate_checked
from .worker.protocol import (
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
from .worker.recovery import Recover, Recoverable, RecoverableFn, after_reset, after_step
from .worker.runner import EnvHost

__all__ = [
    "CLOSE_TIMEOUT",
    "FAULT_KEYS",
    "HOLD",
    "STARTUP_TIMEOUT",
    "Backend",
    "Batch",
    "Call",
    "Cmd",
    "EnvHost",
    "EnvInfo",
    "Failure",
    "FaultOptions",
    "Outcome",
    "PoolBackend",
    "PoolVecEnv",
    "Recover",
    "Recoverable",
    "RecoverableFn",
    "RemoteSite",
    "RemoteVecEnv",
    "Reset",
    "RestartReset",
    "Restarted",
    "SetAttr",
    "Split",
    "Supervisor",
    "WorkerGroup",
    "WorkerHandle",
    "after_reset",
    "after_step",
    "check_fault_options",
    "check_spaces",
    "concatenate_checked",
    "count_restart",
    "env_label",
    "failure_of",
    "keep_rows",
    "merge_block",
    "merge_infos",
    "plan_split",
    "pop_faults",
    "split_envs",
    "split_infos",
    "take_rows",
]
