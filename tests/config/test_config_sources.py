"""Where a config comes from and what a user sees when it is wrong: presets in the user's
config folder or a plugin's (a name clash with a built-in, a typo, broken YAML, a base
from a missing plugin), plugin wrappers' schemas, bare wrapper names, experiment files
without ``--config-dir`` and a vectorizer whose envfactory plugin package is not installed
(issue 28 items 1, 4, 12, 16, 17, 18)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

import envfactory
from envfactory.config import validate
from envfactory.errors import ConfigError, ConflictingNameError, UnknownNameError
from envfactory.plugin import manager


def _without_entry_point(monkeypatch: pytest.MonkeyPatch, dist: str) -> None:
    """As if the distribution ``dist`` were not installed."""
    entry_points = manager._entry_points

    def installed(group: str) -> list[Any]:
        return [ep for ep in entry_points(group) if ep.dist is None or ep.dist.name != dist]

    monkeypatch.setattr(manager, "_entry_points", installed)
    envfactory.reset_plugins()


@pytest.mark.parametrize(
    ("override", "dist"),
    [
        ("vectorizer=threads", "envfactory-threads"),
        ("vectorizer=gymnasium-async", "envfactory-gymnasium"),
    ],
)
def test_a_vectorizer_of_envfactorys_own_plugin_names_the_package(
    monkeypatch: pytest.MonkeyPatch, override: str, dist: str
) -> None:
    _without_entry_point(monkeypatch, dist)
    with pytest.raises(UnknownNameError) as info:
        envfactory.compose([override])
    msg = str(info.value)
    assert f"pip install {dist} " in msg and f"pip install ./plugins/{dist})" in msg
    assert "\n" not in msg


def test_an_experiment_without_its_config_dir_names_config_dir(run: Any) -> None:
    proc = run(["envfactory", "+experiment=pong_subproc"])
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("envfactory: error: unknown key experiment.")
    assert "envfactory --config-dir DIR +experiment=pong_subproc" in line
    assert "ENVFACTORY_CONFIG_DIR=DIR" in line
    with pytest.raises(ConfigError, match=r"experiment/pong_subproc\.yaml"):
        envfactory.compose(["+experiment=pong_subproc"])


def test_a_bare_wrapper_name_is_that_wrapper_with_its_defaults() -> None:
    plan = validate(
        envfactory.compose(
            ["wrappers=[record_episode_statistics]", "vector_wrappers=[normalize_reward]"]
        )
    )
    [(rec, options)] = plan.wrappers
    assert (rec.name, options["buffer_length"]) == ("record_episode_statistics", 100)
    assert [r.name for r, _ in plan.vector_wrappers] == ["normalize_reward"]
    with envfactory.make_vec({"wrappers": ["flatten_observation"], "num_envs": 1}) as envs:
        envs.reset(seed=0)
    # a wrapper with a required option says which, with the path
    with pytest.raises(ConfigError) as info:
        envfactory.make_vec({"wrappers": ["time_limit"]})
    assert str(info.value).startswith(
        "wrapper 'time_limit' at wrappers[0] needs option max_episode_steps"
    )
    with pytest.raises(ConfigError, match=r"wrappers\[0\] must be a wrapper name or a mapping"):
        envfactory.compose(["wrappers=[[time_limit]]"])


@dataclasses.dataclass
class _BonusConfig:
    bonus: float = 1.0

    def __post_init__(self) -> None:
        if self.bonus < 0:
            raise envfactory.OptionError("bonus", self.bonus, "a bonus >= 0")


def _bonus(env: Any, bonus: float = 1.0) -> Any:
    return env


def test_a_plugin_wrappers_schema_checks_run_at_compose_time() -> None:
    envfactory.register_plugin(envfactory.WrapperPlugin("my_bonus", _bonus, _BonusConfig))
    with pytest.raises(envfactory.OptionError) as info:
        envfactory.compose(["wrappers=[{name: my_bonus, bonus: -1}]"])
    assert str(info.value) == "wrappers[0].bonus=-1.0: expected a bonus >= 0."
    plan = validate(envfactory.compose(["wrappers=[{name: my_bonus, bonus: 2}]"]))
    assert plan.wrappers[0][1] == {"bonus": 2.0}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            "{name: time_limit, max_episode_steps: 0}",
            "wrappers[0].max_episode_steps=0: expected an integer >= 1. "
            "Set wrappers[0].max_episode_steps=1 or more",
        ),
        (
            "{name: frame_stack_observation, stack_size: 0}",
            "wrappers[0].stack_size=0: expected an integer >= 1. "
            "Set wrappers[0].stack_size=1 or more",
        ),
        (
            "{name: sticky_action, repeat_action_probability: 1.5}",
            "wrappers[0].repeat_action_probability=1.5: expected a number in [0, 1). "
            "Set wrappers[0].repeat_action_probability to a number in [0, 1)",
        ),
    ],
)
def test_gymnasium_wrapper_options_are_checked_at_compose_time(entry: str, message: str) -> None:
    with pytest.raises(envfactory.OptionError) as info:
        envfactory.compose([f"wrappers=[{entry}]"])
    assert str(info.value) == message


def test_a_bad_wrapper_option_is_one_line_at_the_command_line(run: Any) -> None:
    proc = run(["envfactory", "wrappers=[{name: time_limit, max_episode_steps: 0}]"])
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "envfactory: error: wrappers[0].max_episode_steps=0: expected an integer >= 1. "
        "Set wrappers[0].max_episode_steps=1 or more"
    )


def _preset(folder: Path, group: str, name: str, text: str) -> Path:
    path = folder / group / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("body", "fragments"),
    [
        (
            "timout: 3\n",
            [
                "unknown key vectorizer.timout. Did you mean 'vectorizer.timeout'?",
                "Valid keys under vectorizer: ",
            ],
        ),
        ("timeout: abc\n", ["vectorizer.timeout=abc: expected a number; got 'abc'"]),
    ],
)
def test_a_hand_edited_preset_names_the_file_key_and_value(
    run: Any, tmp_path: Path, body: str, fragments: list[str]
) -> None:
    path = _preset(
        tmp_path / "cfg", "vectorizer", "mine", f"defaults:\n  - subproc\n  - _self_\n{body}"
    )
    proc = run(
        ["envfactory", "vectorizer=mine"], env={"ENVFACTORY_CONFIG_DIR": str(tmp_path / "cfg")}
    )
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"envfactory: error: in the preset vectorizer/mine ({path}): ")
    for fragment in fragments:
        assert fragment in line


def test_a_preset_whose_base_is_missing_names_the_preset(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ENVFACTORY_CONFIG_DIR", str(tmp_path))
    path = _preset(tmp_path, "vectorizer", "fast", "defaults:\n  - threads\n  - _self_\n")
    _without_entry_point(monkeypatch, "envfactory-threads")
    with pytest.raises(UnknownNameError) as info:
        envfactory.compose(["vectorizer=fast"])
    msg = str(info.value)
    assert msg.startswith(f"in the preset vectorizer/fast ({path}): unknown vectorizer 'threads'")
    assert "(none registered)" not in msg and "subproc" in msg
    assert "pip install envfactory-threads" in msg


def test_a_preset_of_broken_yaml_is_one_line(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _preset(tmp_path, "vectorizer", "broken", "defaults:\n  - subproc\ntimeout: [1\n")
    proc = run(["envfactory", "vectorizer=broken"], env={"ENVFACTORY_CONFIG_DIR": str(tmp_path)})
    assert proc.returncode == 2
    [line] = [ln for ln in proc.stderr.strip().splitlines() if "Warning" not in ln]
    assert line.startswith(f"envfactory: error: {path} is not valid YAML: ")
    assert "line 3, column 10" in line
    monkeypatch.setenv("ENVFACTORY_CONFIG_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="is not valid YAML"):
        envfactory.compose(["vectorizer=broken"])


# -- item 1: a preset named like a built-in is a clash, not a silent replacement ----------


def test_a_user_preset_named_like_a_builtin_is_a_clash_naming_both(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ENVFACTORY_CONFIG_DIR", str(tmp_path))
    vec = _preset(tmp_path, "vectorizer", "dummy", "defaults:\n  - subproc\n  - _self_\n")
    with pytest.raises(ConflictingNameError) as info:
        envfactory.compose(["vectorizer=dummy"])
    msg = str(info.value)
    assert msg.startswith("the vectorizer 'dummy' (at vectorizer=dummy) is given by 2 config ")
    assert "envfactory " in msg and "(plugin 'envfactory.vectorizers')" in msg
    assert f"the preset {vec} in your config folder" in msg
    assert f"Rename or remove {vec}" in msg and "\n" not in msg
    # one clash leaves every other name usable
    assert envfactory.compose(["vectorizer=subproc"]).vectorizer.name == "subproc"
    env = _preset(tmp_path, "env", "gym", "defaults:\n  - mountaincar\n  - _self_\n")
    envfactory.reset_plugins()
    with pytest.raises(ConflictingNameError, match=f"the preset {env} in your"):
        envfactory.compose(["vectorizer=subproc"])  # env=gym is the default


def test_a_user_preset_named_like_a_builtin_is_one_line_at_the_command_line(
    run: Any, tmp_path: Path
) -> None:
    path = _preset(tmp_path, "vectorizer", "dummy", "defaults:\n  - subproc\n  - _self_\n")
    proc = run(["envfactory", "run.total_steps=10"], env={"ENVFACTORY_CONFIG_DIR": str(tmp_path)})
    assert proc.returncode == 2
    # one line: the conflict's warning is not printed too (it was, with the same words)
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("envfactory: error: the vectorizer 'dummy' (at vectorizer=dummy) is")
    assert str(path) in line
    # a job that does not use the name: the warning, once, and the job runs
    proc = run(
        ["envfactory", "env=mountaincar", "vectorizer=subproc", "--cfg", "job"],
        env={"ENVFACTORY_CONFIG_DIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("envfactory: warning: the vectorizer 'dummy' is given by 2 config")


def test_a_config_dir_preset_named_like_a_builtin_is_refused_naming_both(
    run: Any, tmp_path: Path
) -> None:
    """A new user's re-trial: ``--config-dir my_exps`` with ``vectorizer/subproc.yaml`` ran
    envfactory's ``subproc`` and ignored the file without a word (Hydra puts ``--config-dir``
    after envfactory's configs). One name means one config: it is refused, as a clashing
    preset in the user config folder is, and a preset of a new name is the way."""
    exps = tmp_path / "my_exps"
    vec = _preset(
        exps, "vectorizer", "subproc", "defaults:\n  - subproc\n  - _self_\nin_series: 3\n"
    )
    proc = run(["envfactory", "--config-dir", exps, "vectorizer=subproc"])
    assert proc.returncode == 2
    assert proc.stderr == (
        f"envfactory: error: --config-dir {exps}: its preset {vec} is named like the vectorizer "
        "'subproc' of envfactory 0.1.0 (plugin 'envfactory.vectorizers'), and one name means "
        f"one config, so it is not used. Rename it (e.g. {exps}/vectorizer/my_subproc.yaml, "
        "with 'defaults: [subproc, _self_]' to start from subproc) and select it with "
        "vectorizer=my_subproc\n"
    )
    assert not (tmp_path / "outputs").exists()
    vec.rename(vec.with_name("my_subproc.yaml"))  # what the line says: it is used
    proc = run(["envfactory", f"--config-dir={exps}", "vectorizer=my_subproc", "--cfg", "job"])
    assert proc.returncode == 0, proc.stderr
    assert "  name: subproc\n" in proc.stdout and "  in_series: 3\n" in proc.stdout
    # a preset named like one of envfactory's own (conf/env/pong.yaml)
    _preset(exps, "env", "pong", "defaults:\n  - atari\n  - _self_\nid: ALE/Breakout-v5\n")
    proc = run(["envfactory", "-cd", exps, "env=pong"])
    assert proc.returncode == 2
    assert (
        f"its preset {exps}/env/pong.yaml is named like the env 'pong' of envfactory's own "
        "preset " in proc.stderr
    )
    assert proc.stderr.count("\n") == 1


def test_a_plugins_preset_named_like_a_builtin_is_a_clash_naming_the_distribution(
    run: Any, plugin_sites: dict[str, Path]
) -> None:
    site = plugin_sites["shadow"]
    proc = run(["envfactory", "run.total_steps=10"], pythonpath=[site])
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert "the vectorizer 'dummy' (at vectorizer=dummy) is given by 2 config sources" in line
    preset = site / "envfactory_shadow" / "conf" / "vectorizer" / "dummy.yaml"
    assert f"the preset {preset} from envfactory-shadow 0.0.1 (plugin 'shadow')" in line
    assert "Disable one with ENVFACTORY_DISABLED_PLUGINS=shadow" in line
    # a clash of two presets (envfactory's own conf/env/pong.yaml and the plugin's)
    proc = run(["envfactory", "env=pong", "vectorizer=subproc"], pythonpath=[site])
    assert proc.returncode == 2
    assert "the env 'pong' (at env=pong) is given by 2 config sources: envfactory's own preset" in (
        proc.stderr
    )
    listing = run(["envfactory-plugins"], pythonpath=[site])
    assert "Conflicts (unusable until one plugin is disabled) (2)" in listing.stdout
    ok = run(
        ["envfactory", "run.total_steps=10", "run.progress=false"],
        pythonpath=[site],
        env={"ENVFACTORY_DISABLED_PLUGINS": "shadow"},
    )
    assert ok.returncode == 0, ok.stderr


def test_tune_refuses_a_name_another_config_source_gives(run: Any, tmp_path: Path) -> None:
    user = tmp_path / "user"
    _preset(user, "vectorizer", "fast", "defaults:\n  - subproc\n  - _self_\n")
    env = {"ENVFACTORY_CONFIG_DIR": str(user)}
    proc = run(
        ["envfactory", "tune", "--name", "fast", "--config-dir", str(tmp_path / "other")], env=env
    )
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("envfactory tune: error: --name 'fast': the preset ")
    assert str(user / "vectorizer" / "fast.yaml") in line and "Pick another name" in line
    assert not (tmp_path / "other").exists()


# -- a "# @package" header Hydra cannot read -----------------------------------------------


@pytest.mark.parametrize(
    ("text", "how"),
    [
        ("seed: 1\n", "without a '# @package' header its keys go under its group's name, "
         "'experiment'"),
        ("# @package _globl_\nseed: 1\n", "its header '# @package _globl_' puts its keys "
         "under '_globl_'"),
    ],
    ids=["no-header", "mistyped-header"],
)  # fmt: skip
def test_an_experiment_file_without_the_global_header_says_so(
    run: Any, tmp_path: Path, text: str, how: str
) -> None:
    """A new user's re-trial: the file's keys under ``experiment`` (or ``_globl_``) were an
    "unknown key experiment ... Fix the spelling" (no key was misspelled)."""
    _preset(tmp_path / "exps", "experiment", "fast", text)
    proc = run(["envfactory", "--config-dir", tmp_path / "exps", "+experiment=fast"])
    assert proc.returncode == 2
    assert proc.stderr == (
        f"envfactory: error: the config file experiment/fast.yaml sets envfactory's keys, but "
        f"{how}: make '# @package _global_' its first line (as the files in examples/)\n"
    )


def test_a_package_header_with_extra_words_is_one_line_naming_the_file(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new user's re-trial: ``# @package _global_ extra`` gave Hydra's traceback ending
    ``ValueError: Too many components in '@package _global_ extra'``, without the file."""
    exp = _preset(tmp_path / "exps", "experiment", "fast", "# @package _global_ extra\nseed: 1\n")
    proc = run(["envfactory", "--config-dir", tmp_path / "exps", "+experiment=fast"])
    assert proc.returncode == 2
    assert proc.stderr == (
        f"envfactory: error: the config file {exp} has a header Hydra cannot read, "
        "'# @package _global_ extra': a header takes one word after @package (e.g. "
        "'# @package _global_'); remove 'extra'\n"
    )
    assert not (tmp_path / "outputs").exists()  # composing failed: no run dir either
    vec = _preset(tmp_path / "cfg", "vectorizer", "mine", "# @package\ndefaults:\n  - subproc\n")
    monkeypatch.setenv("ENVFACTORY_CONFIG_DIR", str(tmp_path / "cfg"))
    with pytest.raises(ConfigError) as info:
        envfactory.compose(["vectorizer=mine"])
    assert str(info.value) == (
        f"the config file {vec} has a header Hydra cannot read, '# @package': a header takes "
        "one word after @package (e.g. '# @package _global_'); give it one (or remove the line)"
    )


