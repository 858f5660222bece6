"""The ``kbus`` command: ingest, search, delete, sync, status, dead letters, libraries, MCP,
eval."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from kbus_cli.common import configure
from kbus_cli.document_commands import delete, ingest, search
from kbus_cli.eval_command import eval_command
from kbus_cli.library_commands import documents, libraries, profile
from kbus_cli.mcp_command import mcp
from kbus_cli.operation_commands import dlq_drop, dlq_list, dlq_replay, status
from kbus_cli.sync_command import sync

app = typer.Typer(
    help="kbus: an event-driven knowledge base on NATS and Weaviate.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
dlq = typer.Typer(help="Dead letters: messages a stage could not process.", no_args_is_help=True)
app.add_typer(dlq, name="dlq")


@app.callback()
def main(
    credential: Annotated[
        Path | None,
        typer.Option(
            envvar="KBUS_CREDENTIAL",
            exists=True,
            dir_okay=False,
            help="A tenant's credential file (python -m kbus_dev nats-auth --credential).",
        ),
    ] = None,
    tls_ca: Annotated[
        Path | None, typer.Option(envvar="KBUS_NATS_TLS_CA", help="CA of a TLS NATS server.")
    ] = None,
    tls_cert: Annotated[
        Path | None, typer.Option(envvar="KBUS_NATS_TLS_CERT", help="Client certificate.")
    ] = None,
    tls_key: Annotated[
        Path | None, typer.Option(envvar="KBUS_NATS_TLS_KEY", help="Client certificate's key.")
    ] = None,
) -> None:
    """kbus: an event-driven knowledge base on NATS and Weaviate."""
    configure(credential, tls_ca, tls_cert, tls_key)


for command in (ingest, search, delete, sync, status, mcp):
    app.command()(command)
dlq.command("list")(dlq_list)
dlq.command("replay")(dlq_replay)
dlq.command("drop")(dlq_drop)
app.command("eval")(eval_command)
app.command("libraries")(libraries)
app.command("documents")(documents)
app.command("profile")(profile)


def cli() -> None:
    """The ``kbus`` command: a failure nothing foresaw is one line, not a traceback
    (``KBUS_DEBUG=1`` shows the traceback)."""
    try:
        app()
    except Exception as exc:
        if os.environ.get("KBUS_DEBUG"):
            raise
        print(f"kbus: {type(exc).__name__}: {exc} (KBUS_DEBUG=1 shows where)", file=sys.stderr)
        raise SystemExit(1) from None
