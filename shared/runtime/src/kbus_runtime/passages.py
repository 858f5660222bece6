"""How a chunk reads to a model: its context (title, headings), then its text."""

from __future__ import annotations

from collections.abc import Sequence


def passage_text(title: str, heading_path: Sequence[str], text: str) -> str:
    """``title / heading / heading`` on the first line, the chunk's text below."""
    header = " / ".join(part for part in (title.strip(), *heading_path) if part)
    return f"{header}\n{text}" if header else text
