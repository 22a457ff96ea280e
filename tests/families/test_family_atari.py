"""Tests of the ``atari`` family (real ROMs shipped with ale-py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from envfactory.errors import ConfigError
from envfactory.families.atari import AtariConfig, make_atari
from envfactory.families.atari_wrappers import FireReset

REPO = Path(__file__).resolve().parents[2]


def _ale(env: gym.Env) -> Any:
    return env.unwrapped.ale  # type: ignore[attr-defined]


def _frame(env: gym.Env) -> int:
    return int(_ale(env).getEpisodeFrameNumber())


def _check_space(env: gym.Env, obs: np.ndarray, shape: tuple[int, ...]) -> None:
    assert obs.shape == shape and obs.dtype == np.uint8
    assert env.observation_space == gym.spaces.Box(0, 255, shape, np.uint8)
    assert env.observation_space.contains(obs)


def test_defaults_shape_dtype_space() -> None:
    env = make_atari()
    obs, _ = env.reset(seed=0)
    _check_space(env, obs, (84, 84, 4))
    obs, reward, terminated, truncated, _ = env.step(0)
    _check_space(env, obs, (84, 84, 4))
    assert isinstance(reward, float) and not terminated and not truncated
    assert env.action_space == gym.spaces.Discrete(6)  # Pong's minimal action set
    env.close()


def test_config_defaults_match_make() -> None:
    cfg = AtariConfig()
    assert (cfg.family, cfg.id, cfg.num_stack, cfg.image_size) == ("atari", "ALE/Pong-v5", 4, 84)
    assert cfg.repeat_action_probability == 0.0 and cfg.max_episode_steps is None


def test_rgb_stack_order_and_channels() -> None:
    env = make_atari(obs_type="rgb", id="ALE/Breakout-v5")
    obs0, _ = env.reset(seed=1)
    _check_space(env, obs0, (84, 84, 12))
    slots0 = [obs0[..., 3 * k : 3 * k + 3] for k in range(4)]
    assert all(np.array_equal(s, slots0[0]) for s in slots0)  # padded with the reset frame
    obs1, *_ = env.step(3)
    obs2, *_ = env.step(3)
    assert np.array_equal(obs1[..., :9], obs0[..., :9])  # oldest first: [r, r, r, s1]
    assert not np.array_equal(obs1[..., 9:], obs0[..., 9:])
    assert np.array_equal(obs2[..., :6], obs0[..., :6])  # [r, r, s1, s2]
    assert np.array_equal(obs2[..., 6:9], obs1[..., 9:])
    env.close()


def test_rgb_last_channels_are_current_frame() -> None:
    import cv2

    env = make_atari(obs_type="rgb", frame_skip=1, id="ALE/Breakout-v5", image_size=[84, 96])
    env.reset(seed=2)
    for _ in range(5):
        obs, *_ = env.step(3)
    expected = cv2.resize(_ale(env).getScreenRGB(), (96, 84), interpolation=cv2.INTER_AREA)
    assert obs.shape == (84, 96, 12)
    assert np.array_equal(obs[..., 9:], expected)  # R, G, B of the newest frame
    env.close()


@pytest.mark.parametrize("obs_type", ["grayscale", "rgb"])
def test_chw_is_hwc_transposed(obs_type: str) -> None:
    hwc, chw = make_atari(obs_type=obs_type), make_atari(obs_type=obs_type, layout="chw")
    channels = 4 if obs_type == "grayscale" else 12
    for seed in (0,):
        a, _ = hwc.reset(seed=seed)
        b, _ = chw.reset(seed=seed)
        for action in (2, 2, 3, 0, 2):
            a, *_ = hwc.step(action)
            b, *_ = chw.step(action)
        _check_space(chw, b, (channels, 84, 84))
        assert b.flags.c_contiguous and a.flags.c_contiguous
        assert np.array_equal(np.moveaxis(a, -1, 0), b)


def test_ram() -> None:
    env = make_atari(obs_type="ram", layout="chw")  # layout is ignored for ram
    obs0, _ = env.reset(seed=0)
    _check_space(env, obs0, (512,))
    assert all(np.array_equal(obs0[128 * k : 128 * (k + 1)], obs0[:128]) for k in range(4))
    frame = _frame(env)
    obs1, *_ = env.step(2)
    assert np.array_equal(obs1[384:], _ale(env).getRAM())  # newest last
    assert np.array_equal(obs1[:384], obs0[:384])
    assert _frame(env) == frame + 4  # frame skip without image processing
    single = make_atari(obs_type="ram", num_stack=1)
    _check_space(single, single.reset(seed=0)[0], (128,))


def test_image_size_non_square() -> None:
    env = make_atari(image_size=[60, 100])
    _check_space(env, env.reset(seed=0)[0], (60, 100, 4))
    env = make_atari(image_size=(50, 40), obs_type="rgb", layout="chw")
    _check_space(env, env.reset(seed=0)[0], (12, 50, 40))
    _check_space(env, env.step(0)[0], (12, 50, 40))


@pytest.mark.parametrize(
    ("options", "shape"),
    [
        ({}, (84, 84, 1)),
        ({"layout": "chw"}, (1, 84, 84)),
        ({"obs_type": "rgb"}, (84, 84, 3)),
        ({"obs_type": "rgb", "layout": "chw"}, (3, 84, 84)),
    ],
)
def test_num_stack_1(options: dict[str, Any], shape: tuple[int, ...]) -> None:
    env = make_atari(num_stack=1, **options)
    _check_space(env, env.reset(seed=0)[0], shape)
    _check_space(env, env.step(0)[0], shape)


def test_clip_reward_and_unclipped_episode_return() -> None:
    common = dict(id="ALE/SpaceInvaders-v5", max_episode_steps=300, episodic_life=False)
    raw_env, clip_env = make_atari(clip_reward=False, **common), make_atari(**common)
    raw_env.reset(seed=5)
    clip_env.reset(seed=5)
    rng = np.random.default_rng(0)
    raw_total, raw_rewards, clip_rewards, info = 0.0, [], [], {}
    for _ in range(300):
        action = int(rng.integers(raw_env.action_space.n))
        _, r_raw, *_ = raw_env.step(action)
        _, r_clip, term, trunc, info = clip_env.step(action)
        raw_rewards.append(r_raw)
        clip_rewards.append(r_clip)
        raw_total += r_raw
        if term or trunc:
            break
    assert max(raw_rewards) > 1  # SpaceInvaders scores 5..30 per alien
    assert set(clip_rewards) <= {-1.0, 0.0, 1.0} and 1.0 in clip_rewards
    assert clip_rewards == [float(np.sign(r)) for r in raw_rewards]
    assert info["episode_stats"]["r"] == pytest.approx(raw_total)  # statistics see raw rewards


def test_episodic_life_does_not_reset_game() -> None:
    env = make_atari(id="ALE/Breakout-v5")
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    lives0 = _ale(env).lives()
    for _ in range(2000):
        _, _, terminated, truncated, info = env.step(int(rng.integers(4)))
        if terminated:
            break
    assert terminated and not truncated
    lives = _ale(env).lives()
    assert 0 < lives < lives0 and info["lives"] == lives
    assert "episode_stats" not in info  # not a real game over
    frame = _frame(env)
    _, info = env.reset()
    assert _ale(env).lives() == lives  # the game was not reset
    assert _frame(env) == frame + 3 * 4  # one no-op step, then FIRE and action 2
    # play on to the real game over: statistics appear only there
    seen_episode = []
    for _ in range(20000):
        _, _, terminated, truncated, info = env.step(int(rng.integers(4)))
        seen_episode.append("episode_stats" in info)
        if terminated or truncated:
            if _ale(env).lives() == 0:
                break
            env.reset()
    assert _ale(env).lives() == 0 and seen_episode[-1] and sum(seen_episode) == 1
    assert info["episode_stats"]["l"] > len(seen_episode)  # counts all agent steps of the game
    env.reset()
    assert _ale(env).lives() == lives0 and _frame(env) < 50  # real reset after game over


def _lose_a_life(env: gym.Env, seed: int = 0) -> int:
    """Reset with ``seed`` and play seeded random actions until a life is lost; return
    the number of learner steps."""
    env.reset(seed=seed)
    env.action_space.seed(seed)
    for step in range(1, 2000):
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            assert terminated and not truncated and _ale(env).lives() == 4
            return step
    raise AssertionError("no life lost")


def test_a_time_limit_in_wrappers_starts_a_new_game() -> None:
    """A user time_limit truncates: the next episode is a new game (5 lives, frame ~0), not
    the old game continued."""
    import envfactory

    over = ["env=breakout", "num_envs=1", "wrappers=[{name: time_limit, max_episode_steps: 15}]"]
    with envfactory.make_vec(overrides=over) as envs:
        envs.reset(seed=0)
        envs.action_space.seed(0)
        new_games = 0
        for step in range(1, 49):
            _, _, term, trunc, infos = envs.step(envs.action_space.sample())
            if step % 16 == 15:
                assert trunc[0] and not term[0] and infos["_episode_stats"][0]
            elif step % 16 == 0:  # next_step autoreset: the reset step
                assert infos["lives"][0] == 5 and infos["episode_frame_number"][0] < 60
                new_games += 1
            else:
                assert not (term[0] or trunc[0])
        assert new_games == 3


def test_only_the_reset_right_after_a_lost_life_continues_the_game() -> None:
    env = make_atari(id="ALE/Breakout-v5")
    _lose_a_life(env)
    _, info = env.reset()
    assert info["lives"] == 4 and info["episode_frame_number"] > 60  # continued
    _, info = env.reset()  # a second unseeded reset in a row: a new game
    assert info["lives"] == 5 and info["episode_frame_number"] < 60
    env.close()


def test_a_game_that_ends_during_the_continuation_keeps_its_statistics() -> None:
    """max_episode_steps falls on the continuation no-op after a lost life: the game is
    reset and its statistics come with the reset's info."""
    probe = make_atari(id="ALE/Breakout-v5")
    steps = _lose_a_life(probe)
    probe.close()
    limit = 2 + steps + 1  # FIRE + action 2 at reset, the learner's steps, the no-op
    env = make_atari(id="ALE/Breakout-v5", max_episode_steps=limit)
    assert _lose_a_life(env) == steps
    _, info = env.reset()
    assert info["episode_stats"]["l"] == limit
    assert info["lives"] == 5 and info["episode_frame_number"] < 60  # a new game
    env.close()


