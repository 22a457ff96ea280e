"""The node actor's channel's messages (`envfactory_ray.wire`): a step's arrays cross raw after
a small header (no Ray needed)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from envfactory_ray.wire import Wire


def batch(n: int = 4) -> tuple:
    infos = {"episode": {"r": np.arange(n, dtype=np.float64), "_r": np.ones(n, np.bool_)}}
    obs = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    flags = np.zeros(n, np.bool_)
    return "ok", (obs, np.ones(n), flags, flags, infos)


def same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, tuple | list):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))  # type: ignore[arg-type]
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def test_a_batch_crosses_raw_once_its_layout_is_known_and_arrives_equal_and_writable() -> None:
    sender, reader = Wire(), Wire()
    first, second = sender.dumps(batch()), sender.dumps(batch())
    assert first[:1] == b"N" and second[:1] == b"K"  # the layout goes once
    assert len(second) < len(pickle.dumps(batch(), protocol=5)) / 2
    for message in (first, second):
        got = reader.loads(message)
        assert same(got, batch())
        got[1][0][0, 0] = 7.0  # (the caller may write what it was given)
    other = ("ok", (np.zeros((2, 5), np.uint8), batch()[1][1]))  # a new layout: numbered next
    message = sender.dumps(other)
    assert message[:1] == b"N" and same(reader.loads(message), other)
    assert same(reader.loads(sender.dumps(batch())), batch())


def test_what_does_not_cross_raw_is_pickled_by_the_fallback() -> None:
    pickled: list = []
    sender, reader = Wire(lambda obj: pickled.append(obj) or pickle.dumps(obj)), Wire()
    for obj in (["a", 1], {"o": np.array([None, 1], dtype=object)}, {1: np.zeros(2)}):
        assert same(reader.loads(sender.dumps(obj)), obj)
    assert len(pickled) == 3
    view = np.arange(6.0)[::2]  # (not contiguous: crosses as a copy)
    assert same(reader.loads(sender.dumps(("step", view))), ("step", view))


def test_a_channel_waits_on_one_poll_registered_once_not_a_selector_a_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`actor.Channel`'s wait polls the ``select.poll`` it registered when it opened:
    ``Connection.poll`` built a selector at every wait (~20 us); still no answer, an answer, and
    a closed peer (EOF at the read) as before."""
    import multiprocessing.connection as mpc
    import socket

    from envfactory_ray.actor import Channel

    def no_selector() -> None:
        raise AssertionError("a selector built for a wait")

    monkeypatch.setattr(mpc, "_WaitSelector", no_selector)
    a, b = socket.socketpair()
    ours, theirs = Channel(a.detach()), mpc.Connection(b.detach())
    assert not ours.poll(0) and not ours.poll(0.01)
    theirs.send_bytes(b"answer")
    assert ours.poll(None) and ours.poll(1.0) and ours.recv_bytes() == b"answer"
    theirs.close()
    assert ours.poll(1.0)
    with pytest.raises(EOFError):
        ours.recv_bytes()
    ours.close()
