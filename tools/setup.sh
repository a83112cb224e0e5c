#!/usr/bin/env bash
# Idempotent setup: the fast system BLAS and redis-server (best effort), .venv with the project.
set -euo pipefail
cd "$(dirname "$0")/.."

# MLX's CPU wheel links a reference BLAS; the system OpenBLAS is ~40x faster (service/engine/blas.py).
if [ "$(uname -s)" = "Linux" ] && ! ls /usr/lib/*-linux-gnu/openblas-pthread/libblas.so.3 >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenblas0-pthread) \
      >/dev/null 2>&1 || echo "setup: could not install libopenblas0-pthread; using the reference BLAS"
  else
    echo "setup: install libopenblas0-pthread for fast CPU matmuls (reference BLAS in use)"
  fi
fi

# The Redis store tests start a real redis-server (tests/support/redis_server.py); they skip without one.
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) \
      >/dev/null 2>&1 || echo "setup: could not install redis-server; the Redis store tests will skip"
  else
    echo "setup: install redis-server to run the Redis store tests (they skip without it)"
  fi
fi

# Debian's Chromium and its driver, for the page's browser tests (tests/http/test_page.py; best
# effort, the tests skip without them).
if ! command -v chromedriver >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
    || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver)) \
    >/dev/null 2>&1 || echo "setup: could not install chromium chromium-driver; the page's browser tests skip"
fi

# Go stub plugins for the buf.gen.yaml check (tests/e2e/test_contract.py; best effort).
if ! command -v protoc-gen-go-grpc >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  go_plugins="protoc-gen-go protoc-gen-go-grpc"
  (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $go_plugins \
    || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $go_plugins)) \
    >/dev/null 2>&1 || echo "setup: could not install $go_plugins; the Go stub check is skipped"
fi

# Go, protoc and gRPC for Go, for the Go client example (tests/e2e/test_go_client.py; best
# effort, the test skips without them). golang/protobuf 1.5 (the APIv2 bridge; 1.3 crashes
# marshalling the stubs) replaces the 1.3 that the plugins above may have pulled in.
if { ! command -v go >/dev/null 2>&1 || ! command -v protoc >/dev/null 2>&1 \
     || [ ! -f /usr/share/gocode/src/github.com/golang/protobuf/proto/registry.go ]; } \
   && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  go_client="golang-go protobuf-compiler golang-google-grpc-dev golang-github-golang-protobuf-1-5-dev"
  (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $go_client \
    || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $go_client)) \
    >/dev/null 2>&1 || echo "setup: could not install $go_client; the Go client test is skipped"
fi

# pip's own chatter (setuptools' notice that an editable install is editable, this machine's
# index warnings) goes to a log, shown only when the install fails.
PIP_LOG=.venv/setup-pip.log
quiet_pip() {
  if ! .venv/bin/python -m pip "$@" >>"$PIP_LOG" 2>&1; then
    cat "$PIP_LOG" >&2
    echo "setup: pip $* failed (log above, kept in $PIP_LOG)" >&2
    exit 1
  fi
}

PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
: >"$PIP_LOG"
quiet_pip install -q --upgrade pip
# The MLX backend: CPU, or on Linux with an NVIDIA driver the CUDA build it supports
# (tools/mlx_backend.py; MLX_RESPONSES_BACKEND=cpu|cuda12|cuda overrides).
BACKEND="$("$PYTHON" tools/mlx_backend.py)"
if [ "$BACKEND" = "cpu" ]; then
  quiet_pip install -q -e ".[dev,vision,embeddings]"
else
  quiet_pip install -q -e ".[dev,vision,embeddings,$BACKEND]"
  # mlx-cpu (the default dependency) and mlx-cuda-* ship the same mlx/lib/libmlx.so: the CUDA
  # build must be the one on disk, whatever order pip installed them in.
  case "$BACKEND" in cuda) CUDA_PKG=mlx-cuda-13 ;; *) CUDA_PKG=mlx-cuda-12 ;; esac
  MLX_VERSION="$(.venv/bin/python -c 'import importlib.metadata as m; print(m.version("mlx"))')"
  quiet_pip install -q --force-reinstall --no-deps "$CUDA_PKG==$MLX_VERSION"
  .venv/bin/python -c 'import mlx.core as mx; assert mx.cuda.is_available()' 2>/dev/null \
    || echo "setup: warning: $CUDA_PKG installed but MLX sees no CUDA device; serving on the CPU"
fi

# The Codex CLI for its end-to-end test (tests/e2e/test_codex.py), project-local and best effort:
# without npm or the registry the test skips, and setup still succeeds.
CODEX_VERSION="0.169"
CODEX=.tools/node_modules/.bin/codex
if ! { [ -x "$CODEX" ] && "$CODEX" --version 2>/dev/null | grep -q " ${CODEX_VERSION}\."; }; then
  if command -v npm >/dev/null 2>&1; then
    npm install --prefix .tools --no-audit --no-fund --loglevel=error "@openai/codex@${CODEX_VERSION}.x" \
      >/dev/null 2>&1 || echo "setup: could not install @openai/codex@${CODEX_VERSION}.x; its test will skip"
  else
    echo "setup: npm not found; the Codex CLI end-to-end test will skip"
  fi
fi
# Claude Code for its end-to-end test (tests/e2e/test_claude_code.py), the same way: best effort.
CLAUDE_VERSION="2.1"
CLAUDE=.tools/node_modules/.bin/claude
if ! { [ -x "$CLAUDE" ] && "$CLAUDE" --version 2>/dev/null | grep -q "^${CLAUDE_VERSION}\."; }; then
  if command -v npm >/dev/null 2>&1; then
    npm install --prefix .tools --no-audit --no-fund --loglevel=error "@anthropic-ai/claude-code@${CLAUDE_VERSION}.x" \
      >/dev/null 2>&1 || echo "setup: could not install @anthropic-ai/claude-code@${CLAUDE_VERSION}.x; its test will skip"
  fi
fi
# The Vercel AI SDK for its end-to-end test (tests/e2e/test_vercel_ai.py), the same way.
if [ ! -f .tools/node_modules/@ai-sdk/openai/package.json ] || [ ! -f .tools/node_modules/ai/package.json ]; then
  if command -v npm >/dev/null 2>&1; then
    npm install --prefix .tools --no-audit --no-fund --loglevel=error "ai@7" "@ai-sdk/openai@4" "zod@4" \
      >/dev/null 2>&1 || echo "setup: could not install the Vercel AI SDK (ai, @ai-sdk/openai); its test will skip"
  else
    echo "setup: npm not found; the Vercel AI SDK end-to-end test will skip"
  fi
fi
touch .venv/.installed
