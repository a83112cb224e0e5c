# mlx-responses: setup, serve, test, lint, regenerate the contract, rebuild the bundled model.
VENV := .venv
PY := $(VENV)/bin/python
BUF_VERSION := 1.75.0

.PHONY: setup serve test test-redis lint proto model bench bench-stores

$(VENV)/.installed: pyproject.toml tools/setup.sh
	bash tools/setup.sh

setup: $(VENV)/.installed  ## create .venv with the project installed (idempotent)

serve: setup  ## run core + façade on the bundled model (http://127.0.0.1:8080)
	$(VENV)/bin/mlx-responses serve $(ARGS)

test: setup  ## the whole test suite
	$(PY) -m pytest -q $(ARGS)

test-redis: setup  ## the HTTP and gRPC suites again, every stack on a real redis-server
	MLX_RESPONSES_TEST_STORE=redis $(PY) -m pytest -q tests/http tests/grpc $(ARGS)

lint: setup  ## ruff, mypy and buf lint
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy service http_facade launcher
	npx --yes @bufbuild/buf@$(BUF_VERSION) lint

proto: setup  ## regenerate mlx_responses/ from proto/
	$(PY) tools/genproto.py

model: setup  ## retrain the bundled tiny chat model (service/assets/tiny-chat)
	$(PY) -m training.tiny_chat.train --out service/assets/tiny-chat --tool-steps 500 --full-steps 700

bench: setup  ## performance benchmark (prints figures; not a test)
	$(PY) tests/benchmarks/bench_serving.py $(ARGS)

bench-stores: setup  ## Redis vs. memory store benchmark (prints figures; not a test)
	$(PY) tests/benchmarks/bench_stores.py $(ARGS)
