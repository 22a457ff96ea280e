"""A short CleanRL-style PPO loop over any envfactory VecEnv (the gymnasium VectorEnv API).

    python examples/cleanrl_ppo.py                                # CartPole, dummy, 4 envs
    python examples/cleanrl_ppo.py vectorizer=subproc num_envs=8 --total-steps 200000
    python examples/cleanrl_ppo.py --target-return 400            # stop once it is reached

Positional arguments are envfactory overrides (``envfactory.compose``); ``--options`` are the
learner's. The env must have a flat Box observation and a Discrete action space (CartPole,
MountainCar, ``env=gym env.id=Acrobot-v1``, ...).

Autoreset: envfactory's default ``autoreset_mode=next_step`` (gymnasium's) is handled as it
must be. When env ``i`` ends an episode at step ``t``, the observation returned is that
episode's *final* observation; at step ``t+1`` the env ignores the action, resets, and returns
the new episode's first observation with reward 0. So:

- the transition of step ``t+1`` is not a transition of the MDP: it is masked out of the loss
  (``valid = False``) and its advantage is 0;
- the advantage chain is cut at ``t`` (``1 - done_t``), so nothing is learned across the reset;
- a *truncated* episode (CartPole's 500-step limit) bootstraps from ``V(final obs)``, which
  next_step hands us in the observation batch; a terminated one does not bootstrap.

``same_step`` and ``disabled`` are refused with one line (this loop is written for next_step).

At the end it prints env time (inside ``envs.step``) against learner time (policy forward
passes and the PPO update), so you see what the vectorizer costs inside training.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import deque

import numpy as np
import torch
import torch.nn as nn
from torch.distributions import Categorical

import envfactory


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("overrides", nargs="*", help="envfactory overrides, e.g. num_envs=8")
    p.add_argument("--total-steps", type=int, default=200_000, help="env steps, summed over envs")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--num-steps", type=int, default=128, help="rollout length per env")
    p.add_argument("--lr", type=float, default=2.5e-4)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument(
        "--target-return",
        type=float,
        default=None,
        help="stop once the mean return of the last --window episodes exceeds this",
    )
    p.add_argument("--window", type=int, default=20, help="episodes in the running mean")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1 on a shared box)")
    p.add_argument("--json", default=None, help="write the summary here as JSON")
    return p.parse_args(argv)


def layer(m: nn.Linear, std: float = float(np.sqrt(2))) -> nn.Linear:
    nn.init.orthogonal_(m.weight, std)
    nn.init.constant_(m.bias, 0.0)
    return m


class Agent(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer(nn.Linear(64, 64)),
            nn.Tanh(),
            layer(nn.Linear(64, 1), 1.0),
        )
        self.actor = nn.Sequential(
            layer(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer(nn.Linear(64, 64)),
            nn.Tanh(),
            layer(nn.Linear(64, n_actions), 0.01),
        )

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def act(self, x: torch.Tensor, action: torch.Tensor | None = None):
        dist = Categorical(logits=self.actor(x))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.value(x)


def train(args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    cfg = envfactory.compose(list(args.overrides))
    mode = str(getattr(cfg.autoreset_mode, "value", cfg.autoreset_mode))
    if mode != "next_step":
        sys.exit(
            f"cleanrl_ppo.py: autoreset_mode={mode} is not supported; this loop is written "
            "for next_step (gymnasium's default): drop the override"
        )
    key = cfg.get("episode_stats_key")
    if not key:
        sys.exit(
            "cleanrl_ppo.py: episode_stats_key=null turns off the episode statistics this "
            "loop reports; drop the override"
        )
    envs = envfactory.make_vec(cfg)
    try:
        return _train(args, envs, str(key))
    finally:
        envs.close()


def _train(args: argparse.Namespace, envs, key: str) -> dict:
    n, T = envs.num_envs, args.num_steps
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    agent = Agent(obs_dim, int(envs.single_action_space.n))
    opt = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)

    obs_b = torch.zeros((T, n, obs_dim))
    act_b = torch.zeros((T, n), dtype=torch.long)
    logp_b, rew_b, val_b = torch.zeros((T, n)), torch.zeros((T, n)), torch.zeros((T, n))
    term_b, done_b, valid_b = torch.zeros((T, n)), torch.zeros((T, n)), torch.zeros((T, n))

    batch = n * T
    minibatch = batch // args.num_minibatches
    iterations = max(1, args.total_steps // batch)
    returns: deque[float] = deque(maxlen=args.window)
    episodes, step, reached_at = 0, 0, None
    env_time = learn_time = 0.0
    t_start = time.perf_counter()

    t0 = time.perf_counter()
    obs, _ = envs.reset(seed=args.seed)
    env_time += time.perf_counter() - t0
    next_obs = torch.as_tensor(obs, dtype=torch.float32).reshape(n, -1)
    # next_step autoreset: envs whose previous step ended an episode reset on this step
    pending_reset = np.zeros(n, dtype=bool)

    for it in range(1, iterations + 1):
        t0 = time.perf_counter()
        for g in opt.param_groups:  # linear learning-rate annealing, as CleanRL
            g["lr"] = (1.0 - (it - 1.0) / iterations) * args.lr
        learn_time += time.perf_counter() - t0
        for t in range(T):
            t0 = time.perf_counter()
            obs_b[t] = next_obs
            valid_b[t] = torch.as_tensor(~pending_reset, dtype=torch.float32)
            with torch.no_grad():
                action, logp, _, value = agent.act(next_obs)
            act_b[t], logp_b[t], val_b[t] = action, logp, value
            actions = action.numpy()
            t1 = time.perf_counter()
            obs, reward, term, trunc, infos = envs.step(actions)
            t2 = time.perf_counter()
            env_time += t2 - t1
            step += n
            rew_b[t] = torch.as_tensor(reward, dtype=torch.float32)
            term_b[t] = torch.as_tensor(term, dtype=torch.float32)
            done = np.logical_or(term, trunc)
            done_b[t] = torch.as_tensor(done, dtype=torch.float32)
            pending_reset = done
            next_obs = torch.as_tensor(obs, dtype=torch.float32).reshape(n, -1)
            if key in infos:
                mask = infos[f"_{key}"]
                for r in infos[key]["r"][mask]:
                    returns.append(float(r))
                    episodes += 1
            learn_time += (t1 - t0) + (time.perf_counter() - t2)
            if (
                reached_at is None
                and args.target_return is not None
                and len(returns) == returns.maxlen
                and np.mean(returns) > args.target_return
            ):
                reached_at = step
        if reached_at is not None:
            break

        t0 = time.perf_counter()
        with torch.no_grad():
            next_value = agent.value(next_obs)
            adv = torch.zeros((T, n))
            last = torch.zeros(n)
            for t in reversed(range(T)):
                nv = next_value if t == T - 1 else val_b[t + 1]
                # a step that ended the episode bootstraps from V(final obs) unless it
                # terminated; the chain never crosses the reset (1 - done)
                delta = rew_b[t] + args.gamma * nv * (1.0 - term_b[t]) - val_b[t]
                last = delta + args.gamma * args.gae_lambda * (1.0 - done_b[t]) * last
                last = last * valid_b[t]  # the reset step is no transition: advantage 0
                adv[t] = last
            ret = adv + val_b

        flat = valid_b.reshape(-1).bool()
        b_obs = obs_b.reshape(-1, obs_dim)[flat]
        b_act, b_logp = act_b.reshape(-1)[flat], logp_b.reshape(-1)[flat]
        b_adv, b_ret = adv.reshape(-1)[flat], ret.reshape(-1)[flat]
        m = len(b_obs)
        for _ in range(args.update_epochs):
            perm = torch.randperm(m)
            for s in range(0, m, minibatch):
                idx = perm[s : s + minibatch]
                _, logp, ent, value = agent.act(b_obs[idx], b_act[idx])
                ratio = (logp - b_logp[idx]).exp()
                a = b_adv[idx]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = torch.max(
                    -a * ratio, -a * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
                ).mean()
                v_loss = 0.5 * ((value - b_ret[idx]) ** 2).mean()
                loss = pg - args.ent_coef * ent.mean() + args.vf_coef * v_loss
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                opt.step()
        learn_time += time.perf_counter() - t0
        mean = float(np.mean(returns)) if returns else float("nan")
        print(
            f"step {step:>8,}  episodes {episodes:>5}  mean return (last {len(returns)}) "
            f"{mean:7.1f}  env {env_time:6.1f}s  learner {learn_time:6.1f}s",
            flush=True,
        )

    wall = time.perf_counter() - t_start
    summary = {
        "steps": step,
        "episodes": episodes,
        "mean_return": float(np.mean(returns)) if returns else None,
        "window": len(returns),
        "target_return": args.target_return,
        "reached_target_at_step": reached_at,
        "wall_s": round(wall, 1),
        "env_s": round(env_time, 1),
        "learner_s": round(learn_time, 1),
        "num_envs": n,
        "vectorizer": type(envs).__name__,
    }
    share = 100 * env_time / max(env_time + learn_time, 1e-9)
    print(
        f"done: {step:,} steps in {wall:.1f}s; env time {env_time:.1f}s ({share:.0f}%), "
        f"learner time {learn_time:.1f}s; mean return of the last {len(returns)} episodes "
        f"{summary['mean_return']}"
        + (f"; > {args.target_return} at step {reached_at:,}" if reached_at else "")
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=2)
    return summary


if __name__ == "__main__":
    train(parse())