def test_fire_reset_presses_fire() -> None:
    fire = make_atari(id="ALE/Breakout-v5", noop_max=0, episodic_life=False)
    plain = make_atari(id="ALE/Breakout-v5", noop_max=0, episodic_life=False, fire_reset=False)
    fire.reset(seed=0)
    plain.reset(seed=0)
    assert _frame(fire) == _frame(plain) + 2 * 4
    # without FIRE the ball never launches: the screen stays static under NOOP
    quiet = [plain.step(0)[0] for _ in range(10)]
    moving = [fire.step(0)[0] for _ in range(10)]
    assert all(np.array_equal(o, quiet[0]) for o in quiet)
    assert not all(np.array_equal(o, moving[0]) for o in moving)


def test_fire_reset_inactive_without_fire_action() -> None:
    env = make_atari(id="ALE/Freeway-v5", noop_max=0, episodic_life=False)
    wrapper = env
    while not isinstance(wrapper, FireReset):
        wrapper = wrapper.env  # type: ignore[attr-defined]
    assert not wrapper.active
    env.reset(seed=0)
    assert _frame(env) == 0


def test_episode_statistics_on_truncation() -> None:
    env = make_atari(max_episode_steps=50, fire_reset=False)
    env.reset(seed=0)
    for step in range(1, 51):
        _, _, terminated, truncated, info = env.step(0)
        assert not terminated
        assert truncated == (step == 50) and ("episode_stats" in info) == (step == 50)
    assert info["episode_stats"]["l"] == 50
    assert info["episode_stats"]["r"] <= 0  # Pong under NOOP: only the opponent scores


