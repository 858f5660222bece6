"""The configuration reference, generated from the settings classes into docs/configuration.md."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from kbus_runtime.budgets import BudgetSettings
from kbus_runtime.settings import BusSettings, CohereSettings, StoreSettings
from kbus_runtime.tracing import TracingSettings
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from kbus_dev import docblocks
from kbus_dev.docblocks import markers

PAGE = Path("docs/configuration.md")
START, END = markers("settings")


def _classes() -> list[tuple[str, type[BaseSettings]]]:
    from kbus_embedder.settings import EmbedderSettings
    from kbus_gateway.settings import GatewaySettings
    from kbus_generator.settings import GeneratorSettings
    from kbus_ingestor.settings import IngestorSettings
    from kbus_reranker.settings import RerankerSettings
    from kbus_searcher.settings import SearcherSettings

    return [
        ("Every service: NATS", BusSettings),
        ("Every service: traces", TracingSettings),
        ("Every service: tenants' budgets", BudgetSettings),
        ("Searcher: Weaviate", StoreSettings),
        ("Embedder and reranker: Cohere", CohereSettings),
        ("Gateway", GatewaySettings),
        ("Ingestor", IngestorSettings),
        ("Embedder", EmbedderSettings),
        ("Searcher", SearcherSettings),
        ("Reranker", RerankerSettings),
        ("Generator", GeneratorSettings),
    ]


def env_names() -> dict[str, type[BaseSettings]]:
    """Every environment variable kbus reads, and the settings class that reads it."""
    names: dict[str, type[BaseSettings]] = {}
    for _, cls in _classes():
        prefix = str(cls.model_config.get("env_prefix", ""))
        for name, field in cls.model_fields.items():
            annotation = field.annotation
            if not (isinstance(annotation, type) and issubclass(annotation, BaseSettings)):
                names[f"{prefix}{name.upper()}"] = cls
    return names


def _default(field: FieldInfo) -> str:
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if "default_doc" in extra:
        return str(extra["default_doc"])
    if field.default_factory is not None:
        return "see below"
    value: Any = field.get_default()
    if value is None:
        return "unset"
    if value == "":
        return '""'
    return f"`{value}`"


def _type(field: FieldInfo) -> str:
    text = str(field.annotation).replace("typing.", "").replace("<class '", "").replace("'>", "")
    text = text.replace("pydantic.types.", "").replace("Literal", "one of ")
    return text.replace(" | None", ", optional").replace("|", "or")


def table() -> str:
    """Markdown tables, one per settings class."""
    out = []
    for title, cls in _classes():
        prefix = str(cls.model_config.get("env_prefix", ""))
        rows = []
        for name, field in cls.model_fields.items():
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseSettings):
                continue
            description = (field.description or "").replace("|", "\\|").replace("\n", " ")
            description = re.sub(r"(docs/([\w.]+#[\w-]+))", r"[\1](\2)", description)
            rows.append(
                f"| `{prefix}{name.upper()}` | {_type(field)} | {_default(field)} | {description} |"
            )
        out.append(
            f"**{title}**\n\n| variable | type | default | meaning |\n| --- | --- | --- "
            f"| --- |\n" + "\n".join(rows)
        )
    return "\n\n".join(out)


def block() -> str:
    return f"{START}\n{table()}\n{END}"


def update(page: Path = PAGE, check: bool = False) -> int:
    return docblocks.update(page, "settings", table(), check=check)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbus_dev settings-doc")
    parser.add_argument("--check", action="store_true", help="fail if the page is out of date")
    return update(check=parser.parse_args(argv).check)
