"""The per-env calls of envfactory's VecEnv contract: ``call`` (a name or a function run
next to each env), the Stable-Baselines3 spellings with ``indices=`` (``env_method``,
``get_attr``, ``set_attr``), ``np_random_seed`` / ``np_random`` and ``render``. Every
argument is checked here; a backend fills in ``_do_call`` and ``_do_set_attr``.
[`VecEnvBase`][envfactory.VecEnvBase] mixes this in."""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["EnvCalls", "tile_images"]


def tile_images(frames: Sequence[np.ndarray], ncols: int | None = None) -> np.ndarray:
    """Tile ``N`` frames of shape (H, W[, C]) into one image, row-major, padding with black.

    Example:
        >>> import numpy as np
        >>> tile_images([np.zeros((2, 3, 3), np.uint8)] * 3).shape
        (4, 6, 3)
    """
    if len(frames) == 0:
        raise ValueError("tile_images needs at least one frame")
    arrs = [np.asarray(f) for f in frames]
    n = len(arrs)
    ncols = ncols or int(np.ceil(np.sqrt(n)))
    nrows = int(np.ceil(n / ncols))
    h, w = arrs[0].shape[:2]
    rest = arrs[0].shape[2:]
    out = np.zeros((nrows * h, ncols * w, *rest), dtype=arrs[0].dtype)
    for k, a in enumerate(arrs):
        r, c = divmod(k, ncols)
        out[r * h : (r + 1) * h, c * w : (c + 1) * w] = a
    return out


class EnvCalls(metaclass=ABCMeta):
    """``call`` / ``env_method`` / ``get_attr`` / ``set_attr`` / ``render`` over
    ``_do_call`` / ``_do_set_attr`` (see [`VecEnvBase`][envfactory.VecEnvBase])."""

    num_envs: int
    closed: bool
    #: raise why ``what`` (a start of a call) cannot run now: VecEnvBase's ``_check_ready``
    _check_ready: Callable[[str, str], None]

    def _indices(self, indices: int | Sequence[int] | None) -> list[int]:
        if indices is None:
            return list(range(self.num_envs))
        if isinstance(indices, (int, np.integer)):
            indices = [int(indices)]
        out = [int(i) for i in indices]
        bad = [i for i in out if not -self.num_envs <= i < self.num_envs]
        if bad:
            raise IndexError(f"env indices {bad} out of range for num_envs={self.num_envs}")
        return [i % self.num_envs for i in out]

    def call(self, name: str | Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every env with ``args``/``kwargs`` (every keyword goes
        to the method, as in gymnasium), or get attribute ``name`` if it is not callable.
        A function instead of a name runs as ``name(env, *args, **kwargs)`` where the env
        lives (in its worker process), so it can inspect the env without pickling it:
        ``envs.call(stable_baselines3.common.env_util.is_wrapped, Monitor)``.

        Returns:
            One result per env, as a tuple.

        Example:
            >>> import envfactory
            >>> envs = envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=2"])
            >>> [spec.id for spec in envs.call("get_wrapper_attr", "spec")]
            ['CartPole-v1', 'CartPole-v1']
            >>> envs.close()
        """
        return self._call("call", name, args, kwargs, None)

    def env_method(
        self, name: str | Callable[..., Any], *args: Any, indices: Any = None, **kwargs: Any
    ) -> list[Any]:
        """Stable-Baselines3 spelling of `call`: only the envs of ``indices`` (an
        int, a list, or None for all), results as a list.

        Example:
            >>> import envfactory
            >>> envs = envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=3"])
            >>> _ = envs.reset(seed=5)
            >>> envs.env_method("get_wrapper_attr", "np_random_seed", indices=[0, 2])
            [5, 7]
            >>> envs.close()
        """
        return list(self._call("env_method", name, args, kwargs, indices))

    def _call(self, what: str, name: Any, args: Any, kwargs: Any, indices: Any) -> tuple:
        self._check_ready(what, what)
        return tuple(self._do_call(name, args, kwargs, self._indices(indices)))

    def get_attr(self, name: str, indices: Any = None) -> tuple[Any, ...]:
        """Attribute ``name`` of every env (or of ``indices``), via ``get_wrapper_attr``.

        Example:
            >>> import envfactory
            >>> envs = envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=2"])
            >>> envs.get_attr("gravity")
            (9.8, 9.8)
            >>> envs.get_attr("gravity", indices=1)
            (9.8,)
            >>> envs.close()
        """
        self._check_ready("get_attr", "get_attr")
        if not isinstance(name, str):
            raise TypeError(
                f"get_attr(name) takes an attribute name (str), got {type(name).__name__}; "
                "to run a function on each env use envs.call(fn)"
            )
        return tuple(self._do_call(name, None, None, self._indices(indices)))

    def set_attr(self, name: str, values: Any, indices: Any = None) -> None:
        """Set attribute ``name`` (via ``set_wrapper_attr``) of every env or of
        ``indices``: one value for all, or a list or tuple with one value per env.

        Raises:
            ValueError: a list of values of the wrong length.

        Example:
            >>> import envfactory
            >>> envs = envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=2"])
            >>> envs.set_attr("gravity", [9.8, 1.6])
            >>> envs.get_attr("gravity")
            (9.8, 1.6)
            >>> envs.close()
        """
        self._check_ready("set_attr", "set_attr")
        idx = self._indices(indices)
        if not isinstance(values, (list, tuple)):
            values = [values] * len(idx)
        if len(values) != len(idx):
            raise ValueError(
                f"set_attr({name!r}) got {len(values)} values for {len(idx)} envs; pass one "
                "value, or a list with one value per env"
            )
        self._do_set_attr(name, list(values), idx)

    def render(self) -> tuple[Any, ...]:
        """One frame per env (as gymnasium's vector envs), from each env's ``render()``;
        [`tile_images`][envfactory.tile_images] tiles them into one image. Needs
        ``env.render_mode``.

        Example:
            >>> import envfactory
            >>> envs = envfactory.make_vec(overrides=["vectorizer=dummy", "num_envs=2"])
            >>> _ = envs.reset(seed=0)
            >>> envs.render()  # no render_mode: one None per env, as gymnasium
            (None, None)
            >>> envs.close()
        """
        if self.closed:
            self._check_ready("render", "render")
        return self.call("render")

    @abstractmethod
    def _do_call(self, name: str, args: Any, kwargs: Any, indices: list[int]) -> list[Any]:
        """Each env of ``indices``: ``name(*args, **kwargs)`` (``args`` None: the attribute)."""

    @abstractmethod
    def _do_set_attr(self, name: str, values: list[Any], indices: list[int]) -> None:
        """Set attribute ``name`` of each env of ``indices`` to its value."""
