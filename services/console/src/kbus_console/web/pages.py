"""The console's pages as HTML text. Every byte that came from a tenant (a title, a text, an
address, a heading, metadata, a library's name) goes through :func:`e` where it is shown: a
document is the first cross-site-scripting payload. No script runs on any page."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from urllib.parse import quote

from kbus_contract import DeadLetter, ProfileReply, SearchHit, SearchReply, StatsReply

#: The pages' policy: their own stylesheet, forms to themselves, nothing else.
PAGE_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
STYLE = """
body { font: 16px/1.5 system-ui, sans-serif; margin: 0 auto; max-width: 60rem; padding: 1rem; }
header { display: flex; justify-content: space-between; align-items: center; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .25rem .5rem; border-bottom: 1px solid #ccc; }
mark { background: #ffe066; }
.hit { border-bottom: 1px solid #ccc; padding: .5rem 0; }
.scores { font-size: .85rem; color: #333; }
.said { background: #eef; padding: .5rem; }
.error { background: #fee; padding: .5rem; }
:focus { outline: 3px solid #1a73e8; }
.sr { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
"""


def e(text: object) -> str:
    """``text`` escaped for HTML text and attribute values."""
    return html.escape(str(text), quote=True)


def page(title: str, body: str, csrf: str | None = None) -> str:
    """A whole page: its title, a sign-out form when signed in, the body."""
    out = ""
    if csrf is not None:
        out = (
            '<form method="post" action="/sign-out">'
            f'<input type="hidden" name="csrf" value="{e(csrf)}">'
            '<button type="submit">Sign out</button></form>'
        )
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{e(title)} · kbus</title><link rel="stylesheet" href="/console.css"></head>'
        f'<body><header><p><a href="/">kbus</a></p>{out}</header>'
        f"<main><h1>{e(title)}</h1>{body}</main></body></html>"
    )


def sign_in(error: str | None = None) -> str:
    said = f'<p class="error" role="alert">{e(error)}</p>' if error else ""
    return page(
        "Sign in",
        f"{said}<p>Paste a token made from your credential "
        "(<code>kbus token --credential FILE</code>).</p>"
        '<form method="post" action="/sign-in">'
        '<label for="token">Token</label> '
        '<input id="token" name="token" type="password" autocomplete="off" required> '
        '<button type="submit">Sign in</button></form>',
    )


def libraries(stats: StatsReply, csrf: str) -> str:
    rows = "".join(
        f'<tr><td><a href="/libraries/{quote(lib.library)}">{e(lib.library)}</a></td>'
        f"<td>{lib.documents}</td><td>{lib.chunks}</td></tr>"
        for lib in stats.libraries
    )
    body = (
        f"<p>Tenant {e(stats.tenant)}.</p>"
        "<table><caption>Libraries</caption><thead><tr><th scope=col>Library</th>"
        f"<th scope=col>Documents</th><th scope=col>Chunks</th></tr></thead><tbody>{rows}"
        "</tbody></table>"
        '<p><a href="/dead-letters">Dead letters</a></p>'
        '<form method="get" action="/open"><label for="library">Open or start a library</label> '
        '<input id="library" name="library" required> <button type="submit">Open</button></form>'
    )
    return page("Libraries", body, csrf)


def library(
    name: str,
    listing: StatsReply,
    csrf: str,
    *,
    said: Iterable[str] = (),
    query: str = "",
    reply: SearchReply | None = None,
    error: str | None = None,
) -> str:
    here = f"/libraries/{quote(name)}"
    notes = "".join(f'<p class="said" role="status">{e(s)}</p>' for s in said)
    if error:
        notes += f'<p class="error" role="alert">{e(error)}</p>'
    search = (
        f'<form method="get" action="{here}" role="search"><label for="q">Search</label> '
        f'<input id="q" name="q" value="{e(query)}" required> '
        '<button type="submit">Search</button></form>'
    )
    return page(
        f"Library {name}",
        notes
        + search
        + (results(reply, query) if reply else "")
        + _importing(here, csrf)
        + _documents(here, listing, csrf),
        csrf,
    )


def _importing(here: str, csrf: str) -> str:
    return (
        "<h2>Import</h2>"
        f'<form method="post" action="{here}/import" enctype="multipart/form-data">'
        f'<input type="hidden" name="csrf" value="{e(csrf)}">'
        '<label for="files">Files (Markdown, text, HTML, PDF, Office, CSV, JSON)</label> '
        '<input id="files" name="files" type="file" multiple> '
        '<label for="url">or a web page by address</label> '
        '<input id="url" name="url" type="url" placeholder="https://..."> '
        '<button type="submit">Import</button></form>'
    )


def _documents(here: str, listing: StatsReply, csrf: str) -> str:
    rows = "".join(
        f"<tr><td>{e(doc.document_id)}</td><td>{e(doc.title)}</td><td>{e(doc.version)}</td>"
        f"<td>{e(doc.source_uri)}</td><td>"
        f'<form method="post" action="{here}/documents/{quote(doc.document_id, safe="")}/delete">'
        f'<input type="hidden" name="csrf" value="{e(csrf)}">'
        f'<button type="submit" aria-label="Delete {e(doc.document_id)}">Delete</button>'
        "</form></td></tr>"
        for doc in listing.documents
    )
    more = (
        f'<p><a href="{here}?after={quote(listing.after)}">Next page</a></p>'
        if listing.after
        else ""
    )
    return (
        f"<h2>Documents ({listing.total})</h2><table><thead><tr><th scope=col>Id</th>"
        "<th scope=col>Title</th><th scope=col>Version</th><th scope=col>Source</th>"
        f"<th scope=col><span class=sr>Actions</span></th></tr></thead><tbody>{rows}</tbody>"
        f"</table>{more}"
    )


def results(reply: SearchReply, query: str) -> str:
    """A search's hits, each with every score named, its citation and its text with the
    query's words marked; or why nothing matched."""
    if not reply.results:
        why = f" ({e(reply.no_match_reason)})" if reply.no_match_reason else ""
        return f'<p class="said" role="status">Nothing in this library matches{why}.</p>'
    said = (
        f"<p>{len(reply.results)} results; scores: {e(reply.score_kind)}, reranker "
        f"{e(reply.reranker or 'none')}{'; degraded' if reply.degraded else ''}.</p>"
    )
    return (
        "<h2>Results</h2>"
        + said
        + "".join(_hit(n, hit, query) for n, hit in enumerate(reply.results, 1))
    )


def _hit(rank: int, hit: SearchHit, query: str) -> str:
    s = hit.scores
    named = [
        ("final", s.final),
        ("fused", s.fused),
        ("keyword", s.keyword),
        ("vector", s.vector),
        ("rerank", s.rerank),
    ]
    scores = ", ".join(f"{n} {v:.3f}" for n, v in named if v is not None)
    where = " > ".join(hit.heading_path)
    return (
        f'<article class="hit"><h3>{rank}. {e(hit.title or hit.document_id)}</h3>'
        f'<p class="scores">{e(scores)}</p>'
        f"<p>{e(where)} <cite>{_source(hit.source_uri)}</cite> ({e(hit.document_id)}, "
        f"characters {hit.char_start} to {hit.char_end})</p>"
        f"<p>{marked(hit.text, query)}</p></article>"
    )


def _source(uri: str) -> str:
    """A document's source: a link only where it is a web address (never ``javascript:``)."""
    if re.match(r"^https?://", uri, re.IGNORECASE):
        return f'<a href="{e(uri)}" rel="noopener noreferrer">{e(uri)}</a>'
    return e(uri)


def marked(text: str, query: str) -> str:
    """``text`` escaped, the query's words (three letters or more) in ``<mark>``."""
    words = {w.lower() for w in re.findall(r"\w{3,}", query)}
    if not words:
        return e(text)
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(words))) + r")\b", re.I)
    out, last = [], 0
    for found in pattern.finditer(text):
        out += [e(text[last : found.start()]), f"<mark>{e(found.group(0))}</mark>"]
        last = found.end()
    return "".join([*out, e(text[last:])])


def dead_letters(letters: list[tuple[int, DeadLetter]], csrf: str, said: Iterable[str] = ()) -> str:
    """The tenant's dead letters with their reasons, each replayed in one click."""
    notes = "".join(f'<p class="said" role="status">{e(s)}</p>' for s in said)
    rows = "".join(
        f"<tr><td>{n}</td><td>{e(letter.library or '')}</td><td>{e(letter.document_id or '')}"
        f"</td><td>{e(letter.stage)}</td><td>{e(letter.code)}</td><td>{e(letter.reason)}</td><td>"
        f'<form method="post" action="/dead-letters/{n}/replay">'
        f'<input type="hidden" name="csrf" value="{e(csrf)}">'
        f'<button type="submit" aria-label="Replay dead letter {n}">Replay</button></form></td>'
        "</tr>"
        for n, letter in letters
    )
    body = (
        f"{notes}<table><thead><tr><th scope=col>#</th><th scope=col>Library</th>"
        "<th scope=col>Document</th><th scope=col>Stage</th><th scope=col>Code</th>"
        f"<th scope=col>Reason</th><th scope=col><span class=sr>Actions</span></th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )
    return page("Dead letters", body if letters else notes + "<p>No dead letters.</p>", csrf)


def profile(
    name: str, reply: ProfileReply, csrf: str, text: str, sample: str = "", said: str = ""
) -> str:
    """A library's profile as JSON to edit, with a sample document to cut with it."""
    here = f"/libraries/{quote(name)}/profile"
    notes = f'<p class="said" role="status">{e(said)}</p>' if said else ""
    if reply.example_preview:
        cut = "".join(
            f"<li><strong>{e(' > '.join(c.heading_path))}</strong> {e(c.text)}</li>"
            for c in reply.example_preview
        )
        notes += f'<h2>The sample, cut</h2><ol class="preview">{cut}</ol>'

    body = (
        f"{notes}<p>Revision {reply.revision} (0: kbus's defaults). The chunker, the matching "
        "texts, the query transformer and the reranker of this library: documents published "
        "after a change are cut by it (docs/formats.md).</p>"
        f'<form method="post" action="{here}">'
        f'<input type="hidden" name="csrf" value="{e(csrf)}">'
        '<label for="profile">Profile (JSON)</label><br>'
        f'<textarea id="profile" name="profile" rows="16" cols="80">{e(text)}</textarea><br>'
        '<label for="sample">A sample document to cut with it (Markdown)</label><br>'
        f'<textarea id="sample" name="sample" rows="6" cols="80">{e(sample)}</textarea><br>'
        '<button type="submit">Save</button></form>'
        f'<p><a href="/libraries/{quote(name)}">Back to {e(name)}</a></p>'
    )
    return page(f"Profile of {name}", body, csrf)
