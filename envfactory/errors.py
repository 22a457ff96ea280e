"""Exceptions raised by envfactory: one class per decision a caller makes."""

from __future__ import annotations

import difflib
import multiprocessing
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from gymnasium import error as gym_error

__all__ = [
    "AlreadyPendingError",
    "ArgumentTypeError",
    "AsyncCallError",
    "ClosedError",
    "ConfigError",
    "ConflictingNameError",
    "EnvfactoryError",
    "InvalidActionError",
    "InvalidSeedError",
    "NoPendingCallError",
    "NotReadyError",
    "ObservationError",
    "OptionError",
    "PluginConflictError",
    "PluginLoadWarning",
    "RemoteEnvError",
    "ResetNeededError",
    "SpaceMismatchError",
    "UnknownKeyError",
    "UnknownNameError",
    "UnpicklableEnvError",
    "VecEnvBrokenError",
    "WorkerDiedError",
    "WorkerError",
    "WorkerTimeoutError",
    "did_you_mean",
    "echo",
    "echo_within",
    "remote_env_error",
    "remote_message",
    "restart_message",
    "warn_restart",
]


ECHO_LIMIT = 200
"""The most characters of a user's value an error message repeats
([`echo`][envfactory.errors.echo])."""


def echo(value: object, limit: int = ECHO_LIMIT, *, quote: bool = True) -> str:
    """A value as an error message repeats it: ``repr(value)`` (``str`` with
    ``quote=False``), cut to ``limit`` characters with an ellipsis and the full length, so a
    1,000,000-character ``env.id`` does not fill the terminal."""
    text = repr(value) if quote else str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


def echo_within(text: str, limit: int = ECHO_LIMIT) -> str:
    """A message from another library (Hydra, OmegaConf) with every run of more than
    ``limit`` non-blank characters (the value it repeats) cut as [`echo`][envfactory.errors.echo]
    cuts one."""
    return re.sub(rf"\S{{{limit + 1},}}", lambda m: echo(m.group(0), limit, quote=False), text)


def warn_restart(failure: BaseException) -> None:
    """The ``RuntimeWarning("restarting after: ...")`` of a worker rebuilt with
    ``restart=true``, on one line ([`restart_message`][envfactory.errors.restart_message]),
    pointing at the user's line (the first frame outside envfactory, whatever the depth of the
    call chain inside it). The whole ``failure`` (its remote traceback included) is the
    warning's ``failure`` attribute, and is logged at DEBUG by the ``envfactory`` logger."""
    import logging
    import sys
    import warnings

    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_globals.get("__name__", "").startswith("envfactory"):
        frame, level = frame.f_back, level + 1
    logging.getLogger("envfactory").debug("restarting after: %s", failure)
    warning = RuntimeWarning(restart_message(failure))
    warning.failure = failure  # type: ignore[attr-defined]
    warnings.warn(warning, stacklevel=level)


def restart_message(failure: BaseException) -> str:
    """``restarting after: <failure>`` on one line: the failure's first line, which names the
    worker, the envs it hosts (the ones rebuilt) and the cause (a
    [`RemoteEnvError`][envfactory.errors.RemoteEnvError]'s: the env's exception type and
    message), without the remote traceback; another failure that carries one ends with the
    traceback's last line."""
    first = " ".join(str(failure).split(REMOTE_TRACEBACK, 1)[0].split())
    tb = str(getattr(failure, "remote_traceback", "") or "")
    last = next((ln for ln in reversed(tb.splitlines()) if ln.strip()), "")
    if last and not isinstance(failure, RemoteEnvError):
        first += f" ({_one_line(last, CAUSE_CHARS)})"
    return f"restarting after: {first or type(failure).__name__}"


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    """Return `` Did you mean 'x'?`` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(str(value), list(choices), n=1, cutoff=0.5)
    return f" Did you mean {close[0]!r}?" if close else ""


class EnvfactoryError(Exception):
    """Base class of every error envfactory raises on purpose."""


class ConfigError(EnvfactoryError, ValueError):
    """A config value is invalid (wrong type, unknown key, out of range)."""


class ArgumentTypeError(ConfigError, TypeError):
    """An argument of the wrong type to ``make_vec`` / ``make_env`` / ``compose`` (one string
    where a list of overrides goes); also a ``TypeError``, as Python's own for a wrong type."""


class UnknownKeyError(ConfigError, TypeError):
    """An unknown key: a keyword argument of ``make_vec`` / ``make_env`` / ``gym.make`` of an
    ``envfactory/...`` id, a key of a config node, an option of a family. Also a ``TypeError``,
    as gymnasium's ``make`` raises for an unknown keyword, so code that probes keywords and
    drops the refused one on ``TypeError`` (TorchRL's ``GymEnv`` and its ``frameskip=``) works."""


