#!/usr/bin/env bash
# Generates the Python stubs of proto/placement/v1/placement.proto with grpcio-tools:
#   src/placement_client/placement/v1/placement_pb2.py       messages   (--python_out)
#   src/placement_client/placement/v1/placement_pb2.pyi      type stubs (--pyi_out)
#   src/placement_client/placement/v1/placement_pb2_grpc.py  client/server stubs (--grpc_python_out)
# Not run through `buf generate`: grpcio-tools ships protoc and the gRPC Python plugin as a
# Python module (grpc_tools.protoc), not as protoc-gen-* executables that buf could call.
#
# Usage: clients/python/generate.sh [OUT_DIR]   (OUT_DIR defaults to src/placement_client;
#        scripts/clients-test.sh passes a temp dir to check the checked-in files are current)
# Python: $PYTHON, else .tools/pyclients/bin/python, else python3 (needs grpcio-tools from
# requirements-dev.txt; the pinned version keeps the output byte-identical).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(git -C "$HERE" rev-parse --show-toplevel)
OUT=${1:-$HERE/src/placement_client}
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$ROOT/.tools/pyclients/bin/python" ]; then PYTHON=$ROOT/.tools/pyclients/bin/python; else PYTHON=python3; fi
fi

mkdir -p "$OUT/placement/v1"
"$PYTHON" -m grpc_tools.protoc -I "$ROOT/proto" \
  --python_out="$OUT" --pyi_out="$OUT" --grpc_python_out="$OUT" \
  "$ROOT/proto/placement/v1/placement.proto"

# The gRPC plugin imports the messages as the top-level package `placement.v1`; inside this
# distribution they live in `placement_client.placement.v1`. Rewriting the import (rather than
# renaming the .proto path) keeps the descriptor's file name "placement/v1/placement.proto",
# the same name the server's reflection reports.
sed -i 's/^from placement\.v1 import placement_pb2 as /from placement_client.placement.v1 import placement_pb2 as /' \
  "$OUT/placement/v1/placement_pb2_grpc.py"
for d in "$OUT/placement" "$OUT/placement/v1"; do
  [ -f "$d/__init__.py" ] || : >"$d/__init__.py"
done
