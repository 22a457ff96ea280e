"""The training-loop section of the benchmark (``bench.py --train``).

A CleanRL-style PPO loop (``cleanrl/ppo.py``, ``ppo_atari.py``): a policy forward on the
batch of observations every step, and every 128 steps a PPO update (GAE, 4 epochs of 4
minibatches, clipped objective, value loss, entropy bonus, gradient clipping), torch on one
thread. CartPole runs an MLP (64-64, tanh), Pong the Nature CNN. Every envfactory
vectorizer and the peers step the same env constructors; the pool runs an envpool-style
async loop (``recv`` a batch of ``num_envs / 2`` ready envs, a forward on it, ``send`` its
actions; an update after as many env steps as the synchronous loop collects, 128 x
num_envs). Reported: end-to-end env steps/s, the share of wall time spent in the env calls
(the rest is the learner), ratios to ``dummy`` and to gymnasium's ``AsyncVectorEnv`` from
the same run. Rounds are interleaved and every cell is a median, as in the rest of bench.py.
"""

from __future__ import annotations

import gc
import importlib.util
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

STEPS_PER_UPDATE = 128
UPDATE_EPOCHS = 4
MINIBATCHES = 4


def torch_missing() -> str | None:
    """Why the training loop cannot run here (None: it can)."""
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed (pip install torch==2.13.0): no training-loop rows"
    return None


def agent(kind: str, obs_shape: tuple[int, ...], actions: int) -> Any:
    """CleanRL's actor-critic: ``mlp`` (64-64 tanh) or ``cnn`` (Nature CNN over hwc uint8
    frames, scaled by 1/255)."""
    import torch
    from torch import nn

    class Agent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            if kind == "cnn":
                c = obs_shape[-1]
                self.body = nn.Sequential(
                    nn.Conv2d(c, 32, 8, stride=4), nn.ReLU(),
                    nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
                    nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
                    nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(),
                )  # fmt: skip
                width = 512
            else:
                self.body = nn.Sequential(
                    nn.Linear(int(np.prod(obs_shape)), 64), nn.Tanh(),
                    nn.Linear(64, 64), nn.Tanh(),
                )  # fmt: skip
                width = 64
            self.actor = nn.Linear(width, actions)
            self.critic = nn.Linear(width, 1)

        def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            if kind == "cnn":
                obs = obs.permute(0, 3, 1, 2).float() / 255.0
            h = self.body(obs.float())
            return self.actor(h), self.critic(h).squeeze(-1)

    return Agent()


