"""The node actors (``in_actor=subproc``) on a real local Ray of 4 logical CPUs, beyond one
message per actor by its channel: ``vectorizer.compiled_graph=true`` (one ``execute`` per step
and no message by a channel, the same trajectories as ``dummy``, a Ctrl-C during a step, an actor
lost during a step: its envs restarted, the other node's step kept, the graph compiled again; the
fallback to the channels when Ray cannot compile the graph) and the async pool across nodes
(``batch_size``: the first nodes done while the others step)."""

from __future__ import annotations

import sys
import time
import warnings
from typing import Any

import numpy as np
import pytest
from envfactory_ray.graph import StepGraph
from envfactory_ray.plugin import build_ray
from envfactory_ray.pool import RayPool
from test_ray_node import ACTIONS, assert_gone, maker, node

import envfactory
from envfactory.testing import check_same_as_dummy

pytestmark = pytest.mark.slow  # a local Ray takes 10-20 s to start here
RAY_CPUS = 4  # logical CPUs (conftest's ray_session): two node actors of 2 CPUs each
GRAPH = ["vectorizer.in_actor=subproc", "vectorizer.compiled_graph=true"]


@pytest.fixture(scope="module", autouse=True)
def _ray(ray_session: Any) -> Any:
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules["test_ray_node"])  # (its envs)
    return ray_session


def counting_executes(graph: StepGraph) -> list[int]:
    """The number of arguments of each ``execute`` of ``graph`` from now on."""
    calls: list[int] = []
    real = graph.compiled.execute

    def counted(*args: Any) -> Any:
        calls.append(len(args))
        return real(*args)

    graph.compiled.execute = counted
    return calls


def test_one_execute_per_step_carries_every_node_and_no_channel_message() -> None:
    with node(*[maker()] * 4, compiled_graph=True) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        graph = envs.group._graph
        assert isinstance(graph, StepGraph)
        executes = counting_executes(graph)
        messages = []
        for h in envs.group.handles:
            real = h.channel.send_bytes
            h.channel.send_bytes = lambda data, real=real: (messages.append(data), real(data))
        for k in range(10):
            obs, rew, *_ = envs.step(ACTIONS)
            np.testing.assert_allclose(obs, (k + 2) / 1000)
            assert rew.tolist() == [1.0] * 4
        assert executes == [2] * 10  # one execute a step, both nodes' actions in it
        assert messages == []  # nothing by the channels
        assert envs.group._graph is graph  # compiled once
        envs.reset(seed=1)  # (by the channels, the graph's actors idle meanwhile)
        obs, *_ = envs.step(ACTIONS)
        np.testing.assert_allclose(obs, 0.001)


@pytest.mark.parametrize("mode", ("next_step", "same_step", "disabled"))
def test_same_trajectories_as_dummy_in_every_autoreset_mode(mode: str) -> None:
    over = ["num_envs=5", f"autoreset_mode={mode}", *GRAPH]
    over += ["vectorizer.in_series=3", "vectorizer.num_cpus=2"]
    check_same_as_dummy(over, "ray", steps=80, seed=7)


def test_step_wait_after_ctrl_c_returns_the_interrupted_step() -> None:
    """A Ctrl-C while the graph's answer is awaited leaves the step pending; ``step_wait()``
    returns it (read from the graph, or the answer each actor kept, by its channel)."""
    from test_ray_vectorizer import ctrl_c_during

    with node(*[maker("slow")] * 4, compiled_graph=True) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)  # (the graph is compiled at the first step)
        ctrl_c_during(lambda: envs.step(ACTIONS))
        obs, rew, *_ = envs.step_wait()
        np.testing.assert_allclose(obs, 0.002)
        assert rew.tolist() == [1.0] * 4
        obs, *_ = envs.step(ACTIONS)
        np.testing.assert_allclose(obs, 0.003)
        assert envs.restarts == [0, 0]


