"""A kind of variant is one registry: its names are one enum, every name has an entry, and
``auto`` takes the first whose condition holds."""

from __future__ import annotations

from enum import StrEnum

import pytest
from kbus_embedder.embedding import BACKENDS as EMBED_BACKENDS
from kbus_embedder.embedding import Making
from kbus_embedder.settings import EmbedBackend, EmbedderSettings, OpenAIEmbeddingSettings
from kbus_reranker.scoring import BACKENDS as RERANK_BACKENDS
from kbus_reranker.settings import RerankBackend, RerankEndpointSettings, RerankerSettings
from kbus_runtime.settings import CohereSettings
from kbus_runtime.variants import Registry, Variant
from pydantic import SecretStr, ValidationError


class Colour(StrEnum):
    AUTO = "auto"
    RED = "red"
    BLUE = "blue"


def test_a_registry_must_cover_its_names_exactly() -> None:
    with pytest.raises(ValueError, match="differ in: blue"):
        Registry("colour", Colour, {Colour.RED: Variant(lambda o: o, "red")})


def test_auto_takes_the_first_variant_whose_condition_holds() -> None:
    colours: Registry[Colour, int, str] = Registry(
        "colour",
        Colour,
        {
            Colour.RED: Variant(lambda n: f"red {n}", "red", auto_when=lambda n: n > 5),
            Colour.BLUE: Variant(lambda n: f"blue {n}", "blue", auto_when=lambda n: True),
        },
    )
    assert colours.create(Colour.AUTO, 9) == "red 9"
    assert colours.create(Colour.AUTO, 1) == "blue 1"
    assert colours.create(Colour.RED, 1) == "red 1"


@pytest.mark.parametrize(
    ("registry", "names"),
    [(RERANK_BACKENDS, RerankBackend), (EMBED_BACKENDS, EmbedBackend)],
)
def test_every_service_registry_covers_its_settings_choices(
    registry: Registry[StrEnum, object, object], names: type[StrEnum]
) -> None:
    assert set(registry.variants) == {n for n in names if n.value != "auto"}


def test_the_settings_refuse_a_backend_no_registry_holds_and_say_which_they_take() -> None:
    with pytest.raises(ValidationError, match="'cohere', 'endpoint', 'maxsim', 'encoder' or 'e5'"):
        RerankerSettings(backend="cross-encoder")


@pytest.mark.parametrize(
    ("backend", "cohere_key", "endpoint_url", "chosen"),
    [
        ("auto", None, None, RerankBackend.MAXSIM),
        ("auto", None, "http://127.0.0.1:1/v1", RerankBackend.ENDPOINT),
        ("auto", "k", None, RerankBackend.COHERE),
        ("auto", "k", "http://127.0.0.1:1/v1", RerankBackend.COHERE),
        ("maxsim", "k", "http://127.0.0.1:1/v1", RerankBackend.MAXSIM),
        ("endpoint", "k", "http://127.0.0.1:1/v1", RerankBackend.ENDPOINT),
        ("cohere", None, "http://127.0.0.1:1/v1", RerankBackend.COHERE),
        ("e5", None, None, RerankBackend.E5),
    ],
)
def test_an_explicit_reranker_wins_else_cohere_with_a_key_else_a_server_else_maxsim(
    backend: str, cohere_key: str | None, endpoint_url: str | None, chosen: RerankBackend
) -> None:
    settings = RerankerSettings(
        backend=RerankBackend(backend),
        cohere=CohereSettings(api_key=SecretStr(cohere_key) if cohere_key else None),
        endpoint=RerankEndpointSettings(url=endpoint_url),
    )
    assert RERANK_BACKENDS.chosen(settings.backend, settings) is chosen


@pytest.mark.parametrize(
    ("backend", "cohere_key", "openai_url", "chosen"),
    [
        ("auto", None, None, EmbedBackend.LOCAL),
        ("auto", None, "http://127.0.0.1:1/v1", EmbedBackend.OPENAI),
        ("auto", "k", None, EmbedBackend.COHERE),
        ("auto", "k", "http://127.0.0.1:1/v1", EmbedBackend.COHERE),
        ("local", "k", "http://127.0.0.1:1/v1", EmbedBackend.LOCAL),
        ("openai", "k", None, EmbedBackend.OPENAI),
        ("cohere", None, "http://127.0.0.1:1/v1", EmbedBackend.COHERE),
    ],
)
def test_an_explicit_embedding_backend_wins_else_cohere_with_a_key_else_a_server_else_local(
    backend: str, cohere_key: str | None, openai_url: str | None, chosen: EmbedBackend
) -> None:
    settings = EmbedderSettings(
        backend=EmbedBackend(backend),
        cohere=CohereSettings(api_key=SecretStr(cohere_key) if cohere_key else None),
        openai=OpenAIEmbeddingSettings(url=openai_url),
    )
    assert EMBED_BACKENDS.chosen(settings.backend, Making(settings)) is chosen
