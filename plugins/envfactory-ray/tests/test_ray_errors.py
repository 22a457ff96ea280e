"""What the ``ray`` vectorizer makes of Ray's errors and options, without starting a Ray: Ray's
cause in one line, the node a failure says is lost, the placement away from it, the
``ray[client]`` extra, ``start_timeout``. (The cluster behind them: test_ray_cluster.py.)"""

from __future__ import annotations

from typing import Any

import pytest
import ray
from envfactory_ray.actor import ActorHandle
from envfactory_ray.causes import CAUSE_CHARS, KILLED, NO_CAUSE, lost_node_of, ray_cause
from envfactory_ray.plugin import RayConfig
from ray.core.generated.common_pb2 import ActorDiedErrorContext
from ray.exceptions import ActorDiedError, ActorUnavailableError, RayTaskError

import envfactory

NODE = "2d" * 28  # a node id: 56 hex digits
ACTOR = "7165c69766aadece9bcb9d5501000000"


def node_died() -> ActorDiedError:
    """Ray 2.60's error for an actor whose node died (as a lost node's replacement gets)."""
    return ActorDiedError(
        ActorDiedErrorContext(
            class_name="EnvActor",
            actor_id=bytes.fromhex(ACTOR),
            node_ip_address="192.0.2.2",
            ray_namespace="ns",
            error_message=f"The actor died because its node has died. Node Id: {NODE}\n\tthe "
            "actor's node was terminated unexpectedly: health check failed due to missing too "
            "many heartbeats",
            never_started=True,
        )
    )


def unreachable() -> ActorUnavailableError:
    """Ray 2.60's error for a call to an actor whose node's processes were killed."""
    return ActorUnavailableError(
        "The actor is temporarily unavailable: RpcError: RPC error: recvmsg:Connection reset "
        "by peer rpc_code: 14.",
        bytes.fromhex(ACTOR),
    )


def creation_failed() -> ActorDiedError:
    """The actor's creation raised (its env constructors could not be unpickled there)."""
    try:
        raise ModuleNotFoundError("No module named 'my_sim'")
    except ModuleNotFoundError as exc:
        tb = "Traceback (most recent call last):\n  File x\nModuleNotFoundError: No module..."
        task = RayTaskError("EnvActor.__init__", tb, exc, actor_id=bytes.fromhex(ACTOR))
    return ActorDiedError(task)


def test_ray_cause_is_one_line_with_ray_s_reason() -> None:
    assert ray_cause(node_died()) == (
        f"The actor died because its node has died. Node Id: {NODE}; the actor's node was "
        "terminated unexpectedly: health check failed due to missing too many heartbeats; The "
        "actor never ran - it was cancelled before it started running."
    )
    assert ray_cause(unreachable()).startswith(
        f"The actor {ACTOR} is unavailable: The actor is temporarily unavailable: RpcError:"
    )
    assert ray_cause(creation_failed()) == (
        "an error in its creation task: ModuleNotFoundError: No module..."
    )
    assert ray_cause(ActorDiedError()) == NO_CAUSE


#: Ray 2.60's exit detail for an actor process that ended without a word to Ray (the same for a
#: SIGKILL, a SIGSEGV, os._exit), and its advice after it
EOF_DETAIL = "Worker unexpectedly exits with a connection error code 2. End of file."
RAY_ADVICE = (
    " Some common causes include: (1) the process was killed by the OOM killer due to high memory"
    " usage, (2) ray stop --force was called, or (3) the worker crashed unexpectedly due to "
    "SIGSEGV or another unexpected error. If the process was killed by the kernel OOM killer "
    "(verifiable by checking for OOM in dmesg of the OOMing node), consider enabling resource "
    "isolation via --enable-resource-isolation to prevent node deaths by resource contention and "
    "significant loss of progress by uninformed kernel OOM killing."
)


def process_died(detail: str) -> ActorDiedError:
    """Ray 2.60's error for a call to an actor whose worker process died."""
    err = ActorDiedError()
    err.error_msg = (
        f"{NO_CAUSE}\n\tclass_name: EnvActor\n\tactor_id: {ACTOR}\n\tpid: 42\n\tnamespace: ns\n"
        "\tip: 192.0.2.2\nThe actor is dead because its worker process has died. Worker exit "
        f"type: SYSTEM_ERROR Worker exit detail: {detail}"
    )
    return err