@pytest.mark.parametrize("key", ["wrappers", "vector_wrappers"])
def test_clip_reward_bounds_are_checked_at_compose_time(key: str) -> None:
    """gymnasium's ClipReward (and its vector counterpart, which builds one) raises
    ``InvalidBound`` for ``max_reward < min_reward`` and for neither given: that was a
    traceback when the first env was built (in a worker under subproc)."""
    with pytest.raises(envfactory.OptionError) as info:
        envfactory.compose([f"{key}=[{{name: clip_reward, min_reward: 1, max_reward: -1}}]"])
    assert str(info.value) == (
        f"{key}[0].max_reward=-1: expected a number >= 1 (its min_reward). gymnasium's "
        "ClipReward needs min_reward <= max_reward: swap them, or change one"
    )
    with pytest.raises(envfactory.OptionError) as neither:
        envfactory.compose([f"{key}=[clip_reward]"])
    assert str(neither.value) == (
        f"{key}[0].min_reward=None: expected a number when max_reward is null too. gymnasium's "
        "ClipReward needs one bound at least: set min_reward, max_reward or both"
    )
    with pytest.raises(envfactory.OptionError, match=r"max_reward=\[0, -2\]: expected "):
        envfactory.compose(
            [f"{key}=[{{name: clip_reward, min_reward: [0, -1], max_reward: [0, -2]}}]"]
        )
    for good in ("min_reward: -1, max_reward: 1", "min_reward: 1, max_reward: 1", "max_reward: 1"):
        envfactory.compose([f"{key}=[{{name: clip_reward, {good}}}]"])


