"""The vectorizer-author API (the plugin guide's "Write a vectorizer backend"): a backend's
[`WorkerHandle`][envfactory.vectorizers.remote.WorkerHandle]s in a
[`WorkerGroup`][envfactory.vectorizers.remote.WorkerGroup] handed to the front, `RemoteVecEnv`;
its workers answer with `EnvHost`. A handle whose ``recv`` reads a stream a Ctrl-C must not cut
part-way sets ``own_wait`` and wraps only its blocking waits in ``HOLD.waiting(wait, limit)``."""

from __future__ import annotations

from .asyncpool.pool_env import PoolVecEnv, take_rows
from .asyncpool.scheduler import PoolBackend, RemoteSite
from .front.checks import check_spaces
from .front.group import Backend, Batch, WorkerGroup
from .front.infos import keep_rows, merge_block, merge_infos, split_infos
from .front.remote_env import FAULT_KEYS, RemoteVecEnv, pop_faults
from .front.supervisor import Outcome, Supervisor, count_restart
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
    "CLOSE_TIMEOUT", "FAULT_KEYS", "HOLD", "STARTUP_TIMEOUT", "Backend", "Batch", "Call", "Cmd",
    "EnvHost", "EnvInfo", "Failure", "FaultOptions", "Outcome", "PoolBackend", "PoolVecEnv",
    "Recover", "Recoverable", "RecoverableFn", "RemoteSite", "RemoteVecEnv", "Reset",
    "RestartReset", "Restarted", "SetAttr", "Split", "Supervisor", "WorkerGroup", "WorkerHandle",
    "after_reset", "after_step", "check_fault_options", "check_spaces", "concatenate_checked",
    "count_restart", "env_label", "failure_of", "keep_rows", "merge_block", "merge_infos",
    "plan_split", "pop_faults", "split_envs", "split_infos", "take_rows",
]  # fmt: skip
