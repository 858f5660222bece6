"""The AsyncAPI 3.0 document of kbus, generated from the code.

FastStream describes every subscription the services declare (channels, operations, NATS
bindings). kbus's handlers parse their own messages (so that a bad message gets a reason), which
leaves FastStream's payloads empty: the catalog (:mod:`kbus_contract.catalog`) supplies them, and
the reply of every request-reply subject, which FastStream leaves out. Subjects served outside
FastStream (the searcher's NATS micro service) and what each stage sends come from the catalog.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import yaml
from kbus_contract import ErrorReply, Refused
from kbus_contract.catalog import CHANNELS, Channel
from kbus_runtime.settings import BusSettings, StoreSettings
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

DEFAULT_PATH = Path("docs/asyncapi.yaml")
REF = "#/components/schemas/{model}"


def _service_specs() -> list[dict[str, Any]]:
    from kbus_embedder.app import create_app as embedder
    from kbus_embedder.settings import EmbedderSettings
    from kbus_gateway.app import create_app as gateway
    from kbus_gateway.settings import GatewaySettings
    from kbus_generator.app import create_app as generator
    from kbus_generator.settings import GeneratorSettings
    from kbus_ingestor.app import create_app as ingestor
    from kbus_ingestor.settings import IngestorSettings
    from kbus_reranker.app import create_app as reranker
    from kbus_reranker.settings import RerankerSettings
    from kbus_searcher.app import create_app as searcher
    from kbus_searcher.settings import SearcherSettings

    bus = BusSettings(nats_url="nats://127.0.0.1:4222", bus_prefix="")
    apps = [
        gateway(GatewaySettings(bus=bus)),
        ingestor(IngestorSettings(bus=bus)),
        generator(GeneratorSettings(bus=bus)),
        embedder(EmbedderSettings(bus=bus)),
        searcher(SearcherSettings(bus=bus, store=StoreSettings(), index=True, serve=True)),
        reranker(RerankerSettings(bus=bus)),
    ]
    return [app.schema.to_specification().to_jsonable() for app in apps]


def _schemas() -> dict[str, Any]:
    models: list[type[BaseModel]] = [ErrorReply, Refused]
    for entry in CHANNELS:
        models.append(entry.payload)
        if entry.reply is not None:
            models.append(entry.reply)
    unique = list(dict.fromkeys(models))
    _, top = models_json_schema([(m, "serialization") for m in unique], ref_template=REF)
    return dict(sorted(top.get("$defs", {}).items()))


def _message(model: type[BaseModel], description: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {
        "name": model.__name__,
        "title": model.__name__,
        "contentType": "application/json",
        "payload": {"$ref": REF.format(model=model.__name__)},
    }
    if description:
        message["summary"] = description
    return message


def _catalog_entry(address: str) -> Channel:
    for entry in CHANNELS:
        if address in (entry.subject_template, entry.queued_template, entry.name):
            return entry
    raise KeyError(
        f"subject {address!r} is subscribed in code but missing from kbus_contract.catalog"
    )


def build() -> dict[str, Any]:
    """The whole document."""
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}
    for spec in _service_specs():
        for key, channel in spec["channels"].items():
            entry = _catalog_entry(channel["address"])
            channel = {k: v for k, v in channel.items() if k != "servers"}
            channel["messages"] = {
                entry.payload.__name__: {"$ref": f"#/components/messages/{entry.payload.__name__}"}
            }
            channel.setdefault("description", entry.description)
            channels[key] = channel
            operation = spec["operations"][key]
            operation["messages"] = [
                {"$ref": f"#/channels/{key}/messages/{entry.payload.__name__}"}
            ]
            operations[key] = operation
            if entry.reply is not None:
                _add_reply(channels, operations, key, entry)
    for entry in CHANNELS:
        messages[entry.payload.__name__] = _message(entry.payload, entry.description)
        if entry.reply is not None:
            messages[entry.reply.__name__] = _message(entry.reply)
        _add_unsubscribed(channels, operations, entry)
        _add_senders(channels, operations, entry)
    messages[ErrorReply.__name__] = _message(ErrorReply, "Any request that could not be answered.")
    messages[Refused.__name__] = _message(
        Refused, "What the gate did not store, as JetStream refuses a publish."
    )
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "kbus",
            "version": version("kbus-contract"),
            "description": "An event-driven knowledge base on NATS JetStream and Weaviate. "
            "Subjects are shown without a bus prefix; with KBUS_BUS_PREFIX=p every subject is "
            "p.<subject> and every stream P_<NAME>.",
        },
        "defaultContentType": "application/json",
        "servers": {"nats": {"host": "127.0.0.1:4222", "protocol": "nats"}},
        "channels": dict(sorted(channels.items())),
        "operations": dict(sorted(operations.items())),
        "components": {"messages": dict(sorted(messages.items())), "schemas": _schemas()},
    }


def _reply_channel(channels: dict[str, Any], entry: Channel) -> str:
    assert entry.reply is not None
    key = f"{entry.name}:reply"
    error = Refused if entry.gated else ErrorReply
    channels[key] = {
        "address": None,
        "description": f"The requester's inbox: {entry.reply.__name__}, or {error.__name__}.",
        "messages": {
            name: {"$ref": f"#/components/messages/{name}"}
            for name in (entry.reply.__name__, error.__name__)
        },
    }
    return key


def _add_reply(
    channels: dict[str, Any], operations: dict[str, Any], key: str, entry: Channel
) -> None:
    reply_key = _reply_channel(channels, entry)
    operations[key]["reply"] = {
        "channel": {"$ref": f"#/channels/{reply_key}"},
        "messages": [
            {"$ref": f"#/channels/{reply_key}/messages/{name}"}
            for name in channels[reply_key]["messages"]
        ],
    }


def _add_unsubscribed(channels: dict[str, Any], operations: dict[str, Any], entry: Channel) -> None:
    """Request-reply subjects served outside FastStream (NATS micro services)."""
    if entry.reply is None or any(
        c.get("address") == entry.subject_template for c in channels.values()
    ):
        return
    key = f"{entry.receiver}:{entry.name}"
    channels[key] = {
        "address": entry.subject_template,
        "description": f"{entry.description} Served as the NATS micro service {entry.micro}.",
        "messages": {
            entry.payload.__name__: {"$ref": f"#/components/messages/{entry.payload.__name__}"}
        },
        "bindings": {"nats": {"queue": entry.receiver, "bindingVersion": "0.1.0"}},
    }
    operations[key] = {
        "action": "receive",
        "channel": {"$ref": f"#/channels/{key}"},
        "messages": [{"$ref": f"#/channels/{key}/messages/{entry.payload.__name__}"}],
    }
    _add_reply(channels, operations, key, entry)


def _add_senders(channels: dict[str, Any], operations: dict[str, Any], entry: Channel) -> None:
    key = f"send:{entry.name}"
    channels[key] = {
        "address": entry.subject_template,
        "description": entry.description,
        "messages": {
            entry.payload.__name__: {"$ref": f"#/components/messages/{entry.payload.__name__}"}
        },
    }
    for sender in entry.senders:
        operations[f"{sender}:send:{entry.name}"] = {
            "action": "send",
            "channel": {"$ref": f"#/channels/{key}"},
            "messages": [{"$ref": f"#/channels/{key}/messages/{entry.payload.__name__}"}],
        }


def render() -> str:
    """The document as YAML."""
    text: str = yaml.safe_dump(build(), sort_keys=False, allow_unicode=True, width=100)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kbus_dev asyncapi")
    parser.add_argument("--out", type=Path, default=DEFAULT_PATH)
    parser.add_argument(
        "--check", action="store_true", help="fail if the file differs from what the code generates"
    )
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text() if args.out.is_file() else ""
        if current != text:
            print(f"{args.out} is out of date: run `make docs`", file=sys.stderr)
            return 1
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0
