"""Ray's word on a lost actor, as the ``ray`` vectorizer's errors carry it: one short line
([`ray_cause`][envfactory_ray.causes.ray_cause]), and the node it says was lost
([`lost_node_of`][envfactory_ray.causes.lost_node_of])."""

from __future__ import annotations

import re

__all__ = [
    "CAUSE_CHARS", "KILLED", "NO_CAUSE", "START_CAUSES", "first_line", "lost_node_of", "ray_cause",
]  # fmt: skip

# the lines of Ray's actor-death message that only repeat what the error names already
_CONTEXT = re.compile(r"^\s*(class_name|actor_id|pid|name|namespace|ip): ")
_NODE_ID = re.compile(r"Node Id: ([0-9a-f]{56})")
IP = re.compile(r"^\s*ip: (\S+)", re.MULTILINE)
#: Ray's message when it knows no more than that the actor is gone
NO_CAUSE = "The actor died unexpectedly before finishing this task."
#: what an actor lost before it started, neither by its node nor by its creation, usually means:
#: a driver with token auth on a cluster without gets "all references to the actor were
#: removed", and Ray's driver log has "Missing authorization header"
START_CAUSES = (
    "the usual causes: this process's Ray token auth differs from the cluster's (RAY_AUTH_MODE, "
    "RAY_AUTH_TOKEN), or the node lacks a package the envs need; Ray's driver log may say more"
)
#: Ray's detail when the actor's process ended without a word to Ray (its connection closed):
#: the same for a SIGKILL (a user's, the kernel OOM killer's), a crash (SIGSEGV) or ``os._exit``
#: (Ray 2.60 does not learn the signal)
_ABRUPT = re.compile(r"Worker unexpectedly exits with a connection error code \d+\.[^.]*\.?")
#: what such an end is said to be, in place of Ray's paragraph of possible causes
KILLED = "killed (SIGKILL: by a user or the kernel's OOM killer) or crashed"
#: where Ray's own advice starts in an actor's death cause (its guesses at the cause, how to
#: read its logs, memory settings): left out, the error says what the actor was
_ADVICE = re.compile(
    r"\s*(Some common causes include|If the process was killed by|To see more information|"
    r"Top \d+ memory users|Refer to the documentation)"
)
#: the most characters of Ray's cause an error carries (cut at a word, with an ellipsis)
CAUSE_CHARS = 300


def ray_cause(exc: BaseException) -> str:
    """Ray's reason for an actor error, on one short line: its message without the lines that
    repeat the actor's name, id, pid and address, and without Ray's own advice, cut to
    `CAUSE_CHARS`. For a process that ended without a word to Ray (a SIGKILL, a crash), `KILLED`
    with Ray's one-sentence detail; for an exception in the actor's creation (an env constructor
    that could not be unpickled: a package missing on the node), that exception's last line."""
    text = str(getattr(exc, "error_msg", "") or exc).strip()
    if getattr(exc, "_actor_init_failed", False) or "error raised in its creation task" in text:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        return _cut(f"an error in its creation task: {lines[-1]}" if lines else text)
    abrupt = _ABRUPT.search(text)
    if abrupt:
        return f"{KILLED}; Ray says: {abrupt.group(0).strip()}"
    kept = [ln.strip() for ln in text.splitlines() if ln.strip() and not _CONTEXT.match(ln)]
    if len(kept) > 1 and kept[0] == NO_CAUSE:
        kept = kept[1:]
    return _cut("; ".join(kept)) or type(exc).__name__


def _cut(text: str) -> str:
    advice = _ADVICE.search(text)
    if advice and advice.start() > 0:
        text = text[: advice.start()].rstrip(" ;")
    text = " ".join(text.split())
    if len(text) <= CAUSE_CHARS:
        return text
    return text[: CAUSE_CHARS - 3].rsplit(" ", 1)[0].rstrip(" ;,") + "..."


def lost_node_of(exc: BaseException, node_id: str) -> str:
    """The node that Ray's actor error ``exc`` says is lost (its id), or "" if it says
    nothing of the kind: the node it names as dead, or ``node_id`` (the actor's) when Ray
    could not reach the actor at all (``ActorUnavailableError``: the node's raylet or the
    network went; Ray may go on listing such a node as alive for 10-15 s)."""
    import ray

    text = str(exc)
    named = _NODE_ID.search(text)
    if named and "node has died" in text:
        return named.group(1)
    if isinstance(exc, ray.exceptions.ActorUnavailableError):
        return node_id
    return ""


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (its type's name if it has none)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0].strip()
