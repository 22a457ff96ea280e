"""``vectorizer.compiled_graph=true``: the node actors' step over one compiled Ray graph.

[`StepGraph`][envfactory_ray.graph.StepGraph] is one Ray Compiled Graph (``ray.dag``): an
``InputNode`` fanned out to each node actor's ``graph_step`` and a ``MultiOutputNode`` back,
compiled once. A synchronous step is one ``execute`` carrying every node's actions; each
[`ActorHandle`][envfactory_ray.actor.ActorHandle] reads its own node's answer from its
``CompiledDAGRef`` (so a timeout names the node that is late). Every other command (reset,
calls, a rebuilt actor's recovery) goes by the actor's channel, as without the graph.

What happens when the graph cannot serve a step:

- it cannot be compiled (the Ray at hand refuses it): one ``RuntimeWarning``, and every step goes
  by the actors' channels for the life of the vectorized env;
- it cannot be compiled because an actor is gone (its node lost before the step): that step goes
  by the channels, where the death is that actor's ``WorkerDiedError``, and a graph is compiled
  again once the actor is rebuilt (``restart``);
- it breaks (an actor dies, its node is lost, a step times out, a Ctrl-C cut a read): the handle
  whose actor died raises its ``WorkerDiedError`` as without the graph (``restart`` rebuilds it);
  every other handle reads its node's answer to that step by its channel (the actor keeps the
  answer of its last graph step, or steps now if the graph never gave it the actions), so the
  surviving nodes lose nothing; the graph is torn down and compiled again over the actors of the
  next step.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Sequence
from typing import Any

from envfactory.vectorizers.remote import HOLD

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
        self._index = {id(h): k for k, h in enumerate(self.handles)}
        with InputNode() as inp:
            dag = MultiOutputNode([h.actor.graph_step.bind(inp[k]) for k, h in enumerate(handles)])
        self.compiled: Any = dag.experimental_compile()
        self._actions: list[Any] = [None] * len(self.handles)
        self._posted: set[int] = set()
        self._refs: list[Any] = []
        #: set once a read failed: the next step tears it down and compiles a new one
        self.broken = False

    def serves(self, handles: Sequence[Any]) -> bool:
        """True if it still steps exactly these actors."""
        return not self.broken and [h.actor_id for h in handles] == self.actor_ids

    def post(self, handle: Any, actions: Any) -> None:
        """``handle``'s actions for the next step; the last of them executes the graph."""
        k = self._index[id(handle)]
        self._actions[k] = actions
        self._posted.add(k)
        if len(self._posted) == len(self.handles):
            self._posted.clear()
            self._refs = list(self.compiled.execute(*self._actions))
            self._actions = [None] * len(self.handles)

    def answer(self, handle: Any, remaining: float | None) -> Any:
        """``handle``'s node's answer to the step executed last, within ``remaining`` seconds
        (None: no limit).

        Raises:
            ray.exceptions.RayActorError: ``handle``'s own actor died.
            GraphBroke: the graph cannot give it (read it by the channel). A graph reads every
                node's answer at once, so a late answer is this too: the channel then says
                which node is late.
        """
        import ray

        k = self._index[id(handle)]
        try:
            ref = self._refs[k]
            limit = -1 if remaining is None else remaining
            message = HOLD.waiting(lambda t: ray.get(ref, timeout=t), limit)
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayChannelTimeoutError):
            self.broken = True
            raise GraphBroke("not every node answered in time") from None
        except ray.exceptions.RayActorError as exc:
            self.broken = True
            if getattr(exc, "actor_id", None) == handle.actor_id:
                raise
            raise GraphBroke(f"another actor's death ({_first_line(exc)})") from exc
        except Exception as exc:  # a channel closed by a teardown, a ref read once already, ...
            self.broken = True
            raise GraphBroke(f"{type(exc).__name__}: {_first_line(exc)}") from exc
        return pickle.loads(message)

    def teardown(self) -> None:
        """End the graph (bounded by Ray's own teardown timeout); Ray's log of the actors that
        are already gone is kept quiet: their deaths were reported as errors."""
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__
