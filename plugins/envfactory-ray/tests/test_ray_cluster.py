"""The ``ray`` vectorizer on a local multi-node Ray cluster (``ray.cluster_utils.Cluster``: a head
with no CPUs and two worker nodes of 2 CPUs, all processes of this machine, one cluster for the
module): actors spread over the nodes, the same trajectories as ``dummy``, a lost node with and
without ``restart``, with and without room elsewhere (also with node actors stepped by the
compiled graph, and in the async pool across node actors), and frozen actors.

A node is lost the hard way (``remove_node(allow_graceful=False)``: its raylet and workers are
SIGKILLed), and Ray goes on listing it as alive for 10-15 s, as on a real cluster. Before each test
the cluster is brought back to two live worker nodes that Ray knows are the only ones.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import psutil
import pytest
from envfactory_ray.graph import StepGraph
from envfactory_ray.pool import RayPool
from envfactory_ray.vecenv import RayVecEnv

import envfactory
from envfactory.testing import assert_rollouts_equal, rollout

pytestmark = pytest.mark.slow  # a cluster of three nodes: about 10 s to start here
NODE_CPUS = 2
FAULT_SECONDS = 30.0  # bound on noticing a fault (the machine is small and shared)
TIMEOUT = 8.0  # vectorizer.timeout (and start_timeout) of the fault tests
#: the node-local mode stepped by one compiled Ray graph (one node actor of 1 CPU per 2 envs)
GRAPH = ("vectorizer.in_actor=subproc", "vectorizer.compiled_graph=true")
#: the ways a synchronous env steps its actors on the cluster: Ray calls, the compiled graph
MODES = pytest.mark.parametrize("mode", [(), GRAPH], ids=["calls", "graph"])


class LocalCluster:
    """A head with no CPUs, worker nodes of ``NODE_CPUS`` CPUs, and this process its driver."""

    def __init__(self) -> None:
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 0, "include_dashboard": False},
        )
        self.top_up()

    @property
    def workers(self) -> list[Any]:
        return list(self.cluster.worker_nodes)

    def top_up(self) -> None:
        """Two live worker nodes, and Ray knows of no other (a removed node is marked dead)."""
        while len(self.workers) < 2:
            self.cluster.add_node(num_cpus=NODE_CPUS, object_store_memory=80 * 1024**2)
        self.cluster.wait_for_nodes(timeout=60)

    def lose(self, node_id: str) -> None:
        """Lose the worker node ``node_id`` the hard way (its processes SIGKILLed)."""
        [node] = [n for n in self.workers if n.node_id == node_id]
        self.cluster.remove_node(node, allow_graceful=False)

    def shutdown(self) -> None:
        self.cluster.shutdown()


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    """The module's cluster, this process its driver; afterwards no process it started is
    left (checked with psutil). Its files go to a Ray temp dir of its own: a cluster writes
    its address to ``<temp dir>/ray_current_cluster``, which every other ``ray.init()`` on
    the machine (another test run's, with no address) would otherwise join."""
    import ray

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    old_tmp = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # (sockets: short)
    local: LocalCluster | None = None
    try:
        local = LocalCluster()  # (its processes are this process's children)
        ray.init(
            address=local.cluster.address,
            logging_level=logging.WARNING,
            log_to_driver=False,  # (a lost node's raylet prints its last log lines)
        )
        yield local
    finally:
        started = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
        ray.shutdown()
        if local is not None:
            local.shutdown()
        left = [p.pid for p in psutil.wait_procs(started, timeout=30)[1]]
        shutil.rmtree(tmp, ignore_errors=True)
        if old_tmp is None:
            del os.environ["RAY_TMPDIR"]
        else:
            os.environ["RAY_TMPDIR"] = old_tmp
        assert not left, f"the Ray cluster left processes behind: {sorted(left)}"


@pytest.fixture
def nodes(cluster: LocalCluster) -> list[str]:
    """The ids of the two live worker nodes."""
    cluster.top_up()
    return [n.node_id for n in cluster.workers]


def gone(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def make(*extra: str, num_envs: int = 8) -> RayVecEnv:
    envs = make_any(*extra, num_envs=num_envs)
    assert isinstance(envs, RayVecEnv)
    return envs


def make_any(*extra: str, num_envs: int = 8) -> Any:
    """The vectorized env of ``extra`` (a `RayVecEnv`, or a `RayPool` with ``batch_size``)."""
    overrides = [
        "vectorizer=ray",
        f"num_envs={num_envs}",
        "vectorizer.num_cpus=1",
        "vectorizer.in_series=2",
        *extra,
    ]
    return envfactory.make_vec(overrides=overrides)


def placement(envs: Any) -> list[str]:
    return [h.node_id for h in envs.group.handles]


def step_until_fault(
    envs: RayVecEnv, seconds: float = FAULT_SECONDS, ended: np.ndarray | None = None
) -> tuple[Any, float]:
    """Step (every 50 ms) until a step raises or reports a restart; (its result or the error,
    seconds it took from the first step). Steps right after a loss may still be answered.
    ``ended``, if given, is kept as the envs that ended their episode at the last step before
    the one returned (their next step is their ``next_step`` autoreset)."""
    t0 = time.monotonic()
    actions = np.zeros(envs.num_envs, dtype=np.int64)
    while time.monotonic() - t0 < seconds:
        try:
            out = envs.step(actions)
        except Exception as exc:
            return exc, time.monotonic() - t0
        if "_restarted" in out[4]:
            return out, time.monotonic() - t0
        if ended is not None:
            ended[:] = out[2] | out[3]
        time.sleep(0.05)
    raise AssertionError(f"no fault seen within {seconds} s of the node's loss")


def test_actors_spread_over_both_nodes_and_match_dummy(nodes: list[str]) -> None:
    """8 CartPoles, 4 actors of 1 CPU on two nodes of 2: two actors on each, and 200 steps
    bit-identical to ``dummy`` (episodes end and autoreset on both nodes)."""
    with make() as envs:
        assert sorted(placement(envs)) == sorted(nodes * 2)
        ran = rollout(envs, steps=200, seed=7)
    with envfactory.make_vec(overrides=["num_envs=8", "vectorizer=dummy"]) as envs:
        expected = rollout(envs, steps=200, seed=7)
    assert_rollouts_equal(expected, ran)
    ends = sum(int(r["terminations"].sum() + r["truncations"].sum()) for r in ran[1:])
    assert ends > 20  # autoresets were part of it


def test_frozen_actors_time_out_at_timeout(nodes: list[str]) -> None:
    """The actors of one node stopped (SIGSTOP): the step raises ``WorkerTimeoutError``
    naming the first of them at ``timeout``, the actor is killed, and the env is broken."""
    with make(f"vectorizer.timeout={TIMEOUT}") as envs:
        envs.reset(seed=0)
        frozen = [h for h in envs.group.handles if h.node_id == nodes[0]]
        assert len(frozen) == 2
        for h in frozen:
            os.kill(h.pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            with pytest.raises(envfactory.WorkerTimeoutError) as info:
                envs.step(np.zeros(8, dtype=np.int64))
            took = time.monotonic() - t0
        finally:
            for h in frozen:
                if psutil.pid_exists(h.pid):
                    os.kill(h.pid, signal.SIGCONT)
        first = frozen[0]
        assert TIMEOUT - 0.1 < took < TIMEOUT + 5.0
        err = info.value
        assert (err.worker, err.env_indices, err.pid) == (first.index, first.indices, first.pid)
        assert f"did not answer within {TIMEOUT:g} s and was killed" in str(err)
        assert f"on node {err.node_ip} ({nodes[0][:12]})" in str(err)
        assert gone(first.pid, 15.0), "the frozen actor was not killed"
        with pytest.raises(envfactory.VecEnvBrokenError):
            envs.step(np.zeros(8, dtype=np.int64))


AUTH_DRIVER = """
import sys, envfactory
try:
    cfg = ["vectorizer=ray", "num_envs=2", "vectorizer.in_series=2"]
    envfactory.make_vec(overrides=[*cfg, "vectorizer.address=" + sys.argv[1]])
except envfactory.WorkerDiedError as exc:
    print("ERR", exc)
except envfactory.ConfigError as exc:  # the join itself failed (GCS connection: a loaded host)
    print("JOIN", " ".join(str(exc).split()))
"""


def test_a_driver_with_token_auth_on_a_cluster_without_gets_actors_that_die_naming_auth(
    cluster: LocalCluster, nodes: list[str]
) -> None:
    """Token auth in this process but not on the cluster: the driver joins, its actors die
    before they start, and Ray's reason ("all references to the actor were removed") does not
    say why (its driver log says "Missing authorization header"): the error names the token
    settings."""
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0123456789abcdef" * 4}
    proc = subprocess.run(
        [sys.executable, "-c", AUTH_DRIVER, cluster.cluster.address],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(("ERR ", "JOIN "))]
    [line] = lines or [proc.stderr[-3000:]]
    if line.startswith("JOIN "):  # Ray refused the connection itself (seen on a loaded host)
        assert "cannot start or join the Ray cluster at" in line, line
        assert "also needs RAY_AUTH_MODE=token and its token (RAY_AUTH_TOKEN)" in line, line
        return
    assert line.startswith("ERR worker 0 (pid None, envs [0, 1], env 'CartPole-v1') [Ray actor ")
    assert ", not started] died before it started (" in line
    assert "token auth differs from the cluster's (RAY_AUTH_MODE, RAY_AUTH_TOKEN)" in line
    assert line.endswith(") during start")


@MODES
def test_node_lost_without_restart(
    cluster: LocalCluster, nodes: list[str], mode: tuple[str, ...]
) -> None:
    """One ``WorkerDiedError`` naming the first actor of the lost node, its envs and the node,
    then ``VecEnvBrokenError``; the same with the compiled graph (its read of the lost node
    breaks, and the error is the actor's, not the graph's)."""
    with make(*mode, num_envs=4) as envs:
        envs.reset(seed=0)
        envs.step(np.zeros(4, dtype=np.int64))  # (the graph is compiled at the first step)
        assert isinstance(envs.group._graph, StepGraph) == bool(mode)
        lost = placement(envs)[0]
        cluster.lose(lost)
        err, took = step_until_fault(envs)
        assert isinstance(err, envfactory.WorkerDiedError), err
        assert took < FAULT_SECONDS
        assert err.worker == 0 and err.env_indices == [0, 1] and err.node_id == lost
        text = str(err)
        assert text.startswith("worker 0 (pid ")
        assert f"envs [0, 1], env 'CartPole-v1') [Ray actor {err.actor_id[:12]} on node" in text
        assert f"({lost[:12]})]" in text and " during step" in text
        with pytest.raises(envfactory.VecEnvBrokenError, match="unusable since: worker 0"):
            envs.step(np.zeros(4, dtype=np.int64))


@pytest.mark.parametrize(
    ("mode", "compiled"),
    [((), False), (GRAPH, True), (GRAPH, False)],
    ids=["calls", "graph", "graph-lost-before-compiled"],
)
def test_node_lost_with_restart_and_room_elsewhere_is_survived(
    cluster: LocalCluster, nodes: list[str], mode: tuple[str, ...], compiled: bool
) -> None:
    """2 actors of 1 CPU on two nodes of 2 CPUs, the node of actor 0 lost while Ray still
    lists it alive: its actors are rebuilt on the other node (not on the lost one, where they
    would die), their envs truncated, the others go on, and the env keeps stepping. With the
    compiled graph, the steps after the loss go by a graph compiled again over the rebuilt
    actors (as sweeps-and-ray.md says), not by the channels; also when the node was lost
    before the first step compiled the graph (a compile that fails on a lost actor is no
    refusal by Ray: no fallback for good, no warning that Ray cannot compile)."""
    opts = [f"vectorizer.timeout={TIMEOUT}", "vectorizer.start_timeout=60"]
    with make("vectorizer.restart=true", *mode, *opts, num_envs=4) as envs:
        envs.reset(seed=0)
        if compiled:
            envs.step(np.zeros(4, dtype=np.int64))  # (the graph is compiled at the first step)
            assert isinstance(envs.group._graph, StepGraph)
        old = envs.group._graph
        before = placement(envs)
        lost = before[0]
        on_lost = [i for h in envs.group.handles if h.node_id == lost for i in h.indices]
        cluster.lose(lost)
        restarted: list[int] = []  # (the actors of a lost node may fail in different steps)
        ended = np.zeros(4, dtype=bool)
        t0 = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            while sorted(restarted) != on_lost and time.monotonic() - t0 < FAULT_SECONDS:
                out, _ = step_until_fault(envs, ended=ended)
                assert not isinstance(out, Exception), f"not survived: {out}"
                now = np.flatnonzero(out[4]["_restarted"]).tolist()
                # the recovery rule: an env whose lost step was its autoreset (it had just
                # ended an episode) is reset, flags False; every other one is truncated
                lost_episode = [i for i in now if not ended[i]]
                assert np.flatnonzero(out[3]).tolist() == lost_episode, (now, ended)
                assert not out[2][now].any() and not out[3][[i for i in now if ended[i]]].any()
                assert set(now) <= set(on_lost) - set(restarted), (now, on_lost, restarted)
                restarted += now
        assert sorted(restarted) == on_lost, f"{on_lost} were not all rebuilt"
        assert lost not in placement(envs) and set(placement(envs)) <= set(nodes)
        first = str(caught[0].message)
        assert first.startswith("restarting after: worker ") and f"({lost[:12]})]" in first
        assert not [w for w in caught if "could not compile" in str(w.message)]
        for _ in range(20):
            envs.step(np.zeros(4, dtype=np.int64))
        graph = envs.group._graph
        if mode:  # back on a graph, over the actors that step now
            assert isinstance(graph, StepGraph) and graph is not old and not graph.broken
            assert graph.actor_ids == [h.actor_id for h in envs.group.handles]
        else:
            assert graph is None


def test_node_lost_with_restart_and_no_room_is_one_clear_error_within_timeout(
    cluster: LocalCluster, nodes: list[str]
) -> None:
    """4 actors fill both nodes; one node lost: the rebuilt actor can go nowhere (not on the
    lost node, where Ray would still place it), and the step raises within ``start_timeout``
    an error that names the replacement, the lost node and the fix."""
    opts = [f"vectorizer.timeout={TIMEOUT}", f"vectorizer.start_timeout={TIMEOUT}"]
    with make("vectorizer.restart=true", *opts) as envs:
        envs.reset(seed=0)
        lost = placement(envs)[0]
        old = envs.group.handles[0].actor_id
        cluster.lose(lost)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the "restarting after" warning
            err, took = step_until_fault(envs)
        assert isinstance(err, envfactory.WorkerTimeoutError), err
        assert took < TIMEOUT + FAULT_SECONDS
        text = str(err)
        assert err.actor_id and err.actor_id != old  # the replacement, not the lost actor
        where = f"[Ray actor {err.actor_id[:12]}, not started, placed away from node {lost[:12]}]"
        assert where in text
        assert (
            f"did not answer within {TIMEOUT:g} s and was killed (not started: no live node other "
            f"than the lost node {lost[:12]} had room for an actor of vectorizer.num_cpus=1"
        ) in text
        assert text.endswith("raise vectorizer.start_timeout) during restart"), text
        with pytest.raises(envfactory.VecEnvBrokenError):
            envs.step(np.zeros(8, dtype=np.int64))


def test_pool_across_nodes_survives_a_lost_node_with_restart(
    cluster: LocalCluster, nodes: list[str]
) -> None:
    """The async pool over node actors (``batch_size`` with ``in_actor=subproc``: 2 actors of
    2 envs, a batch is one node), ``restart=true``, the node of actor 0 lost while the pool
    steps: ``recv`` keeps returning whole nodes within the fault bound, the lost node's envs
    come back flagged ``restarted`` (truncated, or reset when their lost step was their
    autoreset), the others go on, and the pool keeps stepping on the rebuilt actors."""
    opts = [f"vectorizer.timeout={TIMEOUT}", "vectorizer.start_timeout=60"]
    pool = ["vectorizer.in_actor=subproc", "vectorizer.batch_size=2", "vectorizer.restart=true"]
    with make_any(*pool, *opts, num_envs=4) as envs:
        assert isinstance(envs, RayPool)
        actions = np.zeros(2, dtype=np.int64)
        ended = np.zeros(4, dtype=bool)  # each env's flags at its last step returned

        def recv() -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray]:
            t = time.monotonic()
            _, _, term, trunc, infos = envs.recv()
            assert time.monotonic() - t < TIMEOUT + FAULT_SECONDS, "recv waited too long"
            ids = infos["env_id"].tolist()
            assert ids in ([0, 1], [2, 3]), ids  # whole nodes
            flagged = infos.get("_restarted", np.zeros(2, dtype=bool))
            return ids, term, trunc, flagged

        envs.async_reset(seed=0)
        for _ in range(10):
            ids, term, trunc, _ = recv()
            ended[ids] = term | trunc
            envs.send(actions, ids)
        lost = placement(envs)[0]
        on_lost = [i for h in envs.group.handles if h.node_id == lost for i in h.indices]
        cluster.lose(lost)
        restarted: list[int] = []
        t0 = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            while sorted(restarted) != on_lost and time.monotonic() - t0 < FAULT_SECONDS:
                ids, term, trunc, flagged = recv()
                for k, i in enumerate(ids):
                    if flagged[k]:
                        assert i in on_lost and i not in restarted, (i, on_lost, restarted)
                        assert not term[k] and bool(trunc[k]) == (not ended[i]), (i, ended)
                        restarted.append(i)
                ended[ids] = term | trunc
                envs.send(actions, ids)
        assert sorted(restarted) == on_lost, f"{on_lost} were not all rebuilt: {restarted}"
        assert lost not in placement(envs) and set(placement(envs)) <= set(nodes)
        assert str(caught[0].message).startswith("restarting after: worker ")
        seen = set()
        for _ in range(20):
            ids, _, _, flagged = recv()
            assert not flagged.any()
            seen.update(ids)
            envs.send(actions, ids)
        assert seen == {0, 1, 2, 3}  # every node steps again


def test_pool_across_nodes_without_restart_a_lost_node_is_one_clear_error(
    cluster: LocalCluster, nodes: list[str]
) -> None:
    """The pool across nodes without ``restart``: the node of actor 0 lost, ``recv`` raises
    within the fault bound one ``WorkerDiedError`` naming that actor, its envs and the node,
    and the pool is then broken (``VecEnvBrokenError``), as the synchronous env."""
    pool = ["vectorizer.in_actor=subproc", "vectorizer.batch_size=2"]
    with make_any(*pool, f"vectorizer.timeout={TIMEOUT}", num_envs=4) as envs:
        assert isinstance(envs, RayPool)
        actions = np.zeros(2, dtype=np.int64)
        envs.async_reset(seed=0)
        for _ in range(4):
            envs.send(actions, envs.recv()[4]["env_id"])
        lost = placement(envs)[0]
        cluster.lose(lost)
        t0 = time.monotonic()
        with pytest.raises(envfactory.WorkerDiedError) as info:
            while time.monotonic() - t0 < FAULT_SECONDS:
                envs.send(actions, envs.recv()[4]["env_id"])
        assert time.monotonic() - t0 < FAULT_SECONDS
        err = info.value
        assert err.worker == 0 and err.env_indices == [0, 1] and err.node_id == lost
        assert f"({lost[:12]})]" in str(err), str(err)
        with pytest.raises(envfactory.VecEnvBrokenError, match="unusable since: worker 0"):
            envs.recv()
