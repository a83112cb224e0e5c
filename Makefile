# mlx-responses: setup, serve, test, lint, regenerate the contract, rebuild the bundled model.
VENV := .venv
PY := $(VENV)/bin/python
BUF_VERSION := 1.75.0
BUF := npx --yes @bufbuild/buf@$(BUF_VERSION)
# The contract of the last release, as a buf image committed in contract/ (works on any clone,
# shallow or without tags). Compare against a tag instead: make lint BREAKING_AGAINST='.git#tag=v0.2.0'
BREAKING_AGAINST ?= contract/v0.1.1.binpb

.PHONY: setup serve test test-redis lint docs proto model model-gpt-oss model-qwen35-mtp bench bench-overhead bench-stores bench-structured contract-baseline

$(VENV)/.installed: pyproject.toml tools/setup.sh tools/mlx_backend.py
	bash tools/setup.sh

setup: $(VENV)/.installed  ## create .venv with the project installed (idempotent)

serve: setup  ## run core + façade on the bundled model (http://127.0.0.1:8080)
	$(VENV)/bin/mlx-responses serve $(ARGS)

test: setup  ## the whole test suite
	$(PY) -m pytest -q $(ARGS)

test-redis: setup  ## the HTTP and gRPC suites again, every stack on a real redis-server
	MLX_RESPONSES_TEST_STORE=redis $(PY) -m pytest -q tests/http tests/grpc $(ARGS)

lint: setup  ## ruff, mypy, mkdocs build --strict, buf lint and buf breaking (against the last release's contract)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) tools/typecheck.py
	$(VENV)/bin/mkdocs build --strict --quiet --site-dir build/site
	$(BUF) lint
	$(BUF) breaking --against '$(BREAKING_AGAINST)'

docs: setup  ## write the generated docs pages (flags), then build the site into site/
	$(PY) -m tools.gen_docs
	$(VENV)/bin/mkdocs build --strict

contract-baseline:  ## at a release: snapshot the contract (make contract-baseline VERSION=0.2.0)
	$(BUF) build --exclude-source-info -o contract/v$(VERSION).binpb

proto: setup  ## regenerate mlx_responses/ from proto/
	$(PY) tools/genproto.py

# The bundled model's stages (training/tiny_chat/PILOTS.md): the base recipe, then the agent
# stage (agent prose, decoy tools, apply_patch; a 64k context over a 2,048-token sliding window),
# each stage fine-tuning the last with the embeddings frozen. ~20 + 14 + 16 + 10 + 2 min on 2 cores.
MODEL_STAGES := build/tiny-chat
AGENT_MIX := --freeze-embeddings --max-positions 65536 --copy-steps 0 --short-steps 0 --p-random 0.3 --full-p-random 0.3 --p-long-system 0.25 --composed-requests 0.5 --decoys 0.25

model: setup  ## retrain the bundled tiny chat model (service/assets/tiny-chat), stage by stage
	$(PY) -m training.tiny_chat.train --out $(MODEL_STAGES)/base --copy-steps 1200 --tool-steps 500 --full-steps 700 --p-random 0.3 --full-p-random 0.3 --p-long-system 0.2 --copy-p-random 0.5 --spelled-embeddings --underscore-words --composed-requests 0.5
	$(PY) -m training.tiny_chat.train --init-from $(MODEL_STAGES)/base --out $(MODEL_STAGES)/agent1 --skip-eval $(AGENT_MIX) --tool-steps 100 --full-steps 350 --lr 3e-4 --warmup 20 --pose-share 0.5 --agent-prose 0.6 --patch-share 0.3
	$(PY) -m training.tiny_chat.train --init-from $(MODEL_STAGES)/agent1 --out $(MODEL_STAGES)/agent2 --skip-eval $(AGENT_MIX) --sliding-window 2048 --copy-steps 100 --copy-p-random 0.5 --tool-steps 150 --full-steps 300 --lr 1.5e-4 --warmup 10 --agent-prose 0.6 --patch-share 0.3
	$(PY) -m training.tiny_chat.train --init-from $(MODEL_STAGES)/agent2 --out $(MODEL_STAGES)/agent3 --skip-eval $(AGENT_MIX) --sliding-window 2048 --tool-steps 250 --full-steps 150 --lr 1e-4 --warmup 10 --agent-prose 0.5 --patch-share 0.5
	$(PY) -m training.tiny_chat.train --init-from $(MODEL_STAGES)/agent3 --out service/assets/tiny-chat $(AGENT_MIX) --sliding-window 2048 --tool-steps 0 --full-steps 80 --lr 3e-5 --warmup 5 --agent-prose 0.3 --patch-share 0.1

model-gpt-oss: setup  ## retrain the tiny gpt-oss (service/assets/tiny-gpt-oss): harmony, ~15 min of CPU
	nice -n 15 $(PY) -m training.tiny_harmony.train --out service/assets/tiny-gpt-oss --stop-after 741 --cpu-seconds 100000 --wall-seconds 100000

# The tiny Qwen3.5 for speculative decoding (training/tiny_drafter): tiny-chat grafted into a
# Qwen3.5 hybrid and fine-tuned, then its own MTP head and an EAGLE-3 drafter trained on its own
# generations. ~7 + 19 + 28 min wall under nice -n 15 on the shared 2 cores (load 18-30).
QWEN35 := build/tiny-qwen35
model-qwen35-mtp: setup  ## retrain service/assets/tiny-qwen35-mtp (+ its MTP head) and tiny-qwen35-eagle3
	rm -rf $(QWEN35)
	nice -n 15 $(PY) -m training.tiny_drafter.target --out $(QWEN35)/target --steps 120 --lr 1.5e-4 --new-scale 0.5 --max-len 200
	nice -n 15 $(PY) -m training.tiny_drafter.mtp --target $(QWEN35)/target --data $(QWEN35)/own.json --prompts 400 --max-tokens 64 --steps 300 --context 48
	nice -n 15 $(PY) -m training.tiny_drafter.eagle3 --target $(QWEN35)/target --out $(QWEN35)/eagle3 --data $(QWEN35)/own.json --steps 300 --context 160
	rm -rf service/assets/tiny-qwen35-mtp service/assets/tiny-qwen35-eagle3
	cp -r $(QWEN35)/target service/assets/tiny-qwen35-mtp
	cp -r $(QWEN35)/eagle3 service/assets/tiny-qwen35-eagle3
	$(PY) -m training.tiny_drafter.measure --target service/assets/tiny-qwen35-mtp

bench: setup  ## performance benchmark (prints figures; not a test)
	$(PY) tests/benchmarks/bench_serving.py $(ARGS)

bench-overhead: setup  ## serving cost per token: micro model on CPU, served vs. in process (ratios)
	$(PY) tests/benchmarks/bench_overhead.py $(ARGS)

bench-structured: setup  ## grammar (structured output) cost per token (prints figures; not a test)
	nice -n 19 $(PY) tests/benchmarks/bench_structured.py $(ARGS)

bench-stores: setup  ## Redis vs. memory store benchmark (prints figures; not a test)
	$(PY) tests/benchmarks/bench_stores.py $(ARGS)
