"""One registry per kind of variant (a service's backends): each variant's name is a member of
one ``StrEnum`` (the settings' choices, validated by pydantic and listed in the generated
configuration page), and the registry maps every member to how it is made. ``auto`` is the
first variant whose condition holds for the settings, in the registry's order.

Adding a variant touches its enum member, its registry entry, and its implementation: the
settings' choices, the dispatch, the configuration page and the tests' parameters follow.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

#: The name of the choice that picks a variant by the settings.
AUTO = "auto"

Name = TypeVar("Name", bound=StrEnum)
Options = TypeVar("Options")
Made = TypeVar("Made")


@dataclass(frozen=True)
class Variant(Generic[Options, Made]):
    """How one variant is made from the service's options."""

    make: Callable[[Options], Made]
    #: What it is, in a few words (the docs and errors say it).
    about: str
    #: ``auto`` takes it when this holds (the first such, in the registry's order); None: only
    #: when named.
    auto_when: Callable[[Options], bool] | None = None
    #: It calls a server that must be configured (a key, a URL): tests without one skip it.
    remote: bool = False


class Registry(Generic[Name, Options, Made]):
    """Every variant of one kind, keyed by the members of its enum (``auto`` excepted)."""

    def __init__(
        self, kind: str, names: type[Name], variants: Mapping[Name, Variant[Options, Made]]
    ) -> None:
        named = {n for n in names if n.value != AUTO}
        if set(variants) != named:
            missing = sorted(str(n) for n in named.symmetric_difference(variants))
            raise ValueError(f"the {kind} registry and its names differ in: {', '.join(missing)}")
        self.kind = kind
        self.variants = dict(variants)

    def chosen(self, name: Name, options: Options) -> Name:
        """The variant ``name`` picks: itself, or for ``auto`` the first whose condition holds."""
        if name.value != AUTO:
            return name
        for candidate, variant in self.variants.items():
            if variant.auto_when is not None and variant.auto_when(options):
                return candidate
        raise ValueError(f"no {self.kind} applies to these settings; name one")

    def create(self, name: Name, options: Options) -> Made:
        return self.variants[self.chosen(name, options)].make(options)

    def local(self) -> list[Name]:
        """The variants that need no configured server."""
        return [n for n, v in self.variants.items() if not v.remote]
