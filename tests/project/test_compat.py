"""Every private API of a dependency that envfactory uses (all in envfactory/_compat.py)
still exists and behaves as assumed. A failure here after an upgrade names the thing that
moved: fix envfactory/_compat.py, nothing else."""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
import multiprocessing.forkserver as forkserver
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
from hydra.core.config_store import ConfigStore
from hydra.core.object_type import ObjectType
from hydra.types import RunMode

from envfactory import _compat


def test_hydra_config_loader_composes(tmp_path: Path) -> None:
    (tmp_path / "cfg.yaml").write_text("a: 1\n")
    search_path, make_loader = _compat.hydra_config_loader(str(tmp_path))
    loader = make_loader(search_path)
    cfg = loader.load_configuration("cfg", ["a=2"], RunMode.RUN, from_shell=False)
    assert cfg.a == 2


def test_register_hydra_plugin_makes_the_sweeper_discoverable() -> None:
    """The ``envfactory`` command's sweeper reaches Hydra through ``Plugins.register`` /
    ``discover`` (public), also when Hydra scanned its plugins before, and twice is once."""
    from hydra.core.plugins import Plugins
    from hydra.plugins.sweeper import Sweeper

    from envfactory.cli.sweeper import register_sweeper

    Plugins.instance().discover(Sweeper)  # the scan happens first
    register_sweeper()
    register_sweeper()
    found = [c for c in Plugins.instance().discover(Sweeper) if c.__name__ == "EnvfactorySweeper"]
    assert len(found) == 1


def test_configstore_remove() -> None:
    cs = ConfigStore.instance()
    cs.store(group="envfactory_compat_test", name="x", node={"a": 1})
    assert cs.get_type("envfactory_compat_test/x.yaml") is ObjectType.CONFIG
    _compat.configstore_remove(cs, "envfactory_compat_test", "x")
    assert cs.get_type("envfactory_compat_test/x.yaml") is ObjectType.NOT_FOUND
    assert isinstance(cs.repo, dict)
    # a group left empty goes too; one that still holds something stays
    assert cs.get_type("envfactory_compat_test") is ObjectType.NOT_FOUND
    cs.store(group="envfactory_compat_test/a", name="x", node={"a": 1})
    cs.store(group="envfactory_compat_test", name="y", node={"a": 1})
    _compat.configstore_remove(cs, "envfactory_compat_test/a", "x")
    assert cs.get_type("envfactory_compat_test/a") is ObjectType.NOT_FOUND
    assert cs.get_type("envfactory_compat_test") is ObjectType.GROUP
    _compat.configstore_remove(cs, "envfactory_compat_test", "y")
    assert cs.get_type("envfactory_compat_test") is ObjectType.NOT_FOUND


def test_non_daemonic_flag() -> None:
    current = mp.current_process()
    assert isinstance(current._config, dict)  # type: ignore[attr-defined]
    with _compat.non_daemonic():
        assert not current.daemon


def test_forkserver_fields() -> None:
    fs = forkserver._forkserver  # type: ignore[attr-defined]
    for field in ("_forkserver_pid", "_forkserver_address", "_forkserver_alive_fd"):
        assert hasattr(fs, field), field
    assert isinstance(fs._preload_modules, list)
    before = list(fs._preload_modules)
    try:
        _compat.forkserver_preload(mp.get_context("forkserver"), ["json"])
        assert fs._preload_modules == [*before, "json"] or "json" in before
    finally:
        mp.get_context("forkserver").set_forkserver_preload(before)


def test_helper_pids_are_the_running_fork_server_and_resource_tracker() -> None:
    from multiprocessing import resource_tracker

    forkserver.ensure_running()
    resource_tracker.ensure_running()
    pids = _compat.helper_pids()
    assert forkserver._forkserver._forkserver_pid in pids  # type: ignore[attr-defined]
    assert resource_tracker._resource_tracker._pid in pids  # type: ignore[attr-defined]
    assert all(os.path.exists(f"/proc/{pid}") for pid in pids)


