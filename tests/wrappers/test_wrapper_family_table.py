"""Every built-in wrapper on every built-in family (issue 39, item 9): each one either
works (a reset and a few steps) or is refused when the envs are built, in one line that
names the config entry, never at the first reset. ``atari_preprocessing`` on ``env=atari``
used to compose, build, and die at the first reset with ``RuntimeError: Invalid shape (84,
84), expecting shape (210, 160)`` (exit 1, a traceback file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import envfactory
from envfactory.config import validate
from envfactory.plugin.manager import get_registry

FAMILIES = ("gym", "mountaincar", "atari")

# the options a wrapper needs (its schema has no default for them)
OPTIONS: dict[str, dict[str, Any]] = {
    "add_white_noise": {"probability_of_noise_per_pixel": 0.1},
    "delay_observation": {"delay": 1},
    "discretize_action": {"bins": 3},
    "discretize_observation": {"bins": 3},
    "dtype_observation": {"dtype": "float32"},
    "filter_observation": {"filter_keys": ["a"]},
    "frame_stack_observation": {"stack_size": 2},
    "obstruct_view": {"obstructed_pixels_ratio": 0.1, "obstruction_width": 2},
    "record_video": {"video_folder": "videos"},
    "repeat_action": {"num_repeats": 2},
    "rescale_action": {"min_action": -1, "max_action": 1},
    "rescale_observation": {"min_obs": 0, "max_obs": 1},
    "reshape_observation": {"shape": [2, 2]},
    "resize_observation": {"shape": [42, 42]},
    "sticky_action": {"repeat_action_probability": 0.25},
    "time_limit": {"max_episode_steps": 5},
}

# what each built-in wrapper does on each family: refused (r) or works (w), per family in
# the order of FAMILIES; "?" for one whose optional dependency (torch, jax) decides
PER_ENV = {
    "add_render_observation": "rrr",  # needs env.render_mode
    "add_white_noise": "www",
    "array_conversion": "???",
    "atari_preprocessing": "rrr",  # not Atari; env=atari preprocesses already
    "autoreset": "www",
    "clip_action": "rrr",  # Box actions only
    "clip_reward": "rrr",  # needs a bound
    "delay_observation": "www",
    "discretize_action": "rrr",
    "discretize_observation": "rwr",
    "dtype_observation": "www",
    "filter_observation": "rrr",  # Dict/Tuple observations only
    "flatten_observation": "www",
    "frame_stack_observation": "www",
    "grayscale_observation": "rrr",  # RGB images only
    "human_rendering": "rrr",
    "jax_to_numpy": "???",
    "jax_to_torch": "???",
    "max_and_skip_observation": "www",
    "normalize_observation": "www",
    "normalize_reward": "www",
    "numpy_to_torch": "???",
    "obstruct_view": "www",
    "order_enforcing": "www",
    "passive_env_checker": "www",
    "record_episode_statistics": "www",
    "record_video": "rrr",
    "render_collection": "rrr",
    "repeat_action": "www",
    "rescale_action": "rrr",
    "rescale_observation": "rww",
    "reshape_observation": "wrr",  # (2, 2) holds CartPole's 4 numbers only
    "resize_observation": "rrw",
    "sticky_action": "www",
    "time_aware_observation": "wwr",  # env=atari has no time limit by default
    "time_limit": "www",
}
VECTOR = {
    "array_conversion": "???",
    "clip_action": "rrr",
    "clip_reward": "rrr",
    "dict_info_to_list": "www",
    "dtype_observation": "www",
    "filter_observation": "rrr",
    "flatten_observation": "www",
    "grayscale_observation": "rrr",
    "human_rendering": "rrr",
    "jax_to_numpy": "???",
    "jax_to_torch": "???",
    "legacy_final_info": "rrr",  # needs autoreset_mode=same_step
    "normalize_observation": "www",
    "normalize_reward": "www",
    "numpy_to_torch": "???",
    "record_episode_statistics": "www",
    "record_video": "rrr",
    "rescale_action": "rrr",
    "rescale_observation": "rww",
    "reshape_observation": "wrr",
    "resize_observation": "rrw",
}
TABLES = {"wrappers": PER_ENV, "vector_wrappers": VECTOR}


def _outcome(family: str, key: str, name: str) -> tuple[str, str]:
    """``("works", "")``, ``("refused", message)``, or ``("late", what was raised after
    the envs were built)``."""
    entry = json.dumps({"name": name, **OPTIONS.get(name, {})}).replace('"', "")
    overrides = [f"env={family}", "num_envs=2", "vectorizer=dummy", f"{key}=[{entry}]"]
    try:
        envs = envfactory.make_vec(validate(envfactory.compose(overrides)))
    except envfactory.ConfigError as exc:
        return "refused", str(exc)
    try:
        envs.reset(seed=0)
        for _ in range(3):
            envs.step(envs.action_space.sample())
    except Exception as exc:
        return "late", f"{type(exc).__name__}: {exc}"
    finally:
        envs.close()
    return "works", ""


def test_the_table_names_every_built_in_wrapper() -> None:
    reg = get_registry()
    for key, table in TABLES.items():
        builtin = {
            n for n, r in getattr(reg, key).items() if r.provider.distribution == "envfactory"
        }
        assert builtin == set(table), key


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
@pytest.mark.parametrize("family", FAMILIES)
def test_every_built_in_wrapper_works_or_is_refused_when_built(
    family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # (record_video's folder, were it to work)
    column = FAMILIES.index(family)
    wrong = []
    for key, table in TABLES.items():
        for name, row in sorted(table.items()):
            outcome, text = _outcome(family, key, name)
            expected = {"w": "works", "r": "refused"}.get(row[column])
            if outcome == "late" or (expected is not None and outcome != expected):
                wrong.append(f"{key}=[{name}] on env={family}: {outcome} {text}"[:300])
            if outcome == "refused":
                assert "\n" not in text, text
                assert text.startswith((f"{key}[0]", f"{key}[0].", "vector wrapper")), text
    assert not wrong, "\n".join(wrong)


def test_atari_preprocessing_on_env_atari_is_refused_at_compose_time_with_the_fix() -> None:
    """Known from the config alone: ``envfactory.compose`` refuses it, in this process,
    before any env (or worker) is made, so the line is the same under every vectorizer."""
    with pytest.raises(envfactory.ConfigError) as err:
        envfactory.compose(["env=pong", "env.image_size=[64,48]", "wrappers=[atari_preprocessing]"])
    assert str(err.value) == (
        "wrappers[0] (atari_preprocessing): env=atari already preprocesses the frames with "
        "gymnasium's AtariPreprocessing (DeepMind's steps), and a second one would read its "
        "64x48 frames as the raw screen; remove atari_preprocessing from wrappers and set the "
        "family's options instead (env.frame_skip, env.noop_max, env.image_size, env.obs_type, "
        "env.num_stack, ...), or use gymnasium's on the raw game: env=gym "
        "env.id=ale_py:ALE/Pong-v5 env.kwargs.frameskip=1 wrappers=[atari_preprocessing]"
    )


def _preprocessed_pong() -> Any:
    import gymnasium as gym

    return gym.wrappers.AtariPreprocessing(gym.make("ale_py:ALE/Pong-v5", frameskip=1))


def test_atari_preprocessing_on_a_family_that_preprocesses_already_is_refused_when_built() -> None:
    """A family of another plugin that applies gymnasium's AtariPreprocessing itself: known
    only from the env, refused when the wrapper is applied (not at the first reset)."""
    record = envfactory.EnvFamilyPlugin("preprocessed_pong", _preprocessed_pong)
    envfactory.register_plugin(record)
    overrides = ["env=preprocessed_pong", "num_envs=1", "wrappers=[atari_preprocessing]"]
    with pytest.raises(envfactory.ConfigError) as err:
        envfactory.make_vec(overrides=overrides)
    assert str(err.value).startswith(
        "wrappers[0] (atari_preprocessing) cannot wrap env 'preprocessed_pong': the env is "
        "preprocessed already by gymnasium's AtariPreprocessing (as env=atari is): its "
        "observations are (84, 84), not the raw screen that a second one would read; remove "
        "atari_preprocessing from wrappers"
    ), err.value


def test_atari_preprocessing_on_cartpole_says_it_needs_an_atari_env() -> None:
    """gymnasium's own words were "Disable frame-skipping in the original env"."""
    outcome, text = _outcome("gym", "wrappers", "atari_preprocessing")
    assert outcome == "refused", text
    assert text.startswith(
        "wrappers[0] (atari_preprocessing) cannot wrap env 'CartPole-v1': gymnasium's "
        "AtariPreprocessing needs an Atari (ALE) env, and this is not one; remove it"
    ), text


def test_the_raw_game_under_gymnasiums_atari_preprocessing_works_and_frameskip_is_named() -> None:
    """The fix the message gives works; without ``frameskip=1`` it says to set it."""
    base = ["env=gym", "env.id=ale_py:ALE/Pong-v5", "num_envs=1", "wrappers=[atari_preprocessing]"]
    with envfactory.make_vec(overrides=[*base, "env.kwargs.frameskip=1"]) as envs:
        obs, _ = envs.reset(seed=0)
        assert obs.shape == (1, 84, 84)
    with pytest.raises(envfactory.ConfigError) as err:
        envfactory.make_vec(overrides=base)
    assert "(frameskip=4)" in str(err.value) and "set env.kwargs.frameskip=1" in str(err.value)


def test_a_wrapper_that_needs_a_render_mode_says_to_set_env_render_mode() -> None:
    """It said "remove it or change its options", though the fix is the env's option."""
    outcome, text = _outcome("gym", "wrappers", "record_video")
    assert outcome == "refused", text
    assert text.endswith("; set env.render_mode=rgb_array (every family takes it), or remove it")
