"""How a command reaches a node actor other than by a Ray call: by its direct channel or the
compiled graph."""

from __future__ import annotations

from typing import Any

__all__ = ["CHANNEL_TIMEOUT", "KEPT_GRACE", "ByChannel", "ByGraph", "connect"]


class ByChannel:
    """A handle's ``ref`` of a command sent by the channel."""

    __slots__ = ()


class ByGraph:
    """A handle's ``ref`` of a step posted to the compiled graph: its ``seq`` and actions."""

    __slots__ = ("actions", "seq")

    def __init__(self, seq: int, actions: Any) -> None:
        self.seq, self.actions = seq, actions


#: seconds to open a node actor's channel, or to hear from Ray why it closed
CHANNEL_TIMEOUT = 10.0
#: seconds past a step's deadline that a node actor has to give its kept answer by its channel
#: once the compiled graph broke (the graph reads every node at once and cannot say which is late)
KEPT_GRACE = 0.05


def connect(address: Any, key: bytes) -> Any:
    """What ``multiprocessing.connection.Client(address, authkey=key)`` makes, with the TCP
    connect bounded by `CHANNEL_TIMEOUT` (a firewalled port would otherwise take the OS's
    minutes): a ``Connection`` that proved ``key`` both ways."""
    import socket
    from multiprocessing.connection import Connection, answer_challenge, deliver_challenge

    sock = socket.create_connection(tuple(address), timeout=CHANNEL_TIMEOUT)
    sock.settimeout(None)  # (a Connection reads a blocking descriptor)
    conn = Connection(sock.detach())
    try:
        answer_challenge(conn, key)
        deliver_challenge(conn, key)
    except BaseException:
        conn.close()
        raise
    return conn
