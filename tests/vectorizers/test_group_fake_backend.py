"""The worker group's failure policy alone, over a fake backend (issue 37): handles that run
their envs in this process when asked (no process, no pipe, no shared memory) and misbehave
on cue, so each rule of `WorkerGroup` (deadlines, the failure it records, the restart budget,
per-env calls, close) is tested without the transport that `subproc` adds."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest
from gymnasium.vector.utils import create_empty_array

from envfactory.errors import (
    ConfigError,
    RemoteEnvError,
    VecEnvBrokenError,
    WorkerDiedError,
    WorkerError,
    WorkerTimeoutError,
)
from envfactory.testing import FailingEnv
from envfactory.vectorizers.front.group import Backend
from envfactory.vectorizers.front.supervisor import Outcome, Supervisor
from envfactory.vectorizers.front.supervisor import cut as cut_wait
from envfactory.vectorizers.remote import (
    Cmd,
    EnvHost,
    EnvInfo,
    RemoteVecEnv,
    WorkerGroup,
    WorkerHandle,
    failure_of,
    split_envs,
)
from envfactory.vectorizers.subproc import SubprocGroup


class FakeHandle(WorkerHandle):
    """Envs ``start:stop`` run in this process at ``send``; ``script`` maps a call name to
    what ``recv`` does instead of answering: ``"late"`` (past any deadline), ``"die"``, or
    an exception to raise as the handle's own bug."""

    def __init__(self, index: int, start: int, stop: int, mode: Any) -> None:
        super().__init__(index, start, stop, "Fake-v0")
        self.host = EnvHost([FailingEnv() for _ in range(stop - start)], mode, _calls)
        self.script: dict[str, Any] = {}
        self.sends: list[str] = []
        self.killed = 0
        self.answer: Any = [EnvInfo.of(e) for e in self.host.envs]
        self.error_: BaseException | None = None

    @property
    def pid(self) -> int:
        return 1000 + self.index

    def send(self, cmd: Cmd, data: Any) -> None:
        if self.killed:
            raise RuntimeError("cannot send to a killed fake worker")
        self.sends.append(str(cmd))
        self.answer, self.error_ = None, None
        try:
            self.answer = self.host.handle(cmd, data) if cmd != Cmd.CLOSE else None
        except Exception as exc:
            self.error_ = self.remote_error(str(cmd), failure_of(exc))

    def recv(self, deadline: float | None, call: str) -> Any:
        what = self.script.pop(call, None)
        if what == "late":
            if deadline is not None:
                time.sleep(max(0.0, deadline - time.monotonic()))
            raise TimeoutError
        if what == "die":
            raise self.error(WorkerDiedError, "died", call)
        if isinstance(what, BaseException):
            raise what
        if self.error_ is not None:
            raise self.error_
        return self.answer

    def kill(self) -> None:
        self.killed += 1


def _calls(info_calls: Any, mask: Any) -> Any:
    return info_calls


class FakeGroup(WorkerGroup):
    def __init__(self, num_envs: int, in_series: int) -> None:
        super().__init__()
        self.num_envs, self.env_id, self.in_series = num_envs, "Fake-v0", in_series
        self.respawned: list[int] = []

    def start(self) -> None:
        mode = self.env.autoreset_mode
        slices = split_envs(self.num_envs, self.in_series)
        self.set_handles([FakeHandle(k, a, b, mode) for k, (a, b) in enumerate(slices)])
        self.wait_started(self.handles)
        self._obs = create_empty_array(self.env.single_observation_space, n=self.num_envs)

    def collect(self, handles: Any, results: Any, mask: Any) -> Any:
        runners = [h.host.runner for h in handles]  # type: ignore[attr-defined]
        self._obs = self.batch_obs([o for r in runners for o in r.obs], self._obs)
        keys = ("rewards", "terminations", "truncations")
        flags = [np.concatenate([getattr(r, k) for r in runners]) for k in keys]
        return self.out(self._obs), *flags, self.merge_answers(handles, results)

    def respawn(self, handle: WorkerHandle, budget: float) -> list[EnvInfo]:
        self.respawned.append(handle.index)
        fresh = FakeHandle(handle.index, handle.start, handle.stop, self.env.autoreset_mode)
        handle.host = fresh.host  # type: ignore[attr-defined]
        handle.killed = 0  # type: ignore[attr-defined]
        return [EnvInfo.of(e) for e in fresh.host.envs]

    def last_obs(self, handle: WorkerHandle) -> list[Any]:
        return [np.array(o) for o in handle.host.runner.obs]  # type: ignore[attr-defined]