def test_an_actor_lost_during_a_step_is_rebuilt_the_other_keeps_its_step_and_graph() -> None:
    """Actor 1 is killed while both nodes step (1 s a step): with ``restart`` only its envs end
    truncated; actor 0's step is returned whole (the graph broke under it: its kept answer,
    by its channel), and the next steps go by a graph compiled over the new actor."""
    import ray

    with node(*[maker("slow")] * 4, compiled_graph=True, restart=True) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        old = envs.group._graph
        envs.step_async(ACTIONS)
        time.sleep(0.3)  # (both nodes are in their 1 s step)
        pid = envs.pids[1]
        ray.kill(envs.actors[1], no_restart=True)
        assert_gone([pid])  # ray.kill returns before the actor dies: its step may end first
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            obs, rew, _, trunc, infos = envs.step_wait()
        assert any("restarting after: worker 1" in str(w.message) for w in caught)
        np.testing.assert_allclose(obs[:2], 0.002)  # actor 0: its step, whole
        assert rew.tolist()[:2] == [1.0, 1.0] and trunc.tolist() == [False, False, True, True]
        assert infos["_restarted"].tolist() == [False, False, True, True]
        assert envs.restarts == [0, 1]
        obs, *_ = envs.step(ACTIONS)
        np.testing.assert_allclose(obs[:2], 0.003)
        graph = envs.group._graph
        assert isinstance(graph, StepGraph) and graph is not old
        assert graph.actor_ids == [h.actor_id for h in envs.group.handles]


def test_a_late_node_is_the_one_timed_out_though_the_graph_reads_every_node_at_once() -> None:
    """Node 0's env hangs at its 2nd step: the step fails within ``timeout`` (and the grace
    of the kept answers) naming actor 0, not actor 1, whose answer came in time."""
    fns = [maker("hang", at_step=2)] * 2 + [maker()] * 2
    with node(*fns, compiled_graph=True, timeout=3.0) as envs:
        envs.reset(seed=0)
        envs.step(ACTIONS)
        t0 = time.monotonic()
        with pytest.raises(envfactory.WorkerTimeoutError) as info:
            envs.step(ACTIONS)
        assert time.monotonic() - t0 < 3.0 + 5.0  # (a loaded 2-core machine)
        assert info.value.worker == 0, info.value


def test_a_graph_ray_cannot_compile_falls_back_to_the_channels(monkeypatch: Any) -> None:
    """Ray refusing to compile (made to fail here: a real Ray compiles this graph) is one
    warning naming the cause; every step then goes by the channels, still ``dummy``'s."""
    from ray.dag import DAGNode

    def refuse(self: Any, **kwargs: Any) -> Any:
        raise ValueError("no compiled graphs on this Ray")

    monkeypatch.setattr(DAGNode, "experimental_compile", refuse)
    with node(*[maker()] * 4, compiled_graph=True) as envs:
        envs.reset(seed=0)
        with pytest.warns(RuntimeWarning, match="could not compile the step graph \\(ValueError"):
            envs.step(ACTIONS)
        for k in range(5):
            obs, *_ = envs.step(ACTIONS)
            np.testing.assert_allclose(obs, (k + 2) / 1000)
        assert envs.group._graph is None


def test_compiled_graph_without_in_actor_is_refused_at_compose_time() -> None:
    with pytest.raises(envfactory.ConfigError, match=r"vectorizer\.compiled_graph=True: expected"):
        envfactory.compose(["vectorizer=ray", "vectorizer.compiled_graph=true"])


# -- the async pool across nodes ------------------------------------------------------------
def test_pool_across_nodes_returns_the_first_nodes_done_while_a_slow_one_steps() -> None:
    """Node 0 takes 1 s a step, node 1 a few ms: ``recv`` returns node 1 again and again while
    node 0 steps, and node 0 whole when it is done; each env's own trajectory is unchanged."""
    long = 10**9  # (no episode ends)
    fns = [maker("slow", episode_len=long)] * 2 + [maker(episode_len=long)] * 2
    envs = build_ray(fns, in_actor="subproc", in_series=2, num_cpus=2, batch_size=2)
    assert isinstance(envs, RayPool)
    with envs:
        envs.async_reset(seed=0)
        seen: list[list[int]] = []
        steps = {i: 0 for i in range(4)}
        t0 = time.monotonic()
        while steps[0] < 2 and time.monotonic() - t0 < 60:
            obs, _, _, _, infos = envs.recv()
            ids = infos["env_id"].tolist()
            seen.append(ids)
            for k, i in enumerate(ids):
                np.testing.assert_allclose(obs[k], steps[i] / 1000)  # its own next step
                steps[i] += 1
            envs.send(np.zeros(2, dtype=np.int64), ids)
        assert all(ids in ([0, 1], [2, 3]) for ids in seen), seen  # whole nodes
        assert steps[0] == 2 and steps[2] > 4 * steps[0], steps  # node 1 did not wait
        with pytest.raises(ValueError, match=r"only part of actor 0's envs \[0, 1\]"):
            envs.recv()
            envs.send(np.zeros(1, dtype=np.int64), [0])
