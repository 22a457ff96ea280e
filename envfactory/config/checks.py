"""How a config schema checks its values, and where envfactory runs those checks.

A schema (the dataclass given as ``config=`` to a plugin record) checks its own values in
``__post_init__``, the dataclass's own hook for it: raise
[`envfactory.OptionError`][envfactory.OptionError] (the field, the value, what was expected) for a
bad value, or any ``ValueError`` / ``TypeError``. envfactory runs it in the parent process whenever
a config is checked (``compose()``, ``make_vec()``, ``make_env()``, the ``envfactory`` command), by
building the dataclass from the config node with ``OmegaConf.to_object``; so a bad option is one
[`ConfigError`][envfactory.ConfigError] naming its full path (``env.frame_skip=0: expected an
integer >= 1``) before any env or worker exists, the same under every vectorizer, for
built-in and third-party schemas alike. ``make`` / ``build`` then receive the checked
fields, so ``__post_init__`` may normalize a value (``vectorizer.timeout=inf`` becomes
``None``).

A schema whose valid range depends on the top level of the config (``batch_size <=
num_envs``) also defines ``check_config(self, top: TopLevel) -> None``: envfactory calls it
right after ``__post_init__`` with the `TopLevel` values (``num_envs``,
``autoreset_mode``, ``seeding``), and reports what it raises the same way. So every rule
about a family's or vectorizer's options lives in its own schema, and no config code
names one.

The helpers below (`check_int`, `check_choice`, ...) are what the built-in
schemas use; plugins may use them too.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from numbers import Integral, Real
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omegaconf.errors import OmegaConfBaseException

# (OmegaConf is imported where a config node is read: every family's schema uses the
# checks below, also in a worker process that only builds envs and reads no config)
from ..errors import ConfigError, OptionError, UnknownKeyError, did_you_mean, echo, echo_within

__all__ = [
    "TopLevel",
    "check_bool",
    "check_choice",
    "check_int",
    "check_keys",
    "check_number",
    "checked_options",
    "did_you_mean_key",
    "omegaconf_error",
    "one_line",
]


FIX_SPELLING = "Fix the spelling (a '+' cannot add keys to envfactory's config)"


@dataclasses.dataclass(frozen=True)
class TopLevel:
    """The top-level values a family or vectorizer schema may check its own fields
    against, in its ``check_config(self, top)`` (see the module docstring).

    Attributes:
        num_envs: number of sub-environments.
        autoreset_mode: ``next_step`` | ``same_step`` | ``disabled``.
        seeding: ``offset`` | ``spawn``.
    """

    num_envs: int
    autoreset_mode: str = "next_step"
    seeding: str = "offset"


# -- helpers for a schema's __post_init__ ----------------------------------------------------
def _or_null(optional: bool, null: str) -> str:
    return (f", or null {null}" if null else ", or null") if optional else ""


def check_int(obj: Any, name: str, minimum: int, *, optional: bool = False, null: str = "") -> None:
    """``obj.<name>`` must be an int >= ``minimum`` (or None when ``optional``; ``null``
    says what None means in the fix, ``"for a synchronous VecEnv"``)."""
    value = getattr(obj, name)
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, Integral) or int(value) < minimum:
        expected = f"an integer >= {minimum}" + (" or null" if optional else "")
        fix = f"Set {{key}}={minimum} or more{_or_null(optional, null)}"
        raise OptionError(name, value, expected, hint=fix)


def check_number(
    obj: Any,
    name: str,
    low: float,
    high: float = math.inf,
    *,
    optional: bool = False,
    null: str = "",
) -> None:
    """``obj.<name>`` must be a real number in ``[low, high]`` (not NaN)."""
    value = getattr(obj, name)
    if optional and value is None:
        return
    ok = isinstance(value, Real) and not isinstance(value, bool)
    if not ok or math.isnan(float(value)) or not low <= float(value) <= high:
        span = f"a number >= {low:g}" if high == math.inf else f"a number in [{low:g}, {high:g}]"
        fix = f"Set {{key}} to {span}{_or_null(optional, null)}"
        raise OptionError(name, value, span + (" or null" if optional else ""), hint=fix)


def did_you_mean_key(key: str, valid: Iterable[str], path: str) -> str:
    """`did_you_mean` for a key of the node at ``path``: the closest valid key as the full
    dotted key to write (`` Did you mean 'run.total_steps'?``)."""
    close = difflib.get_close_matches(key, list(valid), n=1, cutoff=0.5)  # (did_you_mean's)
    return f" Did you mean {(f'{path}.' if path else '') + close[0]!r}?" if close else ""


def check_bool(obj: Any, name: str) -> None:
    value = getattr(obj, name)
    if not isinstance(value, bool):
        raise OptionError(name, value, "true or false")


def check_choice(obj: Any, name: str, choices: Sequence[str]) -> None:
    """``obj.<name>`` must be one of ``choices``; the error has a "did you mean"."""
    value = getattr(obj, name)
    if value not in choices:
        raise OptionError(
            name, value, f"one of {', '.join(choices)}", hint=did_you_mean(str(value), choices)
        )


# -- running the checks --------------------------------------------------------------------
def one_line(exc: BaseException) -> str:
    """The first line of an OmegaConf/Hydra message (the rest repeats the key and type)."""
    text = str(exc).strip()
    return echo_within(text.splitlines()[0].strip()) if text else type(exc).__name__


def omegaconf_error(exc: OmegaConfBaseException, prefix: str = "", note: str = "") -> ConfigError:
    """One line for an OmegaConf error: ``<path>: <what>``, then ``note`` (`` (wrapper
    'time_limit')``), then the fix where there is one."""
    key = str(getattr(exc, "full_key", None) or "")
    if prefix and key and key != prefix and not key.startswith(prefix + "."):
        key = f"{prefix}.{key}"
    where = f"{key or prefix}: " if key or prefix else ""
    msg = one_line(exc)
    if msg.startswith("Unsupported interpolation type"):
        resolver = msg.rsplit(" ", 1)[-1]
        msg = (
            f"unknown interpolation resolver {resolver!r} (in ${{{resolver}:...}}); register "
            f"it with OmegaConf.register_new_resolver({resolver!r}, ...) before composing, "
            "or use a plain value"
        )
    if _NOT_A_LIST.match(msg):
        value = _node_value(getattr(exc, "value", None))
        return ConfigError(_not_a_list(key or prefix, value) + note)
    converted = _CONVERSION.match(msg)
    if converted:
        value, kind, boolean = converted.groups()
        kind = "Boolean" if boolean else kind
        expected = _EXPECTED.get(kind, f"a value of type {kind}")
        at = key or prefix
        fix = f"; set {at} to {expected}" + (
            f", like {at}={_EXAMPLE[kind]}" if kind in _EXAMPLE else ""
        )
        return ConfigError(f"{at}={value}: expected {expected}; got {value!r}{note}{fix}")
    choice = _CHOICE.match(msg)
    if choice:
        value, options = choice.group(1), [o.strip() for o in choice.group(2).split(",")]
        return ConfigError(
            f"{key or prefix}={value}: expected one of {', '.join(options)}."
            f"{did_you_mean(value, options)}".rstrip()
            + note
        )
    return ConfigError(f"{where}{msg}{note}")


_NOT_A_LIST = re.compile(r"Invalid value assigned: \w+ is not a ListConfig, list or tuple")
#: a wrapper with options, for the fix of a ``wrappers`` / ``vector_wrappers`` not a list
_WRAPPER_EXAMPLE = {
    "wrappers": "{name: time_limit, max_episode_steps: 100}",
    "vector_wrappers": "{name: clip_reward, min_reward: -1, max_reward: 1}",
}


def _node_value(value: Any) -> Any:
    """The Python value of an OmegaConf node (``AnyNode('x')`` -> ``'x'``), else itself."""
    getter = getattr(value, "_value", None)
    return getter() if callable(getter) else value


def _not_a_list(key: str, value: Any) -> str:
    """The message for a list key (``wrappers``) given one value, with the list forms."""
    what = {str: "a string", bool: "a boolean", int: "an integer", float: "a number"}.get(
        type(value), f"a {type(value).__name__}"
    )
    item = value if isinstance(value, (str, int, float)) and not isinstance(value, bool) else ""
    example = _WRAPPER_EXAMPLE.get(key.rpartition(".")[2])
    if example is None:
        return f"{key}={echo(value)}: {key} takes a list, not {what}; write {key}=[{item or '...'}]"
    name = item if isinstance(item, str) and item.isidentifier() else "NAME"
    return (
        f"{key}={echo(value)}: {key} takes a list of wrappers, not {what}; write {key}=[{name}], "
        f"or '{key}=[{example}]' to give a wrapper options"
    )


# OmegaConf's messages for a value of the wrong type (``num_envs=abc``) and an Enum's bad name
_CONVERSION = re.compile(
    r"Value '(.*)' (?:of type '\w+' could not be converted to (\w+)|is not a valid (bool))"
)
_CHOICE = re.compile(r"Invalid value '(.*)', expected one of \[(.*)\]")
_EXPECTED = {
    "Integer": "an integer",
    "Float": "a number",
    "Boolean": "true or false",
    "String": "a string",
}
_EXAMPLE = {"Integer": "4", "Float": "0.5", "Boolean": "true"}


def check_keys(
    node: Mapping[str, Any],
    valid: Iterable[str],
    path: str,
    what: str = "",
    fix: str | Callable[[str], str] = FIX_SPELLING,
) -> None:
    """Every key of ``node`` must be in ``valid`` (keys added with Hydra's ``+`` bypass
    OmegaConf's struct mode); the error lists the valid keys with a "did you mean", then
    ``fix`` (or what ``fix(key)`` says)."""
    names = sorted(str(v) for v in valid)
    for key in node:
        if str(key) not in names:
            full = f"{path}.{key}" if path else str(key)
            where = f" of {what}" if what else ""
            raise UnknownKeyError(
                f"unknown key {full}{where}.{did_you_mean_key(str(key), names, path)} "
                f"Valid keys{' under ' + path if path else ''}: {', '.join(names)}. "
                f"{fix(str(key)) if callable(fix) else fix}"
            )


def checked_options(
    node: Any, schema: type | None, path: str, key: str, name: str, *, top: TopLevel | None = None
) -> dict[str, Any]:
    """The checked fields (without ``key``) of one env/vectorizer node, from its schema's
    ``__post_init__`` and (given ``top``) its ``check_config(top)`` (see the module
    docstring).

    Raises:
        ConfigError: an unknown key, a wrong type, a missing or a bad value (an
            [`OptionError`][envfactory.OptionError] for a bad value), each named by its path.
    """
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        raw = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node
    except OmegaConfBaseException as exc:
        raise omegaconf_error(exc, prefix=path) from None
    data: dict[str, Any] = {str(k): v for k, v in dict(raw).items()}  # type: ignore[arg-type]
    if schema is None:
        data.pop(key, None)
        return data
    from .store import schema_node

    fields = {f.name for f in dataclasses.fields(schema) if f.init} | {key}
    check_keys(data, fields, path, f"{path}={name}")
    base = schema_node(schema, key, name)
    try:
        merged = OmegaConf.merge(base, data)
        obj = OmegaConf.to_object(merged)
        if top is not None:
            _check_config(obj, top)
    except OptionError as exc:
        raise exc.at(path) from None
    except OmegaConfBaseException as exc:
        if type(exc).__name__ == "MissingMandatoryValue":
            k = getattr(exc, "full_key", "") or "?"
            raise ConfigError(
                f"{path}.{k} is required by {path}={name}: set {path}.{k}=<value>"
            ) from None
        raise omegaconf_error(exc, prefix=path) from None
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{path}={name}: {one_line(exc)}") from None
    return {
        f.name: _plain(getattr(obj, f.name))
        for f in dataclasses.fields(obj)  # type: ignore[arg-type]
        if f.name != key
    }


def _check_config(obj: Any, top: TopLevel) -> None:
    """A schema's cross-field checks against the top level: its ``check_config(top)``."""
    check = getattr(obj, "check_config", None)
    if check is not None:
        check(top)


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value