def test_ray_cause_of_a_process_that_ended_without_a_word_is_one_short_line() -> None:
    killed = ray_cause(process_died(EOF_DETAIL + RAY_ADVICE))
    assert killed == f"{KILLED}; Ray says: {EOF_DETAIL}"
    memory = (  # Ray's own memory monitor: its reason kept, its advice and tables left out
        "Task was killed due to the node running low on memory. Memory on the node (IP: "
        "192.0.2.2, ID: 2d2d) was 7.5GB used / 7.8GB limit (0.960000)\nTop 10 memory users:\n"
        "PID MEM(GB) COMMAND\n42 6.1 ray::EnvActor.step\nRefer to the documentation on how to "
        "address the out of memory issue: https://docs.ray.io/..."
    )
    cause = ray_cause(process_died(memory))
    assert cause.endswith(
        "Worker exit detail: Task was killed due to the node running low on memory. Memory on "
        "the node (IP: 192.0.2.2, ID: 2d2d) was 7.5GB used / 7.8GB limit (0.960000)"
    ), cause
    long = ray_cause(process_died("a reason " * 100))
    assert len(long) <= CAUSE_CHARS and long.endswith(" a...") and "\n" not in long


def test_lost_node_is_the_one_ray_names_or_the_unreachable_actor_s() -> None:
    assert lost_node_of(node_died(), "") == NODE
    assert lost_node_of(unreachable(), "abc") == "abc"
    assert lost_node_of(ActorDiedError(), "abc") == ""  # its process died: the node is fine
    assert lost_node_of(creation_failed(), "abc") == ""


class Recorder:
    """Stands for ``ray.remote(EnvActor)``: records the options an actor is made with."""

    def __init__(self) -> None:
        self.options_seen: list[dict[str, Any]] = []

    def options(self, **options: Any) -> Recorder:
        self.options_seen.append(options)
        return self

    def remote(self, *args: Any) -> Any:
        class Actor:
            class describe:
                @staticmethod
                def remote() -> str:
                    return "ref"

        return Actor()


def handle() -> ActorHandle:
    return ActorHandle(0, 0, 2, "CartPole-v1", [], 1)


def test_a_replacement_is_placed_away_from_the_lost_nodes_with_a_valid_selector() -> None:
    from ray._private.label_utils import validate_label_selector

    h, cls = handle(), Recorder()
    h.spawn(cls, "next_step", [NODE])
    h.spawn(cls, "next_step", ["b" * 56, NODE])
    h.spawn(cls, "next_step", [])
    selectors = [o.get("label_selector") for o in cls.options_seen]
    assert selectors == [
        {"ray.io/node-id": f"!{NODE}"},
        {"ray.io/node-id": f"!in({NODE}, {'b' * 56})"},
        None,
    ]
    assert all(validate_label_selector(s) is None for s in selectors)  # Ray takes them
    assert all(o["num_cpus"] == 1 and o["max_restarts"] == 0 for o in cls.options_seen)


def test_died_before_it_started_names_the_replacement_its_node_and_ray_s_cause() -> None:
    h = handle()
    h.spawn(Recorder(), "next_step", ["c" * 56])
    h.actor_id = ACTOR
    err = h._died(node_died(), "restart")
    assert isinstance(err, envfactory.WorkerDiedError) and h.lost_node == NODE
    assert str(err) == (
        f"worker 0 (pid None, envs [0, 1], env 'CartPole-v1') [Ray actor {ACTOR[:12]} on node "
        f"192.0.2.2 ({NODE[:12]})] died before it started ({ray_cause(node_died())}) during "
        "restart"
    )
    assert (err.actor_id, err.node_id, err.node_ip) == (ACTOR, NODE, "192.0.2.2")


def test_died_before_it_started_without_a_reason_says_where_to_look() -> None:
    h = handle()
    h.spawn(Recorder(), "next_step", [])
    h.actor_id = ACTOR
    text = str(h._died(ActorDiedError(), "start"))
    assert text.endswith(
        f"[Ray actor {ACTOR[:12]}, not started] died before it started ({NO_CAUSE}; the usual "
        "causes: this process's Ray token auth differs from the cluster's (RAY_AUTH_MODE, "
        "RAY_AUTH_TOKEN), or the node lacks a package the envs need; Ray's driver log may say "
        "more) during start"
    )
    assert "\n" not in text and not h.lost_node


