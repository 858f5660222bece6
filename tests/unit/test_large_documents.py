"""Large documents: cut a part at a time in bounded memory, each chunk's keywords as if its
window were analysed alone."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap

import pytest
from kbus_contract import ContentType, DocumentAdded
from kbus_ingestor import cutting
from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.markdown import sections
from kbus_ingestor.profiling import Cutter
from kbus_runtime.analysis import analyze_terms, window_span

from tests.cutting import chunk_document

WORDS = ["Cells", "divide", "the", "ΟΔΟΣ", "İstanbul", "x.", "A", "\n", "\n\n", "”", "\t"]
HEADINGS = ["\n# Intro\n", "\n## Methods\n", "\n### Mice\n"]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(
        rng.choice(WORDS + HEADINGS) if rng.random() < 0.03 else rng.choice(WORDS) for _ in range(n)
    )


@pytest.mark.parametrize("seed", range(40))
def test_every_chunk_s_keywords_are_its_window_analysed_alone(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keyword index is made a block at a time; whatever the block's edges, a chunk's
    keywords are its title, headings and window (inside its section) analysed on their own."""
    rng = random.Random(seed)
    monkeypatch.setattr(cutting, "KEYWORD_BLOCK", rng.choice([64, 300, 5000]))
    text = _text(rng, rng.randint(50, 3000))
    markdown = rng.random() < 0.5
    doc = DocumentAdded.model_validate(
        {
            "tenant": "t",
            "library": "l",
            "document_id": "d",
            "title": "Big one",
            "text": text,
            "content_type": ContentType.MARKDOWN if markdown else ContentType.PLAIN,
        }
    )
    window = rng.choice([0, 30, 1000])
    config = ChunkingConfig(size=rng.choice([16, 60, 512]), overlap=5)
    chunks = chunk_document(doc, Cutter.recursive(config), 10**6, keyword_window=window).chunks
    scopes = [(s.start, s.end) for s in sections(text)] if markdown else [(0, len(text))]
    for chunk in chunks:
        lo, hi = next((a, b) for a, b in scopes if a <= chunk.char_start < b)
        start, stop = window_span(text[lo:hi], chunk.char_start - lo, chunk.char_end - lo, window)
        head = analyze_terms(" ".join(("Big one", *chunk.heading_path)))
        alone = head + analyze_terms(text[lo + start : lo + stop])
        assert chunk.keywords == " ".join(alone)


CUT_IN_PARTS = textwrap.dedent(
    """
    import json, sys
    from kbus_contract import ContentType, DocumentAdded
    from kbus_ingestor.chunking import ChunkingConfig
    from kbus_ingestor.cutting import Cutting, parts_of
    from kbus_ingestor.parsing import Limits, parse
    from kbus_ingestor.profiling import Cutter

    def status(key: str) -> int:
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key + ":"))

    words = ("cells divide slowly and the tissue grows back. " * 8 + "\\n\\n").encode()
    doc = DocumentAdded(tenant="t", library="l", document_id="d", title="T", text="x")
    cutter = Cutter.recursive(ChunkingConfig())
    Cutting.of(doc, cutter, 1000, parse(ContentType.PLAIN, words, None, Limits(1, 1))).count(9)
    before = status("VmRSS")
    data = words * (int(sys.argv[1]) // len(words))
    parsed = parse(ContentType.PLAIN, data, None, Limits(1, 1))
    size = len(data)
    del data
    cut = Cutting.of(doc, cutter, 1000, parsed)
    total = cut.count(10**7)
    made = sum(len(part) for part in parts_of(cut.chunks(), 64))
    grew = status("VmHWM") - before
    print(json.dumps({"size": size, "grew": grew, "total": total, "made": made}))
    """
)


def test_a_large_text_is_cut_in_memory_bounded_by_twice_its_size() -> None:
    """Its bytes and its text at most: no chunk list, no copy of the text, no index of its
    words whole (an 8 MB text took 40 times its size before)."""
    run = subprocess.run(
        [sys.executable, "-c", CUT_IN_PARTS, str(8 * 1024**2)],
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(run.stdout)
    assert found["made"] == found["total"] > 15_000
    assert found["grew"] <= 2.2 * found["size"]