class UnknownNameError(ConfigError, KeyError):
    """A config names a family, vectorizer or wrapper that no plugin registered."""

    def __init__(
        self,
        kind: str,
        value: str,
        choices: Sequence[str],
        *,
        key: str = "",
        disabled: str = "",
        note: str = "",
        other_list: str = "",
        failed: str = "",
        preset: str = "",
    ) -> None:
        """``disabled``: why the name is unusable although a plugin provides it (its plugin
        is disabled, and by what); ``note``: one more sentence for an unknown name;
        ``other_list``: the name is registered for the other wrapper list, and where it goes
        (the whole fix: no "install the plugin"); ``failed``: the installed plugins that
        may provide it but were skipped, and why (the fix is theirs, not an install);
        ``preset``: the preset file that sets the name (``key`` is then its key there)."""
        self.kind, self.value, self.choices, self.key = kind, value, sorted(choices), key
        self._reasons = {"disabled": disabled, "failed": failed}
        where = f" (at {echo(key, quote=False)})" if key else ""
        valid = ", ".join(self.choices) or "(none registered)"
        if preset and not (disabled or failed or other_list):
            msg = (
                f"preset {preset}: {key}: {value}: no {kind} has that name."
                f"{did_you_mean(value, choices)} Valid {kind} names: {valid}. Fix {key} in "
                "that file, or install the plugin that provides it ('envfactory-plugins' "
                "shows what is registered)."
            )
        elif preset:
            msg = f"preset {preset}: {key}: {value}: " + str(
                UnknownNameError(kind, value, choices, disabled=disabled, failed=failed)
            )
        elif other_list:
            msg = f"{kind} {echo(value)}{where} is in the wrong list: {other_list}."
        elif failed:
            msg = (
                f"unknown {kind} {echo(value)}{where}.{did_you_mean(value, choices)} "
                f"Valid {kind} names: {valid}. Installed plugins that may provide it were "
                f"skipped: {failed}. Fix the plugin (or uninstall it); 'envfactory-plugins' "
                f"shows each plugin's status.{' ' + note if note else ''}"
            )
        elif disabled:
            msg = (
                f"the {kind} {echo(value)}{where} is disabled: {disabled}. Valid {kind} "
                f"names now: {valid}."
            )
        else:
            msg = (
                f"unknown {kind} {echo(value)}{where}.{did_you_mean(value, choices)} "
                f"Valid {kind} names: {valid}. Install the plugin that provides it, or run "
                f"'envfactory-plugins' to see what is registered.{' ' + note if note else ''}"
            )
        super().__init__(msg)

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])

    def in_preset(self, preset: str, key: str) -> UnknownNameError:
        """The same error, said at the preset file that sets the name (``key: value`` in
        ``preset``), rather than at the override ``group=value`` the user never typed."""
        return UnknownNameError(
            self.kind, self.value, self.choices, key=key, preset=preset, **self._reasons
        )


class OptionError(ConfigError):
    """One option of a config schema has a bad value: what a schema's ``__post_init__``
    raises (see `envfactory.config.checks`). envfactory adds the node's path, so the
    message reads ``env.frame_skip=0: expected an integer >= 1``.

    Args:
        field: the option's name in its schema (``frame_skip``).
        value: the bad value.
        expected: what would be valid (``an integer >= 1``, ``one of grayscale, rgb, ram``).
        hint: more text: a "did you mean", or how to fix it (``{key}`` in it: the option's
            full path, ``Set {key}=1 or more`` reads ``Set env.frame_skip=1 or more``).
        path: the node's path (``env``); envfactory sets it.
    """

    def __init__(
        self, field: str, value: object, expected: str, *, hint: str = "", path: str = ""
    ) -> None:
        self.field, self.value, self.expected, self.hint, self.path = (
            field,
            value,
            expected,
            hint,
            path,
        )
        key = f"{path}.{field}" if path else field
        hint = f" {hint.strip()}".replace("{key}", key) if hint.strip() else ""
        super().__init__(f"{key}={echo(value)}: expected {expected}.{hint}")

    def at(self, path: str) -> OptionError:
        """The same error, named by its full path (``env.frame_skip``)."""
        return OptionError(self.field, self.value, self.expected, hint=self.hint, path=path)


class PluginConflictError(EnvfactoryError):
    """Two plugins registered the same name for the same kind of record."""


