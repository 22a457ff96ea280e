"""Config composition: defaults, every error message, make_vec(dict), envfactory inside a
user's own Hydra app, config-only experiments, and the conf dir of a non-editable install."""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from omegaconf import OmegaConf

import envfactory
from envfactory.errors import ConfigError, OptionError, UnknownNameError


def test_defaults() -> None:
    cfg = envfactory.compose([])
    assert (cfg.env.family, cfg.env.id, cfg.vectorizer.name) == ("gym", "CartPole-v1", "dummy")
    assert (cfg.num_envs, cfg.seed, cfg.wrappers, cfg.vector_wrappers) == (4, None, [], [])
    assert cfg.run.total_steps > 0 and cfg.run.progress is True
    assert "hydra" not in cfg


KEYS = "Valid keys: autoreset_mode, env, "  # ... num_envs, run, seed, ... wrappers


@pytest.mark.parametrize(
    ("overrides", "error", "fragments"),
    [
        pytest.param(
            ["env=nope"],
            UnknownNameError,
            [
                "unknown env (family or preset) 'nope' (at env=nope)",
                "atari",
                "gym",
                "mountaincar",
                "pendulum",
                "envfactory-plugins",
            ],
            id="unknown-family-lists-valid-names",
        ),
        pytest.param(
            ["vectorizer=dumy"],
            UnknownNameError,
            ["unknown vectorizer 'dumy'", "Did you mean 'dummy'?", "dummy, gym-sync"],
            id="vectorizer-did-you-mean",
        ),
        pytest.param(
            ["env.idd=CartPole-v1"],
            ConfigError,
            [
                "unknown key env.idd. Did you mean 'env.id'? Valid keys under env: family, id, "
                "kwargs, max_episode_steps"
            ],
            id="unknown-key-path",
        ),
        pytest.param(
            ["numenvs=4"],
            ConfigError,
            ["unknown key numenvs. Did you mean 'num_envs'?", KEYS, "a '+' cannot add keys"],
            id="unknown-key-no-plus-advice",
        ),
        pytest.param(
            ["+num_env=8"],
            ConfigError,
            ["unknown key num_env. Did you mean 'num_envs'?", KEYS],
            id="unknown-key-added-with-plus",
        ),
        pytest.param(["+foo=1"], ConfigError, ["unknown key foo.", KEYS], id="plus-foo"),
        pytest.param(
            ["+run.foo=1"],
            ConfigError,
            [
                "unknown key run.foo. Valid keys under run: fps, job, policy, progress, "
                "render_steps, "
                "total_steps"
            ],
            id="plus-run-foo",
        ),
        pytest.param(
            ["+env.frame_skip=2"],
            ConfigError,
            ["unknown key env.frame_skip of env=gym.", "Valid keys under env: family, id"],
            id="plus-env-key-of-another-family",
        ),
        pytest.param(
            ["run.total_steps=0"],
            ConfigError,
            ["run.total_steps=0: expected an integer >= 1"],
            id="total-steps-zero-not-clamped",
        ),
        pytest.param(
            ["num_envs=abc"],
            ConfigError,
            ["num_envs=abc: expected an integer; got 'abc'"],
            id="wrong-type",
        ),
        pytest.param(  # a new user's re-trial: OmegaConf's "Value 'maybe' is not a valid bool"
            ["run.progress=maybe"],
            ConfigError,
            ["run.progress=maybe: expected true or false; got 'maybe'"],
            id="wrong-type-bool",
        ),
        pytest.param(  # the same: "Invalid value 'sameStep', expected one of [...]"
            ["autoreset_mode=sameStep"],
            ConfigError,
            [
                "autoreset_mode=sameStep: expected one of next_step, same_step, disabled. Did "
                "you mean 'same_step'?"
            ],
            id="enum-did-you-mean",
        ),
        pytest.param(
            ["num_envs=0"],
            ConfigError,
            ["num_envs must be a positive integer, got 0; set num_envs=1 or more"],
            id="num-envs-zero",
        ),
        pytest.param(
            ["seed=-1"], ConfigError, ["seed=-1: expected an integer >= 0 or null"], id="seed"
        ),
        pytest.param(
            ["num_envs=${foo:bar}"],
            ConfigError,
            ["num_envs: unknown interpolation resolver 'foo'", "register_new_resolver"],
            id="unknown-resolver",
        ),
        pytest.param(
            ["wrappers=[{name:time_limt,max_episode_steps:5}]"],
            UnknownNameError,
            ["unknown wrapper 'time_limt' (at wrappers[0].name)", "Did you mean 'time_limit'?"],
            id="unknown-wrapper-did-you-mean",
        ),
        pytest.param(
            ["wrappers=[{name:record_episode_statistics},{name:time_limit,max_episode_steps:x}]"],
            ConfigError,
            [
                "wrappers[1].max_episode_steps=x: expected an integer; got 'x' "
                "(wrapper 'time_limit')"
            ],
            id="bad-wrapper-option-type-second",
        ),
        pytest.param(
            ["env=pendulum", "env.g=heavy"],
            ConfigError,
            ["env.g=heavy: expected a number; got 'heavy'"],
            id="plugin-schema-wrong-type",
        ),
        pytest.param(
            ["env=pendulum", "env.g=-1"],
            ConfigError,
            ["env.g=-1.0: expected a gravity > 0"],
            id="plugin-schema-own-check",
        ),
        pytest.param(
            ["wrappers=[{name:scale_reward,scael:2}]"],
            ConfigError,
            [
                "unknown key wrappers[0].scael of wrapper 'scale_reward'. "
                "Did you mean 'wrappers[0].scale'?"
            ],
            id="plugin-wrapper-unknown-option",
        ),
        # every family / vectorizer check, at compose time
        pytest.param(
            ["env=atari", "env.image_size=-1"],
            ConfigError,
            ["env.image_size=-1: expected a positive int or [height, width] of positive ints"],
            id="atari-image-size",
        ),
        pytest.param(
            ["env=atari", "env.frame_skip=0"],
            ConfigError,
            ["env.frame_skip=0: expected an integer >= 1"],
            id="atari-frame-skip",
        ),
        pytest.param(
            ["env=atari", "env.noop_max=-1"],
            ConfigError,
            ["env.noop_max=-1: expected an integer >= 0"],
            id="atari-noop-max",
        ),
        pytest.param(
            ["env=atari", "env.obs_type=gray"],
            ConfigError,
            ["env.obs_type='gray': expected one of grayscale, rgb, ram. Did you mean 'grayscale'?"],
            id="atari-obs-type",
        ),
        pytest.param(
            ["env=atari", "env.layout=CHW"],
            ConfigError,
            ["env.layout='CHW': expected one of hwc, chw"],
            id="atari-layout",
        ),
        pytest.param(
            ["env=atari", "env.repeat_action_probability=1.5"],
            ConfigError,
            ["env.repeat_action_probability=1.5: expected a number in [0, 1]"],
            id="atari-sticky",
        ),
        pytest.param(
            ["env=atari", "env.max_episode_steps=0"],
            ConfigError,
            ["env.max_episode_steps=0: expected an integer >= 1 or null"],
            id="atari-max-episode-steps",
        ),
        pytest.param(
            ["env=atari", "env.id=ALE/Pongg-v5"],
            ConfigError,
            ["env.id='ALE/Pongg-v5': expected an ALE id", "Did you mean 'ALE/Pong-v5'?"],
            id="atari-id",
        ),
        pytest.param(
            ["env=atari", "env.id=CartPole-v1"],
            ConfigError,
            ["env.id='CartPole-v1'", "use env=gym env.id=CartPole-v1"],
            id="atari-id-of-a-gym-env",
        ),
        pytest.param(
            ["env.id=no_such_module:Foo-v0"],
            ConfigError,
            ["env.id='no_such_module:Foo-v0'", "Module 'no_such_module' was not found"],
            id="gym-module-not-found",
        ),
        pytest.param(
            ["env.id=CartPol-v1"],
            ConfigError,
            ["env.id='CartPol-v1': expected a registered gymnasium id. Did you mean 'CartPole-v1'"],
            id="gym-id",
        ),
        pytest.param(
            ["env.max_episode_steps=0"],
            ConfigError,
            ["env.max_episode_steps=0: expected an integer >= 1 or null"],
            id="gym-max-episode-steps",
        ),
        pytest.param(
            ["env=mountaincar", "env.num_stack=0"],
            ConfigError,
            ["env.num_stack=0: expected an integer >= 1"],
            id="mountaincar-num-stack",
        ),
        pytest.param(
            ["env=mountaincar", "env.id=MountainCar-v1"],
            ConfigError,
            ["env.id='MountainCar-v1': expected one of MountainCar-v0, MountainCarContinuous-v0"],
            id="mountaincar-id",
        ),
        pytest.param(
            ["vectorizer=subproc", "vectorizer.in_series=0"],
            ConfigError,
            ["vectorizer.in_series=0: expected an integer >= 1 or null"],
            id="subproc-in-series",
        ),
        pytest.param(
            ["vectorizer=subproc-atari", "vectorizer.context=forks"],
            ConfigError,
            ["vectorizer.context='forks': expected one of fork, forkserver, spawn."],
            id="subproc-context",
        ),
        pytest.param(
            ["vectorizer=subproc", "vectorizer.timeout=nan"],
            ConfigError,
            ["vectorizer.timeout=nan: expected a number of seconds > 0, or null (or inf)"],
            id="subproc-timeout-nan",
        ),
        pytest.param(
            ["vectorizer=subproc", "vectorizer.timeout=0"],
            ConfigError,
            ["vectorizer.timeout=0.0: expected a number of seconds > 0"],
            id="subproc-timeout-zero",
        ),
        pytest.param(
            ["vectorizer=subproc", "vectorizer.spin_us=-1"],
            ConfigError,
            ["vectorizer.spin_us=-1: expected an integer >= 0"],
            id="subproc-spin-us",
        ),
    ],
)
def test_config_error_messages(
    overrides: list[str], error: type[Exception], fragments: list[str]
) -> None:
    with pytest.raises(error) as info:
        envfactory.compose(overrides)
    message = str(info.value)
    assert "\n" not in message, message  # one line
    for fragment in fragments:
        assert fragment in message, message


