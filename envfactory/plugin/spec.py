"""Hook specifications of the ``envfactory`` plugin system.

A plugin is any object (usually a module) with functions decorated by
``envfactory.hookimpl`` and named after these specs. It is found through the entry-point
group ``envfactory``:

    # pyproject.toml of the plugin package
    [project.entry-points.envfactory]
    my_plugin = "my_package.plugin"

Each hook returns a list of registration records; a plugin implements any subset.

A record's ``config`` dataclass checks its own values in ``__post_init__`` (raise
``envfactory.OptionError(field, value, expected)``, or any ``ValueError``). envfactory runs
it in the parent whenever a config is composed or passed to ``make_vec``, so a bad option
is one ``ConfigError`` naming its path (``env.g=-1.0: expected a gravity > 0``) before any
env or worker exists, for built-in and third-party schemas alike; ``make``/``build``
receive the checked fields (see `envfactory.config.checks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .types import EnvFamilyPlugin, VectorizerPlugin, WrapperPlugin

NAME = "envfactory"

hookspec = pluggy.HookspecMarker(NAME)
hookimpl = pluggy.HookimplMarker(NAME)
"""Marks a plugin's hook functions (``@envfactory.hookimpl``); pluggy's options work too
(``@envfactory.hookimpl(wrapper=True)``)."""


@hookspec
def envfactory_env_families() -> list[EnvFamilyPlugin]:  # type: ignore[empty-body]
    """Register environment families (``env=<name>``).

    Example plugin (a complete module):

        from dataclasses import dataclass

        import gymnasium as gym
        import envfactory


        @dataclass
        class DocPendulumConfig:
            family: str = "doc_pendulum"
            g: float = 10.0
            max_episode_steps: int = 200


        def make_doc_pendulum(g: float, max_episode_steps: int) -> gym.Env:
            return gym.make("Pendulum-v1", g=g, max_episode_steps=max_episode_steps)


        @envfactory.hookimpl
        def envfactory_env_families():
            return [envfactory.EnvFamilyPlugin("doc_pendulum", make_doc_pendulum, DocPendulumConfig,
                                               summary="Pendulum with a gravity knob")]

    ``envfactory env=doc_pendulum env.g=9.81`` then works with no YAML. To check a value, give
    the schema a ``__post_init__`` that raises ``envfactory.OptionError("g", self.g, "a
    gravity > 0")``: ``env.g=-1`` then fails at compose time.
    """


@hookspec
def envfactory_vectorizers() -> list[VectorizerPlugin]:  # type: ignore[empty-body]
    """Register vectorizers (``vectorizer=<name>``).

    Example plugin:

        from dataclasses import dataclass

        import gymnasium as gym
        import envfactory


        @dataclass
        class DocSyncConfig:
            name: str = "doc-sync"
            copy: bool = True


        def build(env_fns, *, copy: bool, autoreset_mode: gym.vector.AutoresetMode):
            return gym.vector.SyncVectorEnv(env_fns, copy=copy, autoreset_mode=autoreset_mode)


        @envfactory.hookimpl
        def envfactory_vectorizers():
            return [envfactory.VectorizerPlugin("doc-sync", build, DocSyncConfig)]

    ``build`` receives the list of zero-argument env constructors (picklable with
    cloudpickle), the vectorizer node's fields and the top-level ``autoreset_mode`` as gymnasium's
    ``AutoresetMode``, and ``seeding`` (``"offset"``/``"spawn"``) if it takes a ``seeding``
    parameter (this one does not: it seeds env *i* with ``seed + i``, and ``seeding=spawn``
    is refused at compose time). A vectorizer that does not call the constructors (a native
    one, such as ``envfactory-ale``'s ``ale-vector``) reads the env config from them: each carries
    ``options`` (the env node's fields, without ``family``), ``make`` (the family's
    ``make``; compare with ``envfactory.get_registry().families[name].record.make``),
    ``wrappers`` (the per-env wrappers) and ``stats_key`` (``episode_stats_key``).
    """


@hookspec
def envfactory_wrappers() -> list[WrapperPlugin]:  # type: ignore[empty-body]
    """Register named wrappers for ``wrappers`` (per env) and ``vector_wrappers``.

    Example plugin:

        from dataclasses import dataclass

        import gymnasium as gym
        import envfactory


        @dataclass
        class DocScaleRewardConfig:
            scale: float = 1.0


        def doc_scale_reward(env: gym.Env, scale: float) -> gym.Env:
            return gym.wrappers.TransformReward(env, lambda r: r * scale)


        @envfactory.hookimpl
        def envfactory_wrappers():
            return [envfactory.WrapperPlugin("doc_scale_reward", doc_scale_reward,
                                              DocScaleRewardConfig)]

    Then ``wrappers=[{name: doc_scale_reward, scale: 0.1}]``. With ``vector=True`` the record
    wraps the VectorEnv and is used in ``vector_wrappers``.
    """


@hookspec
def envfactory_config_dirs() -> list[str]:  # type: ignore[empty-body]
    """Add Hydra config folders (presets) to the search path.

    Example plugin:

        from pathlib import Path

        import envfactory


        @envfactory.hookimpl
        def envfactory_config_dirs():
            return [str(Path(__file__).parent / "conf")]

    A file ``conf/env/pong_fast.yaml`` in that folder is then selectable as
    ``env=pong_fast``; a file ``conf/experiment/x.yaml`` as ``+experiment=x``.
    """
