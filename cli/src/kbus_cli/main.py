"""The ``kbus`` command: ingest, search, delete, sync, status, dead letters, libraries, MCP,
eval.

Each command's module is imported only when that command runs or its own help is asked for:
``kbus --help`` reads each command's summary from its module's source, so it imports neither
the client nor the bus.
"""

from __future__ import annotations

import ast
import difflib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from typer import _click as click  # the click typer carries (and builds commands of)
from typer.core import TyperCommand, TyperGroup

#: Every command, in the order ``kbus --help`` lists them: where it is defined.
COMMANDS = {
    "ingest": "kbus_cli.ingest_command:ingest",
    "search": "kbus_cli.document_commands:search",
    "delete": "kbus_cli.document_commands:delete",
    "sync": "kbus_cli.sync_command:sync",
    "status": "kbus_cli.operation_commands:status",
    "mcp": "kbus_cli.mcp_command:mcp",
    "eval": "kbus_cli.eval_command:eval_command",
    "libraries": "kbus_cli.library_commands:libraries",
    "documents": "kbus_cli.library_commands:documents",
    "profile": "kbus_cli.library_commands:profile",
    "dlq": "kbus_cli.operation_commands:dlq",
    "token": "kbus_cli.token_command:token",
}


def summary_of(target: str) -> str:
    """A command's help as its source says it (a function's docstring, or a group's
    ``help=``), without importing its module."""
    module, name = target.split(":")
    spec = importlib.util.find_spec(module)
    assert spec is not None
    assert spec.origin is not None
    for node in ast.parse(Path(spec.origin).read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return ast.get_docstring(node) or ""
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            assert isinstance(node.value, ast.Call)
            found = [k.value for k in node.value.keywords if k.arg == "help"]
            return str(ast.literal_eval(found[0])) if found else ""
    return ""


class LazyCommand(TyperCommand):
    """A command known by its name and summary until it runs (or shows its own help)."""

    def __init__(self, name: str, target: str) -> None:
        super().__init__(name, help=summary_of(target))
        self.target = target

    def real(self) -> click.Command:
        module, name = self.target.split(":")
        found = getattr(importlib.import_module(module), name)
        if isinstance(found, typer.Typer):
            return typer.main.get_command(found)
        single = typer.Typer(add_completion=False)
        single.command(self.name)(found)
        return typer.main.get_command(single)

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        return self.real().make_context(info_name, args, parent, **extra)


class Commands(TyperGroup):
    """The commands of :data:`COMMANDS`, each made when it is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        return LazyCommand(cmd_name, target) if target is not None else None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.UsageError as exc:
            matches = difflib.get_close_matches(args[0], COMMANDS) if args else []
            if matches:
                named = ", ".join(repr(m) for m in matches)
                exc.message = f"{exc.message.rstrip('.')}. Did you mean {named}?"
            raise


app = typer.Typer(
    cls=Commands,
    help="kbus: an event-driven knowledge base on NATS and Weaviate.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


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
    from kbus_cli.common import configure

    configure(credential, tls_ca, tls_cert, tls_key)


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