def test_an_ale_id_under_the_gym_family_points_to_atari(monkeypatch: pytest.MonkeyPatch) -> None:
    """(Where ale_py was imported in this process its ids are registered and ``env=gym`` builds
    them as they are; hidden here, as in a fresh process.)"""
    for env_id in [k for k in gym.registry if k.startswith("ALE/")]:
        monkeypatch.delitem(gym.registry, env_id)
    with pytest.raises(ConfigError) as info:
        envfactory.compose(["env.id=ALE/Pong-v5"])
    message = str(info.value)
    assert "\n" not in message, message
    for fragment in ["env.id='ALE/Pong-v5'", "Use env=atari env.id=ALE/Pong-v5"]:
        assert fragment in message, message


@pytest.mark.parametrize("vectorizer", ["dummy", "subproc"])
@pytest.mark.parametrize(
    ("overrides", "text"),
    [
        (["env=atari", "env.frame_skip=0"], "env.frame_skip=0: expected an integer >= 1"),
        (["env=mountaincar", "env.num_stack=0"], "env.num_stack=0: expected an integer >= 1"),
    ],
)
def test_bad_family_option_is_the_same_error_under_every_vectorizer(
    vectorizer: str, overrides: list[str], text: str
) -> None:
    """Checked in the parent before a worker exists: not a RemoteEnvError from a worker."""
    with pytest.raises(OptionError, match=re.escape(text)):
        envfactory.make_vec(overrides=[*overrides, f"vectorizer={vectorizer}", "num_envs=2"])
    # a config composed elsewhere and edited by hand is checked again by make_vec
    cfg = envfactory.compose([f"vectorizer={vectorizer}", overrides[0], "num_envs=2"])
    key, value = overrides[1].split("=")
    OmegaConf.update(cfg, key, int(value))
    with pytest.raises(OptionError, match=re.escape(text)):
        envfactory.make_vec(cfg)


