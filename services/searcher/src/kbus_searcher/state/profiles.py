"""Libraries' profiles, followed from the profiles bucket: a library without one (or with one
that is not valid) is searched with kbus's defaults."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from kbus_contract import LibraryProfile
from kbus_contract.errors import ErrorCode, TransientError
from kbus_contract.profiles import profile_key
from nats.errors import Error as NatsError
from nats.js.api import KeyValueConfig
from nats.js.errors import KeyNotFoundError
from pydantic import ValidationError

from kbus_searcher.state.buckets import FollowedBucket

log = logging.getLogger("kbus.searcher")


def _parsed(value: bytes) -> LibraryProfile | None:
    try:
        return LibraryProfile.model_validate_json(value)
    except ValidationError as exc:
        # Written around the ingestor, which checks what it keeps: searched with the defaults.
        log.warning("a library profile is not valid (the defaults apply): %s", exc)
        return None


class LibraryProfiles(FollowedBucket[LibraryProfile | None]):
    """The profiles bucket, followed; a library without one has kbus's defaults."""

    def __init__(self, config: KeyValueConfig) -> None:
        super().__init__(config, _parsed)

    async def of(self, tenant: str, libraries: Sequence[str]) -> list[LibraryProfile]:
        """The profile of each library (read from the bucket when not following it)."""
        return [await self._one(profile_key(tenant, library)) for library in libraries]

    async def _one(self, key: str) -> LibraryProfile:
        if self.following:
            return self.copied(key) or LibraryProfile()
        try:
            entry = await self.kv.get(key)
        except KeyNotFoundError:
            return LibraryProfile()
        except NatsError as exc:
            raise TransientError(f"the profiles bucket: {exc}", code=ErrorCode.BUS_ERROR) from exc
        return _parsed(entry.value or b"") or LibraryProfile()