class ConflictingNameError(PluginConflictError, ConfigError, KeyError):
    """A config names a family, vectorizer or wrapper that two installed plugins register:
    that name is unusable until one is disabled (everything else works). A config error
    (the CLI prints one line and exits 2) and a ``KeyError``, as an unknown name is.
    ``table`` (``vectorizers``, ``families``, ...) and ``name`` say which name."""

    table: str = ""
    name: str = ""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class PluginLoadWarning(UserWarning):
    """A plugin failed to import or raised in a hook; it was skipped."""


class AsyncCallError(EnvfactoryError, RuntimeError):
    """A call came at the wrong time: an async half out of order (see the two subclasses),
    or a step of a finished env in ``disabled`` autoreset mode."""


class NoPendingCallError(AsyncCallError, gym_error.NoAsyncCallError):
    """``step_wait``/``reset_wait`` with no matching ``*_async`` pending; also gymnasium's
    ``NoAsyncCallError``. ``name`` is the call that is pending (``""`` if none)."""

    def __init__(self, message: str, name: str = "") -> None:
        Exception.__init__(self, message)
        self.name = name


class NotReadyError(AsyncCallError, multiprocessing.TimeoutError, TimeoutError):
    """A poll (the pool's ``recv(timeout=0)``) found its batch not ready yet: nothing was
    waited on and no worker was stopped, so the call can be made again. Also
    ``multiprocessing.TimeoutError`` (what gymnasium's ``step_wait`` raises on a timeout)
    and the builtin ``TimeoutError``."""


class AlreadyPendingError(AsyncCallError, gym_error.AlreadyPendingCallError):
    """A call while a ``step_async``/``reset_async`` is pending; also gymnasium's
    ``AlreadyPendingCallError``. ``name`` is the pending call (``"step"``/``"reset"``)."""

    def __init__(self, message: str, name: str = "") -> None:
        Exception.__init__(self, message)
        self.name = name


class ClosedError(EnvfactoryError, RuntimeError, gym_error.ClosedEnvironmentError):
    """The vectorized environment was used after ``close()``; also gymnasium's
    ``ClosedEnvironmentError``."""


class SpaceMismatchError(EnvfactoryError, ValueError, RuntimeError):
    """Sub-environments of one vectorized env have different spaces (a ``RuntimeError`` as
    in gymnasium's vector envs, and a ``ValueError``)."""


class ResetNeededError(AsyncCallError, gym_error.ResetNeeded):
    """``step`` of an env that needs a reset: before the first ``reset()``, or (autoreset
    mode ``disabled``) after its episode ended. Also gymnasium's ``ResetNeeded``."""


class InvalidSeedError(EnvfactoryError, ValueError, TypeError):
    """A seed passed to ``reset`` is not an int >= 0 or None, or a seed list has the
    wrong length; checked before anything reaches an env."""


class ObservationError(EnvfactoryError, ValueError):
    """An env returned an observation that does not fit its declared observation space
    (wrong shape, a scalar, None, a dtype that cannot be cast safely): raised under every
    vectorizer, naming the env index and the expected and actual shape and dtype."""


class InvalidActionError(EnvfactoryError, ValueError, TypeError):
    """An action batch does not fit the action space (wrong shape, type or value); checked
    before anything reaches an env, so the vectorized env stays usable. A ``TypeError`` as
    in gymnasium's vector envs, and a ``ValueError``."""


class UnpicklableEnvError(EnvfactoryError, TypeError):
    """An env constructor cannot be sent to a worker process under spawn/forkserver."""


class VecEnvBrokenError(EnvfactoryError, RuntimeError):
    """A previous worker failure left the vectorized env unusable (no stale data is served)."""


#: what separates a [`WorkerError`][envfactory.errors.WorkerError]'s message from the remote
#: traceback it carries
REMOTE_TRACEBACK = "\n--- remote traceback ---\n"


