"""``to_tianshou(venv)``: an envfactory VectorEnv as a Tianshou ``BaseVectorEnv``.

Tianshou's vector envs do not reset by themselves: its ``Collector`` steps the envs in
``ready_env_ids`` with ``step(action, id)``, resets the finished ones with
``reset(env_id=...)``, and under ``collect(n_episode=...)`` drops finished envs from the
ids it steps (so it steps a subset of the envs). How each call maps onto envfactory:

- ``step(action)`` of every env: one synchronous ``venv.step``.
- ``step(action, id)`` of a subset: with envfactory's async pool (``vectorizer.batch_size``
  set, any value) ``send(action, id)`` then ``recv(env_ids=id)``: the envs of the subset
  step in parallel, come back in the order of ``id``, and the others stay where they are.
  Any other envfactory VectorEnv steps each env of the subset in turn through
  ``env_method("step", ...)`` (the same wrapped env, so the same trajectory, one round trip
  per env): no env outside ``id`` moves, which a masked synchronous step could not promise
  (gymnasium's ``step`` steps every env). With ``vectorizer.restart=true``, an env that
  raises in such a step ends its episode truncated at the last observation returned for
  it, with ``infos["restarted"]`` and a ``RuntimeWarning``, as a full step's rebuilt
  worker does (Tianshou then resets it; the env is reset, not rebuilt: a worker that
  dies in such a step still fails, see the pool above, whose subset steps restart it).
  A Ctrl-C in a pool's subset step leaves it pending, as a Ctrl-C in envfactory's own
  ``step``: ``step(None, id)`` (Tianshou's spelling of "wait for the step in flight")
  returns it, and every other call refuses at once with ``AlreadyPendingError`` saying so
  (``close()`` abandons it). Nothing of it is dropped: an episode that ended in it is
  seen. A Ctrl-C that came before the step was sent leaves nothing pending. The same holds
  for a step of every env: ``step(None)`` returns it (envfactory's ``step_wait()``).
- ``reset(env_id)``: ``venv.reset(options={"reset_mask": ...})`` (no seed: each env's
  generator goes on, as Tianshou's ``DummyVectorEnv``).
- ``seed(seed)``: as Tianshou's workers, seeds each env's action-space sampler with
  ``seed + i`` and resets env ``i`` with that seed; the same seeds then collect the same
  episodes as Tianshou's own ``DummyVectorEnv`` over the same envs.

Asynchronous collection (Tianshou's ``wait_num`` / ``timeout``, its ``AsyncCollector``):
``to_tianshou(pool, wait_num=k, timeout=t)`` over envfactory's async pool makes ``is_async``
true, as Tianshou's venvs built with those arguments. ``step(action, id)`` sends the actions of
the ready envs ``id`` and returns every env whose step is done once ``wait_num`` of those
stepping are (at most all of them), or once ``timeout`` seconds passed and one is, as
Tianshou's ``SubprocVectorEnv`` does (`PoolVecEnv.recv_ready`); ``step(None)`` waits so
for those still stepping. ``infos[k]["env_id"]`` names each row's env; the others keep
stepping. ``reset(env_id)`` of envs whose episode just ended, while others are stepping, is
the pool's autoreset (their next send resets them: no options, no seed, as Tianshou's own
autoreset-free workers' ``reset()``); with none stepping it is the masked reset above. Every
env keeps the trajectory it has under ``DummyVectorEnv``, whatever order the envs come back
in. Only the pool (``vectorizer.batch_size`` set, any value) can step envs while others are
in flight, so ``wait_num``/``timeout`` over any other venv is refused with that fix, and
asynchronous collection needs ``autoreset_mode=next_step``.

The venv's ``autoreset_mode`` must be ``next_step`` (envfactory's default) or ``disabled``:
Tianshou resets a finished env before it steps it again, so no autoreset ever happens;
``same_step`` would replace the last observation of an episode by the next reset's.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from tianshou.env import BaseVectorEnv

from envfactory.errors import (
    AlreadyPendingError,
    ClosedError,
    NoPendingCallError,
    NotReadyError,
    RemoteEnvError,
    restart_message,
)
from envfactory.vectorizers.asyncpool.pool import SubprocPool, take_rows
from envfactory.wrappers.legacy_final_info import unbatch_info

__all__ = ["TianshouVectorEnv", "to_tianshou"]


def to_tianshou(
    venv: VectorEnv, *, wait_num: int | None = None, timeout: float | None = None
) -> TianshouVectorEnv:
    """Wrap an envfactory (or any gymnasium 1.x) ``VectorEnv`` for Tianshou's ``Collector``
    (and, with ``wait_num`` / ``timeout`` over envfactory's async pool, its ``AsyncCollector``).

    Args:
        venv: what ``envfactory.make_vec`` returns.
        wait_num: as Tianshou's venvs: a step returns once this many of the envs stepping
            are done (``1 <= wait_num <= num_envs``; None: all of them).
        timeout: as Tianshou's venvs: a step returns once this many seconds passed and at
            least one env is done (None: no such limit). Either one makes ``is_async`` true.

    Raises:
        TypeError: ``venv`` is not a ``gymnasium.vector.VectorEnv``.
        ValueError: its ``autoreset_mode`` is ``same_step``; ``wait_num`` / ``timeout`` out
            of range, or given for a venv that is not envfactory's pool or not ``next_step``.
        ClosedError: ``venv`` is closed.
    """
    return TianshouVectorEnv(venv, wait_num=wait_num, timeout=timeout)


class TianshouVectorEnv(BaseVectorEnv):
    """Tianshou's ``BaseVectorEnv`` interface over a gymnasium ``VectorEnv`` (see the module
    docstring). ``venv`` is the wrapped env; ``len()`` its ``num_envs``.

    It subclasses ``BaseVectorEnv`` (so ``isinstance`` checks hold) without its workers:
    every method Tianshou's collectors call is implemented here over ``venv``.
    """

    def __init__(
        self, venv: VectorEnv, wait_num: int | None = None, timeout: float | None = None
    ) -> None:
        if not isinstance(venv, VectorEnv):
            raise TypeError(
                f"to_tianshou(venv) takes a gymnasium.vector.VectorEnv (envfactory.make_vec(...)),"
                f" got {type(venv).__name__}"
            )
        if venv.closed:
            raise ClosedError(
                "to_tianshou(venv): the venv is closed; make a new one with "
                "envfactory.make_vec(...)"
            )
        mode = venv.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        if mode in (AutoresetMode.SAME_STEP, AutoresetMode.SAME_STEP.value):
            raise ValueError(
                "to_tianshou(venv): autoreset_mode=same_step replaces each episode's last "
                "observation by the next reset's, and Tianshou resets envs itself: build the "
                "env with autoreset_mode=next_step (the default) or disabled"
            )
        self.venv = venv
        n = venv.num_envs
        # BaseVectorEnv's state, for code that reads it (waiting_id: the envs stepping)
        self.env_num, self.wait_num, self.timeout = n, _wait_num(wait_num, n), _timeout(timeout)
        self.is_async, self.is_closed = self.wait_num != n or timeout is not None, False
        self.waiting_conn: list[Any] = []
        self.waiting_id: list[int] = []
        self.ready_id = list(range(n))
        # one sampler per env, seeded by seed() as Tianshou's workers seed theirs
        self._action_spaces = [copy.deepcopy(venv.single_action_space) for _ in range(n)]
        # envfactory's async pool steps a subset in parallel: send, then recv(env_ids=...)
        self._pool = isinstance(venv, SubprocPool)
        self._unreturned: list[int] | None = None  # a subset step a Ctrl-C cut (pool)
        self._held: tuple | None = None  # its results, if a refusal's poll found them ready
        # restart=true without the pool: each env's last observation returned, for the
        # truncated end of an episode an env fault cuts in a subset step
        self._restart = bool(getattr(venv.unwrapped, "restart", False)) and not self._pool
        self._last: list[Any] = [None] * n
        if self.is_async:
            _check_async(venv, self._pool, mode, wait_num, timeout)
        # asynchronous collection: each env's last action sent, and whether its last step
        # returned ended its episode (its reset is then the pool's autoreset)
        self._sent: list[Any] = [None] * n
        self._ended = np.zeros(n, dtype=np.bool_)
        self._autoresets = self._pool and mode in (AutoresetMode.NEXT_STEP, "next_step")

    # Tianshou reads gym.Env's reserved attributes (action_space, ...) through
    # get_env_attr: one value per env, as a list
    def get_env_attr(self, key: str, id: int | Sequence[int] | np.ndarray | None = None) -> list:
        """Attribute ``key`` of each env of ``id`` (all by default), as a list."""
        self._assert_is_not_closed()
        self._refuse_if_cut("get_env_attr")
        ids = self._ids(id)
        if key == "action_space":
            return [self._action_spaces[i] for i in ids]
        if key == "observation_space":
            return [self.venv.single_observation_space for _ in ids]
        return list(self.venv.get_attr(key, indices=ids))  # type: ignore[call-arg]

    def set_env_attr(
        self, key: str, value: Any, id: int | Sequence[int] | np.ndarray | None = None
    ) -> None:
        """Set attribute ``key`` to ``value`` in each env of ``id`` (all by default)."""
        self._assert_is_not_closed()
        self._refuse_if_cut("set_env_attr")
        self.venv.set_attr(key, value, indices=self._ids(id))  # type: ignore[call-arg]

    def reset(
        self, env_id: int | Sequence[int] | np.ndarray | None = None, **kwargs: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """Reset the envs ``env_id`` (all by default): ``(obs, infos)``, ``infos`` an object
        array of one dict per env, each with its ``env_id``."""
        self._assert_is_not_closed()
        self._refuse_if_cut("reset")
        ids = self._ids(env_id)
        if self.is_async:
            self._check_not_stepping("reset", ids)
        if self._autoresets and ids and not kwargs and self._ended[ids].all():
            return self._autoreset(ids)
        if self.waiting_id:
            raise ValueError(
                f"reset(env_id={ids}{', **kwargs' if kwargs else ''}) while envs "
                f"{self.waiting_id} are stepping: only envs whose episode just ended can be "
                "reset then (by the pool's autoreset: no seed, no options); call step(None) "
                "until every env is returned first"
            )
        self._ended[ids] = False
        mask = np.zeros(self.env_num, dtype=np.bool_)
        mask[ids] = True
        options = dict(kwargs.pop("options", None) or {})
        if not mask.all():
            options["reset_mask"] = mask
        with _pending_full_step("reset"):
            obs, infos = self.venv.reset(options=options or None, **kwargs)
        obs = take_rows(obs, ids)
        self._remember(obs, ids)
        return obs, _info_rows(infos, ids)

    def step(
        self, action: Any, id: int | Sequence[int] | np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step the envs ``id`` (all by default) with one action each. ``action=None``:
        the pool's subset step a Ctrl-C interrupted (see the module docstring)."""
        self._assert_is_not_closed()
        if self.is_async:
            return self._step_async(action, id)
        if action is None and self._unreturned is not None:
            return self._finish_cut_step(id)
        self._refuse_if_cut("step")
        ids = self._ids(id)
        every = list(ids) == list(range(self.env_num))
        if action is None:
            if every:
                return self._finish_full_step()
            raise ValueError("action must be not-None for non-async")
        action = np.asarray(action)
        if len(action) != len(ids):
            raise ValueError(f"step(action, id): {len(action)} actions for {len(ids)} env ids")
        if every:
            self._note_sent(action, ids)
            with _pending_full_step("step"):
                obs, rew, term, trunc, infos = self.venv.step(action)
            self._remember(obs, ids, term | trunc)
            return obs, rew, term, trunc, _info_rows(infos, ids)
        if self._pool:
            self._note_sent(action, ids)
            return self._step_pool(action, ids)
        return self._step_each(action, ids)

    # -- asynchronous collection (wait_num / timeout over the pool) ------------------------
    def _step_async(self, action: Any, id: Any) -> tuple:
        """Send ``action`` to the ready envs ``id`` (``None``: send nothing), then return every
        env done once ``wait_num`` of those stepping are, or ``timeout`` passed and one is."""
        venv: Any = self.venv
        if action is not None:
            ids = self._ids(id)
            self._check_not_stepping("step", ids)
            action = np.asarray(action)
            if len(action) != len(ids):
                raise ValueError(f"step(action, id): {len(action)} actions for {len(ids)} env ids")
            venv.send(action, ids)
            self._note_sent(action, ids)
            self.waiting_id += ids
            self.ready_id = [i for i in self.ready_id if i not in ids]
        elif not self.waiting_id:
            raise ValueError(
                "step(None): no env is stepping; step(action, id) the ready envs "
                f"{self.ready_id} first"
            )
        at_least = min(self.wait_num, len(self.waiting_id))
        obs, rew, term, trunc, infos = venv.recv_ready(at_least, wait=self.timeout)
        got = infos["env_id"].tolist()
        self.waiting_id = [i for i in self.waiting_id if i not in got]
        self.ready_id += got
        self._remember(obs, got, term | trunc)
        return obs, rew, term, trunc, _info_rows(infos, range(len(got)), got)

    def _autoreset(self, ids: list[int]) -> tuple:
        """Reset ``ids``, whose episode ended, by the pool's autoreset: their next send (with
        the last action sent, which the autoreset ignores) resets them with no seed and no
        options, as a Tianshou worker's ``reset()``; the other envs may be stepping."""
        venv: Any = self.venv
        venv.send(np.stack([np.asarray(self._sent[i]) for i in ids]), ids)
        obs, _, _, _, infos = venv.recv(env_ids=ids)
        self._ended[ids] = False
        self._remember(obs, ids)
        return obs, _info_rows(infos, range(len(ids)), ids)

    def _check_not_stepping(self, what: str, ids: list[int]) -> None:
        busy = [i for i in ids if i in self.waiting_id]
        if busy:
            raise ValueError(
                f"{what}(): cannot interact with envs {busy}, which are stepping now; the ready "
                f"envs are {sorted(self.ready_id)} (step(None) returns those stepping)"
            )

    def _finish_full_step(self) -> tuple:
        """``step(None)``: the step of every env a Ctrl-C interrupted, whole (envfactory's
        ``step_wait()``), or the error of a ``None`` action when none is pending."""
        step_wait = getattr(self.venv, "step_wait", None)
        if step_wait is None:
            raise ValueError("action must be not-None for non-async")
        try:
            obs, rew, term, trunc, infos = step_wait()
        except NoPendingCallError:
            raise ValueError("action must be not-None for non-async") from None
        ids = list(range(self.env_num))
        self._remember(obs, ids, term | trunc)
        return obs, rew, term, trunc, _info_rows(infos, ids)

    def _step_pool(self, action: np.ndarray, ids: list[int]) -> tuple:
        venv: Any = self.venv
        self._unreturned, self._held = ids, None  # until returned (a Ctrl-C may cut in)
        try:
            venv.send(action, ids)
        except Exception:
            self._unreturned = None  # refused: nothing was sent
            raise
        self._held = venv.recv(env_ids=ids)  # row k is env ids[k]
        return self._finish_cut_step(None)

    def _refuse_if_cut(self, what: str) -> None:
        """A pool's subset step that a Ctrl-C cut is pending: refuse ``what`` (the step is
        finished by ``step(None, id)``, never behind the caller's back and dropped). A poll
        tells whether it went out: a Ctrl-C before the send leaves nothing pending."""
        ids = self._unreturned
        if ids is None:
            return
        if self._held is None:
            try:
                self._held = self.venv.recv(timeout=0, env_ids=ids)  # type: ignore[attr-defined]
            except NotReadyError:
                pass  # in flight
            except ValueError:  # not in flight: the Ctrl-C came before the send went out
                self._unreturned = None
                return
            except Exception:
                self._unreturned = None  # a fault: the pool raises it (or is rebuilt)
                raise
        raise AlreadyPendingError(
            f"{what}() called while step(action, id={ids}) interrupted by Ctrl-C is pending; "
            f"call step(None, id={ids}) to get its results (nothing of it is lost), or "
            "close() to abandon it",
            "step",
        )

    def _finish_cut_step(self, id: Any) -> tuple:
        """``step(None, id)``: the subset step a Ctrl-C interrupted, whole (also the end of
        every subset step over the pool)."""
        ids = self._unreturned
        assert ids is not None
        if id is not None and self._ids(id) != ids:
            raise ValueError(
                f"step(None, id={self._ids(id)}): the step pending is the one of envs {ids}; "
                f"call step(None, id={ids}) (or step(None))"
            )
        try:
            if self._held is None:
                self._held = self.venv.recv(env_ids=ids)  # type: ignore[attr-defined]
        except ValueError:  # not in flight: the Ctrl-C came before the send went out
            self._unreturned = None
            raise NoPendingCallError(
                f"step(None, id={ids}): the interrupted step never reached the envs (the "
                f"Ctrl-C came before it was sent), so nothing is pending; step them with "
                f"step(action, id={ids})",
                "",
            ) from None
        except Exception:
            self._unreturned = None  # a fault: the pool raises it (or is rebuilt)
            raise
        obs, rew, term, trunc, infos = self._held
        self._ended[ids] = term | trunc
        out = obs, rew, term, trunc, _info_rows(infos, range(len(ids)), ids)
        self._unreturned, self._held = None, None
        return out

    def _step_each(self, action: np.ndarray, ids: list[int]) -> tuple:
        rows = []
        for a, i in zip(action, ids, strict=True):
            try:
                obs, rew, term, trunc, info = self.venv.env_method("step", a, indices=[i])[0]  # type: ignore[attr-defined]
            except RemoteEnvError as failure:  # the env raised; its worker is alive
                if not self._restart or self._last[i] is None:
                    raise
                warnings.warn(restart_message(failure), RuntimeWarning, stacklevel=4)
                rows.append((self._last[i], 0.0, False, True, {"restarted": True, "env_id": i}))
                continue
            if self._restart:
                self._last[i] = obs
            rows.append((obs, rew, term, trunc, {**info, "env_id": i}))
        return _stack(rows)

    def _note_sent(self, action: np.ndarray, ids: list[int]) -> None:
        """The pool: each env's last action, what its autoreset sends again (and ignores)."""
        if self._autoresets:
            for k, i in enumerate(ids):
                self._sent[i] = action[k]

    def _remember(self, obs: Any, ids: list[int], ended: np.ndarray | None = None) -> None:
        """Whether each env's episode ended at the step just returned (the pool's autoreset
        resets it then), and with restart=true without the pool each env's observation."""
        if ended is not None:
            self._ended[ids] = ended
        if self._restart:
            for k, i in enumerate(ids):
                self._last[i] = take_rows(obs, k)

    def seed(self, seed: int | list[int] | None = None) -> list[list[int] | None]:
        """As Tianshou's ``DummyVectorEnv.seed``: env ``i``'s action sampler and env get
        ``seed + i`` (or ``seed[i]``); the envs are reset with those seeds."""
        self._assert_is_not_closed()
        self._refuse_if_cut("seed")
        if seed is None:
            seeds: list[int | None] = [None] * self.env_num
        elif isinstance(seed, int | np.integer):
            seeds = [int(seed) + i for i in range(self.env_num)]
        else:
            seeds = list(seed)
        for space, s in zip(self._action_spaces, seeds, strict=True):
            space.seed(s)
        self.venv.reset(seed=seeds)
        return [[s] if s is not None else None for s in seeds]

    def render(self, **kwargs: Any) -> list[Any]:
        """One frame per env (the venv's ``render()``)."""
        self._assert_is_not_closed()
        self._refuse_if_cut("render")
        frames = self.venv.render()
        return list(frames) if frames is not None else [None] * self.env_num

    def close(self) -> None:
        """Close the venv (its worker processes). A second call is refused, as Tianshou."""
        self._assert_is_not_closed()
        self.venv.close()
        self.is_closed = True

    def _ids(self, id: Any) -> list[int]:
        if id is None:
            return list(range(self.env_num))
        if np.isscalar(id):
            return [int(id)]  # type: ignore[arg-type]
        return [int(i) for i in id]


