"""``python -m kbus_cli`` is the ``kbus`` command."""

from kbus_cli.main import cli

cli()