ACTS = np.zeros(4, np.int64)


def _env(**faults: Any) -> RemoteVecEnv:
    envs = RemoteVecEnv(FakeGroup(4, 2), "next_step", **faults)
    envs.reset(seed=0)
    return envs


def _handle(envs: RemoteVecEnv, k: int) -> FakeHandle:
    h = envs.group.handles[k]
    assert isinstance(h, FakeHandle)
    return h


def test_a_late_worker_is_killed_within_the_one_deadline_and_recorded_as_the_failure() -> None:
    envs = _env(timeout=0.2)
    _handle(envs, 1).script["step"] = "late"
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeoutError, match=r"worker 1 .* within 0\.2 s and was killed"):
        envs.step(ACTS)
    assert time.monotonic() - t0 < 0.35
    assert _handle(envs, 1).killed == 1 and _handle(envs, 0).killed == 0
    assert isinstance(envs._broken, WorkerTimeoutError)
    with pytest.raises(VecEnvBrokenError, match=r"within 0\.2 s"):
        envs.step(ACTS)
    envs.close()  # asks worker 0 to close; worker 1's send raises and is tolerated
    assert "close" in _handle(envs, 0).sends


def test_a_gather_given_a_deadline_already_under_way_never_extends_it() -> None:
    envs = _env(timeout=5.0)
    group = envs.group
    h = _handle(envs, 0)
    h.send(Cmd.CALL, None)
    h.script["call"] = "late"
    t0 = time.monotonic()
    with pytest.raises(WorkerTimeoutError):
        group.gather("call", [h], 5.0, deadline=time.monotonic() + 0.1)
    assert time.monotonic() - t0 < 0.3
    envs.close()


def test_an_env_error_in_a_call_keeps_the_env_usable_one_in_a_step_breaks_it() -> None:
    envs = _env()
    with pytest.raises(RemoteEnvError, match="boom fails on purpose"):
        envs.call("boom")
    assert envs._broken is None
    envs.step(ACTS)
    _handle(envs, 0).script["step"] = "die"
    with pytest.raises(WorkerDiedError, match="worker 0"):
        envs.step(ACTS)
    assert isinstance(envs._broken, WorkerDiedError)
    envs.close()


def test_restarts_rebuild_the_worker_and_the_budget_stops_them() -> None:
    envs = _env(restart=True, max_restarts=1)
    _handle(envs, 1).script["step"] = "die"
    with pytest.warns(RuntimeWarning, match="restarting after"):
        *_, trunc, infos = envs.step(ACTS)
    assert envs.group.respawned == [1] and envs.restarts == [0, 1]
    assert trunc.tolist() == [False, False, True, True] and infos["restarted"][2:].all()
    _handle(envs, 1).script["step"] = "die"
    with pytest.raises(WorkerDiedError):  # the budget: one restart per window
        envs.step(ACTS)
    assert isinstance(envs._broken, WorkerDiedError)
    envs.close()


def test_a_bug_in_a_handle_is_named_and_recorded() -> None:
    envs = _env()
    _handle(envs, 0).script["step"] = KeyError("lost the answer")
    with pytest.raises(WorkerError, match=r"FakeHandle\.recv raised KeyError: 'lost the answer'"):
        envs.step(ACTS)
    with pytest.raises(VecEnvBrokenError, match="a bug in the backend"):
        envs.step(ACTS)
    envs.close()


def test_per_env_calls_go_to_the_workers_of_their_indices_in_order() -> None:
    envs = _env()
    assert envs.env_method("_fails_now", indices=[3, 0]) == [True, True]
    assert [h.sends[-1] for h in envs.group.handles] == ["call", "call"]
    envs.get_attr("t", indices=[2])  # worker 1 only
    assert len(_handle(envs, 0).sends) == 2 and len(_handle(envs, 1).sends) == 3
    envs.set_attr("fail_step", [7, 8], indices=[1, 2])
    assert envs.get_attr("fail_step") == (0, 7, 8, 0)
    envs.close()


