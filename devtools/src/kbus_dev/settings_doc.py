"""The configuration reference, generated from the settings classes into docs/configuration.md."""

from __future__ import annotations

import argparse
import enum
import re
from pathlib import Path
from typing import Any

from kbus_runtime.budgets import BudgetSettings
from kbus_runtime.chat import LLMSettings
from kbus_runtime.settings import BusSettings, CohereSettings, ProcessSettings, StoreSettings
from kbus_runtime.tracing import TracingSettings
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from kbus_dev import docblocks
from kbus_dev.docblocks import markers

PAGE = Path("docs/configuration.md")
START, END = markers("settings")


def _classes() -> list[tuple[str, type[BaseSettings]]]:
    from kbus_console.settings import ConsoleSettings
    from kbus_embedder.settings import EmbedderSettings, OpenAIEmbeddingSettings
    from kbus_gateway.settings import GatewaySettings
    from kbus_generator.settings import GeneratorSettings
    from kbus_ingestor.settings import IngestorSettings
    from kbus_reranker.settings import RerankEndpointSettings, RerankerSettings
    from kbus_searcher.settings import SearcherSettings

    return [
        ("Every service: the process", ProcessSettings),
        ("Every service: NATS", BusSettings),
        ("Every service: traces", TracingSettings),
        ("Every service: tenants' budgets", BudgetSettings),
        ("Searcher: Weaviate", StoreSettings),
        ("Embedder and reranker: Cohere", CohereSettings),
        ("Embedder: an OpenAI-compatible embeddings server", OpenAIEmbeddingSettings),
        ("Reranker: a rerank server", RerankEndpointSettings),
        ("Generator, searcher and reranker: an OpenAI-compatible chat model", LLMSettings),
        ("Gateway", GatewaySettings),
        ("Ingestor", IngestorSettings),
        ("Embedder", EmbedderSettings),
        ("Searcher", SearcherSettings),
        ("Reranker", RerankerSettings),
        ("Generator", GeneratorSettings),
        ("Console (the HTTP API)", ConsoleSettings),
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
    if isinstance(field.annotation, type) and issubclass(field.annotation, enum.Enum):
        return f"one of {[m.value for m in field.annotation]}"
    text = str(field.annotation).replace("typing.", "").replace("<class '", "").replace("'>", "")
    text = text.replace("pydantic.types.", "").replace("Literal", "one of ")
    text = re.sub(r"\b(?:\w+\.)+(\w+)", r"\1", text)  # a class, not its module's path
    text = re.sub(r"Annotated\[(\w+), Gt\(gt=0\)\]", r"\1 > 0", text)
    return text.replace(" | None", ", optional").replace("|", "or")


def _deploys(field: FieldInfo) -> bool:
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    return bool(extra.get("deploy"))


def _rows(cls: type[BaseSettings], deploys: bool) -> list[str]:
    """One class's settings a deployment sets (``deploys``) or its tuning knobs."""
    prefix = str(cls.model_config.get("env_prefix", ""))
    rows = []
    for name, field in cls.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseSettings):
            continue
        if _deploys(field) != deploys:
            continue
        description = (field.description or "").replace("|", "\\|").replace("\n", " ")
        description = re.sub(r"(docs/([\w.]+#[\w-]+))", r"[\1](\2)", description)
        rows.append(
            f"| `{prefix}{name.upper()}` | {_type(field)} | {_default(field)} | {description} |"
        )
    return rows


HEADER = "| variable | type | default | meaning |\n| --- | --- | --- | --- |\n"


def table() -> str:
    """The settings a deployment sets, then every class's tuning knobs."""
    deploy = [row for _, cls in _classes() for row in _rows(cls, deploys=True)]
    out = [
        "### What a deployment sets\n\nWhere the servers are, the credentials and keys, and "
        "how many copies: the rest can stay at its default.\n\n" + HEADER + "\n".join(deploy),
        "### Tuning, by service",
    ]
    for title, cls in _classes():
        rows = _rows(cls, deploys=False)
        if rows:
            out.append(f"**{title}**\n\n" + HEADER + "\n".join(rows))
    return "\n\n".join(out)


def block() -> str:
    return f"{START}\n{table()}\n{END}"


def update(page: Path = PAGE, check: bool = False) -> int:
    return docblocks.update(page, "settings", table(), check=check)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbus_dev settings-doc")
    parser.add_argument("--check", action="store_true", help="fail if the page is out of date")
    return update(check=parser.parse_args(argv).check)
