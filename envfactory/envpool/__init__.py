"""envpool's Python interface over envfactory's async pool: swap one import line.

Code written for [envpool](https://github.com/sail-sg/envpool) 1.2 runs with
``import envfactory.envpool as envpool`` in place of ``import envpool``:

    import envfactory.envpool as envpool
    env = envpool.make("Pong-v5", env_type="gymnasium", num_envs=8, batch_size=4, seed=0)
    env.async_reset()
    while True:
        obs, rew, term, trunc, info = env.recv()          # the next 4 ready envs
        env.send(policy(obs), info["env_id"])

What is envpool's, and kept: ``make(task_id, env_type, **options)`` (``env_type``
required), ``make_gymnasium`` and ``make_gym`` (the same since envpool 1.2: gymnasium's API,
``reset`` -> ``(obs, info)``, 5-tuple steps, gymnasium spaces), ``make_spec`` and
``env.spec`` ([`EnvSpec`][envfactory.envpool.EnvSpec]: ``spec.config.max_episode_steps``,
``reward_threshold``, the spaces, the state and action array specs), ``list_all_envs()``,
``__version__`` (the envpool version whose interface this follows); per-env
``action_space`` / ``observation_space``; ``len(env)``, ``env.is_async``, ``env.config``;
the pool is a ``gymnasium.Env`` and a ``gymnasium.vector.VectorEnv`` (``num_envs``,
``single_observation_space``, ``single_action_space``, ``is_vector_env``), so gymnasium's
wrappers and vector wrappers take it; ``reset(env_id=None)`` (also gymnasium's
``options={"reset_mask": ...}``), ``step(action, env_id=None)`` (also for a subset of envs
in synchronous mode), ``async_reset()``, ``send(action, env_id=None)`` (also envpool's
dict form ``{"action": ..., "env_id": ...}``), ``recv()``; ``render_mode=`` and
``render(env_ids=None)`` (frames ``(k, H, W, 3)``, env 0 by default); float32 rewards;
infos ``env_id``, ``players`` (``{"env_id": ...}``), ``elapsed_step`` and the env's own
infos (CliffWalking's ``prob``, ...), and for Atari ``lives``, ``reward`` (before
clipping), ``terminated`` (the real game over) and ``ram``; the seed given to ``make``
(default 42; env ``i`` gets ``seed + i``); envpool's auto-reset (the step after the end of
an episode resets the env and ignores its action: gymnasium's ``next_step``), and its pool
that starts done (a step of an env never reset is its reset).

Task ids: envpool's Atari ids (``Pong-v5``, ``Breakout-v5``, any ``<Game>-v5`` of a ROM
ale-py ships) build envfactory's ``atari`` family with envpool's defaults (no episodic
life, no reward clipping, fire reset, 84x84 grayscale, CHW, stack 4, frame skip 4, noop max
30, ``repeat_action_probability=0``, 27000 steps), and envpool's option names
(``episodic_life``, ``reward_clip``, ``stack_num``, ``img_height``, ``mode``,
``difficulty``, ...). ``max_episode_steps`` counts the agent's steps (not the automatic
FIRE presses), as envpool's; with ``episodic_life=True`` it caps each life (envpool: the
whole game). Any other id is a gymnasium id (``CartPole-v1``, ``Pendulum-v1``,
``LunarLander-v3``, ...; envpool's ``LunarLander-v2`` / ``CarRacing-v2`` /
``LunarLanderContinuous-v2`` map to gymnasium's current versions) built by the ``gym``
family, with ``max_episode_steps``.

How it maps onto the pool: ``batch_size < num_envs`` (async) is envfactory's pool with that
``batch_size`` (``subproc`` / ``subproc-atari`` with ``vectorizer.batch_size``), so ``recv``
returns the first ``batch_size`` envs ready. Synchronous mode builds the pool with
``batch_size=1``: a step of every env is the pool's synchronous ``step`` (one round trip per
worker), and a step of a subset is ``send`` then ``recv(env_ids=...)`` of exactly those
envs, in the order of ``env_id``. ``num_threads`` sets the number of worker processes.

Not offered: dm_env's API (``make_dm``, ``env_type="dm"``, the spec's
``observation_spec()`` / ``action_spec()``; ``DMEnvPool`` exists as a name only), ``xla()``,
envpool's C++ classes (``envpool.atari.AtariEnvSpec``, ``_AtariEnvPool``) and the task
families envfactory does not claim (MuJoCo, Procgen, VizDoom, MiniGrid, gfootball, ...):
docs/guides/clients.md lists them with the reason for each.
"""

from __future__ import annotations

from typing import Any

from .pool import DMEnvPool, EnvPool, GymnasiumEnvPool
from .registration import list_all_envs, make, make_dm, make_gym, make_gymnasium, make_spec
from .spec import ArraySpec, EnvSpec

#: the envpool release whose Python interface this module follows
__version__ = "1.2.4"

__all__ = [  # noqa: RUF022  # envpool's order: EnvSpec, EnvPool, DMEnvPool, GymnasiumEnvPool
    "ArraySpec",
    "EnvSpec",
    "EnvPool",
    "DMEnvPool",
    "GymnasiumEnvPool",
    "list_all_envs",
    "make",
    "make_dm",
    "make_gym",
    "make_gymnasium",
    "make_spec",
]


def __getattr__(name: str) -> Any:
    """``atari_game_list``: envpool's snake_case names of the Atari games (``"pong"``, ...),
    read from ale-py's ROMs when first asked for (``import`` stays free of ale_py)."""
    if name == "atari_game_list":
        from .registration import atari_games

        return sorted(rom for _, rom in atari_games().values())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
