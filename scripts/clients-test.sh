#!/usr/bin/env bash
# Tests the generated gRPC clients (clients/go, clients/python); scripts/test.sh calls it.
#   1. installs what is missing: Debian Go packages (go, protoc-gen-go, protoc-gen-go-grpc and
#      the grpc/protobuf Go libraries under /usr/share/gocode) and a venv .tools/pyclients with
#      clients/python/requirements-dev.txt plus placement-client in editable mode
#   2. builds scheduler-service (debug)
#   3. regenerates the stubs into a temp dir (buf generate, clients/python/generate.sh) and fails
#      if they differ from the checked-in ones
#   4. builds the Go client offline (GOPATH mode against /usr/share/gocode) and runs
#      clients/go/cmd/example against a started scheduler-service
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
# Debian 12 packages. golang-github-golang-protobuf-1-5-dev replaces the default 1-3-dev: grpc
# 1.33's codec marshals through github.com/golang/protobuf, and 1.3.x cannot marshal the
# APIv2 messages protoc-gen-go 1.28 generates (nil-pointer panic in table_marshal.go).
DEB_PKGS=(golang-go protoc-gen-go protoc-gen-go-grpc golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev)
missing=()
for p in "${DEB_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  say "apt-get install ${missing[*]}"
  SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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
# Offline build: GOPATH mode with Debian's libraries in /usr/share/gocode; the module is linked
# into a throwaway GOPATH at its import path (module mode would need the network or a vendor/).
GOPATH_TMP="$TMP/gopath"
mkdir -p "$GOPATH_TMP/src/github.com/placement/placement/clients"
ln -s "$ROOT/clients/go" "$GOPATH_TMP/src/github.com/placement/placement/clients/go"
export GO111MODULE=off GOPATH="$GOPATH_TMP:/usr/share/gocode" GOCACHE="$TOOLS/gocache" GOFLAGS= GOPROXY=off
GOPKGS=(github.com/placement/placement/clients/go/placement/v1 github.com/placement/placement/clients/go/cmd/example)
unformatted=$(gofmt -l clients/go)
[ -z "$unformatted" ] || die "gofmt needed: $unformatted"
say "go vet + go build (GO111MODULE=off, GOPATH=/usr/share/gocode)"
go vet "${GOPKGS[@]}"
go build -o "$TMP/placement-example" github.com/placement/placement/clients/go/cmd/example

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT=$(free_port)
"$BIN" --listen "127.0.0.1:$PORT" --metrics-listen off >"$TMP/server.log" 2>&1 &
SERVER_PID=$!
say "Go example against scheduler-service on 127.0.0.1:$PORT"
# The example waits for the server itself (blocking dial with a deadline).
"$TMP/placement-example" -addr "127.0.0.1:$PORT" -timeout 30s || { cat "$TMP/server.log" >&2; die "Go example failed"; }
kill "$SERVER_PID"; wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=

# --- 5. Python ---
say "pytest clients/python/tests"
SCHEDULER_SERVICE_BIN="$BIN" "$PY" -m pytest -q -p no:cacheprovider clients/python/tests

say "all client tests passed"
