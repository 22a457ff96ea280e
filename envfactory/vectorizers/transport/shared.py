"""The shared region of a group's workers (observations, rewards, flags, actions, control
slots, info columns) in one ``memfd_create`` file: nothing can outlive the processes."""

from __future__ import annotations

import contextlib
import copy
import mmap
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import concatenate

from ...errors import ObservationError
from .board import SLOT_WORDS
from .infocols import INFO_KEYS, InfoColumns

__all__ = [
    "Layout", "ResultWriter", "SharedBuffers", "concatenate_checked", "layout_for", "obs_copier",
    "supports_shared_memory"
]  # fmt: skip

_BOXLIKE = (gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)


def _walk(tree: Any, leaf: Callable[[Any, str], Any], path: str = "") -> Any:
    """``leaf(x, path)`` of each leaf of a Dict/Tuple space, or of a nest of dicts and tuples
    (a layout's entries, a batch), in the same nesting."""
    if isinstance(tree, gym.spaces.Dict | gym.spaces.Tuple):
        tree = tree.spaces
    if isinstance(tree, dict):
        return {k: _walk(v, leaf, f"{path}[{k!r}]") for k, v in tree.items()}
    if isinstance(tree, tuple) and not (tree and isinstance(tree[0], int)):  # (not an entry)
        return tuple(_walk(v, leaf, f"{path}[{j}]") for j, v in enumerate(tree))
    return leaf(tree, path)


def supports_shared_memory(space: gym.Space) -> bool:
    """Box-like leaves inside any nesting of Dict/Tuple."""
    boxlike: list[bool] = []
    _walk(space, lambda s, _: boxlike.append(isinstance(s, _BOXLIKE)))
    return all(boxlike)


@dataclass(frozen=True)
class Layout:
    """Byte offsets of each buffer in the shared region (picklable, sent to workers)."""

    num_envs: int
    obs: Any  # nested (offset, dtype str, shape) mirroring the space, or None (no shm obs)
    rewards: int
    flags: int  # terminations then truncations, 2 * num_envs bools
    size: int
    actions: Any = None  # (offset, dtype str, shape) of the action batch, or None (pipe)
    control: int = 0  # offset of the workers' control slots (see .board)
    workers: int = 0
    infos: int = -1  # offset of the info columns (see .infocols), or -1: none


def _align(n: int, a: int = 64) -> int:
    return (n + a - 1) // a * a


def layout_for(
    space: gym.Space | None, num_envs: int, action_space: gym.Space | None = None, workers: int = 0,
) -> Layout:  # fmt: skip
    """Where each buffer lies (observations of ``space`` unless None; actions when
    ``action_space`` is Box-like, else by pipe; one control slot per worker)."""
    pos = 0

    def entry(s: gym.Space, _: str) -> tuple[int, str, tuple[int, ...]]:
        nonlocal pos
        dtype = np.dtype(s.dtype)
        shape = (num_envs, *(s.shape or ()))
        at, pos = pos, _align(pos + int(np.prod(shape)) * dtype.itemsize)
        return at, dtype.str, shape

    obs = _walk(space, entry) if space is not None else None
    rewards, pos = pos, _align(pos + 8 * num_envs)
    flags, pos = pos, _align(pos + 2 * num_envs)
    actions = _walk(action_space, entry) if isinstance(action_space, _BOXLIKE) else None
    control, pos = pos, _align(pos + 8 * SLOT_WORDS * workers)
    infos, pos = (pos, _align(pos + 8 * INFO_KEYS * num_envs)) if workers else (-1, pos)
    return Layout(num_envs, obs, rewards, flags, max(pos, 64), actions, control, workers, infos)