def test_compose_checks_atari_ids_without_importing_ale_py(run: Any) -> None:
    code = (
        "import sys, time, envfactory\n"
        "envfactory.compose([])\n"
        "t = time.perf_counter()\n"
        "cfg = envfactory.compose(['env=atari', 'env.id=ALE/SpaceInvaders-v5'])\n"
        "print(cfg.env.id, 'ale_py' in sys.modules, time.perf_counter() - t)\n"
    )
    proc = run(["python", "-c", code])
    assert proc.returncode == 0, proc.stderr
    env_id, imported, _seconds = proc.stdout.split()
    assert (env_id, imported) == ("ALE/SpaceInvaders-v5", "False")


def test_vectorizer_timeout_inf_means_no_timeout() -> None:
    cfg = envfactory.compose(["vectorizer=subproc", "vectorizer.timeout=inf", "num_envs=1"])
    assert cfg.vectorizer.timeout == float("inf")
    with envfactory.make_vec(cfg) as envs:
        assert envs.timeout is None
        envs.reset(seed=0)
        envs.step(envs.action_space.sample())


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_env_kwargs_the_natural_way(run: Any, tmp_path: Path) -> None:
    for cfg in (
        envfactory.compose(["env.kwargs={render_mode: rgb_array}"]),
        envfactory.compose(["+env.kwargs.render_mode=rgb_array"]),
        {"env": {"kwargs": {"render_mode": "rgb_array"}}},
    ):
        with envfactory.make_vec(cfg) as envs:  # type: ignore[arg-type]
            assert envs.get_attr("render_mode") == ("rgb_array",) * 4
    out = tmp_path / "job"
    proc = run(
        [
            "envfactory",
            "env.id=MountainCar-v0",  # never solved in 10 random steps: episodes of exactly 10
            "env.kwargs={max_episode_steps: 10}",
            "num_envs=1",
            "run.total_steps=110",  # next_step autoreset: 10 steps + 1 reset step per episode
            f"hydra.run.dir={out}",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "summary.json").read_text())["episodes"] == 10


def test_wrapper_options_reach_the_wrapper() -> None:
    cfg = envfactory.compose(["wrappers=[{name:time_limit,max_episode_steps:5}]", "num_envs=1"])
    with envfactory.make_vec(cfg) as envs:
        envs.reset(seed=0)
        truncated = [envs.step([0])[3][0] for _ in range(5)]
    assert truncated == [False] * 4 + [True]


def test_make_vec_from_a_dict() -> None:
    with envfactory.make_vec({"env": "mountaincar", "num_envs": 2}) as envs:
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (2, 8)
    spec = {
        "env": {"family": "pendulum", "g": 3.0},
        "vectorizer": "gym-sync",
        "num_envs": 3,
        "autoreset_mode": "same_step",
    }
    with envfactory.make_vec(spec) as envs:
        assert envs.num_envs == 3 and envs.get_attr("g") == (3.0, 3.0, 3.0)
        assert envs.metadata["autoreset_mode"].name == "SAME_STEP"
    with pytest.raises(ConfigError, match="num_envs must be a positive integer, got 0"):
        envfactory.make_vec({"num_envs": 0})
    with pytest.raises(UnknownNameError, match="Did you mean 'mountaincar'"):
        envfactory.make_vec({"env": "mountaincat"})


