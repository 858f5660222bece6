"""What a client sees when kbus cannot do what it asked.

The same typed errors the services raise (:mod:`kbus_contract.errors`): ``code`` is stable,
``retryable`` says whether asking again can help, ``stage`` names the service that answered.
"""

from __future__ import annotations

from kbus_contract.errors import KbusError, PermanentError

#: An error reply from kbus, or no reply at all.
KbError = KbusError


class DocumentRejectedError(PermanentError):
    """A published document will not be indexed: the gate refused it (it was never stored), or
    a stage dead-lettered it; ``code`` and the message say why."""