def _alive_fd_in_a_forkserver_child(queue: Any) -> None:
    fs = forkserver._forkserver  # type: ignore[attr-defined]
    pid, fd = fs._forkserver_pid, fs._forkserver_alive_fd
    open_before = isinstance(fd, int) and _is_open(fd)
    _compat.release_forkserver_alive_fd()
    open_after = fd is not None and _is_open(fd)
    fields_after = (fs._forkserver_alive_fd, fs._forkserver_address)
    queue.put((pid, isinstance(fd, int), open_before, open_after, *fields_after))


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_release_forkserver_alive_fd_in_a_forkserver_child() -> None:
    """A child of the forkserver holds the write end of its "alive" pipe in
    ``_forkserver._forkserver_alive_fd`` (and no ``_forkserver_pid``): the worker closes
    and forgets it, so the forkserver dies with the main process."""
    ctx = mp.get_context("forkserver")
    queue = ctx.SimpleQueue()
    proc = ctx.Process(target=_alive_fd_in_a_forkserver_child, args=(queue,))
    proc.start()
    proc.join(30)
    assert proc.exitcode == 0
    pid, had_fd, open_before, open_after, fd_after, address_after = queue.get()
    assert pid is None and had_fd and open_before, "the forkserver's fields moved"
    assert not open_after and fd_after is None and address_after is None
    # in the process that started the forkserver, nothing is touched
    fs = forkserver._forkserver  # type: ignore[attr-defined]
    before = (fs._forkserver_pid, fs._forkserver_alive_fd)
    _compat.release_forkserver_alive_fd()
    assert (fs._forkserver_pid, fs._forkserver_alive_fd) == before and before[0] is not None


def test_children_registry() -> None:
    import multiprocessing.process as mp_process

    assert isinstance(mp_process._children, set)  # type: ignore[attr-defined]
    proc = mp.get_context("fork").Process(target=int)
    mp_process._children.add(proc)  # type: ignore[attr-defined]
    _compat.forget_children([proc])
    assert proc not in mp_process._children  # type: ignore[attr-defined]


def test_without_main_drops_the_main_module_only_inside_the_block() -> None:
    from multiprocessing import spawn

    with _compat.without_main():
        inside = spawn.get_preparation_data("x")
    outside = spawn.get_preparation_data("x")
    assert "init_main_from_name" not in inside and "init_main_from_path" not in inside
    # pytest's __main__ is a module run by path or name: outside the block it is kept
    assert {"init_main_from_name", "init_main_from_path"} & set(outside)
    assert {k: v for k, v in outside.items() if not k.startswith("init_main")} == inside


def test_add_info_merges_as_a_vector_env_of_that_many_rows() -> None:
    """The async pool's batches merge infos as gymnasium's vector envs (SyncVectorEnv's
    infos for the same per-env infos are the reference)."""
    import gymnasium as gym
    import numpy as np

    per_env = [
        (1, {"a": 2, "nested": {"x": 1.5}, "final_obs": np.ones(2)}),
        (0, {"a": 7, "tag": "t"}),
    ]
    infos: dict = {}
    for row, info in per_env:
        infos = _compat.add_info(infos, info, row, 3)
    ref: dict = {}
    vec = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 3)
    for row, info in per_env:
        ref = vec._add_info(ref, info, row)
    vec.close()
    assert infos.keys() == ref.keys() == {
        "a", "_a", "nested", "_nested", "final_obs", "_final_obs", "tag", "_tag"
    }  # fmt: skip
    assert infos["a"].tolist() == [7, 2, 0] and infos["_a"].tolist() == [True, True, False]
    assert infos["nested"]["x"].tolist() == [0.0, 1.5, 0.0]
    assert infos["final_obs"].shape == (3,) and infos["final_obs"].dtype == object
    assert infos["tag"].tolist() == ["t", None, None]


def test_wrapper_submodule_reads_gymnasiums_lazy_table() -> None:
    """gymnasium.wrappers names the submodules of its lazily imported wrappers (those
    needing jax or torch) in a private table; the named wrappers read their docstrings
    from it without importing jax or torch."""
    import gymnasium.wrappers
    import gymnasium.wrappers.vector

    assert _compat.wrapper_submodule(gymnasium.wrappers, "JaxToNumpy") == "jax_to_numpy"
    assert _compat.wrapper_submodule(gymnasium.wrappers, "NoSuchWrapper") is None
    for module in (gymnasium.wrappers, gymnasium.wrappers.vector):
        for name in getattr(module, "__all__", []):
            sub = _compat.wrapper_submodule(module, name)
            if sub is not None:  # the file is there (importing it would need jax/torch)
                spec = importlib.util.find_spec(f"{module.__name__}.{sub}")
                assert spec is not None and spec.origin is not None


def test_episode_statistics_key_is_the_info_key_given() -> None:
    env = gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"), stats_key="ep")
    assert _compat.episode_statistics_key(env, None) == "ep"
    plain = gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))
    assert _compat.episode_statistics_key(plain, None) == "episode"
    assert _compat.episode_statistics_key(gym.make("CartPole-v1"), "x") == "x"
