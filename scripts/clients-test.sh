#!/usr/bin/env bash
# Tests the generated gRPC clients (clients/go, clients/python); scripts/test.sh calls it.
#   1. installs what is missing: Go >= 1.26 is needed on PATH (/usr/local/go/bin is added when
#      present); protoc-gen-go and protoc-gen-go-grpc at pinned versions into .tools/bin
#      (`go install` from the Go module proxy); a venv .tools/pyclients with
#      clients/python/requirements-dev.txt plus placement-client in editable mode
#   2. builds scheduler-service (debug)
#   3. regenerates the stubs into a temp dir (buf generate, clients/python/generate.sh) and fails
#      if they differ from the checked-in ones
#   4. Go, in module mode (clients/go/go.mod and go.sum; modules come from the Go module proxy
#      into the default module cache): gofmt, go vet, go build, the example against a started
#      scheduler-service, then go test ./... (the conversion conformance test; the controller
#      against a real cluster when E2E_KUBECONFIG is set, skipped otherwise)
#   5. runs the Python tests (pytest clients/python/tests; they start their own server)
set -euo pipefail

ROOT=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$ROOT"
TOOLS="$ROOT/.tools"
export PATH="$TOOLS/bin:$PATH"
say() { printf -- '--> clients: %s\n' "$*"; }
die() { echo "clients-test: $*" >&2; exit 1; }

TMP=$(mktemp -d)
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

# --- 1. tools ---
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
command -v go >/dev/null || die "Go >= 1.26 is needed on PATH (https://go.dev/doc/install; /usr/local/go/bin is looked at)"
go_minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
[ "${go_minor:-0}" -ge 26 ] 2>/dev/null || die "Go >= 1.26 is needed (clients/go/go.mod), found $(go env GOVERSION)"
if [ "$(protoc-gen-go --version 2>/dev/null)" != "protoc-gen-go $PROTOC_GEN_GO_VERSION" ]; then
  say "go install protoc-gen-go@$PROTOC_GEN_GO_VERSION"
  GOBIN="$TOOLS/bin" go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
fi
if [ "$(protoc-gen-go-grpc --version 2>/dev/null)" != "protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION#v}" ]; then
  say "go install protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
  GOBIN="$TOOLS/bin" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
fi
bash scripts/install-tools.sh >/dev/null # buf (idempotent; already done when run from scripts/test.sh)

PY="$TOOLS/pyclients/bin/python"
[ -x "$PY" ] || python3 -m venv "$TOOLS/pyclients" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
say "pip install -r clients/python/requirements-dev.txt -e clients/python"
"$PY" -m pip install --quiet --no-input --disable-pip-version-check \
  -r clients/python/requirements-dev.txt -e clients/python
say "$(go version), $(protoc-gen-go --version), $(protoc-gen-go-grpc --version), buf $(buf --version)"
say "$("$PY" -m pip list --disable-pip-version-check 2>/dev/null | grep -E '^(grpcio|grpcio-tools|protobuf|kubernetes) ' | tr -s ' ' | paste -sd, -)"

# --- 2. server ---
say "cargo build -p scheduler-service"
cargo build --quiet -p scheduler-service
# Honour CARGO_TARGET_DIR (a relative one is relative to the workspace root, as cargo reads it).
TARGET_DIR=${CARGO_TARGET_DIR:-target}
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$ROOT/$TARGET_DIR" ;; esac
BIN="$TARGET_DIR/debug/scheduler-service"

# --- 3. the checked-in stubs are what the generators produce ---
say "reproducibility: buf generate + clients/python/generate.sh into $TMP/gen"
buf generate -o "$TMP/gen"
diff -r "$TMP/gen/clients/go/placement" clients/go/placement ||
  die "clients/go/placement differs from 'buf generate' output: run 'buf generate' and commit"
PYTHON="$PY" bash clients/python/generate.sh "$TMP/gen/python"
diff -r -x __pycache__ "$TMP/gen/python/placement" clients/python/src/placement_client/placement ||
  die "clients/python stubs differ from clients/python/generate.sh output: run it and commit"

# --- 4. Go ---
# Module mode. GOFLAGS=-mod=readonly: go.mod and go.sum are committed and must already be
# complete (a missing entry fails here instead of being written).
export GOFLAGS=-mod=readonly
unformatted=$(gofmt -l clients/go)
[ -z "$unformatted" ] || die "gofmt needed: $unformatted"
say "go vet ./... + go build ./... (clients/go, module mode)"
(cd clients/go && go vet ./... && go build ./... && go build -o "$TMP/placement-example" ./cmd/example)

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
"$BIN" --listen "127.0.0.1:$PORT" --metrics-listen off >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
say "Go example against scheduler-service on 127.0.0.1:$PORT"
# The example waits for the server itself (its first call waits for readiness within its deadline).
"$TMP/placement-example" -addr "127.0.0.1:$PORT" -timeout 30s || { cat "$TMP/server.log" >&2; die "Go example failed"; }
if [ -n "${E2E_KUBECONFIG:-}" ]; then
  say "go test ./... (clients/go): the controller runs against E2E_KUBECONFIG=$E2E_KUBECONFIG"
else
  say "go test ./... (clients/go): E2E_KUBECONFIG is not set, the controller test against a real cluster is skipped"
fi
(cd clients/go && PLACEMENT_ADDR="127.0.0.1:$PORT" go test -count=1 ./...) || { cat "$TMP/server.log" >&2; die "go test failed"; }
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=

# --- 5. Python ---
say "pytest clients/python/tests"
SCHEDULER_SERVICE_BIN="$BIN" "$PY" -m pytest -q -p no:cacheprovider clients/python/tests

say "all client tests passed"