def _wait_num(wait_num: Any, n: int) -> int:
    if wait_num is None:
        return n
    if isinstance(wait_num, bool) or not isinstance(wait_num, int | np.integer):
        raise ValueError(f"to_tianshou(wait_num={wait_num!r}): wait_num must be an int or None")
    if not 1 <= wait_num <= n:
        raise ValueError(
            f"to_tianshou(wait_num={wait_num}): wait_num should be in [1, {n}] (num_envs), or "
            "None for a synchronous venv"
        )
    return int(wait_num)


def _timeout(timeout: Any) -> float | None:
    if timeout is not None and not (
        isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout > 0
    ):
        raise ValueError(
            f"to_tianshou(timeout={timeout!r}): timeout must be None or seconds > 0 (it should "
            "be positive if provided, as Tianshou's)"
        )
    return None if timeout is None else float(timeout)


def _check_async(venv: VectorEnv, pool: bool, mode: Any, wait_num: Any, timeout: Any) -> None:
    """Asynchronous collection needs envfactory's pool under ``next_step``."""
    asked = f"to_tianshou(venv, wait_num={wait_num!r}, timeout={timeout!r})"
    if not pool:
        raise ValueError(
            f"{asked}: asynchronous collection needs envfactory's async pool, which steps some "
            f"envs while others are in flight; {type(venv.unwrapped).__name__} steps all envs "
            "together. Build it with vectorizer=subproc (or subproc-atari) and "
            "vectorizer.batch_size set (any value, e.g. vectorizer.batch_size=1)"
        )
    if mode not in (AutoresetMode.NEXT_STEP, AutoresetMode.NEXT_STEP.value):
        raise ValueError(
            f"{asked}: asynchronous collection resets a finished env by the pool's autoreset, "
            f"so it needs autoreset_mode=next_step (the default), not {AutoresetMode(mode).value}"
        )