def _rollout(env: gym.Env, seed: int, steps: int) -> tuple[list[np.ndarray], list[float]]:
    rng = np.random.default_rng(123)
    obs, _ = env.reset(seed=seed)
    observations, rewards = [obs], []
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        observations.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            observations.append(env.reset()[0])
    return observations, rewards


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
@pytest.mark.parametrize("options", [{}, {"repeat_action_probability": 0.25, "obs_type": "ram"}])
def test_determinism_same_seed(options: dict[str, Any]) -> None:
    env = make_atari(id="ALE/Breakout-v5", **options)
    first = _rollout(env, seed=7, steps=300)
    again = _rollout(env, seed=7, steps=300)  # same instance, reseeded
    fresh = _rollout(make_atari(id="ALE/Breakout-v5", **options), seed=7, steps=300)
    for other in (again, fresh):
        assert len(first[0]) == len(other[0]) and first[1] == other[1]
        assert all(np.array_equal(a, b) for a, b in zip(first[0], other[0]))


@pytest.mark.slow  # > 3 s: CI runs it; the quick loop (-m 'not slow') does not
def test_noops_come_from_the_seed() -> None:
    env = make_atari(fire_reset=False, episodic_life=False)
    frames, firsts = [], []
    for seed in range(6):
        obs, _ = env.reset(seed=seed)
        frames.append(_frame(env))
        firsts.append(obs)
        assert np.array_equal(env.reset(seed=seed)[0], obs) and _frame(env) == frames[-1]
    assert all(1 <= f <= 30 for f in frames)
    assert len(set(frames)) > 1
    assert len({o.tobytes() for o in firsts}) > 1
    no_noop = make_atari(noop_max=0, fire_reset=False)
    no_noop.reset(seed=0)
    assert _frame(no_noop) == 0


