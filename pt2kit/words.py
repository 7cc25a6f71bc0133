"""Closed sets of words that pt2kit's records spell as plain strings: Enums whose members *are* those strings.

A member equals, hashes, prints and reprs as its value (``Kind.CRASH == "crash"``,
``f"{Kind.CRASH}"`` and ``repr(Kind.CRASH)`` are ``crash`` and ``'crash'``), so ``report.json``,
``--json`` and a generated ``repro.py`` read exactly as they did with bare strings, and a
record read back from JSON compares equal to one built in code. What the Enum adds is the
name: a misspelt word is an AttributeError where it is written, not a comparison that is
silently never true, and a reader sees every word of the set in one place.
"""

from __future__ import annotations

from enum import Enum


class Word(str, Enum):
    """A str-valued Enum member that behaves as its string everywhere (see the module docstring)."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return str.__repr__(self)

    def __format__(self, format_spec: str) -> str:
        return str.__format__(self, format_spec)
