"""What a message costs the stage that takes it: the unit of every fair turn (docs/scaling.md,
"Fair share").

Work is counted in chunks: embedding, indexing, the token states, the store's bytes and the
generator's model calls all grow with a document's chunks, and a chunk's cost varies little
(each is cut to about the same length). A chunk message's work is its chunks; a document's is
the chunks its text will make, estimated from its bytes before it is read. It is known before
the work runs, so a turn is given by it; it cannot be steered by a tenant (kbus writes it:
the gate for what a tenant sends, a stage for what it publishes on, in the :data:`WORK_HEADER`
of the stored message, and the gate keeps no header of a tenant's own of that name); and unlike
CPU time it does not depend on what else the machine does meanwhile.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

#: The header a stored message's work travels in (written by kbus, never kept from a tenant).
WORK_HEADER = "Kbus-Work"
#: Characters of text per chunk, for an estimate from a text's size (the default chunk size).
CHARS_PER_CHUNK = 512
#: Bytes of a stage's message per chunk, for a message without the header (kbus's own carry it).
BYTES_PER_CHUNK = 4096
#: The most work a turn of a fair stage does: a chunk message holds at most this many chunks,
#: and larger work is done in turns of at most this much.
QUANTUM = 64


def document_work(size: int) -> float:
    """The work of a document of ``size`` bytes of text: the chunks it will make, at least one."""
    return float(max(1, -(-size // CHARS_PER_CHUNK)))


class _Chunk(Protocol):
    @property
    def matching(self) -> Sequence[object]: ...


def chunks_work(chunks: Iterable[_Chunk]) -> float:
    """The work of a message of chunks: each chunk and each of its matching texts."""
    return float(sum(1 + len(chunk.matching) for chunk in chunks))


def work_of(headers: Mapping[str, str] | None, body: bytes) -> float:
    """A stored message's work: its header, else an estimate from its size (at least one)."""
    value = (headers or {}).get(WORK_HEADER)
    if value is not None:
        try:
            work = float(value)
        except ValueError:
            work = 0.0
        if 0 < work < 1e9:
            return work
    return float(max(1, len(body) // BYTES_PER_CHUNK))


def work_header(work: float) -> dict[str, str]:
    """The header that says a message's work."""
    return {WORK_HEADER: f"{max(1.0, work):g}"}