class WorkerError(EnvfactoryError, RuntimeError):
    """A worker process failed. Carries which worker, pid, env indices, env id and the
    remote traceback text.

    Attributes:
        worker: index of the worker process (-1: the parent's own envs, ``in_parent``).
        pid: its process id.
        env_indices: the env indices it hosts.
        env_id: the env id (or family) of those envs.
        exitcode: the exit code (negative: killed by signal), or None if alive.
        signal: the signal name that killed it, if any.
        remote_traceback: traceback text from the worker, if any.
    """

    def __init__(
        self,
        what: str,
        *,
        worker: int,
        pid: int | None,
        env_indices: Sequence[int],
        env_id: str,
        exitcode: int | None = None,
        remote_traceback: str = "",
        call: str = "",
        detail: str = "",
    ) -> None:
        """``detail``: the failure's own words, ending the first line (a
        [`RemoteEnvError`][envfactory.errors.RemoteEnvError]'s: the env's message)."""
        import signal as _signal

        self.worker, self.pid, self.env_indices = worker, pid, list(env_indices)
        self.env_id, self.exitcode, self.remote_traceback, self.call = (
            env_id,
            exitcode,
            remote_traceback,
            call,
        )
        self.signal: str | None = None
        if exitcode is not None and exitcode < 0:
            try:
                self.signal = _signal.Signals(-exitcode).name
            except ValueError:
                self.signal = f"signal {-exitcode}"
        who = f"worker {worker}" if worker >= 0 else "the parent process (in_parent)"
        parts = [
            f"{who} (pid {pid}, envs {self.env_indices}, env {echo(env_id)}) {what}"
            + (f" during {call}" if call else "")
        ]
        if exitcode is not None:
            parts.append(f"exit code {exitcode}" + (f" ({self.signal})" if self.signal else ""))
        msg = "; ".join(parts) + (f": {detail}" if detail else "")
        if remote_traceback:
            msg += REMOTE_TRACEBACK + remote_traceback.rstrip()
        # not super(): a RemoteEnvError subclass also derives from an env's own exception
        # type, whose __init__ may take other arguments
        Exception.__init__(self, msg)


class RemoteEnvError(WorkerError):
    """An env raised inside a worker. The original exception is ``__cause__`` (when it could
    be pickled) and its type name is ``exc_type``; its message ends the first line
    (``worker 0 (pid 42, envs [0], env 'X-v0') raised builtins.RuntimeError during start:
    <the env's message>``), on one line, cut to `CAUSE_CHARS`.

    [`remote_env_error`][envfactory.errors.remote_env_error] raises it as a class that also derives
    from the original exception's type (``RemoteEnvError(ValueError)``, as Ray's task errors do), so
    ``except ValueError`` catches it as it would under ``dummy`` or gymnasium.
    """

    exc_type: str = ""

    def __str__(self) -> str:  # the original type's __str__ (KeyError's quoting) is not ours
        return BaseException.__str__(self)

    def __reduce__(self) -> Any:
        original = type(self).__bases__[-1] if type(self) is not RemoteEnvError else None
        return _rebuild_remote, (original, self.args, self.__dict__)


CAUSE_CHARS = 300
"""The most characters of an env's own message that a
[`RemoteEnvError`][envfactory.errors.RemoteEnvError]'s first line carries."""


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def remote_message(exc_type: str, original: BaseException | None, remote_traceback: str) -> str:
    """The message of an exception an env raised in a worker, on one line, cut to
    `CAUSE_CHARS`: from the original exception when it came back unpickled, else the
    last line of the remote traceback (``module.Type: message``). Empty for an exception
    without a message."""
    if original is not None:
        text = str(original)
    else:
        lines = [line for line in remote_traceback.strip().splitlines() if line.strip()]
        last = lines[-1] if lines else ""
        prefix = f"{exc_type}:"
        text = last[len(prefix) :] if exc_type and last.startswith(prefix) else ""
    return _one_line(text, CAUSE_CHARS)


_REMOTE_CLASSES: dict[type, type[RemoteEnvError]] = {}


def _remote_class(original: type | None) -> type[RemoteEnvError]:
    if (
        original is None
        or not isinstance(original, type)
        or not issubclass(original, Exception)
        or issubclass(original, WorkerError)
    ):
        return RemoteEnvError
    cls = _REMOTE_CLASSES.get(original)
    if cls is None:
        try:
            cls = type(
                f"RemoteEnvError({original.__name__})",
                (RemoteEnvError, original),
                {"__module__": __name__, "__doc__": RemoteEnvError.__doc__},
            )
        except TypeError:  # final classes, instance lay-out conflicts
            cls = RemoteEnvError
        _REMOTE_CLASSES[original] = cls
    return cls


def _rebuild_remote(original: type | None, args: tuple, state: dict) -> RemoteEnvError:
    err = _remote_class(original).__new__(_remote_class(original), *args)
    err.args = args
    err.__dict__.update(state)
    return err


def _type_by_name(dotted: str) -> type | None:
    """The exception class ``module.qualname`` if its module is already imported here."""
    module, _, qualname = dotted.rpartition(".")
    obj: Any = sys.modules.get(module or "builtins")
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, type) else None