def gae(rew: np.ndarray, val: np.ndarray, done: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Generalized advantage estimates (gamma 0.99, lambda 0.95) over axis 0."""
    adv = np.zeros_like(rew)
    run = np.zeros_like(last)
    for t in reversed(range(len(rew))):
        nxt = last if t == len(rew) - 1 else val[t + 1]
        keep = 1.0 - done[t]
        delta = rew[t] + 0.99 * nxt * keep - val[t]
        run = delta + 0.99 * 0.95 * keep * run
        adv[t] = run
    return adv


@dataclass
class Batch:
    obs: np.ndarray
    act: np.ndarray
    logp: np.ndarray
    adv: np.ndarray
    ret: np.ndarray


def ppo_update(net: Any, opt: Any, b: Batch) -> None:
    """CleanRL's update: 4 epochs x 4 shuffled minibatches, clip 0.2, value coef 0.5,
    entropy coef 0.01, gradient norm 0.5."""
    import torch

    obs = torch.as_tensor(b.obs)
    act, logp0 = torch.as_tensor(b.act), torch.as_tensor(b.logp)
    adv, ret = torch.as_tensor(b.adv), torch.as_tensor(b.ret)
    size = len(act)
    mb = max(1, size // MINIBATCHES)
    for _ in range(UPDATE_EPOCHS):
        perm = torch.randperm(size)
        for start in range(0, size, mb):
            idx = perm[start : start + mb]
            logits, value = net(obs[idx])
            dist = torch.distributions.Categorical(logits=logits)
            ratio = (dist.log_prob(act[idx]) - logp0[idx]).exp()
            a = adv[idx]
            a = (a - a.mean()) / (a.std() + 1e-8)
            pg = torch.max(-a * ratio, -a * ratio.clamp(0.8, 1.2)).mean()
            loss = pg + 0.5 * ((value - ret[idx]) ** 2).mean() - 0.01 * dist.entropy().mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)
            opt.step()


@dataclass
class _Env:
    """A vec env as the synchronous loop drives it: ``reset() -> obs``, ``step(actions) ->
    (obs, rewards, dones)``, ``close()``, and its size and per-env spaces."""

    reset: Callable[[], Any]
    step: Callable[[Any], tuple[Any, Any, Any]]
    close: Callable[[], Any]
    num_envs: int
    single_observation_space: Any
    single_action_space: Any


def gym_env(envs: Any) -> _Env:
    """A gymnasium VectorEnv (envfactory's vectorizers, gymnasium's own)."""

    def step(a: Any) -> tuple[Any, Any, Any]:
        obs, rew, term, trunc, _ = envs.step(a)
        return obs, rew, np.logical_or(term, trunc)

    return _Env(lambda: envs.reset(seed=0)[0], step, envs.close, envs.num_envs,
                envs.single_observation_space, envs.single_action_space)  # fmt: skip


def sb3_env(fns: list) -> _Env:
    """Stable-Baselines3's SubprocVecEnv over the same constructors (its own 4-tuple API)."""
    from stable_baselines3.common.vec_env import SubprocVecEnv

    venv = SubprocVecEnv(fns)
    venv.seed(0)
    return _Env(venv.reset, lambda a: venv.step(a)[:3], venv.close, venv.num_envs,
                venv.observation_space, venv.action_space)  # fmt: skip


def _sample(net: Any, obs: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    import torch

    with torch.no_grad():
        logits, value = net(torch.as_tensor(obs))
        dist = torch.distributions.Categorical(logits=logits)
        act = dist.sample()
        return act.numpy(), dist.log_prob(act).numpy(), value.numpy()


def sync_loop(env: _Env, net: Any, n: int, seconds: float) -> tuple[float, float]:
    """``(steps/s, share of wall time in env calls)``: whole iterations (128 steps and an
    update) until ``seconds`` have passed (at least one), after 8 warm-up steps."""
    import torch

    opt = torch.optim.Adam(net.parameters(), lr=2.5e-4, eps=1e-5)
    obs = env.reset()
    for _ in range(8):
        obs = env.step(_sample(net, obs)[0])[0]
    T = STEPS_PER_UPDATE
    bo = np.zeros((T, *np.shape(obs)), dtype=np.asarray(obs).dtype)
    ba, bl, bv, br, bd = (np.zeros((T, n), dtype=np.float32) for _ in range(5))
    in_env, steps, t0 = 0.0, 0, time.perf_counter()
    while True:
        for t in range(T):
            act, logp, value = _sample(net, obs)
            bo[t], ba[t], bl[t], bv[t] = obs, act, logp, value
            s = time.perf_counter()
            obs, rew, done = env.step(act)
            in_env += time.perf_counter() - s
            br[t], bd[t] = rew, done
        steps += T * n
        last = _sample(net, obs)[2]
        adv = gae(br, bv, bd, last)
        flat = (T * n, *bo.shape[2:])
        act = ba.reshape(-1).astype(np.int64)
        ppo_update(net, opt, Batch(bo.reshape(flat), act, bl.reshape(-1), adv.reshape(-1),
                                   (adv + bv).reshape(-1)))  # fmt: skip
        wall = time.perf_counter() - t0
        if wall >= seconds:
            return steps / wall, in_env / wall


def async_loop(envs: Any, net: Any, seconds: float) -> tuple[float, float]:
    """The envpool-style loop over a pool: ``recv`` the next ``batch_size`` ready envs, a
    forward on their observations, ``send`` their actions; an update after 128 x num_envs
    env steps, with advantages along each env's own steps."""
    import torch

    opt = torch.optim.Adam(net.parameters(), lr=2.5e-4, eps=1e-5)
    n, bs = envs.num_envs, envs.batch_size
    envs.async_reset(seed=0)
    for _ in range(8):
        obs, *_, info = envs.recv()
        envs.send(_sample(net, obs)[0], info["env_id"])
    size = STEPS_PER_UPDATE * n
    bo = np.zeros((size, *np.shape(obs)[1:]), dtype=np.asarray(obs).dtype)
    ba, bl, bv, br, bd = (np.zeros(size, dtype=np.float32) for _ in range(5))
    ids = np.zeros(size, dtype=np.int64)
    in_env, steps, t0 = 0.0, 0, time.perf_counter()
    while True:
        for k in range(0, size - bs + 1, bs):
            s = time.perf_counter()
            obs, rew, term, trunc, info = envs.recv()
            in_env += time.perf_counter() - s
            act, logp, value = _sample(net, obs)
            sl = slice(k, k + bs)
            bo[sl], ba[sl], bl[sl], bv[sl] = obs, act, logp, value
            br[sl], bd[sl], ids[sl] = rew, np.logical_or(term, trunc), info["env_id"]
            s = time.perf_counter()
            envs.send(act, info["env_id"])
            in_env += time.perf_counter() - s
        steps += size
        adv = np.zeros(size, dtype=np.float32)
        for e in range(n):
            mine = np.flatnonzero(ids == e)
            if len(mine):
                adv[mine] = gae(br[mine], bv[mine], bd[mine], bv[mine[-1]])
        ppo_update(net, opt, Batch(bo, ba.astype(np.int64), bl, adv, adv + bv))
        wall = time.perf_counter() - t0
        if wall >= seconds:
            return steps / wall, in_env / wall


MODELS = {"CartPole": "mlp", "Pong": "cnn"}


def measure_train(workload: str, make: Callable[[], Any], seconds: float) -> tuple[float, float]:
    """Build with ``make()``, run the loop (the synchronous one, or the async one for a
    pool) with a fresh agent seeded alike, close. Returns ``(steps/s, env share)``."""
    import torch

    torch.manual_seed(0)
    made = make()
    try:
        net = agent(MODELS[workload], made.single_observation_space.shape,
                    int(made.single_action_space.n))  # fmt: skip
        if isinstance(made, _Env):
            return sync_loop(made, net, made.num_envs, seconds)
        return async_loop(made, net, seconds)
    finally:
        made.close()
        gc.collect()
