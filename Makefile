# The two commands: `make demo` and `make test`. Both install what they need first.
UV := python3 -m uv
RUN := $(UV) run --frozen

.PHONY: install cli demo up up-cluster stop test check unit lint docs bench bench-fairness bench-context bench-access bench-neighbour bench-large bench-tenants chaos chaos-cluster

install:
	./scripts/install.sh

# The kbus command on your PATH, for use outside the repository (it runs from .venv).
cli: install
	mkdir -p $(HOME)/.local/bin
	ln -sf $(CURDIR)/.venv/bin/kbus $(HOME)/.local/bin/kbus
	@echo "linked $(HOME)/.local/bin/kbus; add $(HOME)/.local/bin to PATH if it is not there"

demo: install
	$(RUN) python -m kbus_dev demo

up: install
	$(RUN) python -m kbus_dev up

up-cluster: install
	$(RUN) python -m kbus_dev up --cluster

stop:
	$(RUN) python -m kbus_dev down

test: install
	$(RUN) python -m kbus_dev install --test-tools --llm  # what only the tests run, built once (minutes)
	$(MAKE) --no-print-directory lint
	$(RUN) pytest -q -p no:cacheprovider -n 2 tests/unit  # no servers: on both cores
	# With servers: on both cores (e2e's tests on one worker, security's on the other, each
	# sharing its folder's services; integration's spread), then those that time what they
	# measure or start clusters (marked alone), one at a time: clusters beside the parallel
	# phase cost it as much as they saved and made a race test there fail (2026-12-07).
	$(RUN) pytest -q -p no:cacheprovider --durations=15 -n 2 --dist loadgroup -m "not alone" --ignore=tests/unit
	$(RUN) pytest -q -p no:cacheprovider --durations=15 -m alone --ignore=tests/unit

unit:
	$(RUN) pytest -q tests/unit

# Before each commit: lint, types, the unit tests and the integration tests (real NATS and
# Weaviate, no cluster), on both cores (docs/operating.md says how long it takes).
check: install
	$(RUN) python -m kbus_dev install --test-tools --llm
	$(MAKE) --no-print-directory lint
	$(RUN) pytest -q -p no:cacheprovider -n 2 tests/unit
	$(RUN) pytest -q -p no:cacheprovider -n 2 --dist loadgroup -m "not alone" tests/integration

lint:
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy
	$(RUN) lint-imports

docs:
	$(RUN) python -m kbus_dev asyncapi
	$(RUN) python -m kbus_dev settings-doc
	$(RUN) python -m kbus_dev permissions-doc
	$(RUN) python -m kbus_dev tables-doc

# Side-by-side benchmark (floors, kbus, LlamaIndex); BENCH_ARGS="--documents 0" for all of SciFact.
bench: install
	$(UV) sync --frozen --group bench --link-mode copy --reinstall-package llama-index-core  # nltk refuses hard-linked data files
	$(UV) run --frozen --group bench python -m bench $(BENCH_ARGS)

# Fair share side by side (off, then on): tenant a imports 3,000 SciFact documents while b and c
# publish one every 10 s and a publishes an interactive edit every 30 s (CI runs it at 200).
bench-fairness: install
	$(RUN) python -m bench.fairness $(FAIRNESS_ARGS)

# Answers within a token budget on long SciFact documents, every mode side by side; test read
# once (CI runs it at 40 made-up documents).
bench-context: install
	$(RUN) python -m bench.context --split test $(CONTEXT_ARGS)

# Search time with per-document access filtering against without, on one library.
bench-access: install
	$(RUN) python -m bench.access $(ACCESS_ARGS)

# A noisy neighbour: one tenant's flood of 1 MB documents and heavy searches beside another's
# small documents and searches, side by side with the quiet run (CI runs it at 20 s).
bench-neighbour: install
	$(RUN) python -m bench.neighbour $(NEIGHBOUR_ARGS)

# Large documents (5, 20 and 50 MB texts and a 300-page PDF) against many small ones, side by
# side in one run (about 70 minutes here; CI runs it at 0.3 MB and 20 pages).
bench-large: install
	$(RUN) python -m bench.large $(LARGE_ARGS)

# 100, 1,000 and 10,000 tenants on one installation provisioned as a deployment is, and 500
# new tenants publishing at once (about 8 minutes here; CI provisions 300 in
# tests/security/test_many_tenants.py).
bench-tenants: install
	$(RUN) python -m bench.tenants $(TENANTS_ARGS)

# The chaos test at full size (CI runs it at 200 documents inside `make test`).
chaos: install
	$(RUN) python -m tests.chaos --documents 2000 --publish-seconds 150 --kills-per-service 3 --out chaos-results.json

# The chaos test on three NATS servers and three Weaviate nodes, two replicas of every stage:
# the leader of every stream and bucket killed, Weaviate nodes (the Raft leader first), a rolling
# restart, searches throughout (CI runs it at 60 documents); SEED=n for another schedule. The
# control beside it: one query searcher (it must miss the search targets).
SEED ?= 1
chaos-cluster: install
	$(RUN) python -m tests.chaos --cluster --replicas 2 --documents 400 --publish-seconds 120 --kills-per-service 2 --weaviate-kills 4 --searches-per-s 5 --rolling-restart --seed $(SEED) --out chaos-cluster-results.json
	$(RUN) python -m tests.chaos --cluster --replicas 1 --documents 150 --publish-seconds 60 --kill-stages query --kills-per-service 3 --leader-kills 0 --weaviate-kills 0 --searches-per-s 3 --out chaos-cluster-control.json
