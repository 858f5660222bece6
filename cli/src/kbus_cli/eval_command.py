"""``kbus eval``: retrieval quality on a BEIR dataset through the bus, every mode side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.progress import TaskID

from kbus_cli import common
from kbus_cli.evaluation import (
    DEFAULT_MODES,
    MODES,
    Dataset,
    EvalResult,
    Mode,
    Recorder,
    evaluate_dataset,
    expand,
    markdown,
)
from kbus_cli.styles import STYLES, held_out


def _lines(path: Path) -> list[str]:
    return [
        line.strip()
        for line in path.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


# The options of `kbus eval`.
_Split = Annotated[str, typer.Option(help="qrels/<split>.tsv to score.")]
_Mode = Annotated[
    list[str] | None,
    typer.Option(
        help="keyword, vector, hybrid, hybrid+rerank (repeat; these four by default), "
        "hybrid+rewrite or hybrid+rerank+rewrite (the searcher's query rewriter)."
    ),
]
_Style = Annotated[
    str,
    typer.Option(
        help="question (the split's queries), or queries made from the judged documents: "
        "title, keywords or paragraph."
    ),
]
_ExcludeSelf = Annotated[
    bool,
    typer.Option(help="A query whose id is also a document id never matches that document."),
]
_Library = Annotated[
    str | None,
    typer.Option(help="Score an already indexed library instead of ingesting a fresh one."),
]
_MaxQueries = Annotated[int | None, typer.Option(help="Score only this many queries.")]
_Alpha = Annotated[
    list[float] | None,
    typer.Option(
        help="Run the hybrid modes once per alpha (repeat; the server's default "
        "otherwise). For tuning on a train split."
    ),
]
_MaxDocuments = Annotated[
    int | None, typer.Option(help="Ingest at most this many documents (the judged ones first).")
]
_MinSimilarity = Annotated[
    float | None,
    typer.Option(help="A cosine floor for no_match instead of the server's evidence rule."),
]
_MinEvidence = Annotated[
    float | None,
    typer.Option(help="The no_match evidence floor (-1: off); the server's by default."),
]
_RerankDepth = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=50,
        help="Candidates the reranker re-scores in the reranked modes; the "
        "server's default otherwise.",
    ),
]
_OffTopic = Annotated[
    Path | None,
    typer.Option(
        exists=True,
        dir_okay=False,
        help="Queries the dataset cannot answer, one per line (# comments): counts how many "
        "get no_match. With --split train or test, only that split's half of the lines.",
    ),
]
_Results = Annotated[Path, typer.Option(help="Folder for runs.jsonl, results.json and results.md.")]
_Keep = Annotated[
    bool,
    typer.Option(
        "--keep-library",
        help="Keep the library the run ingests (to score it again with --library); deleted "
        "at the end otherwise.",
    ),
]


def eval_command(
    folder: Annotated[
        Path,
        typer.Argument(
            exists=True, file_okay=False, help="A BEIR folder: corpus.jsonl, queries.jsonl, qrels/."
        ),
    ],
    split: _Split = "test",
    mode: _Mode = None,
    style: _Style = "question",
    exclude_self: _ExcludeSelf = False,
    library: _Library = None,
    max_queries: _MaxQueries = None,
    alpha: _Alpha = None,
    max_documents: _MaxDocuments = None,
    min_similarity: _MinSimilarity = None,
    min_evidence: _MinEvidence = None,
    rerank_depth: _RerankDepth = None,
    off_topic: _OffTopic = None,
    results: _Results = Path("eval-results"),
    keep_library: _Keep = False,
    tenant: common.Tenant = "eval",
    nats_url: common.NatsUrl = common.DEFAULT_URL,
    prefix: common.Prefix = "",
) -> None:
    """Measure retrieval quality on a BEIR dataset through the bus, every mode side by side.

    Each query's answer is written to runs.jsonl as it comes and the scores after each mode; a
    query that fails is recorded with its reason, scored 0, and the run goes on. The library
    it ingests (in the credential's tenant, which wins over --tenant) is deleted at the end
    unless --keep-library. A search the
    tenant's quota refuses waits as long as the refusal says and is asked again (up to 5
    minutes): a refusal is never scored as a miss.
    """
    names = mode or list(DEFAULT_MODES)
    unknown = [m for m in names if m not in MODES] + ([style] if style not in STYLES else [])
    if unknown:
        common.err.print(f"[red]unknown modes or style: {', '.join(unknown)}[/]")
        raise typer.Exit(2)
    data = Dataset.load(folder, split, max_queries, max_documents).with_style(style)
    questions = held_out(_lines(off_topic), split) if off_topic else None
    modes = expand(names, alpha, rerank_depth, min_similarity, min_evidence)
    try:
        result = common.run(
            _evaluate(
                data,
                split,
                modes,
                exclude_self,
                library,
                questions,
                results,
                tenant,
                nats_url,
                prefix,
                keep_library,
            )
        )
    except ValueError as exc:
        common.fail(str(exc), exc)
    typer.echo(markdown(result))
    if result.rejected:
        common.err.print(f"[yellow]{len(result.rejected)} documents were rejected[/]")
    for warning in result.warnings:
        common.err.print(f"[yellow]{warning}[/]")
    if library is None:
        kept = "kept: score it again with --library" if keep_library else "deleted"
        common.err.print(f"library {result.library!r} {kept}")


async def _evaluate(
    data: Dataset,
    split: str,
    modes: list[Mode],
    exclude_self: bool,
    library: str | None,
    off_topic: list[str] | None,
    results: Path,
    tenant: str,
    nats_url: str,
    prefix: str,
    keep: bool,
) -> EvalResult:
    kb = await common.connect(nats_url, prefix, tenant)
    async with kb:
        with common.bars() as bar:
            tasks: dict[str, TaskID] = {}

            def progress(stage: str, done: int, total: int) -> None:
                if stage not in tasks:
                    tasks[stage] = bar.add_task(stage, total=total)
                bar.update(tasks[stage], completed=done)

            return await evaluate_dataset(
                kb,
                data,
                split,
                modes,
                exclude_self,
                progress,
                Recorder(results),
                library,
                off_topic,
                keep=keep,
            )