def test_an_unreachable_actor_is_named_so() -> None:
    h = handle()
    h.spawn(Recorder(), "next_step", [])
    h.describing, h.node_id, h.node_ip, h.pid = False, NODE, "192.0.2.2", 42
    err = h._died(unreachable(), "step")
    assert "(pid 42, envs [0, 1], env 'CartPole-v1') [Ray actor " in str(err)
    assert f"on node 192.0.2.2 ({NODE[:12]})] became unreachable (The actor " in str(err)
    assert h.lost_node == NODE


def test_ray_client_address_without_ray_client_names_the_extra(monkeypatch: Any) -> None:
    from envfactory_ray import vecenv

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(
        ray._private.utils,
        "get_ray_client_dependency_error",
        lambda: ModuleNotFoundError("No module named 'grpc'"),
    )
    monkeypatch.setattr(ray, "init", lambda **_: pytest.fail("ray.init was called"))
    with pytest.raises(envfactory.ConfigError) as info:
        vecenv.connect("ray://head:10001")
    assert str(info.value) == (
        "vectorizer=ray: vectorizer.address='ray://head:10001' is a Ray Client address, which "
        "needs ray[client] (No module named 'grpc'); install it with pip install "
        "'envfactory-ray[client]' (or 'ray[client]'), or run on a cluster node with an address "
        "such as 'head:6379'"
    )


def test_a_cluster_that_cannot_be_joined_names_token_auth(monkeypatch: Any) -> None:
    """Ray says only "Failed to connect" to a driver without the cluster's token auth."""
    from envfactory_ray import vecenv

    def refuse(**_: Any) -> None:
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.7:6379")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refuse)
    with pytest.raises(envfactory.ConfigError) as info:
        vecenv.connect("10.0.0.7:6379")
    assert str(info.value) == (
        "vectorizer=ray: cannot start or join the Ray cluster at '10.0.0.7:6379': "
        "ConnectionError: Failed to connect to Ray cluster at 10.0.0.7:6379 (set "
        "vectorizer.address=null for a local Ray, or the address of a running cluster such as "
        "'ray://head:10001' or 'head:6379'; a cluster started with token auth also needs "
        "RAY_AUTH_MODE=token and its token (RAY_AUTH_TOKEN) in this process)"
    )


def test_ray_s_own_ray_client_error_is_turned_into_the_extra_s_name(monkeypatch: Any) -> None:
    """Where Ray's own check cannot be asked first, its ``ray.init`` error names the extra too."""
    from envfactory_ray import vecenv

    def refuse(**_: Any) -> None:
        raise ValueError("Ray Client requires pip package `ray[client]`. If you installed ...")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray._private.utils, "get_ray_client_dependency_error", lambda: None)
    monkeypatch.setattr(ray, "init", refuse)
    with pytest.raises(envfactory.ConfigError, match=r"pip install 'envfactory-ray\[client\]'"):
        vecenv.connect("ray://head:10001")


@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_bad_start_timeout_fails_at_compose_time_in_one_line(value: str) -> None:
    with pytest.raises(envfactory.ConfigError) as info:
        envfactory.compose(["vectorizer=ray", f"vectorizer.start_timeout={value}"])
    text = str(info.value)
    assert "vectorizer.start_timeout=" in text and "expected a number of seconds > 0" in text
    assert "\n" not in text


def test_start_timeout_inf_means_null_and_a_number_is_kept() -> None:
    assert RayConfig(start_timeout=float("inf")).start_timeout is None
    cfg = envfactory.compose(["vectorizer=ray", "vectorizer.start_timeout=30"])
    assert cfg.vectorizer.start_timeout == 30


def test_in_actor_says_the_choices_at_compose_time() -> None:
    with pytest.raises(envfactory.ConfigError) as info:
        envfactory.compose(["vectorizer=ray", "vectorizer.in_actor=subprc"])
    assert str(info.value) == (
        "vectorizer.in_actor='subprc': expected null (each actor steps its envs itself) or "
        "'subproc' (each actor hosts its envs in that vectorizer, one worker per CPU it "
        "reserves). Did you mean 'subproc'?"
    )
    cfg = envfactory.compose(["vectorizer=ray", "vectorizer.in_actor=subproc"])
    assert cfg.vectorizer.in_actor == "subproc"


