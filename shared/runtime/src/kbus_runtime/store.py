"""Store wiring: an async Weaviate client from settings."""

from __future__ import annotations

import weaviate
from weaviate.classes.init import AdditionalConfig, Auth, Timeout

from kbus_runtime.settings import StoreSettings


def weaviate_client(settings: StoreSettings) -> weaviate.WeaviateAsyncClient:
    """An async client (not yet connected: ``await client.connect()``)."""
    auth = Auth.api_key(settings.api_key.get_secret_value()) if settings.api_key else None
    return weaviate.use_async_with_custom(
        http_host=settings.http_host,
        http_port=settings.http_port,
        http_secure=settings.secure,
        grpc_host=settings.grpc_host,
        grpc_port=settings.grpc_port,
        grpc_secure=settings.secure,
        auth_credentials=auth,
        additional_config=AdditionalConfig(
            timeout=Timeout(
                init=settings.timeout_s, query=settings.timeout_s, insert=settings.timeout_s
            )
        ),
        # The init checks also ask pypi.org for the newest client version: a call to the
        # outside world at every start. connect() still checks that Weaviate answers.
        skip_init_checks=True,
    )
