"""kbus's client: publish documents, search, and give agents retrieval as a tool."""

from kbus_contract.hedging import Hedge

from kbus_client.citing import citation_line, degraded_note, format_context
from kbus_client.client import DEFAULT_URL, KbClient
from kbus_client.credentials import CredentialFile
from kbus_client.errors import DocumentRejectedError, KbError
from kbus_client.results import PublishResult
from kbus_client.retrying import Retry
from kbus_client.sync import SyncKbClient
from kbus_client.tool import KbTool, format_for_model, nothing_matched, why_no_match

__all__ = [
    "DEFAULT_URL",
    "CredentialFile",
    "DocumentRejectedError",
    "Hedge",
    "KbClient",
    "KbError",
    "KbTool",
    "PublishResult",
    "Retry",
    "SyncKbClient",
    "citation_line",
    "degraded_note",
    "format_context",
    "format_for_model",
    "nothing_matched",
    "why_no_match",
]
