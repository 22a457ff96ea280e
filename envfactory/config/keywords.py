"""How a plain-dict config and ``make_vec``'s keyword arguments are read: one reading for
``make_vec({...})``, ``make_vec(num_envs=4, env="atari")``, gymnasium's ``make_vec(id,
num_envs, **kwargs)`` through a ``vector_entry_point`` and RLlib's ``env_config``.

- A key is a top-level key of the config (``num_envs``, ``seed``, ``autoreset_mode``,
  ``wrappers``, ...), its value as in YAML: a mapping is merged into that node
  (``vectorizer={"name": "subproc", "in_series": 2}``), anything else replaces it.
- ``env`` / ``vectorizer`` given as a string picks that config group option, as the override
  ``env=atari`` does (a family, a vectorizer or a preset); a mapping with ``family`` / ``name``
  picks it too, and its other keys set options.
- A dotted key sets one option: ``{"env.id": "Acrobot-v1"}`` is ``{"env": {"id": "Acrobot-v1"}}``.
- gymnasium's spellings: ``render_mode`` is ``env.render_mode`` and ``max_episode_steps``
  (which gymnasium's ``make_vec`` passes when the registered spec has one) is
  ``env.max_episode_steps``, the time limit that replaces the id's own, as in ``gym.make``
  (every built-in family has both; None keeps the id's limit).
- ``overrides``: a list of Hydra overrides (what ``make_vec(overrides=[...])`` takes), for
  callers that can pass only a dict (RLlib's ``env_config``).

Later sources win over earlier ones, and keys over overrides (a group picked by a key and by
an override takes the override's pick, as ``make_vec(dict, overrides=...)`` always did). A key
that is none of these is one `UnknownKeyError` (a `ConfigError` and a ``TypeError``) listing
the valid keys.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ArgumentTypeError, UnknownKeyError, did_you_mean, echo

__all__ = ["GYMNASIUM_KEYS", "Reading", "read", "unknown_key"]

#: the config groups a string value picks an option of, and the key of a mapping that does
_GROUPS = {"env": "family", "vectorizer": "name"}
#: gymnasium's keyword arguments that are not config keys, and what each becomes
GYMNASIUM_KEYS = {
    "render_mode": "env.render_mode",
    "max_episode_steps": "env.max_episode_steps",
    "overrides": "Hydra overrides",
}


@dataclass
class Reading:
    """What a list of dicts / keyword arguments asks for, before the config is composed."""

    picks: dict[str, str] = field(default_factory=dict)  # group -> option ("env" -> "atari")
    layers: list[dict[str, Any]] = field(default_factory=list)  # merged in order
    overrides: list[str] = field(default_factory=list)

    @property
    def pick_overrides(self) -> list[str]:
        return [f"{group}={name}" for group, name in self.picks.items()]

    def check_keys(self, valid: Collection[str]) -> None:
        """Refuse a top-level key that the composed config does not have."""
        for layer in self.layers:
            for key in layer:
                if key not in valid:
                    raise unknown_key(key, valid)


def unknown_key(key: str, valid: Collection[str]) -> UnknownKeyError:
    """An unknown keyword argument: a `ConfigError` and a ``TypeError`` whose message has
    Python's words (``unexpected keyword argument 'frameskip'``), as a function or gymnasium's
    ``make`` raises for one, so a caller that drops a refused keyword on that ``TypeError``
    (TorchRL's ``GymEnv("envfactory/CartPole-v1")`` passing ``frameskip=``) works."""
    names = sorted({*valid, *GYMNASIUM_KEYS} - {"hydra"})
    return UnknownKeyError(
        f"unknown key {echo(key)} (an unexpected keyword argument {echo(key)} of make_vec / "
        f"make_env / gym.make, or a key of a config dict or of RLlib's env_config)."
        f"{did_you_mean(key, names)} Valid keys: "
        f"{', '.join(names)}; a dotted key sets one option (env.id=...), a dict sets a node"
    )


def read(sources: Sequence[Mapping[str, Any]]) -> Reading:
    """Read ``sources`` (a config dict, then keyword arguments) in order."""
    out = Reading()
    for source in sources:
        layer: dict[str, Any] = {}
        for raw_key, value in source.items():
            key = str(raw_key)
            if key == "overrides":
                out.overrides.extend(_override_list(value))
            elif key in GYMNASIUM_KEYS:
                _set(layer, GYMNASIUM_KEYS[key].split("."), value)
            elif key in _GROUPS and isinstance(value, str):
                out.picks[key] = value
            else:
                if key in _GROUPS and isinstance(value, Mapping) and _GROUPS[key] in value:
                    out.picks[key] = str(value[_GROUPS[key]])
                _set(layer, key.split("."), value)
        if layer:
            out.layers.append(layer)
    return out


def _set(layer: dict[str, Any], path: list[str], value: Any) -> None:
    """Merge ``value`` at ``path`` into ``layer`` (mappings merged key by key)."""
    node = layer
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {} if not isinstance(child, Mapping) else dict(child)
        node = child
    last = path[-1]
    if isinstance(value, Mapping) and isinstance(node.get(last), Mapping):
        merged = dict(node[last])
        for k, v in value.items():
            _set(merged, [str(k)], v)
        node[last] = merged
    else:
        node[last] = value


def _override_list(value: Any) -> list[str]:
    """As ``make_vec(overrides=...)``: a list of strings, and a string is a ``TypeError``."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ArgumentTypeError(
            f"overrides must be a list of strings like ['num_envs=2', 'env=mountaincar'], got "
            f"{type(value).__name__} {echo(value)}"
        )
    return [str(v) for v in value]
