"""Stable-Baselines3 PPO on an envfactory env, through ``envfactory_sb3.to_sb3``.

    pip install ./plugins/envfactory-sb3                           # SB3 + torch==2.13.0 (CPU)
    python examples/sb3_ppo.py                                     # CartPole, 8 envs, dummy
    python examples/sb3_ppo.py vectorizer=subproc --target-return 400
    python examples/sb3_ppo.py env=atari env.id=ALE/Pong-v5 vectorizer=subproc-atari \\
        --total-steps 4096 --log-every 1                           # runs and logs (CnnPolicy)

Positional arguments are envfactory overrides (``envfactory.compose``); ``--options`` are
the learner's. The default hyperparameters for a flat observation are RL Zoo's tuned PPO
for CartPole-v1; an image observation gets ``CnnPolicy`` with RL Zoo's Atari PPO settings.
``autoreset_mode`` defaults to ``same_step`` here (SB3's own semantics: no extra reset call
per finished episode); ``next_step`` works too (``to_sb3`` resets finished envs itself).

Prints env time (inside the VecEnv's ``step``/``reset``) against learner time (everything
else: policy forward passes, the PPO update, SB3's bookkeeping).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
import torch
from envfactory_sb3 import to_sb3
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnvWrapper

import envfactory


class TimeEnv(VecEnvWrapper):
    """Adds up the wall time spent inside the wrapped VecEnv."""

    def __init__(self, venv: Any) -> None:
        super().__init__(venv)
        self.env_time = 0.0

    def reset(self) -> Any:
        t = time.perf_counter()
        obs = self.venv.reset()
        self.env_time += time.perf_counter() - t
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        t = time.perf_counter()
        self.venv.step_async(actions)
        self.env_time += time.perf_counter() - t

    def step_wait(self) -> Any:
        t = time.perf_counter()
        out = self.venv.step_wait()
        self.env_time += time.perf_counter() - t
        return out


class Progress(BaseCallback):
    """Logs the running mean return and the time split; stops at ``target``."""

    def __init__(self, timer: TimeEnv, target: float | None, window: int, every: int) -> None:
        super().__init__()
        self.timer, self.target, self.window, self.every = timer, target, window, every
        self.returns: list[float] = []
        self.reached_at: int | None = None
        self.rollouts = 0
        self.t0 = time.perf_counter()

    def _on_step(self) -> bool:
        for info in self.locals["infos"]:
            if "episode" in info:
                self.returns.append(float(info["episode"]["r"]))
        last = self.returns[-self.window :]
        if (
            self.target is not None
            and self.reached_at is None
            and len(last) == self.window
            and np.mean(last) > self.target
        ):
            self.reached_at = self.num_timesteps
            return False
        return True

    def _on_rollout_end(self) -> None:
        self.rollouts += 1
        if self.rollouts % self.every:
            return
        last = self.returns[-self.window :]
        mean = f"{np.mean(last):7.1f}" if last else "    n/a"
        wall = time.perf_counter() - self.t0
        print(
            f"step {self.num_timesteps:>8,}  episodes {len(self.returns):>5}  mean return "
            f"(last {len(last)}) {mean}  env {self.timer.env_time:6.1f}s  learner "
            f"{wall - self.timer.env_time:6.1f}s",
            flush=True,
        )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("overrides", nargs="*", help="envfactory overrides, e.g. num_envs=8")
    p.add_argument("--total-steps", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--target-return",
        type=float,
        default=None,
        help="stop once the mean return of the last --window episodes exceeds this",
    )
    p.add_argument("--window", type=int, default=20)
    p.add_argument("--log-every", type=int, default=4, help="rollouts between log lines")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1 on a shared box)")
    p.add_argument("--json", default=None, help="write the summary here as JSON")
    return p.parse_args(argv)


def hyperparameters(image: bool, total: int) -> dict[str, Any]:
    def linear(start: float):  # RL Zoo's "lin_" schedules
        return lambda progress: progress * start

    if image:  # RL Zoo, atari PPO
        return dict(
            policy="CnnPolicy",
            n_steps=128,
            n_epochs=4,
            batch_size=256,
            learning_rate=linear(2.5e-4),
            clip_range=linear(0.1),
            vf_coef=0.5,
            ent_coef=0.01,
        )
    return dict(
        policy="MlpPolicy",
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=linear(0.001),
        clip_range=linear(0.2),
    )


def main(args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads)
    overrides = list(args.overrides)
    if not any(o.startswith("autoreset_mode=") for o in overrides):
        overrides.append("autoreset_mode=same_step")
    if not any(o.startswith("num_envs=") for o in overrides):
        overrides.append("num_envs=8")
    cfg = envfactory.compose(overrides)
    venv = TimeEnv(to_sb3(envfactory.make_vec(cfg), episode_key=cfg.get("episode_stats_key")))
    image = len(venv.observation_space.shape or ()) == 3
    hp = hyperparameters(image, args.total_steps)
    model = PPO(env=venv, seed=args.seed, verbose=0, device="cpu", **hp)
    cb = Progress(venv, args.target_return, args.window, args.log_every)
    t0 = time.perf_counter()
    try:
        model.learn(total_timesteps=args.total_steps, callback=cb)
    finally:
        venv.close()
    wall = time.perf_counter() - t0
    last = cb.returns[-args.window :]
    summary = {
        "steps": model.num_timesteps,
        "episodes": len(cb.returns),
        "mean_return": float(np.mean(last)) if last else None,
        "window": len(last),
        "target_return": args.target_return,
        "reached_target_at_step": cb.reached_at,
        "wall_s": round(wall, 1),
        "env_s": round(venv.env_time, 1),
        "learner_s": round(wall - venv.env_time, 1),
        "num_envs": venv.num_envs,
        "policy": hp["policy"],
    }
    share = 100 * venv.env_time / max(wall, 1e-9)
    print(
        f"done: {model.num_timesteps:,} steps in {wall:.1f}s; env time {venv.env_time:.1f}s "
        f"({share:.0f}%), learner time {wall - venv.env_time:.1f}s; mean return of the last "
        f"{len(last)} episodes {summary['mean_return']}"
        + (f"; > {args.target_return} at step {cb.reached_at:,}" if cb.reached_at else "")
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return summary


if __name__ == "__main__":
    main(parse())
