# The two commands: `make demo` and `make test`. Both install what they need first.
UV := python3 -m uv
RUN := $(UV) run --frozen

.PHONY: install demo up stop test unit lint docs

install:
	./scripts/install.sh

demo: install
	$(RUN) python -m kbus_dev demo

up: install
	$(RUN) python -m kbus_dev up

stop:
	$(RUN) python -m kbus_dev down

test: install
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy
	$(RUN) pytest -q -p no:cacheprovider

unit:
	$(RUN) pytest -q tests/unit

lint:
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy

docs:
	$(RUN) python -m kbus_dev asyncapi
	$(RUN) python -m kbus_dev settings-doc
