"""``python -m kbus_gateway``."""

from kbus_runtime.runner import serve

from kbus_gateway.app import create_app
from kbus_gateway.settings import GatewaySettings

if __name__ == "__main__":
    settings = GatewaySettings()
    serve(create_app(settings), settings)
