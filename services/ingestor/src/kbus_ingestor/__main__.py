"""``python -m kbus_ingestor``."""

from kbus_runtime.runner import serve

from kbus_ingestor.app import create_app
from kbus_ingestor.settings import IngestorSettings

if __name__ == "__main__":
    settings = IngestorSettings()
    serve(create_app(settings), settings)
