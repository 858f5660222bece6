"""``python -m kbus_console``."""

import uvicorn

from kbus_console.app import create_app
from kbus_console.settings import ConsoleSettings

if __name__ == "__main__":
    settings = ConsoleSettings()
    uvicorn.run(
        create_app(settings),
        host=settings.process.http_host,
        port=settings.http_port,
        log_level=settings.process.log_level.lower(),
        access_log=False,
    )