def remote_env_error(
    what: str, *, exc_type: str, original: BaseException | None, **fields: Any
) -> RemoteEnvError:
    """The [`RemoteEnvError`][envfactory.errors.RemoteEnvError] for an exception an env raised in a
    worker: an instance of a (cached) class deriving from both ``RemoteEnvError`` and the original
    exception's type, or plain ``RemoteEnvError`` when that type cannot be subclassed or is unknown
    here.

    Args:
        what: what happened (``"raised ValueError"``).
        exc_type: ``module.qualname`` of the original exception's type.
        original: the original exception, unpickled (None if it could not be pickled).
        **fields: [`WorkerError`][envfactory.errors.WorkerError]'s keyword arguments (worker, pid,
            env_indices, ...).

    Returns:
        The error, with ``exc_type`` set and ``original`` as its ``__cause__``.

    Example:
        >>> err = remote_env_error("raised ValueError", exc_type="builtins.ValueError",
        ...     original=ValueError("bad"), worker=0, pid=1, env_indices=[0], env_id="x")
        >>> isinstance(err, ValueError), isinstance(err, RemoteEnvError)
        (True, True)
    """
    cls = _remote_class(type(original) if original is not None else _type_by_name(exc_type))
    detail = remote_message(exc_type, original, str(fields.get("remote_traceback", "")))
    try:
        err = cls(what, detail=detail, **fields)
    except Exception:  # the original type's __new__ wants other arguments
        err = RemoteEnvError(what, detail=detail, **fields)
    err.exc_type = exc_type
    err.__cause__ = original
    return err


class WorkerDiedError(WorkerError):
    """A worker process exited or was killed (e.g. SIGKILL) while the parent waited on it."""


class WorkerTimeoutError(WorkerError, multiprocessing.TimeoutError, TimeoutError):
    """A worker did not answer within ``timeout`` seconds; it was killed. Also
    ``multiprocessing.TimeoutError`` (what gymnasium's ``AsyncVectorEnv`` raises) and the
    builtin ``TimeoutError``."""


def too_many_open_files(exc: BaseException, workers: int) -> BaseException | None:
    """The error for a vectorizer's start that ran out of file descriptors (``EMFILE``, in
    this process or in a worker), with ``Too many open files`` and the fix on its first
    line; None for any other error. Each worker holds a few descriptors in the parent
    (its pipe, its wake-up eventfds, the process's sentinel), so a low ``ulimit -n`` (96
    on some clusters) or vectorized envs left open run out. An ``OSError`` stays an
    ``OSError`` (the same errno); a worker's error keeps its class, the advice first."""
    import errno

    too_many = (isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE)) or (
        isinstance(exc, WorkerError) and "Too many open files" in str(exc)
    )
    if not too_many:
        return None
    soft, hard = "?", ""
    raise_advice = "raise the limit (ulimit -n 4096 in the shell that runs this"
    fewer = "start fewer workers (vectorizer.in_series=<envs per worker>)"
    try:
        import resource

        limits = resource.getrlimit(resource.RLIMIT_NOFILE)
        soft = str(limits[0])
        target = max(4096, 2 * limits[0])  # (a soft limit of 4096 or more: double it)
        if limits[1] != resource.RLIM_INFINITY:
            hard = f"; hard limit {limits[1]}"
            target = min(target, limits[1])
        if target > limits[0]:
            raise_advice = f"raise the limit (ulimit -n {target} in the shell that runs this"
        else:  # the soft limit is the hard one: ulimit -n cannot go higher (only root can)
            raise_advice = ""
    except (ImportError, OSError, ValueError):  # (no resource module: Windows)
        pass
    if raise_advice:
        fix = (
            "Close the vectorized envs you no longer use (envs.close(), or a with block), "
            f"{raise_advice}; in Python, resource.setrlimit(resource.RLIMIT_NOFILE, ...)), "
            f"or {fewer}"
        )
    else:
        fix = (
            f"The soft limit is already the hard limit, which only an administrator can raise: "
            f"{fewer}, or close the vectorized envs you no longer use (envs.close(), or a "
            "with block)"
        )
    line = (
        f"Too many open files while starting {workers} worker{'s' if workers != 1 else ''}: "
        f"this process may hold {soft} open files (ulimit -n{hard}) and each worker holds "
        f"several. {fix}"
    )
    if isinstance(exc, WorkerError):  # (also a RemoteEnvError(OSError)): keep who failed
        exc.args = (f"{line}; {exc.args[0] if exc.args else ''}",)
        return exc
    err = OSError(getattr(exc, "errno", None), line)
    err.__cause__ = exc
    return err