RESIZE = "{name: resize_observation, shape: [84, 84]}"
RESIZE_SAYS = (
    "ValueError: ResizeObservation requires a 2D or 3D image, got shape (4,); remove it or "
    "change its options"
)


def test_a_wrapper_that_cannot_wrap_the_env_names_its_entry() -> None:
    """A wrapper whose options are fine but which refuses the env (an image wrapper on
    CartPole) raised gymnasium's bare ``ValueError``: ``envfactory: error: ValueError:
    ResizeObservation requires ...`` with no key path."""
    with pytest.raises(ConfigError) as info:
        envfactory.make_vec(overrides=[f"wrappers=[record_episode_statistics, {RESIZE}]"])
    assert str(info.value) == (
        f"wrappers[1] (resize_observation) cannot wrap env 'CartPole-v1': {RESIZE_SAYS}"
    )
    cause = info.value.__cause__
    assert type(cause) is ValueError and "requires a 2D or 3D image" in str(cause)
    with pytest.raises(ConfigError, match=r"^wrappers\[0\] \(resize_observation\) cannot wrap"):
        envfactory.make_env(overrides=[f"wrappers=[{RESIZE}]"])
    with pytest.raises(ConfigError) as vector:
        envfactory.make_vec(overrides=[f"vector_wrappers=[{RESIZE}]", "num_envs=2"])
    assert str(vector.value) == (
        "vector_wrappers[0] (resize_observation) cannot wrap the vector env (vectorizer "
        f"'dummy', 2 envs of 'CartPole-v1'): {RESIZE_SAYS}"
    )
    assert type(vector.value.__cause__) is ValueError