def test_action_space_options() -> None:
    env = make_atari(full_action_space=True, repeat_action_probability=0.25)
    assert env.action_space == gym.spaces.Discrete(18)
    assert _ale(env).getFloat("repeat_action_probability") == pytest.approx(0.25)


def test_mode_difficulty_and_ram_info() -> None:
    """``mode`` / ``difficulty`` set the game's (ALE's setMode / setDifficulty) and change
    it; ``ram_info`` puts the console's RAM in every info (issue 38)."""
    raw = {"num_stack": 1, "noop_max": 0, "fire_reset": False, "obs_type": "rgb"}
    for game, option in (("Breakout", {"difficulty": 1}), ("Freeway", {"mode": 1})):
        plain = make_atari(id=f"ALE/{game}-v5", **raw)
        other = make_atari(id=f"ALE/{game}-v5", **raw, **option)
        assert not np.array_equal(plain.reset(seed=0)[0], other.reset(seed=0)[0]), game
    env = make_atari(ram_info=True)
    _, info = env.reset(seed=0)
    np.testing.assert_array_equal(info["ram"], _ale(env).getRAM())
    _, _, _, _, info = env.step(0)
    assert info["ram"].dtype == np.uint8 and info["ram"].shape == (128,)
    np.testing.assert_array_equal(info["ram"], _ale(env).getRAM())
    assert "ram" not in make_atari().reset(seed=0)[1]


