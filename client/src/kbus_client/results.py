"""What the client's calls return."""

from __future__ import annotations

from kbus_contract import DocumentAdded, DocumentIndexed


class PublishResult:
    """What a publish returned: the version kbus will index, and its receipt if awaited."""

    def __init__(
        self, document: DocumentAdded, receipt: DocumentIndexed | None, duplicate: bool = False
    ) -> None:
        self.document_id = document.document_id
        self.version = receipt.version if receipt else document.effective_version()
        self.receipt = receipt
        #: The same content was published within the stream's duplicate window: this publish
        #: was dropped (the earlier one is, or was, indexed). No receipt is awaited for it.
        self.duplicate = duplicate

    @classmethod
    def told(
        cls,
        document_id: str,
        version: str,
        receipt: DocumentIndexed | None,
        duplicate: bool = False,
    ) -> PublishResult:
        """The result a server told (over HTTP), without the document itself."""
        result = cls.__new__(cls)
        result.document_id, result.version = document_id, version
        result.receipt, result.duplicate = receipt, duplicate
        return result

    def __repr__(self) -> str:
        return (
            f"PublishResult({self.document_id!r}, version={self.version!r}, "
            f"indexed={self.receipt is not None}, duplicate={self.duplicate})"
        )