# -- the supervisor alone: what a failure means, no worker touched ----------------------------
def _handles(n: int = 2) -> list[FakeHandle]:
    return [FakeHandle(k, 2 * k, 2 * k + 2, "next_step") for k in range(n)]


def test_the_supervisor_rebuilds_within_the_budget_then_breaks_the_env() -> None:
    sup = Supervisor(restart=True, max_restarts=1)
    h0, h1 = _handles()
    died = h1.error(WorkerDiedError, "died", "step")
    first = sup.failed("step", [(h1, died)], broken=False)
    assert first == Outcome(restart=((h1, died),)) and first.broken is None
    assert len(h1.restarts) == 1 and "died" in h1.restart_cause
    again = h1.error(WorkerDiedError, "died again", "step")
    spent = sup.failed("step", [(h1, again)], broken=False)
    assert spent.error is again and spent.broken is again and not spent.restart
    assert "restart budget is spent" in str(again)
    late = h0.error(WorkerTimeoutError, "late", "step")
    assert sup.failed("step", [(h0, late)], broken=True) == Outcome(late, late)  # broken already


def test_the_supervisor_keeps_an_env_error_in_a_call_and_breaks_on_anything_else() -> None:
    sup = Supervisor()
    h0, h1 = _handles()
    env_error = h1.remote_error("call", failure_of(ValueError("no")))
    assert sup.failed("call", [(h1, env_error)], broken=False) == Outcome(env_error)
    died = h0.error(WorkerDiedError, "died", "call")
    # in env order: worker 0 first, whatever order the failures came in
    assert sup.failed("call", [(h1, env_error), (h0, died)], False) == Outcome(died, died)
    assert sup.failed("reset", [(h1, env_error)], False) == Outcome(env_error, env_error)


def test_the_supervisor_names_a_handle_bug_and_a_cut_wait_it_cannot_ask_again() -> None:
    (h,) = _handles(1)
    bug = cut_wait("step", h, KeyError("lost"))
    assert bug.error is bug.broken and "FakeHandle.recv raised KeyError" in str(bug.error)
    stop = KeyboardInterrupt()
    cut = cut_wait("step", h, stop)
    assert cut.error is stop and "step was interrupted (KeyboardInterrupt)" in str(cut.broken)
    h.resumable = True  # its recv can be asked again: the call is only pending
    assert cut_wait("step", h, stop) == Outcome(stop)


@pytest.mark.parametrize("bad", [{"timeout": 0}, {"max_restarts": -1}, {"restart_window": 0}])
def test_the_supervisor_refuses_bad_fault_options_in_one_line(bad: dict) -> None:
    with pytest.raises(ConfigError, match=r"^vectorizer\.(timeout|max_restarts) must be"):
        Supervisor(**bad)


def test_the_front_applies_outcomes_in_one_place_keeping_the_first_reason() -> None:
    envs = _env()
    assert envs.apply(Outcome(KeyError("x"))) is not None and envs._broken is None
    first, second = RuntimeError("first"), RuntimeError("second")
    envs.apply(Outcome(broken=first))
    envs.apply(Outcome(broken=second))
    assert envs._broken is first
    with pytest.raises(VecEnvBrokenError, match="first"):
        envs.step(ACTS)
    envs.close()


def test_every_backend_implements_the_backend_protocol() -> None:
    assert isinstance(FakeGroup(4, 2), Backend)
    assert isinstance(SubprocGroup([FailingEnv] * 2, in_series=1), Backend)

    class NoCollect:  # (start and the rest, no collect)
        num_envs, env_id = 1, "x"

        def start(self) -> None: ...

    assert not isinstance(NoCollect(), Backend)


def test_a_rebuild_that_fails_breaks_the_env_with_its_own_error() -> None:
    envs = _env(restart=True)
    group = envs.group
    assert isinstance(group, FakeGroup)

    def no_rebuild(handle: WorkerHandle, budget: float) -> list[EnvInfo]:
        raise OSError("no more processes")

    group.respawn = no_rebuild  # type: ignore[method-assign]
    _handle(envs, 0).script["step"] = "die"
    warns = pytest.warns(RuntimeWarning, match="restarting after")
    with warns, pytest.raises(OSError, match="no more processes"):
        envs.step(ACTS)
    assert isinstance(envs._broken, OSError)
    with pytest.raises(VecEnvBrokenError, match="no more processes"):
        envs.step(ACTS)
    envs.close()
