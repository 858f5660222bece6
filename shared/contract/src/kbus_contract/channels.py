"""What a channel is: a subject's forms, what travels on it, who sends and answers it, and what
a tenant's credential may do with it; :mod:`kbus_contract.catalog` declares every one."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel

import kbus_contract as c
from kbus_contract.lanes import Lane, lane_of_form

_TOKEN = re.compile(r"^\{(\w+)\}$")

#: The token before a tenant's subject once the gate accepted its message: streams hold what
#: tenants send under it (``accepted.document.added.{tenant}.{library}``), and only kbus's
#: services reach it (kbus_contract.intake).
ACCEPTED = "accepted"
#: The service that answers what a tenant sends into the streams.
GATEWAY = "gateway"

#: The last token of a form that carries what names restricted documents (those whose
#: ``access`` is not everyone): their receipts, their dead letters, the feed that reads them
#: back. Only a credential that may write the library, or act for anyone, reaches such a form.
RESTRICTED = "restricted"


def is_restricted(form: str) -> bool:
    """Whether a form is one of those for restricted documents. Forms only: a subject's last
    token may be a library named "restricted" (match the subject to its form first)."""
    return form.rsplit(".", 1)[-1] == RESTRICTED


class Use(StrEnum):
    """What a tenant's credential may do with a subject (always its own tenant's forms)."""

    #: Nothing: between kbus's services only.
    NONE = "none"
    #: A writing credential publishes or asks on it, within its libraries.
    WRITE = "write"
    #: Every credential asks on it, within its grant.
    READ = "read"
    #: Every credential listens on it, within its libraries.
    RECEIVE = "receive"


@dataclass(frozen=True)
class Channel:
    """One subject, what travels on it, and for requests, what answers."""

    name: str
    #: The subject's forms, most specific first; ``{tenant}``, ``{library}``, ``{grant}`` and
    #: ``{stage}`` are tokens filled per message.
    forms: tuple[str, ...]
    payload: type[BaseModel]
    reply: type[BaseModel] | None = None
    description: str = ""
    senders: tuple[str, ...] = ()
    #: For a request served as a NATS micro service: the service answering it (its replicas'
    #: queue group) and the micro service's name.
    receiver: str = ""
    micro: str = ""
    use: Use = Use.NONE
    #: A read whose second copy is answered as the first, changes nothing and costs about
    #: what any other of its kind costs: a client may send one before the first answers (a
    #: hedge, :mod:`kbus_contract.hedging`). Not a rerank, whose cost varies a thousandfold
    #: with its candidates and model: a hedge would double the costliest work.
    repeatable: bool = False

    @property
    def subject_template(self) -> str:
        """Every subject of the channel as one subscription (without a bus prefix): each token
        a ``*`` for a request whose forms are all one length, everything after the fixed part
        (``>``) for the rest."""
        first = self.forms[0].split(".")
        if self.reply is not None and len({len(f.split(".")) for f in self.forms}) == 1:
            return ".".join("*" if _TOKEN.match(t) else t for t in first)
        fixed: list[str] = []
        for token in first:
            if _TOKEN.match(token):
                return ".".join([*fixed, ">"])
            fixed.append(token)
        return self.forms[0]

    @property
    def tokens(self) -> frozenset[str]:
        """The names of the tokens its forms carry."""
        return frozenset(
            m.group(1) for form in self.forms for t in form.split(".") if (m := _TOKEN.match(t))
        )

    @property
    def gated(self) -> bool:
        """Whether tenants send it to the gate, which stores it under :data:`ACCEPTED`."""
        return self.receiver == GATEWAY

    @property
    def queued_forms(self) -> tuple[str, ...]:
        """The forms as a stream holds them: the gate's accepted forms of what tenants send,
        the channel's own for what the services send."""
        return tuple(f"{ACCEPTED}.{form}" for form in self.forms) if self.gated else self.forms

    @property
    def queued_template(self) -> str:
        """Every subject of the channel as its stream holds them, as one subscription."""
        if not self.gated:
            return self.subject_template
        return f"{ACCEPTED}.{self.kind}.>"

    @property
    def prefixed(self) -> bool:
        """Whether a bus prefix applies (the server's own ``$`` subjects have none)."""
        return not self.forms[0].startswith("$")

    def fill(self, restricted: bool = False, **tokens: str | None) -> str:
        """The subject of the first form whose every token is given (``None``: not given),
        among the forms for restricted documents or among the others."""
        given = {name: value for name, value in tokens.items() if value is not None}
        for form in self.forms:
            if is_restricted(form) != restricted:
                continue
            names = [m.group(1) for t in form.split(".") if (m := _TOKEN.match(t))]
            if set(names) <= set(given):
                return form.format(**given)
        raise ValueError(f"{self.name}: no form takes {sorted(given)}")

    @staticmethod
    def tokens_of(form: str) -> set[str]:
        """The names of the tokens of one form."""
        return {m.group(1) for t in form.split(".") if (m := _TOKEN.match(t))}

    @staticmethod
    def fill_form(form: str, **tokens: str) -> str:
        """One form with these tokens, ``*`` for the others."""
        return ".".join(
            tokens.get(m.group(1), "*") if (m := _TOKEN.match(t)) else t for t in form.split(".")
        )

    def read(self, tokens: list[str]) -> dict[str, str] | None:
        """The tokens a subject (without prefix) fills in one of the forms, or None."""
        matched = self.match(tokens)
        return None if matched is None else matched[1]

    def match(self, tokens: list[str]) -> tuple[str, dict[str, str]] | None:
        """The form a subject (without prefix) has, with the tokens it fills, or None."""
        for form in self.forms:
            parts = form.split(".")
            if len(parts) != len(tokens):
                continue
            found: dict[str, str] = {}
            for part, token in zip(parts, tokens, strict=True):
                if m := _TOKEN.match(part):
                    found[m.group(1)] = token
                elif part != token:
                    break
            else:
                return form, found
        return None

    def lane_forms(self, lane: Lane) -> tuple[str, ...]:
        """The queued forms of a lane (:mod:`kbus_contract.lanes`)."""
        return tuple(form for form in self.queued_forms if lane_of_form(form) is lane)

    def match_queued(self, tokens: list[str]) -> tuple[str, dict[str, str]] | None:
        """The queued form a subject (without prefix) has, with the tokens it fills, or None."""
        if self.gated:
            if tokens[:1] != [ACCEPTED]:
                return None
            matched = self.match(tokens[1:])
            return None if matched is None else (f"{ACCEPTED}.{matched[0]}", matched[1])
        return self.match(tokens)

    @property
    def kind(self) -> str:
        """The fixed tokens that start every form (``document.added``)."""
        fixed = []
        for token in self.forms[0].split("."):
            if _TOKEN.match(token):
                break
            fixed.append(token)
        return ".".join(fixed)

    def request_schema(self) -> str:
        return json.dumps(self.payload.model_json_schema(mode="validation"), sort_keys=True)

    def reply_schema(self) -> str:
        if self.reply is None:
            return ""
        return json.dumps(
            {
                "oneOf": [
                    self.reply.model_json_schema(mode="serialization"),
                    (c.Refused if self.gated else c.ErrorReply).model_json_schema(
                        mode="serialization"
                    ),
                ]
            },
            sort_keys=True,
        )
