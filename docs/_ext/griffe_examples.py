"""A griffe extension (mkdocstrings, see mkdocs.yml): read a Google-style ``Example:``
section as griffe's ``Examples:`` section.

The Google style guide spells the section both ways (napoleon and gymnasium's docstrings
accept both); griffe knows only the plural, and would render a singular section's doctest
lines as Markdown text.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_SINGULAR = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _SINGULAR.sub(r"\1Examples:", obj.docstring.value)
