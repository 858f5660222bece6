"""``python -m kbus_generator``."""

from kbus_runtime.runner import serve

from kbus_generator.app import create_app
from kbus_generator.settings import GeneratorSettings

if __name__ == "__main__":
    settings = GeneratorSettings()
    serve(create_app(settings), settings)
