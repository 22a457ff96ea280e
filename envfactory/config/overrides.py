"""One line with the fix for an override Hydra will not take as typed: one its grammar cannot
read (a ``[`` or ``{`` left open, characters that need quotes), and a sweep (``num_envs=1,2``,
``range(1,4)``) in a run without ``-m``."""

from __future__ import annotations

import dataclasses
import re

from ..errors import ConfigError, echo, echo_within
from .schema import EnvfactoryConfig

__all__ = ["override_parse_error", "sweep_error"]

_CLOSER = {"[": "]", "{": "}", "(": ")"}
_OPENER = {v: k for k, v in _CLOSER.items()}


def override_parse_error(override: str, reason: str) -> ConfigError:
    """Hydra's override grammar could not read ``override``: say so with the fix. A value
    whose brackets do not pair up gets them paired (``its [ is not closed``, and the
    override closed); otherwise the advice is to quote the value (characters such as
    non-ASCII letters or spaces need quotes)."""
    key, sep, value = str(override).partition("=")
    brackets = _bracket_fix(value) if sep else None
    if brackets is not None:
        what, fixed = brackets
        return ConfigError(
            echo_within(f"cannot read the override {echo(override)}: {what}; write '{key}={fixed}'")
        )
    if sep and value and not value.startswith(("'", '"')):
        quoted = value.replace('"', '\\"')
        hint = (
            "If the value holds characters Hydra's override grammar does not take unquoted "
            f"(non-ASCII letters, spaces, brackets, ...), quote it: '{key}=\"{quoted}\"' on the "
            f"command line, or overrides=['{key}=\"{quoted}\"']"
        )
    else:
        hint = "See https://hydra.cc/docs/advanced/override_grammar/basic/"
    return ConfigError(
        echo_within(f"cannot read the override {echo(override)} ({reason.split(':')[0]}). {hint}")
    )


def _bracket_fix(value: str) -> tuple[str, str] | None:
    """``(what is wrong, the value paired up)`` when the brackets of ``value`` (outside
    quotes) do not pair up, and the paired-up value is one Hydra reads; else None. An
    unclosed bracket is closed where the next closer of an outer one comes, or at the end;
    a closer that closes nothing is dropped."""
    out: list[str] = []
    stack: list[str] = []
    unclosed: list[str] = []
    stray: list[str] = []
    quote = ""
    escaped = False
    for ch in value:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in _CLOSER:
            stack.append(ch)
        elif ch in _OPENER:
            if _OPENER[ch] not in stack:
                stray.append(ch)
                continue
            while stack[-1] != _OPENER[ch]:
                unclosed.append(stack[-1])
                out.append(_CLOSER[stack.pop()])
            stack.pop()
        out.append(ch)
    unclosed += reversed(stack)
    out += [_CLOSER[b] for b in reversed(stack)]
    if quote or not (unclosed or stray):
        return None
    fixed = "".join(out)
    if not _readable(fixed):
        return None
    parts = []
    if unclosed:
        opened = sorted(set(unclosed), key=value.index)  # in the order they are typed
        verb = "is" if len(opened) == 1 else "are"
        parts.append(f"its {' and '.join(opened)} {verb} not closed")
    if stray:
        closers = sorted(set(stray), key=value.index)
        parts.append(f"its {' and '.join(closers)} closes nothing")
    return "; ".join(parts), fixed


def _readable(value: str) -> bool:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        OverridesParser.create().parse_override(f"key={value}")
    except HydraException:  # (a syntax error is a plain HydraException here)
        return False
    return True


_AMBIGUOUS = re.compile(r"Ambiguous value for argument '(.*)'")
_SWEEP = re.compile(r"Sweep parameters '(.*)' requires --multirun")
_LIST_KEYS = {
    f.name for f in dataclasses.fields(EnvfactoryConfig) if str(f.type).startswith("list")
}


def sweep_error(text: str) -> ConfigError | None:
    """Hydra's refusal of a sweep in a run without ``-m`` (``Ambiguous value for argument
    'num_envs=1,2'``, ``Sweep parameters 'num_envs=range(1,4)' requires --multirun``): how
    many values it sweeps over and the fix, and the list form where a list is valid (None
    for another message)."""
    m = _AMBIGUOUS.match(text) or _SWEEP.match(text)
    if m is None:
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ValueType

    override = m.group(1)
    try:
        parsed = OverridesParser.create().parse_override(override)
        count = f" over {len(list(parsed.sweep_string_iterator()))} values"
    except Exception:  # a glob(...) needs the config to expand
        parsed, count = None, ""
    line = (
        f"{override} is a sweep{count}: add -m (--multirun) to run a job per value (in Python, "
        "compose once per value)"
    )
    key, _, value = override.partition("=")
    path = key.lstrip("+~")
    simple = parsed is not None and parsed.value_type == ValueType.SIMPLE_CHOICE_SWEEP
    if simple and (path in _LIST_KEYS or path.startswith("env.kwargs.")):  # (free-form)
        line += f"; for one list, write '{key}=[{value}]'"
    return ConfigError(echo_within(line))
