#!/usr/bin/env bash
# After ../shared/gpu/prepare.sh (from the project root): .gpu/proj in the installed layout
# (mlx_responses.service, .http_facade, .launcher, as `pip install` lays them out) and our own
# gpu_bench.py (contenders ours_slots, ours_batch, ours_x with OURS_X_FLAGS). Rerun after a code
# change; carry .gpu/proj and .gpu/gpu_bench.py to the device (docs/performance.md).
set -eu
[ -d .gpu ] || { echo "run ../shared/gpu/prepare.sh first" >&2; exit 1; }
rm -rf .gpu/proj && mkdir -p .gpu/proj/mlx_responses .gpu/proj/tests
cp -r mlx_responses/. .gpu/proj/mlx_responses/
cp -r service http_facade launcher .gpu/proj/mlx_responses/
cp -r mlx_responses_client .gpu/proj/
cp tests/__init__.py .gpu/proj/tests/ && cp -r tests/support .gpu/proj/tests/
cp tools/gpu/gpu_bench.py .gpu/
find .gpu/proj -name __pycache__ -prune -exec rm -rf {} +
du -sh .gpu/proj
