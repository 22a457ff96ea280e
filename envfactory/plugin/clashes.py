"""Names two config sources give: a preset file named like a registered family or
vectorizer, or like a preset of another folder.

Hydra takes the first config of a name on its search path and says nothing, so a
``vectorizer/dummy.yaml`` in the user's config folder or in any plugin's would replace
envfactory's ``dummy``. envfactory treats it as two plugins registering one name: the name
goes to the registry's ``conflicts`` (using it raises
[`ConflictingNameError`][envfactory.errors.ConflictingNameError] naming both sources, every other
name works, ``envfactory-plugins`` lists it), and its private config source serves the name
ahead of every folder (`envfactory.config.store.extend_search_path`), so no preset
is composed in its place.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .folders import CONF_PLUGIN, PRESET_GROUPS, PresetFile, conf_dir, preset_files
from .registry import Provider, Registered, Registry

__all__ = ["add_preset_clashes", "preset_sources", "taken_names"]


def preset_sources(
    reg: Registry, version: str, folders: Iterable[tuple[str, Provider]] | None = None
) -> dict[str, dict[str, list[Registered[Any]]]]:
    """``{group: {name: [every source giving it]}}``: registered records first, then the
    preset files of envfactory's ``conf/`` and of every config folder (each folder once)."""
    dirs = [(str(conf_dir()), Provider(CONF_PLUGIN, "envfactory", version))]
    dirs += list(reg.config_dirs if folders is None else folders)
    seen: set[str] = set()
    out: dict[str, dict[str, list[Registered[Any]]]] = {}
    for group, table_name in PRESET_GROUPS.items():
        given: dict[str, list[Registered[Any]]] = {}
        table: dict[str, Registered[Any]] = getattr(reg, table_name)
        for name, entry in table.items():
            given[name] = [entry]
        for name, regs in reg.conflicts.get(table_name, {}).items():
            given[name] = list(regs)
        seen.clear()
        for folder, provider in dirs:
            key = os.path.realpath(folder)
            if key in seen:
                continue
            seen.add(key)
            for preset in preset_files(folder, group):
                given.setdefault(preset.name, []).append(Registered(preset, provider))
        out[group] = given
    return out


def add_preset_clashes(reg: Registry, version: str) -> None:
    """Move every name that two config sources give into ``reg.conflicts``."""
    for group, given in preset_sources(reg, version).items():
        table_name = PRESET_GROUPS[group]
        table: dict[str, Registered[Any]] = getattr(reg, table_name)
        for name, sources in given.items():
            if len(sources) < 2 or not any(isinstance(r.record, PresetFile) for r in sources):
                continue  # one source, or a clash of records the registry has already
            table.pop(name, None)
            reg.conflicts.setdefault(table_name, {})[name] = sources


def taken_names(reg: Registry, group: str, own: str | os.PathLike[str]) -> dict[str, str]:
    """``{name: who gives it}`` for every ``group`` name given by a source other than the
    folder ``own`` (where ``envfactory tune`` writes): a preset written there under one of
    these names would clash."""
    own_path = os.path.realpath(Path(own, group))
    out: dict[str, str] = {}
    for name, sources in preset_sources(reg, "-").get(group, {}).items():
        for r in sources:
            if isinstance(r.record, PresetFile):
                if os.path.realpath(Path(r.record.path).parent) == own_path:
                    continue
                out.setdefault(name, f"the preset {r.record.path}")
            else:
                out.setdefault(name, f"a registered {group} of {r.provider}")
    return out
