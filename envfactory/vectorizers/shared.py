"""Shared-memory observation buffers for worker processes.

One anonymous memory file (``memfd_create``: no ``/dev/shm`` entry ever exists, so nothing
can outlive the processes, even after SIGKILL) holds the batched observations of every
Box-like leaf of the observation space, plus the rewards and the termination/truncation
flags. Its file descriptor is handed to each worker over its socket pipe (SCM_RIGHTS), after
the workers have built their envs and reported their spaces: the parent never has to build
an env just to learn the spaces.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["Layout", "SharedBuffers", "layout_for", "supports_shared_memory"]

_BOXLIKE = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def supports_shared_memory(space: gym.Space) -> bool:
    """Box-like leaves inside any nesting of Dict/Tuple."""
    if isinstance(space, _BOXLIKE):
        return True
    if isinstance(space, gym.spaces.Dict):
        return all(supports_shared_memory(s) for s in space.spaces.values())
    if isinstance(space, gym.spaces.Tuple):
        return all(supports_shared_memory(s) for s in space.spaces)
    return False


@dataclass(frozen=True)
class Layout:
    """Byte offsets of each buffer in the shared region (picklable, sent to workers)."""

    num_envs: int
    obs: Any  # nested (offset, dtype str, shape) mirroring the space, or None (no shm obs)
    rewards: int
    flags: int  # terminations then truncations, 2 * num_envs bools
    size: int


def _align(n: int, a: int = 64) -> int:
    return (n + a - 1) // a * a


def layout_for(space: gym.Space | None, num_envs: int) -> Layout:
    pos = 0

    def leaves(s: gym.Space) -> Any:
        nonlocal pos
        if isinstance(s, gym.spaces.Dict):
            return {k: leaves(v) for k, v in s.spaces.items()}
        if isinstance(s, gym.spaces.Tuple):
            return tuple(leaves(v) for v in s.spaces)
        dtype = np.dtype(s.dtype)
        shape = (num_envs, *(s.shape or ()))
        entry = (pos, dtype.str, shape)
        pos = _align(pos + int(np.prod(shape)) * dtype.itemsize)
        return entry

    obs = leaves(space) if space is not None else None
    rewards = pos
    pos = _align(pos + 8 * num_envs)
    flags = pos
    pos = _align(pos + 2 * num_envs)
    return Layout(num_envs, obs, rewards, flags, max(pos, 64))


class SharedBuffers:
    """Numpy views over the shared region, in the parent and in each worker."""

    def __init__(self, layout: Layout, fd: int | None = None) -> None:
        self.layout = layout
        owner = fd is None
        if fd is None:
            fd = _anonymous_fd(layout.size)
        self._mm: mmap.mmap | None = mmap.mmap(fd, layout.size)
        self.fd: int | None = fd if owner else None
        if not owner:
            os.close(fd)
        buf = self._mm

        def view(entry: Any) -> Any:
            if isinstance(entry, dict):
                return {k: view(v) for k, v in entry.items()}
            if isinstance(entry, tuple) and entry and isinstance(entry[0], tuple | dict):
                return tuple(view(v) for v in entry)
            off, dtype, shape = entry
            return np.ndarray(shape, dtype=np.dtype(dtype), buffer=buf, offset=off)

        n = layout.num_envs
        self.obs = view(layout.obs) if layout.obs is not None else None
        self.rewards = np.ndarray((n,), np.float64, buffer=buf, offset=layout.rewards)
        flags = np.ndarray((2, n), np.bool_, buffer=buf, offset=layout.flags)
        self.terminations, self.truncations = flags[0], flags[1]

    def writer(self) -> Callable[[int, Any], None]:
        """``write(i, obs)`` puts env i's observation into the batch buffers."""
        return _make_writer(self.obs)

    def close(self) -> None:
        self.obs = None
        self.rewards = self.terminations = self.truncations = None
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:  # a caller still holds a view (copy=False): the GC frees it
                pass
            self._mm = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _make_writer(target: Any) -> Callable[[int, Any], None]:
    if isinstance(target, np.ndarray):

        def write(i: int, value: Any) -> None:
            target[i] = value

        return write
    if isinstance(target, dict):
        subs = {k: _make_writer(v) for k, v in target.items()}

        def write_dict(i: int, value: Any) -> None:
            for k, w in subs.items():
                w(i, value[k])

        return write_dict
    parts = [_make_writer(v) for v in target]

    def write_tuple(i: int, value: Any) -> None:
        for w, v in zip(parts, value):
            w(i, v)

    return write_tuple


def copy_obs(obs: Any) -> Any:
    if isinstance(obs, np.ndarray):
        return obs.copy()
    if isinstance(obs, dict):
        return {k: copy_obs(v) for k, v in obs.items()}
    return tuple(copy_obs(v) for v in obs)


def _anonymous_fd(size: int) -> int:
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("envfactory-vecenv", os.MFD_CLOEXEC)
    else:  # pragma: no cover - non-Linux: an unlinked temp file
        f = tempfile.TemporaryFile(prefix="envfactory-")  # noqa: SIM115 - only its fd is kept
        fd = os.dup(f.fileno())
        f.close()
    os.ftruncate(fd, size)
    return fd
