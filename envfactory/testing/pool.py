"""The async pool's conformance check: every env's trajectory through ``async_reset`` /
``recv`` / ``send`` (whatever order the envs come back in) equals ``dummy``'s for the same
per-env actions and seeds. For any vectorizer with a ``batch_size`` (``subproc``'s pool, the
``ray`` plugin's, a third party's):

    from envfactory.testing import check_pool_same_as_dummy
    check_pool_same_as_dummy(["env=gym", "num_envs=5", "vectorizer=my-vec",
                              "vectorizer.batch_size=2"], steps=60)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["check_pool_same_as_dummy", "dummy_trajectories", "pool_action", "pool_trajectories"]

#: one record per env and step: (obs bytes, reward, terminated, truncated, final obs bytes or
#: None, (episode return, length) or None)
Step = tuple


def pool_action(i: int, k: int) -> int:
    """Env ``i``'s action at its ``k``-th step (a fixed, env-specific pattern of 0 and 1:
    a ``Discrete(2)`` env such as CartPole)."""
    return (i * 7 + k * 3 + (k * k) % 5) % 2


def _record(obs: Any, rew: Any, term: Any, trunc: Any, infos: dict, row: int) -> Step:
    final = None
    if "_final_obs" in infos and infos["_final_obs"][row]:
        final = np.asarray(infos["final_obs"][row]).tobytes()
    ep = None
    if "_episode" in infos and infos["_episode"][row]:
        ep = (float(infos["episode"]["r"][row]), int(infos["episode"]["l"][row]))
    return (np.asarray(obs[row]).tobytes(), float(rew[row]), bool(term[row]), bool(trunc[row]),
            final, ep)  # fmt: skip


def dummy_trajectories(overrides: Sequence[str], steps: int, seed: int = 3) -> list[list[Step]]:
    """Per env under ``dummy`` (``overrides`` plus ``vectorizer=dummy``): the reset record,
    then one record per step with `pool_action` (``disabled``: until the first episode
    end)."""
    import envfactory

    envs: Any = envfactory.make_vec(overrides=[*overrides, "vectorizer=dummy"])
    with envs:
        n = envs.num_envs
        obs, infos = envs.reset(seed=seed)
        zeros = np.zeros(n)
        out = [[_record(obs, zeros, zeros, zeros, infos, i)] for i in range(n)]
        ended = np.zeros(n, bool)
        for k in range(steps):
            acts = np.array([pool_action(i, k) for i in range(n)])
            obs, rew, term, trunc, infos = envs.step(acts)
            for i in range(n):
                if not ended[i]:
                    out[i].append(_record(obs, rew, term, trunc, infos, i))
            if envs.metadata["autoreset_mode"].value == "Disabled":
                ended |= term | trunc
                if (term | trunc).any():
                    envs.reset(options={"reset_mask": term | trunc})
    return out


def pool_trajectories(envs: Any, steps: int, seed: int = 3) -> list[list[Step]]:
    """The same through a pool's ``async_reset`` / ``recv`` / ``send``, each env advancing
    at its own pace (``envs``: a vectorized env with ``batch_size``)."""
    n, disabled = envs.num_envs, envs.metadata["autoreset_mode"].value == "Disabled"
    out: list[list[Step]] = [[] for _ in range(n)]
    ended = np.zeros(n, bool)
    envs.async_reset(seed=seed)
    in_flight = n
    while in_flight >= envs.batch_size and not all(
        ended[i] or len(out[i]) > steps for i in range(n)
    ):
        obs, rew, term, trunc, infos = envs.recv()
        ids = infos["env_id"]
        assert ids.dtype == np.int32 and len(ids) == envs.batch_size == len(obs), (
            f"recv() returned {len(obs)} rows and env_id {ids!r} for batch_size={envs.batch_size}"
        )
        in_flight -= len(ids)
        send = []
        for row, i in enumerate(ids.tolist()):
            out[i].append(_record(obs, rew, term, trunc, infos, row))
            ended[i] |= disabled and bool(term[row] or trunc[row])
            if not ended[i]:  # (also past ``steps``: the others may need more recv()s)
                send.append(i)
        if send:
            envs.send(np.array([pool_action(i, len(out[i]) - 1) for i in send]), np.array(send))
            in_flight += len(send)
    return [traj[: steps + 1] for traj in out]


def check_pool_same_as_dummy(overrides: Sequence[str], steps: int = 60, seed: int = 3) -> None:
    """Build the pool from ``overrides`` (which set the vectorizer and its ``batch_size``)
    and assert that every env's trajectory equals ``dummy``'s (``overrides`` with
    ``vectorizer=dummy``: the vectorizer's own keys are dropped), naming the first env and
    step that differs.

    Raises:
        AssertionError: an env's trajectory differs, or nothing was compared.
    """
    import envfactory

    env_only = [o for o in overrides if not o.lstrip("+~").startswith("vectorizer")]
    ref = dummy_trajectories(env_only, steps, seed)
    envs: Any = envfactory.make_vec(overrides=list(overrides))
    with envs:
        got = pool_trajectories(envs, steps, seed)
    for i, (a, b) in enumerate(zip(ref, got)):
        n = min(len(a), len(b))
        assert n > 1, f"env {i}: nothing compared"
        for k in range(n):
            assert a[k] == b[k], f"env {i} differs from dummy at its step {k}: {a[k]} != {b[k]}"
