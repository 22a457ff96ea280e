"""``RayConfig``: the schema of ``vectorizer=ray`` and its checks (at compose time, and by
`RayGroup`/`RayPool` for a caller that did not compose)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Optional

from envfactory import OptionError
from envfactory.config.checks import check_int
from envfactory.errors import did_you_mean
from envfactory.vectorizers.remote import FaultOptions

from .node import IN_ACTOR

__all__ = ["RayConfig"]

#: Ray's scheduling strategies that a config can name (a node affinity or a placement group
#: needs Ray objects: pass them with ``ray.remote`` options of your own)
STRATEGIES = ("DEFAULT", "SPREAD")
#: resources Ray takes by their own keyword, not in ``resources``
_OWN_KEYWORD = {"CPU": "num_cpus", "GPU": "num_gpus", "memory": "memory"}


@dataclass
class RayConfig(FaultOptions):
    """Schema of ``vectorizer=ray`` (the Ray guide, docs/guides/sweeps-and-ray.md, has more).

    Attributes:
        name: always ``ray``.
        address: null starts a local Ray or joins the one ``ray start`` left running; else a
            cluster address (``ray://head:10001`` or ``head:6379``).
        in_series: envs per actor; null = as many actors as the cluster's CPUs hold.
        num_cpus: CPUs Ray reserves for each actor (> 0); null = Ray's default, or with
            ``in_actor`` every CPU of the smallest node (one actor per node).
        in_actor: null = each actor steps its envs itself; ``subproc`` = in a ``subproc`` of
            its own, one worker per CPU it reserves (one Ray call per node per step).
        compiled_graph: with ``in_actor``: each step is one ``execute`` of a Ray Compiled
            Graph over the node actors instead of their channels.
        batch_size: null: a synchronous VecEnv; an int: the async pool over the actors (with
            ``in_actor`` a multiple of ``in_series``, as ``num_envs`` is).
        start_timeout: seconds an actor may take to start, at each rebuild too; null = 120 s,
            or ``timeout`` when larger.
        num_gpus: GPUs Ray reserves for each actor; null: none.
        resources: custom resources each actor reserves, such as ``{sim_license: 1}``.
        scheduling_strategy: null or ``DEFAULT`` (Ray packs actors), or ``SPREAD``.
        label_selector: node labels an actor's node must have, such as ``{region: us-west1}``.
        runtime_env: Ray's runtime environment for the actors (``env_vars``, ``pip``, ...).

    The fault options are `FaultOptions`' (a rebuilt worker is a new actor).
    """

    name: str = "ray"
    address: Optional[str] = None  # noqa: UP045 (OmegaConf needs Optional on Python 3.10)
    in_series: Optional[int] = None  # noqa: UP045
    num_cpus: Optional[float] = None  # noqa: UP045
    start_timeout: Optional[float] = None  # noqa: UP045
    in_actor: Optional[str] = None  # noqa: UP045
    compiled_graph: bool = False
    batch_size: Optional[int] = None  # noqa: UP045
    num_gpus: Optional[float] = None  # noqa: UP045
    resources: dict[str, float] = field(default_factory=dict)
    scheduling_strategy: Optional[str] = None  # noqa: UP045
    label_selector: dict[str, str] = field(default_factory=dict)
    runtime_env: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """The checks envfactory runs at compose time (each raises ``OptionError``, which
        envfactory reports as ``vectorizer.<key>=<value>: expected ...``)."""
        if self.address is not None and (not isinstance(self.address, str) or not self.address):
            raise OptionError("address", self.address, "null (start or join a local Ray) or a Ray "
                              "address such as 'ray://head:10001' or 'head:6379'")  # fmt: skip
        check_int(self, "in_series", 1, optional=True)
        check_int(self, "batch_size", 1, optional=True)
        for key, ok, expected in _NUMBERS:
            value = getattr(self, key)
            if value is not None and _bad(value, ok):
                raise OptionError(key, value, expected)
        if self.start_timeout == math.inf:
            self.start_timeout = None
        if self.in_actor is not None and self.in_actor not in IN_ACTOR:
            raise OptionError(
                "in_actor", self.in_actor,
                f"null (each actor steps its envs itself) or {' or '.join(map(repr, IN_ACTOR))} "
                "(each actor hosts its envs in that vectorizer, one worker per CPU it reserves)",
                hint=did_you_mean(self.in_actor, IN_ACTOR),
            )  # fmt: skip
        if self.compiled_graph and self.in_actor is None:
            raise OptionError(
                "compiled_graph", self.compiled_graph,
                "false without vectorizer.in_actor (the graph steps node actors)",
                hint="Set vectorizer.in_actor=subproc, or vectorizer.compiled_graph=false",
            )  # fmt: skip
        self._check_placement()
        super().__post_init__()  # the fault options

    def check_config(self, top: Any) -> None:
        """Against the top level: ``batch_size`` is at most ``num_envs``, and with ``in_actor``
        a multiple of ``in_series`` as ``num_envs`` is (a node actor steps its envs only all
        together)."""
        size, per_node = self.batch_size, self.in_series
        if size is not None and size > top.num_envs:
            raise OptionError(
                "batch_size", size,
                f"an integer in [1, num_envs={top.num_envs}] or null (null: a synchronous VecEnv)",
                hint=f"Lower vectorizer.batch_size or raise num_envs (now {top.num_envs})",
            )  # fmt: skip
        if size and self.in_actor and per_node and (size % per_node or top.num_envs % per_node):
            raise OptionError(
                "batch_size",
                size,
                f"a multiple of vectorizer.in_series={per_node} with vectorizer.in_actor, as "
                f"num_envs={top.num_envs} must be (a node actor steps its envs only all together)",
                hint="Set vectorizer.in_series to a divisor of both",
            )

    def _check_placement(self) -> None:
        resources = dict(self.resources or {})
        for key, value in resources.items():
            if key in _OWN_KEYWORD:
                raise OptionError("resources", resources, f"custom resources only; {key} goes by "
                                  f"its own option", hint=f"Use vectorizer.{_OWN_KEYWORD[key]}="
                                  f"{value} instead")  # fmt: skip
            if _bad(value, lambda v: 0 <= v < math.inf):
                raise OptionError("resources", resources, "a map of resource name to an amount "
                                  ">= 0")  # fmt: skip
        strategy = self.scheduling_strategy
        if strategy is not None and strategy not in STRATEGIES:
            raise OptionError("scheduling_strategy", strategy, "null, " + " or ".join(STRATEGIES),
                              hint=did_you_mean(str(strategy).upper(), STRATEGIES))  # fmt: skip
        for key in ("label_selector", "runtime_env"):
            value = getattr(self, key)
            if not isinstance(value, Mapping):
                raise OptionError(key, value, "a map ({} for none)")
        env_vars = self.runtime_env.get("env_vars")
        if isinstance(env_vars, Mapping):  # (env_vars=1 on the command line means "1")
            text = {k: str(v).lower() if v is True or v is False else str(v)
                    for k, v in env_vars.items()}  # fmt: skip
            self.runtime_env["env_vars"] = {str(k): v for k, v in text.items()}
        for label, want in (self.label_selector or {}).items():
            if not isinstance(want, str) or not want:
                raise OptionError(
                    "label_selector", dict(self.label_selector or {}),
                    f"a map of label to a value or expression (a string); {label!r} has {want!r}",
                )  # fmt: skip


#: the number options: (key, what a value given meets, what is expected)
_NUMBERS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("num_cpus", lambda v: 0 < v < math.inf,
     "a number of CPUs per actor > 0 (e.g. 1 or 0.5), or null (Ray's default)"),
    ("start_timeout", lambda v: v > 0,
     "a number of seconds > 0 for an actor to start, or null (120 s, or timeout when larger)"),
    ("num_gpus", lambda v: 0 <= v < math.inf, "a number of GPUs per actor >= 0, or null"),
)  # fmt: skip


def _bad(value: Any, ok: Callable[[Any], bool]) -> bool:
    """Not a number (a bool is not) meeting ``ok``."""
    return isinstance(value, bool) or not isinstance(value, Real) or not ok(value)
