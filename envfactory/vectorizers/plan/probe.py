"""One env's step timed in a throwaway process, for the plan (the parent never runs the env)."""

from __future__ import annotations

import contextlib
import signal
import time
from typing import Any

__all__ = ["PROBE_SECONDS", "PROBE_STEPS", "step_seconds"]

#: the probe's steps: at most this many, and no more once they took this long in all
PROBE_STEPS, PROBE_SECONDS = 30, 0.2
#: the longest the parent waits for the probe (build included) before it gives up on it
PROBE_TIMEOUT = 2.0


def step_seconds(ctx: Any, payload: Any, start: Any) -> float | None:
    """The median step time of ``payload``'s first env in a new process (None: it failed)."""
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
    """The probe process: build the env, time up to `PROBE_STEPS` steps, send the median."""
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
