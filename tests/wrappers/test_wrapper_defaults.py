"""Wrappers built by name keep the wrapped library's defaults for every option not set."""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import envfactory
from envfactory.wrappers import LIBRARY_DEFAULT, gymnasium_wrappers

PER_ENV = [r for r in gymnasium_wrappers() if not r.vector]
VECTOR = [r for r in gymnasium_wrappers() if r.vector]


def _defaults(rec: Any) -> dict[str, Any] | None:
    """The options a config with no user settings hands to ``wrap`` (None: a field is required)."""
    try:
        schema = rec.wrap.envfactory_config()  # (made on first use)
    except envfactory.ConfigError:  # its optional dependency (torch, jax) is missing
        return None
    try:
        return dataclasses.asdict(schema())
    except TypeError:  # a required option, or None: not buildable from a config
        return None
    except envfactory.OptionError:  # defaults gymnasium refuses (clip_reward: no bound)
        return None


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False  # a tuple that became a list counts
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool(np.all(a == b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if callable(a) and hasattr(a, "__code__"):  # lambdas made per instance: same code
        return a.__code__ is b.__code__
    if isinstance(a, (int, float, str, bool, type(None))) or callable(a):
        return a == b or (isinstance(a, float) and np.isnan(a) and np.isnan(b))
    return True  # spaces, envs, generators: not options


def _compare(direct: Any, built: Any, name: str) -> None:
    for k, v in vars(direct).items():
        if k in ("env", "_env", "_cached_spec") or k.startswith("_np_random"):
            continue
        assert _same(v, vars(built)[k]), (
            f"{name}: attribute {k} is {vars(built)[k]!r} when built by name with no options, "
            f"but gymnasium's default gives {v!r}"
        )


def _env(render: bool = False) -> gym.Env:
    return gym.make("CartPole-v1", render_mode="rgb_array" if render else None)


@pytest.mark.parametrize("rec", PER_ENV, ids=lambda r: r.name)
def test_per_env_wrapper_defaults_are_gymnasiums(rec: Any, tmp_path: Any, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    options = _defaults(rec)
    if options is None:
        pytest.skip(f"{rec.name} has a required option")
    cls = rec.wrap.load()
    try:
        direct = cls(_env(render=True))
    except Exception as exc:  # needs another kind of env (images, Box actions, ...)
        pytest.skip(f"gymnasium's {cls.__name__} cannot wrap CartPole: {exc}")
    built = rec.wrap(_env(render=True), **options)
    _compare(direct, built, rec.name)


def test_record_video_keeps_gymnasiums_gc_trigger(tmp_path: Any) -> None:
    pytest.importorskip("moviepy")
    rec = envfactory.get_registry().wrapper("record_video")
    options = _defaults(rec)
    assert options is not None and options["gc_trigger"] == LIBRARY_DEFAULT
    direct = gym.wrappers.RecordVideo(_env(True), video_folder=str(tmp_path / "a"))
    built = rec.wrap(_env(True), **{**options, "video_folder": str(tmp_path / "b")})
    assert built.gc_trigger is direct.gc_trigger is not None
    # an explicit null still reaches gymnasium
    options = {**options, "video_folder": str(tmp_path / "c"), "gc_trigger": None}
    off = rec.wrap(_env(True), **options)
    assert off.gc_trigger is None


def test_vector_wrapper_tuple_defaults_stay_tuples(tmp_path: Any) -> None:
    checked = 0
    for rec in VECTOR:
        options = _defaults(rec)
        if options is None:
            continue
        cls = rec.wrap.load()
        make = lambda: gym.make_vec("CartPole-v1", 2, render_mode="rgb_array")  # noqa: E731
        try:
            direct = cls(make())
        except Exception:
            continue
        built = rec.wrap(make(), **options)
        _compare(direct, built, rec.name)
        checked += 1
    assert checked >= 5


def _keep(episode: int) -> bool:
    return True


class Marked(gym.Wrapper):
    """A wrapper with the two kinds of default a config cannot hold as they are."""

    def __init__(self, env: gym.Env, trigger: Any = _keep, size: tuple = (3, 4)) -> None:
        super().__init__(env)
        self.trigger, self.size = trigger, size


def test_callable_and_tuple_defaults_reach_the_wrapper_unchanged(monkeypatch: Any) -> None:
    import sys
    import types

    from envfactory.wrappers import _records

    module = types.ModuleType("marked_wrappers")  # (records name a module: importable)
    module.__all__, module.Marked = ["Marked"], Marked  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "marked_wrappers", module)
    (rec,) = _records(module, gym.Wrapper, vector=False)
    options = _defaults(rec)
    assert options == {"trigger": LIBRARY_DEFAULT, "size": [3, 4]}  # what YAML can hold
    built = rec.wrap(_env(), **options)
    assert built.trigger is _keep and built.size == (3, 4) and type(built.size) is tuple
    assert rec.wrap(_env(), **{**options, "trigger": None}).trigger is None  # explicit null
