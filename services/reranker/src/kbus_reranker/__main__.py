"""``python -m kbus_reranker``."""

from kbus_runtime.runner import serve

from kbus_reranker.app import create_app
from kbus_reranker.settings import RerankerSettings

if __name__ == "__main__":
    settings = RerankerSettings()
    serve(create_app(settings), settings)