class SharedBuffers:
    """Numpy views over the shared region, in the parent and in each worker."""

    def __init__(self, layout: Layout, fd: int | None = None) -> None:
        self.layout = layout
        owner = fd is None
        if fd is None:  # (Linux only, as the eventfds: nothing outlives the processes)
            fd = os.memfd_create("envfactory-vecenv", os.MFD_CLOEXEC)
            os.ftruncate(fd, layout.size)
        self._mm: mmap.mmap | None = mmap.mmap(fd, layout.size)
        self.fd: int | None = fd if owner else None
        if not owner:
            os.close(fd)
        buf = self._mm

        def view(e: Any, _: str) -> np.ndarray:
            return np.ndarray(e[2], dtype=np.dtype(e[1]), buffer=buf, offset=e[0])

        n = layout.num_envs
        self.obs = _walk(layout.obs, view) if layout.obs is not None else None
        self.rewards = np.ndarray((n,), np.float64, buffer=buf, offset=layout.rewards)
        flags = np.ndarray((2, n), np.bool_, buffer=buf, offset=layout.flags)
        self.terminations, self.truncations = flags[0], flags[1]
        self.actions = _walk(layout.actions, view) if layout.actions is not None else None
        self.control = self.infos = None
        if layout.workers:
            shape = (layout.workers, SLOT_WORDS)
            self.control = np.ndarray(shape, np.int64, buffer=buf, offset=layout.control)
            words = np.ndarray((INFO_KEYS, n), np.int64, buffer=buf, offset=layout.infos)
            self.infos = InfoColumns(words)

    def close(self) -> None:
        self.obs = self.actions = self.control = self.infos = None
        self.rewards = self.terminations = self.truncations = None
        if self._mm is not None:
            with contextlib.suppress(BufferError):  # a view still held (copy=False): GC frees it
                self._mm.close()
            self._mm = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class ResultWriter:
    """An `EnvHost`'s ``collect``: the runner's results of envs ``start:`` into the region,
    and the `StepResult` (observations not in shared memory; None for those not in ``mask``)."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.runner: Any = None  # the EnvHost's runner, set once it exists
        self.buffers: SharedBuffers | None = None
        self.write: Callable[[int, Any], None] | None = None  # one env's obs into shm

    def attach(self, buffers: SharedBuffers, shared_obs: bool) -> None:
        self.buffers = buffers
        if shared_obs and buffers.obs is not None:
            self.write = _make_writer(buffers.obs)

    def __call__(self, calls: list, mask: Any) -> Any:
        runner, b, start = self.runner, self.buffers, self.start
        assert b is not None
        stop = start + len(runner.obs)
        b.rewards[start:stop] = runner.rewards
        b.terminations[start:stop] = runner.terminations
        b.truncations[start:stop] = runner.truncations
        if self.write is not None:
            for i, o in enumerate(runner.obs):
                if mask is None or mask[i]:
                    self.write(start + i, o)
            return calls, None
        return calls, [o if (mask is None or mask[i]) else None for i, o in enumerate(runner.obs)]


def _make_writer(target: Any, path: str = "") -> Callable[[int, Any], None]:
    """A checked writer of env ``i``'s observation into ``target`` (of a space: a check)."""
    if isinstance(target, gym.spaces.Dict | gym.spaces.Tuple):
        target = target.spaces
    if isinstance(target, dict):
        subs = {k: _make_writer(v, f"{path}[{k!r}]") for k, v in target.items()}
        keys = set(subs)

        def write_dict(i: int, value: Any) -> None:
            if not isinstance(value, Mapping) or value.keys() != keys:
                got = sorted(value) if isinstance(value, Mapping) else type(value).__name__
                raise ObservationError(
                    f"env {i} returned observation{path} = {got}, but the observation space "
                    f"is a Dict with keys {sorted(keys)}"
                )
            for k, w in subs.items():
                w(i, value[k])

        return write_dict
    if isinstance(target, tuple):
        parts = [_make_writer(v, f"{path}[{k}]") for k, v in enumerate(target)]

        def write_tuple(i: int, value: Any) -> None:
            if not isinstance(value, (tuple, list)) or len(value) != len(parts):
                seq = isinstance(value, (tuple, list))
                got = f"of length {len(value)}" if seq else f"= {type(value).__name__}"
                raise ObservationError(
                    f"env {i} returned observation{path} {got}, but the observation space is "
                    f"a Tuple of {len(parts)}"
                )
            for w, v in zip(parts, value):
                w(i, v)

        return write_tuple
    array = target if isinstance(target, np.ndarray) else None
    if array is not None:
        shape, dtype = array.shape[1:], array.dtype
    elif isinstance(target, _BOXLIKE):
        shape, dtype = tuple(target.shape or ()), np.dtype(target.dtype)
    else:  # (a space of another kind: nothing to check)
        return lambda i, value: None
    but = f"but the observation space expects shape {shape} and dtype {dtype}; return "
    but += "observations that fit env.observation_space (or wrap the env in an "
    but += "ObservationWrapper that reshapes or casts them)"

    def write(i: int, value: Any) -> None:
        # (three checks; anything else in full: nothing silently broadcast or cast)
        if not (type(value) is np.ndarray and value.shape == shape and value.dtype == dtype):
            got = f"env {i} returned observation{path}"
            if value is None:
                raise ObservationError(f"{got} = None, {but}")
            try:
                arr = np.asarray(value)
            except Exception as exc:
                why = f"of type {type(value).__name__}, which is not an array ({exc})"
                raise ObservationError(f"{got} {why}, {but}") from None
            if arr.shape != shape or not np.can_cast(arr.dtype, dtype, "same_kind"):
                why = f"of shape {arr.shape} and dtype {arr.dtype}"
                raise ObservationError(f"{got} {why}, {but}")
        if array is not None:
            array[i] = value

    return write


def concatenate_checked(space: gym.Space, items: Sequence[Any], out: Any) -> Any:
    """gymnasium's ``concatenate``; if it fails, the error names the env that does not fit."""
    try:
        return concatenate(space, items, out)
    except Exception as exc:
        check = _make_writer(space)  # (the shared-memory writer's check, without the write)
        for i, value in enumerate(items):
            check(i, value)
        raise ObservationError(
            f"the envs' observations cannot be batched for observation space {space}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def obs_copier(space: gym.Space) -> Callable[[Any], Any]:
    """A copier of a batch of ``space``'s observations (``ndarray.copy`` for Box-like leaves)."""
    if isinstance(space, _BOXLIKE):
        return np.ndarray.copy
    if isinstance(space, gym.spaces.Dict):  # (built once: a step's copy walks nothing)
        subs = {k: obs_copier(v) for k, v in space.spaces.items()}
        return lambda batch: {k: c(batch[k]) for k, c in subs.items()}
    if isinstance(space, gym.spaces.Tuple):
        parts = [obs_copier(v) for v in space.spaces]
        return lambda batch: tuple(c(b) for c, b in zip(parts, batch))
    return copy.deepcopy
