#!/usr/bin/env bash
# run_bench.sh BUILD_DIR [RUNS] - sbx (with the agent and through the Engine
# API), the libcurl floor, the local provider and docker-py on one
# private daemon (started and stopped here), same image, same run; then the
# big-data measures (RSS growth for 256 MiB, throughput vs docker cp).
set -euo pipefail
build="${1:?usage: $0 BUILD_DIR [RUNS]}"
runs="${2:-5}"
src="$(cd "$(dirname "$0")/../.." && pwd)"
dir="$(mktemp -d /tmp/sbxb-XXXXXX)"
trap '"$src/scripts/services/dockerd.sh" stop "$dir" >/dev/null 2>&1; rm -rf "$dir"' EXIT
host="$("$src/scripts/services/dockerd.sh" start "$dir")"
image="${SBX_TEST_DOCKER_IMAGE:-sbx-test:busybox}"
"$build/bench/docker/bench_docker" "$host" "$image" "$runs"
python3 "$src/bench/docker/docker_py_bench.py" "$host" "$image" "$runs"
"$build/bench/docker/bench_docker_stream" "$host" "$image" "$runs" 256
