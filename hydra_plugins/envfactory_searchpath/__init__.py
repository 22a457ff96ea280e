"""Hydra search-path plugin: makes envfactory's config groups (``env``, ``vectorizer``,
the ``envfactory`` node, plugin presets) composable from any Hydra app in this Python
environment, and stores envfactory's structured schemas in ConfigStore.

Hydra imports every module under the ``hydra_plugins`` namespace package; this one stays
light at import and does its work only when Hydra asks for the search path.
"""
