"""``vectorizer.compiled_graph=true``: the node actors' step over one compiled Ray graph
(what happens when it cannot be compiled or breaks: the Ray guide, docs/guides/sweeps-and-ray.md).
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Sequence
from typing import Any

from envfactory.vectorizers.remote import HOLD

from .causes import first_line

__all__ = ["GraphBroke", "StepGraph"]

#: the plugin's own channel command: a node actor's answer to graph step ``seq`` (see `NodeActor`)
KEPT = "kept"


class GraphBroke(Exception):
    """The graph could not give a handle its node's answer to a step, for a reason other than
    that node's own death (which is the handle's ``WorkerDiedError``)."""


class StepGraph:
    """One compiled graph over ``handles``' node actors (in env order): ``post`` each handle's
    actions (the graph executes once every handle posted), then ``answer`` each handle's."""

    def __init__(self, handles: Sequence[Any]) -> None:
        from ray.dag import InputNode, MultiOutputNode

        self.handles = list(handles)
        self.actor_ids = [h.actor_id for h in self.handles]
        with InputNode() as inp:
            dag = MultiOutputNode([h.actor.graph_step.bind(inp[k]) for k, h in enumerate(handles)])
        self.compiled: Any = dag.experimental_compile()
        self._actions: dict[int, Any] = {}
        self._refs: list[Any] = []
        #: set once a read failed: the next step tears it down and compiles a new one
        self.broken = False

    def post(self, handle: Any, actions: Any) -> None:
        """``handle``'s actions for the next step; the last of them executes the graph."""
        self._actions[handle.index] = actions  # (handles in env order: ``index`` is its place)
        if len(self._actions) == len(self.handles):
            actions, self._actions = self._actions, {}
            self._refs = list(self.compiled.execute(*(actions[k] for k in range(len(actions)))))

    def answer(self, handle: Any, remaining: float | None) -> Any:
        """``handle``'s node's answer to the last step within ``remaining`` seconds (None: no
        limit). Raises ``RayActorError`` if ``handle``'s own actor died, `GraphBroke` if the
        graph cannot give it (a late node too: the channel then says which)."""
        import ray

        try:
            ref = self._refs[handle.index]
            limit = -1 if remaining is None else remaining
            message = HOLD.waiting(lambda t: ray.get(ref, timeout=t), limit)
        except Exception as exc:  # a late node, a death, a channel a teardown closed, ...
            self.broken = True
            errors = ray.exceptions
            if isinstance(exc, errors.GetTimeoutError | errors.RayChannelTimeoutError):
                raise GraphBroke("not every node answered in time") from None
            mine = getattr(exc, "actor_id", None) == handle.actor_id
            if isinstance(exc, errors.RayActorError) and mine:
                raise  # (its own death: the handle's WorkerDiedError)
            raise GraphBroke(f"{type(exc).__name__}: {first_line(exc)}") from exc
        return pickle.loads(message)

    def teardown(self) -> None:
        """End the graph (bounded by Ray's teardown timeout), Ray's log of the actors already
        gone kept quiet (their deaths were reported as errors)."""
        compiled, self.compiled = self.compiled, None
        if compiled is None:
            return
        self.broken = True
        log = logging.getLogger("ray.dag.compiled_dag_node")
        level, log.level = log.level, logging.CRITICAL + 1
        try:
            compiled.teardown()
        except Exception:
            pass
        finally:
            log.setLevel(level)
