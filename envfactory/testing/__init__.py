"""A conformance suite for vectorized environments, for built-in and third-party
vectorizers and env families alike.

Two ways to use it:

* [`check_vecenv`][envfactory.testing.check_vecenv] runs every check against a factory of fresh
  vectorized envs and raises ``AssertionError`` naming the first broken rule:

        from envfactory.testing import check_vecenv
        check_vecenv(lambda: envfactory.make_vec(overrides=["vectorizer=my-vec"]), steps=200)

* [`VecEnvConformance`][envfactory.testing.VecEnvConformance] holds the same checks as pytest test
  methods (in the spirit of Hydra's ``LauncherTestSuite``): subclass it in a ``test_*.py`` file
  under a ``Test*`` name and provide a ``make_vecenv`` fixture that returns the factory:

        import pytest
        import envfactory
        from envfactory.testing import VecEnvConformance

        class TestMyVectorizer(VecEnvConformance):
            steps = 100

            @pytest.fixture(params=["next_step", "same_step", "disabled"])
            def make_vecenv(self, request):
                ov = ["vectorizer=my-vec", f"autoreset_mode={request.param}"]
                return lambda: envfactory.make_vec(overrides=ov)

* [`check_faults`][envfactory.testing.check_faults] runs the fault model against a backend's build
  function (an env raising in ``step`` or ``call``, ``close`` after a fault, ``restart=true``).

* [`SpacesConformance`][envfactory.testing.SpacesConformance] (and
  [`check_spaces`][envfactory.testing.check_spaces]) checks observations of every space gymnasium
  ships (Text, Graph, Sequence, OneOf, nested Dict/Tuple, ...) against ``SyncVectorEnv`` in every
  autoreset mode, ``copy`` on and off; it builds the vectorized env from env constructors, so
  override its ``build_vecenv(env_fns,
  **options)``.

The rules are gymnasium 1.x's (as `gymnasium.vector.SyncVectorEnv` implements
them) plus envfactory's contract: batched spaces are ``batch_space`` of the single
spaces; ``metadata["autoreset_mode"]`` is an ``AutoresetMode``; ``reset(seed=int)`` is
reproducible and gives env *i* the seed ``seed + i``; rewards are float64 and the flags
bool arrays of shape ``(num_envs,)``; infos are dicts of arrays with ``_key`` masks;
episode statistics (``infos["episode_stats"]`` / ``_episode_stats``) appear exactly when an episode
ends; each autoreset mode behaves as gymnasium's; ``reset_mask`` resets only the masked
envs; ``close()`` is idempotent; ``call(fn, *args, **kwargs)`` runs ``fn(env, *args,
**kwargs)`` next to each env and returns one result per env.

The **family kit** checks one env of a family (as ``envfactory.make_env`` builds it):
[`check_family`][envfactory.testing.check_family] runs
[`check_env_spaces`][envfactory.testing.check_env_spaces] (observations in the space, with its dtype
and shape), [`check_env_seeding`][envfactory.testing.check_env_seeding] (same seed, same trajectory;
different seeds differ), [`check_env_checker`][envfactory.testing.check_env_checker] (gymnasium's
``check_env``), [`check_env_episode_stats`][envfactory.testing.check_env_episode_stats] (statistics
exactly at episode ends, under the env's own statistics key) and
[`check_env_close`][envfactory.testing.check_env_close];
[`FamilyConformance`][envfactory.testing.FamilyConformance] holds them as pytest tests with a
``make_env`` fixture:

    class TestMyFamily(FamilyConformance):
        @pytest.fixture
        def make_env(self):
            cfg = envfactory.compose(["env=my-family"])
            return lambda: envfactory.make_env(cfg)

The helpers [`rollout`][envfactory.testing.rollout],
[`sample_actions`][envfactory.testing.sample_actions] and
[`assert_rollouts_equal`][envfactory.testing.assert_rollouts_equal] drive two vectorized envs with
the same seed and actions and compare everything they return bit for bit (differential testing
against ``dummy`` or ``SyncVectorEnv``).

A plugin package checks itself as installed with
[`check_entry_point`][envfactory.testing.check_entry_point] (its entry point registers the names, at
its installed version) and [`check_same_as_dummy`][envfactory.testing.check_same_as_dummy]
(bit-identical rollouts under its vectorizer and ``dummy``); its ``tests/conftest.py`` makes every
test hermetic (a fresh registry, no user presets) with one line:

    from envfactory.testing.pytest_plugin import hermetic_envfactory  # noqa: F401

The suites live in one module each ([`rollouts`][envfactory.testing.rollouts],
[`vecenv`][envfactory.testing.vecenv], [`faults`][envfactory.testing.faults],
[`spaces`][envfactory.testing.spaces],
[`family`][envfactory.testing.family], [`plugins`][envfactory.testing.plugins]); import them from
here. This package needs neither pytest nor anything beyond gymnasium and numpy (only
[`pytest_plugin`][envfactory.testing.pytest_plugin], the fixture, imports pytest), and ``import
envfactory`` does not import it.
"""

from __future__ import annotations

from .family import (
    FamilyConformance,
    MakeEnv,
    check_env_checker,
    check_env_close,
    check_env_episode_stats,
    check_env_seeding,
    check_env_spaces,
    check_family,
    episode_stats_key_of,
)
from .faults import EnvFault, FailingEnv, check_faults
from .plugins import check_entry_point, check_same_as_dummy
from .pool import check_pool_same_as_dummy, dummy_trajectories, pool_action, pool_trajectories
from .rollouts import (
    DEFAULT_IGNORE,
    MakeVecEnv,
    Record,
    assert_infos_layout,
    assert_rollouts_equal,
    assert_tree_equal,
    autoreset_mode_of,
    rollout,
    sample_actions,
)
from .spaces import (
    BuildVecEnv,
    SpaceEnv,
    SpacesConformance,
    check_space,
    check_spaces,
    gymnasium_spaces,
)
from .vecenv import (
    VecEnvConformance,
    check_call,
    check_close,
    check_errors,
    check_interface,
    check_reset_mask,
    check_reset_seeding,
    check_restarts,
    check_rollout,
    check_vecenv,
)

__all__ = [
    "DEFAULT_IGNORE",
    "BuildVecEnv",
    "EnvFault",
    "FailingEnv",
    "FamilyConformance",
    "MakeEnv",
    "MakeVecEnv",
    "Record",
    "SpaceEnv",
    "SpacesConformance",
    "VecEnvConformance",
    "assert_infos_layout",
    "assert_rollouts_equal",
    "assert_tree_equal",
    "autoreset_mode_of",
    "check_call",
    "check_close",
    "check_entry_point",
    "check_env_checker",
    "check_env_close",
    "check_env_episode_stats",
    "check_env_seeding",
    "check_env_spaces",
    "check_errors",
    "check_family",
    "check_faults",
    "check_interface",
    "check_pool_same_as_dummy",
    "check_reset_mask",
    "check_reset_seeding",
    "check_restarts",
    "check_rollout",
    "check_same_as_dummy",
    "check_space",
    "check_spaces",
    "check_vecenv",
    "dummy_trajectories",
    "episode_stats_key_of",
    "gymnasium_spaces",
    "pool_action",
    "pool_trajectories",
    "rollout",
    "sample_actions",
]