def test_placement_options_pass_through_to_every_actor_and_each_rebuilt_one() -> None:
    """Issue 27: resources, scheduling strategy, label selectors and runtime_env reach Ray's
    actor options as given; a rebuilt actor's own selector off the lost node is added to the
    user's (and wins on the node id)."""
    placement = {
        "num_gpus": 0.5,
        "resources": {"sim_license": 1.0},
        "scheduling_strategy": "SPREAD",
        "label_selector": {"region": "us-west1"},
        "runtime_env": {"env_vars": {"A": "b"}},
    }
    h, cls = ActorHandle(0, 0, 2, "CartPole-v1", [], 1, (), placement), Recorder()
    h.spawn(cls, "next_step", [])
    h.spawn(cls, "next_step", [NODE])
    first, rebuilt = cls.options_seen
    assert first == {"num_cpus": 1, "max_restarts": 0, **placement}
    assert rebuilt["label_selector"] == {"region": "us-west1", "ray.io/node-id": f"!{NODE}"}
    assert rebuilt["resources"] == {"sim_license": 1.0} and rebuilt["num_gpus"] == 0.5


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "vectorizer.scheduling_strategy=spread",
            "vectorizer.scheduling_strategy='spread': expected null, DEFAULT or SPREAD. Did you "
            "mean 'SPREAD'?",
        ),
        (
            "vectorizer.resources={CPU: 2}",
            "vectorizer.resources={'CPU': 2.0}: expected custom resources only; CPU goes by its "
            "own option. Use vectorizer.num_cpus=2.0 instead",
        ),
        ("vectorizer.num_gpus=-1", "vectorizer.num_gpus=-1.0: expected a number of GPUs per"),
        ("vectorizer.resources={sim: -1}", "vectorizer.resources={'sim': -1.0}: expected a map"),
    ],
)
def test_bad_placement_options_fail_at_compose_time_in_one_line(
    override: str, message: str
) -> None:
    with pytest.raises(envfactory.ConfigError) as info:
        envfactory.compose(["vectorizer=ray", override])
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_placement_options_compose_from_the_command_line() -> None:
    cfg = envfactory.compose(
        [
            "vectorizer=ray",
            "vectorizer.scheduling_strategy=SPREAD",
            "vectorizer.resources={sim_license: 1}",
            "vectorizer.label_selector={region: us-west1}",
            "vectorizer.runtime_env={env_vars: {OMP_NUM_THREADS: '1'}}",
            "vectorizer.num_gpus=0.25",
        ]
    )
    v = cfg.vectorizer
    assert (v.scheduling_strategy, v.num_gpus) == ("SPREAD", 0.25)
    assert dict(v.resources) == {"sim_license": 1.0}
    assert dict(v.label_selector) == {"region": "us-west1"}
    assert dict(v.runtime_env.env_vars) == {"OMP_NUM_THREADS": "1"}


def test_an_actor_that_never_started_names_what_it_asked_for() -> None:
    """Found by a user trial: a label selector no node matches (or a runtime_env that cannot
    be set up) was blamed on CPUs only, and num_cpus read ``None``."""
    from envfactory import WorkerTimeoutError

    placement = {"label_selector": {"region": "us-west1"}, "runtime_env": {"pip": ["x"]}}
    h = ActorHandle(0, 0, 2, "CartPole-v1", [], None, (), placement)
    h.describing = True
    text = str(h.error(WorkerTimeoutError, "did not answer within 5 s and was killed", "start"))
    assert (
        "no live node had room for an actor of vectorizer.num_cpus=null, "
        "label_selector={'region': 'us-west1'}, with what other actors hold"
    ) in text
    assert "or its runtime_env could not be set up there" in text


def test_runtime_env_is_read_as_ray_reads_it() -> None:
    """A typo'd field is named with Ray's field; env_vars typed as numbers or booleans on the
    command line become the strings Ray needs; Ray's own check says the rest in one line."""
    from envfactory_ray.vecenv import _check_runtime_env

    with pytest.raises(
        envfactory.ConfigError, match="unknown field 'env_var': did you mean 'env_vars'"
    ):
        _check_runtime_env({"env_var": {"A": "b"}})
    with pytest.raises(envfactory.ConfigError, match=r"^vectorizer.runtime_env=.*must be of type"):
        _check_runtime_env({"env_vars": {"A": 1}})
    _check_runtime_env({"my_plugin_field": 1})  # (a runtime_env plugin's field: passed on)
    cfg = RayConfig(runtime_env={"env_vars": {"A": 1, "B": True, "C": "c"}})
    assert cfg.runtime_env == {"env_vars": {"A": "1", "B": "true", "C": "c"}}
