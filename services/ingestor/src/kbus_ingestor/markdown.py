"""Markdown sections: the text under each heading, with the path of headings above it."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# The line ends str.splitlines knows; a document's lines are read one at a time (a large one
# is never held as a list of its lines).
_ENDS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_LINE = re.compile(f"[^{_ENDS}]*(?:\r\n|[{_ENDS}])?")
_BREAK = re.compile(f"[{_ENDS}]")
_VISIBLE = re.compile(r"\S")


@dataclass(frozen=True)
class Section:
    """A run of the document under one heading path (the heading line included)."""

    start: int
    end: int
    heading_path: tuple[str, ...]

    def has_body(self, text: str) -> bool:
        """Whether the section holds anything besides its heading line."""
        start = self.start
        if self.heading_path:  # past its heading line
            found = _BREAK.search(text, start, self.end)
            start = found.end() if found else self.end
        return _VISIBLE.search(text, start, self.end) is not None


def sections(text: str) -> list[Section]:
    """Split Markdown at ATX headings (``#`` to ``######``), ignoring fenced code blocks."""
    result: list[Section] = []
    path: list[tuple[int, str]] = []
    section_start = 0
    current: tuple[str, ...] = ()
    fence: str | None = None
    offset = 0
    for match in _LINE.finditer(text):
        line = match.group()
        if not line:
            break
        stripped = line.rstrip("\r\n")
        fence_match = _FENCE.match(stripped)
        if fence_match:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker[0] * 3
            elif marker.startswith(fence):
                fence = None
        elif fence is None and (heading := _ATX.match(stripped)):
            if offset > section_start:
                result.append(Section(section_start, offset, current))
            level = len(heading.group(1))
            path = [(lvl, title) for lvl, title in path if lvl < level]
            path.append((level, heading.group(2).strip()))
            current = tuple(title for _, title in path)
            section_start = offset
        offset += len(line)
    if len(text) > section_start:
        result.append(Section(section_start, len(text), current))
    return result
