"""Timing one env's step in a throwaway process, before ``subproc`` decides how many envs
each worker gets (`plan.plan_split`): the env is built, stepped and closed
there, so the parent never runs an env it promised to keep in a worker."""

from __future__ import annotations

import contextlib
import signal
import time
from typing import Any

__all__ = ["PROBE_SECONDS", "PROBE_STEPS", "step_seconds"]

#: the probe's steps: at most this many, and no more once they took this long in all
PROBE_STEPS, PROBE_SECONDS = 30, 0.2
#: the longest the parent waits for the probe (build included) before it gives up on it:
#: an env this slow to build is no cheap env, and the probe delays the start by at most this
PROBE_TIMEOUT = 2.0


def step_seconds(ctx: Any, payload: Any, start: Any) -> float | None:
    """The median time of one step of the first env of ``payload`` (env constructors, or
    their cloudpickle), built in a new process of ``ctx`` started by ``start(proc)``;
    None if that env could not be built and stepped there within `PROBE_TIMEOUT` (its
    workers then report why, as without the probe)."""
    parent_conn, child_conn = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_probe_main, args=(child_conn, payload), name="envfactory-probe", daemon=True
    )
    try:
        start(proc)
        child_conn.close()
        if not parent_conn.poll(PROBE_TIMEOUT):
            return None
        answer = parent_conn.recv()
        return float(answer) if isinstance(answer, float) else None
    except (EOFError, OSError):
        return None
    finally:
        parent_conn.close()
        if proc.pid is not None:
            proc.join(1.0)
            if proc.is_alive():
                proc.kill()
                proc.join()


def _probe_main(conn: Any, payload: Any) -> None:
    """The probe process: build the env, reset it, time up to `PROBE_STEPS` steps of
    sampled actions (reset when an episode ends), send the median, close the env."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides (as a worker)
    answer: float | None = None
    try:
        if isinstance(payload, bytes):
            import cloudpickle

            payload = cloudpickle.loads(payload)
        env = payload[0]()
        try:
            env.reset(seed=0)
            env.action_space.seed(0)
            times: list[float] = []
            while len(times) < PROBE_STEPS and sum(times) < PROBE_SECONDS:
                action = env.action_space.sample()
                t0 = time.perf_counter()
                _, _, terminated, truncated, _ = env.step(action)
                times.append(time.perf_counter() - t0)
                if terminated or truncated:
                    env.reset()
            answer = sorted(times)[len(times) // 2]
        finally:
            with contextlib.suppress(Exception):
                env.close()
    except Exception:
        answer = None
    with contextlib.suppress(OSError):
        conn.send(answer)
        conn.close()