@pytest.mark.parametrize("obs_type", ["grayscale", "ram"])
def test_a_game_without_noop_takes_the_consoles_noops(obs_type: str) -> None:
    """Backgammon's minimal action set has no NOOP, so AtariPreprocessing refused
    ``noop_max > 0`` (the build failed): its no-ops are the console's own NOOP, a seeded
    number of them, as envpool's."""
    env = make_atari(id="ALE/Backgammon-v5", obs_type=obs_type)
    assert env.unwrapped.get_action_meanings()[0] != "NOOP"  # type: ignore[attr-defined]
    frames = set()
    for seed in range(4):
        env.reset(seed=seed)
        frames.add(_frame(env))
    assert len(frames) > 1  # the number of no-ops follows the seed
    env.reset(seed=0)
    again = _frame(env)
    env.reset(seed=0)
    assert _frame(env) == again
    env.step(0)


@pytest.mark.parametrize(
    ("options", "fragments"),
    [
        ({"obs_type": "gray"}, ["obs_type", "'gray'", "grayscale, rgb, ram"]),
        ({"layout": "nhwc"}, ["layout", "'nhwc'", "hwc, chw"]),
        ({"frame_skip": 0}, ["frame_skip", "0", ">= 1"]),
        ({"num_stack": 0}, ["num_stack", "0", ">= 1"]),
        ({"noop_max": -1}, ["noop_max", "-1", ">= 0"]),
        ({"frame_skip": 2.5}, ["frame_skip", "2.5"]),
        ({"image_size": [84]}, ["image_size", "[84]", "[height, width]"]),
        ({"image_size": 0}, ["image_size", "0"]),
        ({"image_size": "84"}, ["image_size", "'84'"]),
        ({"image_size": [84, -1]}, ["image_size", "[84, -1]"]),
        ({"repeat_action_probability": 1.5}, ["repeat_action_probability", "1.5"]),
        ({"max_episode_steps": 0}, ["max_episode_steps", "0"]),
        ({"clip_reward": "yes"}, ["clip_reward", "'yes'"]),
        ({"mode": -1}, ["mode", "-1", ">= 0"]),
        ({"difficulty": 0.5}, ["difficulty", "0.5"]),
        ({"ram_info": "no"}, ["ram_info", "'no'"]),
        ({"frame_skips": 4}, ["frame_skips", "Did you mean 'frame_skip'"]),
        ({"id": "ALE/Pongg-v5"}, ["id", "'ALE/Pongg-v5'", "ALE/Pong-v5"]),
        ({"id": "CartPole-v1"}, ["id", "'CartPole-v1'", "ALE"]),
    ],
)
def test_config_errors(options: dict[str, Any], fragments: list[str]) -> None:
    with pytest.raises(ConfigError) as excinfo:
        make_atari(**options)
    message = str(excinfo.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_import_is_lazy() -> None:
    code = (
        "import sys, envfactory.families.atari, envfactory.families.atari_wrappers\n"
        "heavy = [m for m in ('ale_py', 'cv2') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("obs_type", ["grayscale", "rgb"])
def test_frames_equal_gymnasiums_own_atari_preprocessing(obs_type: str) -> None:
    """The RAM-observation base env (which spares ALE an RGB render per skipped frame)
    gives exactly the frames of gymnasium's AtariPreprocessing over an RGB base env."""
    import ale_py

    gym.register_envs(ale_py)
    ours = make_atari(
        id="ALE/Breakout-v5", obs_type=obs_type, num_stack=1, episodic_life=False,
        fire_reset=False, clip_reward=False,
    )  # fmt: skip
    ref = gym.wrappers.AtariPreprocessing(
        gym.make("ALE/Breakout-v5", frameskip=1, repeat_action_probability=0.0),
        noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=obs_type == "grayscale",
    )  # fmt: skip
    o1, _ = ours.reset(seed=7)
    o2, _ = ref.reset(seed=7)
    rng = np.random.default_rng(0)
    for _ in range(200):
        assert np.array_equal(o1.reshape(o2.shape), o2)
        a = int(rng.integers(ours.action_space.n))
        o1, r1, t1, u1, _ = ours.step(a)
        o2, r2, t2, u2, _ = ref.step(a)
        assert (r1, t1, u1) == (r2, t2, u2)
        if t1 or u1:
            o1, _ = ours.reset()
            o2, _ = ref.reset()


# -- the ROM loaded once (ale_rom): start-up, issue 28 -----------------------------------
def _count_loads(monkeypatch: Any) -> list[str]:
    """Clear what this process knows of the games and count the ROM loads really done."""
    from ale_py.env import AtariEnv

    from envfactory.families import ale_rom

    monkeypatch.setattr(ale_rom, "_KNOWN", {})
    loads: list[str] = []
    real = AtariEnv.load_game

    def load_game(self: Any) -> None:
        loads.append(self._game)
        real(self)

    monkeypatch.setattr(AtariEnv, "load_game", load_game)
    return loads


def test_envs_of_a_game_built_here_before_load_their_rom_at_the_first_reset_only(
    monkeypatch: Any,
) -> None:
    """ale_py loads the ROM when an env is built and again at its seeded reset (~65 ms
    each): the family's second and later envs of a game skip the first load (8 Pongs made
    16 loads before their first batch, now 9)."""
    loads = _count_loads(monkeypatch)
    envs = [make_atari(id="ALE/Pong-v5") for _ in range(4)]
    assert loads == ["pong"]  # the first env only: its action set and screen serve the rest
    for k, env in enumerate(envs):
        obs, _ = env.reset(seed=k)
        _check_space(env, obs, (84, 84, 4))
    assert loads == ["pong"] * 5  # each seeded reset loads (as ale_py's own env does)


def test_an_env_whose_rom_loads_at_reset_steps_as_ale_pys_own(monkeypatch: Any) -> None:
    """What a seeded reset and the steps after it return is ale_py's AtariEnv's, frame for
    frame; an unseeded first reset and a step before any reset load the ROM too."""
    import ale_py
    from ale_py.env import AtariEnv

    from envfactory.families.ale_rom import RomAtOnceAtariEnv

    _count_loads(monkeypatch)
    kw = {"frameskip": 1, "repeat_action_probability": 0.25, "obs_type": "ram"}
    RomAtOnceAtariEnv("breakout", **kw)  # (the game becomes known here)
    late, own = RomAtOnceAtariEnv("breakout", **kw), AtariEnv("breakout", **kw)
    assert late.rom_pending and late.action_space == own.action_space
    assert late.observation_space == own.observation_space
    assert late.get_action_meanings() == own.get_action_meanings()
    a, _ = late.reset(seed=7)
    b, _ = own.reset(seed=7)
    assert (a == b).all() and not late.rom_pending
    for t in range(300):
        x, y = late.step(t % 4), own.step(t % 4)
        assert (x[0] == y[0]).all() and x[1:4] == y[1:4], t
    assert (late.ale.getScreenRGB() == own.ale.getScreenRGB()).all()
    unseeded = RomAtOnceAtariEnv("breakout", **kw)
    obs, _ = unseeded.reset()
    assert obs.shape == (128,) and int(unseeded.ale.getEpisodeFrameNumber()) == 0
    stepped = RomAtOnceAtariEnv("breakout", **kw)
    assert stepped.step(0)[0].shape == (128,)  # (no reset: loaded by the step)
    assert isinstance(stepped.clone_state(), ale_py.ALEState)
    asked = RomAtOnceAtariEnv("breakout", **kw)  # the ALE itself, before any reset:
    assert asked.rom_pending and asked.ale.lives() == 5  # loaded first, never a game-less ALE
    assert not asked.rom_pending and asked.ale.getScreenRGB().shape == (210, 160, 3)