def _info_rows(
    infos: dict[str, Any], rows: Sequence[int], env_ids: Sequence[int] | None = None
) -> np.ndarray:
    """gymnasium's batched infos as Tianshou's object array of one dict per row of
    ``rows``, each with its ``env_id`` (``env_ids[k]`` for row ``rows[k]``; by default the
    row itself)."""
    ids = rows if env_ids is None else env_ids
    out = np.empty(len(rows), dtype=object)
    for k, (row, i) in enumerate(zip(rows, ids, strict=True)):
        out[k] = {**unbatch_info(infos, row), "env_id": i}
    return out


def _stack(rows: list[tuple]) -> tuple:
    obs, rew, term, trunc, info = zip(*rows, strict=True)
    infos = np.empty(len(rows), dtype=object)
    infos[:] = list(info)
    return np.stack(obs), np.asarray(rew), np.asarray(term), np.asarray(trunc), infos


@contextlib.contextmanager
def _pending_full_step(what: str) -> Iterator[None]:
    """The venv refuses ``what`` because a step of every env that a Ctrl-C interrupted is
    pending: say it in Tianshou's spelling, ``step(None)`` (the venv's own message names
    ``step_wait()``, which a Tianshou vector env does not have)."""
    try:
        yield
    except AlreadyPendingError as exc:
        if "step_wait()" not in str(exc):
            raise
        raise AlreadyPendingError(
            f"{what}() called while a step of every env interrupted by Ctrl-C is pending; "
            "call step(None) to get its results (nothing of it is lost), or close() to "
            "abandon it",
            "step",
        ) from None
