"""``python -m kbus_searcher``."""

from kbus_runtime.runner import serve

from kbus_searcher.app import create_app
from kbus_searcher.settings import SearcherSettings

if __name__ == "__main__":
    settings = SearcherSettings()
    serve(create_app(settings), settings)
