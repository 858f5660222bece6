"""``python -m kbus_embedder``."""

from kbus_runtime.runner import serve

from kbus_embedder.app import create_app
from kbus_embedder.settings import EmbedderSettings

if __name__ == "__main__":
    settings = EmbedderSettings()
    serve(create_app(settings), settings)