# A user's own @hydra.main app composing envfactory: tests/config/test_hydra_app.py


def test_config_only_experiment(run: Any, tmp_path: Path) -> None:
    exp_dir = tmp_path / "my_experiments" / "experiment"
    exp_dir.mkdir(parents=True)
    (exp_dir / "fast_mountaincar.yaml").write_text(
        textwrap.dedent(
            """\
            # @package _global_
            defaults:
              - override /env: mountaincar

            num_envs: 2
            run:
              total_steps: 100
            """
        )
    )
    out = tmp_path / "run"
    proc = run(
        [
            "envfactory",
            "--config-dir",
            tmp_path / "my_experiments",
            "+experiment=fast_mountaincar",
            f"hydra.run.dir={out}",
            "run.progress=false",
        ],
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["family"], summary["env"]) == ("mountaincar", "MountainCar-v0")
    assert (summary["num_envs"], summary["steps"]) == (2, 100)
    assert "+experiment=fast_mountaincar" in summary["overrides"]


def test_conf_dir_of_a_non_editable_install(run: Any, wheel_site: Path, tmp_path: Path) -> None:
    code = (
        "import json, envfactory, envfactory.config\n"
        "cfg = envfactory.compose(['env=mountaincar'])\n"
        "print(json.dumps({'conf': str(envfactory.config.conf_dir()),"
        " 'module': envfactory.__file__, 'family': cfg.env.family}))\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = run(["python", "-c", code], cwd=elsewhere, pythonpath=[wheel_site])
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    site = wheel_site.resolve()
    assert Path(out["module"]).resolve().is_relative_to(site)
    assert Path(out["conf"]).resolve() == site / "envfactory" / "conf"
    assert (site / "envfactory" / "conf" / "envfactory.yaml").is_file()
    assert out["family"] == "mountaincar"


def test_missing_required_wrapper_option_names_it() -> None:
    with pytest.raises(ConfigError) as info:
        envfactory.compose(["wrappers=[{name: time_limit}]"])
    message = str(info.value)
    assert "wrapper 'time_limit' at wrappers[0] needs option max_episode_steps" in message
    assert "{name: time_limit, max_episode_steps: ...}" in message


# -- the config is resolved once, into a checked plan (issue 17) ---------------------------

_CHECKS: list[str] = []


@dataclasses.dataclass
class _CountedConfig:
    """A family schema that counts its checks."""

    family: str = "counted"
    id: str = "CartPole-v1"

    def __post_init__(self) -> None:
        _CHECKS.append("env")


@dataclasses.dataclass
class _CountedVecConfig:
    """A vectorizer schema that counts its checks, and checks itself against num_envs."""

    name: str = "counted-vec"
    at_most: int = 1

    def __post_init__(self) -> None:
        _CHECKS.append("vectorizer")

    def check_config(self, top: envfactory.config.TopLevel) -> None:
        _CHECKS.append("vectorizer.check_config")
        if self.at_most > top.num_envs:
            raise OptionError("at_most", self.at_most, f"at most num_envs={top.num_envs}")


_BUILT: list[dict[str, Any]] = []


def _make_counted(id: str) -> gym.Env:
    return gym.make(id)


def _build_counted(env_fns: Any, **options: Any) -> Any:
    _BUILT.append(options)
    return gym.vector.SyncVectorEnv(env_fns, autoreset_mode=options["autoreset_mode"])


def _build_without_seeding(env_fns: Any, *, at_most: int, autoreset_mode: Any) -> Any:
    _BUILT.append({"at_most": at_most, "autoreset_mode": autoreset_mode})
    return gym.vector.SyncVectorEnv(env_fns, autoreset_mode=autoreset_mode)


def _register_counted(build: Any = _build_counted) -> None:
    envfactory.register_plugin(
        [
            envfactory.EnvFamilyPlugin("counted", _make_counted, _CountedConfig),
            envfactory.VectorizerPlugin("counted-vec", build, _CountedVecConfig),
        ]
    )
    _CHECKS.clear()
    _BUILT.clear()


def test_each_schema_is_checked_once_per_call() -> None:
    _register_counted()
    picks = ["env=counted", "vectorizer=counted-vec", "num_envs=2"]
    cfg = envfactory.compose(picks)
    assert _CHECKS == ["env", "vectorizer", "vectorizer.check_config"]  # compose: once
    _CHECKS.clear()
    with envfactory.make_vec(cfg) as envs:  # make_vec: once more, not twice
        assert envs.num_envs == 2
    assert _CHECKS == ["env", "vectorizer", "vectorizer.check_config"]
    _CHECKS.clear()
    envfactory.make_vec(overrides=picks).close()
    envfactory.make_env(overrides=picks).close()
    assert _CHECKS == ["env", "vectorizer", "vectorizer.check_config"] * 2
    _CHECKS.clear()
    plan = envfactory.config.validate(cfg)  # a plan is built with no check at all
    _CHECKS.clear()
    envfactory.make_vec(plan).close()
    assert _CHECKS == [] and plan.vectorizer_options == {"at_most": 1}


def test_a_schema_checks_itself_against_the_top_level_at_compose() -> None:
    _register_counted()
    with pytest.raises(OptionError) as err:
        envfactory.compose(
            ["env=counted", "vectorizer=counted-vec", "num_envs=2", "vectorizer.at_most=3"]
        )
    assert str(err.value) == "vectorizer.at_most=3: expected at most num_envs=2."


def test_autoreset_mode_and_seeding_reach_build_the_same_way() -> None:
    _register_counted()
    picks = ["env=counted", "vectorizer=counted-vec", "num_envs=2"]
    envfactory.make_vec(overrides=[*picks, "autoreset_mode=same_step", "seeding=spawn"]).close()
    assert _BUILT == [
        {"at_most": 1, "autoreset_mode": gym.vector.AutoresetMode.SAME_STEP, "seeding": "spawn"}
    ]


def test_a_build_without_seeding_gets_offset_implicitly_and_refuses_spawn_at_compose() -> None:
    _register_counted(_build_without_seeding)
    picks = ["env=counted", "vectorizer=counted-vec", "num_envs=2"]
    envfactory.make_vec(overrides=picks).close()  # offset: called without seeding=
    assert _BUILT == [{"at_most": 1, "autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}]
    with pytest.raises(ConfigError) as err:
        envfactory.compose([*picks, "seeding=spawn"])  # before anything is built
    assert str(err.value) == (
        "seeding=spawn is not supported by vectorizer 'counted-vec'; use seeding=offset"
    )


# -- bad input found by an adversarial pass (issue 18) --------------------------------------


def test_in_parent_of_every_env_fails_at_compose() -> None:
    for name in ("subproc", "subproc-atari"):
        with pytest.raises(OptionError) as err:
            envfactory.compose([f"vectorizer={name}", "num_envs=2", "vectorizer.in_parent=2"])
        assert str(err.value) == (
            "vectorizer.in_parent=2: expected an integer in [0, num_envs - 1 = 1] or null "
            "(auto): the parent steps that many envs itself, and at least one must be in a "
            "worker. Lower vectorizer.in_parent or raise num_envs (now 2); for every env in "
            "this process, use vectorizer=dummy"
        )
    assert envfactory.compose(["vectorizer=subproc", "num_envs=2", "vectorizer.in_parent=1"])


def test_a_huge_value_is_echoed_capped() -> None:
    huge = "A" * 1_000_000
    with pytest.raises(OptionError) as err:
        envfactory.compose([f"env.id={huge}"])
    msg = str(err.value)
    assert len(msg) < 600, len(msg)
    assert msg.startswith("env.id='AAAA") and "... (1,000,002 characters): expected" in msg
    with pytest.raises(UnknownNameError) as unknown:
        envfactory.get_registry().vectorizer(huge, key=f"vectorizer={huge}")
    assert len(str(unknown.value)) < 1000 and "(1,000,002 characters)" in str(unknown.value)
    for override in (f"num_envs={huge}", f"+{huge}=1", f"env.id={huge}é"):  # Hydra's own
        with pytest.raises(ConfigError) as hydra:
            envfactory.compose([override])
        assert len(str(hydra.value)) < 1000 and " characters)" in str(hydra.value)


def test_an_override_hydra_cannot_read_says_to_quote_it() -> None:
    with pytest.raises(ConfigError) as err:
        envfactory.compose(["env.id=CartPöle-v1"])
    assert str(err.value) == (
        "cannot read the override 'env.id=CartPöle-v1' (LexerNoViableAltException). If the "
        "value holds characters Hydra's override grammar does not take unquoted (non-ASCII "
        "letters, spaces, brackets, ...), quote it: 'env.id=\"CartPöle-v1\"' on the command "
        "line, or overrides=['env.id=\"CartPöle-v1\"']"
    )
    with pytest.raises(OptionError, match="Did you mean 'CartPole-v1'"):
        envfactory.compose(['env.id="CartPöle-v1"'])  # quoted: read, then checked


@pytest.mark.parametrize("call", ["make_vec", "make_env", "compose"])
def test_overrides_given_as_one_string_are_refused(call: str) -> None:
    fn = getattr(envfactory, call)
    with pytest.raises(TypeError) as err:
        fn("num_envs=2") if call == "compose" else fn(overrides="num_envs=2")
    assert str(err.value) == (
        "overrides must be a list of strings, got the string 'num_envs=2'; pass "
        "overrides=['num_envs=2'] (one list entry per override)"
    )


def test_an_option_of_another_vectorizer_names_the_ones_that_have_it() -> None:
    """A new user's trial (issue 28's re-trial): ``vectorizer.batch_size=2`` under the
    default ``dummy`` said only "Valid keys under vectorizer: copy, name"."""
    with pytest.raises(ConfigError) as err:
        envfactory.compose(["vectorizer.batch_size=2"])
    says = str(err.value)
    assert "unknown key vectorizer.batch_size" in says
    assert "batch_size is an option of vectorizer=auto, subproc, subproc-atari" in says
    assert "select one of those" in says and "\n" not in says


def test_a_gymnasium_id_given_as_the_env_points_to_env_id() -> None:
    """A new user's trial (issue 28's re-trial): ``env=CartPole-v1`` said only "unknown env
    (family or preset)", with no word of ``env.id``."""
    with pytest.raises(
        ConfigError, match=r"a gymnasium id goes in env.id: env=gym env.id=CartPole-v1"
    ):
        envfactory.compose(["env=CartPole-v1"])


class _TakesAnything(gym.Env):
    """An env whose constructor takes ``**kwargs``: which keys it reads cannot be known."""

    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


def test_a_typo_in_env_kwargs_is_caught_at_compose_with_the_close_match() -> None:
    """A new user's re-trial: ``env.kwargs={sutton_barto_rewrd: true}`` composed and failed
    only when the env was built (a TypeError in a worker, or a traceback under ``dummy``).
    The keys are checked against the constructor the registry names (and
    ``gymnasium.make``'s own) at compose time; where they cannot be known, nothing is said."""
    with pytest.raises(OptionError) as info:
        envfactory.compose(["env.kwargs={sutton_barto_rewrd: true}"])
    says = str(info.value)
    assert says.startswith("env.kwargs.sutton_barto_rewrd=True: expected a keyword argument ")
    assert "Did you mean 'sutton_barto_reward'?" in says and "\n" not in says
    assert "(CartPoleEnv), max_episode_steps, disable_env_checker (gymnasium.make)" in says
    with pytest.raises(OptionError, match=r"env\.kwargs\.gg=9\.0: .*Did you mean 'g'\?"):
        envfactory.make_vec({"env": {"id": "Pendulum-v1", "kwargs": {"gg": 9.0}}})
    for good in ("sutton_barto_reward: true", "max_episode_steps: 5", "render_mode: null"):
        envfactory.compose([f"env.kwargs={{{good}}}"])
    # a constructor taking **kwargs: any key passes, as gymnasium.make would pass it
    gym.register("TakesAnything-v0", entry_point=_TakesAnything)
    try:
        envfactory.compose(["env.id=TakesAnything-v0", "env.kwargs={anything: 1}"])
    finally:
        gym.registry.pop("TakesAnything-v0")


def test_a_missing_launcher_plugin_says_how_to_install_it() -> None:
    """A new user's re-trial: the sweeps guide's ``hydra/launcher=joblib`` without the
    launcher installed said only "Valid options: basic"."""
    from hydra.errors import MissingConfigException

    from envfactory.config.compose import hydra_error

    missing = MissingConfigException(
        "In 'hydra/config': Could not find 'hydra/launcher/joblib'",
        missing_cfg_file="hydra/launcher/joblib",
        options=["basic"],
    )
    assert str(hydra_error(missing)) == (
        "In 'hydra/config': Could not find 'hydra/launcher/joblib'. Valid options: basic. "
        "Install it: pip install 'envfactory[joblib]' (Hydra's joblib launcher)"
    )


@pytest.mark.parametrize(
    ("call", "says"),
    [
        (lambda: envfactory.make_vec("num_envs=2"), "make_vec(overrides=['num_envs=2'])"),
        (lambda: envfactory.make_vec(["num_envs=2"]), "make_vec(overrides=['num_envs=2'])"),
        (lambda: envfactory.make_vec(overrides="num_envs=2"), "pass overrides=['num_envs=2']"),
        (lambda: envfactory.compose("num_envs=2"), "pass overrides=['num_envs=2']"),
    ],
)
def test_overrides_of_the_wrong_type_are_envfactory_errors_and_type_errors(
    call: Any, says: str
) -> None:
    """A new user's re-trial: ``make_vec(overrides="num_envs=2")`` raised a bare TypeError,
    which ``except envfactory.EnvfactoryError`` missed (the errors page promises it); the
    overrides passed as the config did not say where they go."""
    with pytest.raises(envfactory.ArgumentTypeError) as info:
        call()
    assert isinstance(info.value, TypeError) and isinstance(info.value, envfactory.EnvfactoryError)
    assert says in str(info.value)


# -- a new user's trial (err-lines): one line with the fix -------------------------------------
@pytest.mark.parametrize("key", ["wrappers", "vector_wrappers"])
def test_a_wrapper_name_without_the_list_shows_the_list_forms(key: str) -> None:
    """``wrappers=time_limit`` said ``wrappers: Invalid value assigned: str is not a
    ListConfig, list or tuple. (in wrappers=time_limit)``."""
    with pytest.raises(ConfigError) as info:
        envfactory.compose([f"{key}=time_limit"])
    example = (  # (time_limit has no vector counterpart)
        "{name: time_limit, max_episode_steps: 100}"
        if key == "wrappers"
        else "{name: clip_reward, min_reward: -1, max_reward: 1}"
    )
    assert str(info.value) == (
        f"{key}='time_limit': {key} takes a list of wrappers, not a string; write "
        f"{key}=[time_limit], or '{key}=[{example}]' to give a wrapper options"
    )
    with pytest.raises(ConfigError) as given:  # the same words for a dict or keyword options
        envfactory.make_vec({key: "time_limit"})
    assert str(given.value) == str(info.value)
    with pytest.raises(ConfigError) as mapping:  # one wrapper's mapping, without the list
        envfactory.compose([f"{key}={{name: clip_reward, max_reward: 1}}"])
    assert str(mapping.value) == (
        f"{key}={{name: clip_reward, max_reward: 1}}: {key} takes a list, not a mapping; "
        f"write '{key}=[{{name: clip_reward, max_reward: 1}}]'"
    )


def test_an_override_with_an_unclosed_bracket_says_so_and_closes_it() -> None:
    """``wrappers=[{name: time_limit, max_episode_steps: 100}`` advised quoting the value,
    which does not work."""
    with pytest.raises(ConfigError) as info:
        envfactory.compose(["wrappers=[{name: time_limit, max_episode_steps: 100}"])
    assert str(info.value) == (
        "cannot read the override 'wrappers=[{name: time_limit, max_episode_steps: 100}': its "
        "[ is not closed; write 'wrappers=[{name: time_limit, max_episode_steps: 100}]'"
    )
    with pytest.raises(ConfigError) as both:
        envfactory.compose(["wrappers=[{name: time_limit, max_episode_steps: 100"])
    assert "its [ and { are not closed; write 'wrappers=[{name: time_limit, " in str(both.value)
    assert str(both.value).endswith("max_episode_steps: 100}]'")
    with pytest.raises(ConfigError) as extra:
        envfactory.compose(["wrappers=[time_limit]]"])
    assert str(extra.value) == (
        "cannot read the override 'wrappers=[time_limit]]': its ] closes nothing; write "
        "'wrappers=[time_limit]'"
    )
    with pytest.raises(ConfigError) as unreadable:  # closed, Hydra still cannot read it
        envfactory.compose(["num_envs=(1"])
    assert "not closed" not in str(unreadable.value) and "quote it" in str(unreadable.value)


@pytest.mark.parametrize(
    ("override", "says"),
    [
        (
            "num_envs=1,2",
            "num_envs=1,2 is a sweep over 2 values: add -m (--multirun) to run a job per value "
            "(in Python, compose once per value)",
        ),
        (
            "env=gym,mountaincar",
            "env=gym,mountaincar is a sweep over 2 values: add -m (--multirun) to run a job per "
            "value (in Python, compose once per value)",
        ),
        (
            "num_envs=range(1,4)",
            "num_envs=range(1,4) is a sweep over 3 values: add -m (--multirun) to run a job per "
            "value (in Python, compose once per value)",
        ),
        (
            "wrappers=time_limit,clip_reward",
            "wrappers=time_limit,clip_reward is a sweep over 2 values: add -m (--multirun) to "
            "run a job per value (in Python, compose once per value); for one list, write "
            "'wrappers=[time_limit,clip_reward]'",
        ),
    ],
)
def test_a_sweep_without_multirun_says_to_add_m(override: str, says: str) -> None:
    """``num_envs=1,2`` without ``-m`` said only ``invalid envfactory config: Ambiguous value
    for argument 'num_envs=1,2'`` (Hydra's advice dropped)."""
    with pytest.raises(ConfigError) as info:
        envfactory.compose([override])
    assert str(info.value) == says


class _Annotated(gym.Env):
    """An env whose constructor annotates its parameters."""

    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)

    def __init__(
        self,
        flag: bool = False,
        count: int = 1,
        scale: float = 1.0,
        name: str = "x",
        anything: Any = None,
        maybe: int | None = None,
        bare=None,
    ) -> None:
        pass


class _Unresolvable(_Annotated):
    """An annotation ``typing.get_type_hints`` cannot resolve: nothing is checked."""

    def __init__(
        self,
        count: int = 1,
        other: NoSuchType = None,  # noqa: F821
    ) -> None:
        pass


def test_an_env_kwarg_of_the_wrong_type_is_caught_at_compose() -> None:
    """``+env.kwargs.sutton_barto_reward=maybe`` (CartPole's parameter is annotated ``bool``)
    composed, and the string reached the env."""
    with pytest.raises(OptionError) as info:
        envfactory.compose(["+env.kwargs.sutton_barto_reward=maybe"])
    assert str(info.value) == (
        "env.kwargs.sutton_barto_reward='maybe': expected true or false (CartPoleEnv's "
        "sutton_barto_reward is annotated bool). Fix the value under env.kwargs"
    )
    gym.register("Annotated-v0", entry_point=_Annotated)
    try:
        bad = {"flag": 1, "count": True, "scale": "1.5", "name": 3}
        expected = {
            "flag": "true or false",
            "count": "an integer",
            "scale": "a number",
            "name": "a string",
        }
        for key, value in bad.items():
            with pytest.raises(OptionError) as err:
                envfactory.make_vec({"env": {"id": "Annotated-v0", "kwargs": {key: value}}})
            assert str(err.value).startswith(
                f"env.kwargs.{key}={value!r}: expected {expected[key]} (_Annotated's {key} is "
            ), str(err.value)
        good = "{flag: true, count: 2, scale: 2, name: y, anything: z, maybe: w, bare: v}"
        envfactory.compose(["env.id=Annotated-v0", f"env.kwargs={good}"])
        gym.register("Unresolvable-v0", entry_point=_Unresolvable)
        envfactory.compose(["env.id=Unresolvable-v0", "env.kwargs={count: many}"])
    finally:
        gym.registry.pop("Annotated-v0")
        gym.registry.pop("Unresolvable-v0", None)


@pytest.mark.parametrize(
    ("first", "says"),
    [
        ("CartPole-v1", "make_vec(overrides=['env.id=CartPole-v1'], num_envs=4)"),
        ("ALE/Pong-v5", "make_vec(overrides=['env=atari', 'env.id=ALE/Pong-v5'], num_envs=4)"),
        ("num_envs=2", "overrides go by name: make_vec(overrides=['num_envs=2'])"),
    ],
)
def test_an_env_id_as_the_first_argument_points_to_env_id(first: str, says: str) -> None:
    """``make_vec("CartPole-v1", num_envs=4)`` said ``overrides go by name:
    make_vec(overrides=['CartPole-v1'])``, which is no valid override either."""
    with pytest.raises(envfactory.ArgumentTypeError) as info:
        envfactory.make_vec(first, num_envs=4) if "=" not in first else envfactory.make_vec(first)
    assert str(info.value).endswith(says), str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["vectorizer=subproc", "vectorizer.batch_size=0"],
            "vectorizer.batch_size=0: expected an integer >= 1 or null. "
            "Set vectorizer.batch_size=1 or more, or null for a synchronous VecEnv",
        ),
        (
            ["vectorizer=subproc", "vectorizer.in_series=-1"],
            "vectorizer.in_series=-1: expected an integer >= 1 or null. "
            "Set vectorizer.in_series=1 or more, or null for one worker per core",
        ),
        (
            ["vectorizer=subproc", "vectorizer.spin_us=-5"],
            "vectorizer.spin_us=-5: expected an integer >= 0. Set vectorizer.spin_us=0 or more",
        ),
        (
            ["env=atari", "env.frame_skip=0"],
            "env.frame_skip=0: expected an integer >= 1. Set env.frame_skip=1 or more",
        ),
        (
            ["env=atari", "env.repeat_action_probability=1.5"],
            "env.repeat_action_probability=1.5: expected a number in [0, 1]. "
            "Set env.repeat_action_probability to a number in [0, 1]",
        ),
        (  # a gymnasium wrapper's range (wrappers/bounds.py): said no fix before
            ["wrappers=[{name:time_limit,max_episode_steps:0}]"],
            "wrappers[0].max_episode_steps=0: expected an integer >= 1. "
            "Set wrappers[0].max_episode_steps=1 or more",
        ),
        (
            ["wrappers=[{name:sticky_action,repeat_action_probability:1.5}]"],
            "wrappers[0].repeat_action_probability=1.5: expected a number in [0, 1). "
            "Set wrappers[0].repeat_action_probability to a number in [0, 1)",
        ),
        (
            ["num_envs=abc"],
            "num_envs=abc: expected an integer; got 'abc'; set num_envs to an integer, "
            "like num_envs=4",
        ),
        (
            ["run.progress=maybe"],
            "run.progress=maybe: expected true or false; got 'maybe'; set run.progress to true "
            "or false, like run.progress=true",
        ),
        (  # the wrapper named before the fix, as before
            ["wrappers=[{name:time_limit,max_episode_steps:x}]"],
            "wrappers[0].max_episode_steps=x: expected an integer; got 'x' (wrapper "
            "'time_limit'); set wrappers[0].max_episode_steps to an integer, like "
            "wrappers[0].max_episode_steps=4",
        ),
        (
            ["run.total_step=100"],
            "unknown key run.total_step. Did you mean 'run.total_steps'? Valid keys under run: ",
        ),
        (["num_env=3"], "unknown key num_env. Did you mean 'num_envs'? Valid keys: "),
    ],
)
def test_a_value_out_of_range_says_how_to_fix_it(overrides: list[str], message: str) -> None:
    """The trial: ``vectorizer.batch_size=0`` (and in_series, spin_us, frame_skip,
    num_envs=abc) said only what was expected, and ``run.total_step`` suggested
    ``total_steps``, not the key to write."""
    with pytest.raises(ConfigError) as info:
        envfactory.compose(overrides)
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)


def test_a_schema_built_directly_names_its_field_in_the_fix() -> None:
    """(No config path: a schema made in Python, as a plugin's tests do.)"""
    from envfactory.config.checks import check_int

    @dataclasses.dataclass
    class Options:
        batch_size: Any = 0

        def __post_init__(self) -> None:
            check_int(self, "batch_size", 1, optional=True, null="for a synchronous VecEnv")

    with pytest.raises(OptionError) as info:
        Options()
    assert str(info.value) == (
        "batch_size=0: expected an integer >= 1 or null. Set batch_size=1 or more, or null for "
        "a synchronous VecEnv"
    )
    assert str(info.value.at("vectorizer")).endswith(
        "Set vectorizer.batch_size=1 or more, or null for a synchronous VecEnv"
    )
