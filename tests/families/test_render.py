"""``env.render_mode`` for every built-in family, ``render()`` + ``tile_images`` under every
built-in vectorizer (pygame comes with the ``render`` extra, in the ``test`` extra too)."""

from __future__ import annotations

import numpy as np
import pytest

import envfactory

CARTPOLE = ["env=gym"]
MOUNTAINCAR = ["env=mountaincar"]
BREAKOUT = ["env=breakout"]
PONG_GYM = ["env=gym", "env.id=ALE/Pong-v5"]  # the gym family with an image env

CASES = [
    (CARTPOLE, "dummy", (400, 600, 3)),
    (CARTPOLE, "subproc", (400, 600, 3)),
    (MOUNTAINCAR, "dummy", (400, 600, 3)),
    (MOUNTAINCAR, "subproc", (400, 600, 3)),
    (BREAKOUT, "dummy", (210, 160, 3)),
    (BREAKOUT, "subproc", (210, 160, 3)),
    (BREAKOUT, "subproc-atari", (210, 160, 3)),
    (PONG_GYM, "subproc-atari", (210, 160, 3)),  # subproc-atari takes uint8 images only
]


def _frames(env: list[str], vectorizer: str, steps: int = 3) -> tuple[np.ndarray, ...]:
    over = [*env, f"vectorizer={vectorizer}", "num_envs=2", "env.render_mode=rgb_array"]
    with envfactory.make_vec(overrides=over) as envs:
        assert envs.render_mode == "rgb_array"
        envs.reset(seed=0)
        envs.action_space.seed(0)
        for _ in range(steps):
            envs.step(envs.action_space.sample())
        return tuple(envs.render())


@pytest.mark.parametrize(("env", "vectorizer", "shape"), CASES)
def test_render_gives_one_real_frame_per_env(
    env: list[str], vectorizer: str, shape: tuple[int, ...]
) -> None:
    frames = _frames(env, vectorizer)
    assert len(frames) == 2
    for frame in frames:
        assert frame.shape == shape and frame.dtype == np.uint8
        colors = np.unique(frame.reshape(-1, 3), axis=0)
        assert len(colors) >= 4  # a drawn scene, not a blank or one-colour image
        assert (frame.min(axis=-1) != frame.max(axis=-1)).any()  # RGB, not grayscale
    tiled = envfactory.tile_images(frames)
    assert tiled.shape == (shape[0], 2 * shape[1], 3)
    np.testing.assert_array_equal(tiled[:, : shape[1]], frames[0])


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_atari_frames_are_the_emulators_rgb_screen_under_every_vectorizer() -> None:
    """The atari family steps a RAM base env for speed; render() is still ALE's RGB screen,
    the same under every vectorizer."""
    over = [*BREAKOUT, "num_envs=2", "env.render_mode=rgb_array"]
    with envfactory.make_vec(overrides=over) as envs:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        for _ in range(3):
            envs.step(envs.action_space.sample())
        frames = envs.render()
        screens = [ale.getScreenRGB() for ale in envs.call("get_wrapper_attr", "ale")]
    for frame, screen in zip(frames, screens):
        np.testing.assert_array_equal(frame, screen)
    for vectorizer in ("subproc", "subproc-atari"):
        for ours, theirs in zip(_frames(BREAKOUT, vectorizer), frames):
            np.testing.assert_array_equal(ours, theirs)


def test_no_render_mode_by_default() -> None:
    for env in (CARTPOLE, MOUNTAINCAR, BREAKOUT):
        with envfactory.make_vec(overrides=[*env, "num_envs=1"]) as envs:
            assert envs.render_mode is None


@pytest.mark.parametrize(
    ("env", "fragments"),
    [
        (BREAKOUT, ["render_mode='rgb'", "rgb_array, human"]),
        (MOUNTAINCAR, ["'rgb'", "rgb_array, human"]),
        (CARTPOLE, ["render_mode='rgb'", "'CartPole-v1'", "human, rgb_array"]),
    ],
)
def test_bad_render_mode_is_one_clear_error(env: list[str], fragments: list[str]) -> None:
    with pytest.raises(envfactory.ConfigError) as info:
        envfactory.make_vec(overrides=[*env, "num_envs=1", "env.render_mode=rgb"])
    for fragment in fragments:
        assert fragment in str(info.value)


def test_gym_render_mode_and_kwargs_agree() -> None:
    over = ["num_envs=1", "env.render_mode=rgb_array", "+env.kwargs.render_mode=human"]
    with pytest.raises(envfactory.ConfigError, match="disagree"):
        envfactory.make_vec(overrides=over)
    over = ["num_envs=1", "+env.kwargs.render_mode=rgb_array"]  # the old spelling still works
    with envfactory.make_vec(overrides=over) as envs:
        envs.reset(seed=0)
        assert envs.render()[0].shape == (400, 600, 3)
