#!/usr/bin/env bash
# Builds Kueue (sigs.k8s.io/kueue, pinned below) from the Go module proxy into .tools/kueue/ with
# the CRDs of the same module, for the Kueue end-to-end test (tests/tests/kueue.rs). Idempotent: a
# build already there is kept. Prints the two variables the test reads:
#
#   eval "$(bash scripts/kueue.sh)"   # E2E_KUEUE=.../kueue E2E_KUEUE_CRDS=.../crds
set -euo pipefail

KUEUE_VERSION=v0.17.0
ROOT=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
DIR="$ROOT/.tools/kueue/$KUEUE_VERSION"
die() { echo "kueue.sh: $*" >&2; exit 1; }

if [ ! -x "$DIR/kueue" ] || [ ! -f "$DIR/crds/kueue.x-k8s.io_topologies.yaml" ]; then
  command -v go >/dev/null 2>&1 || die "Kueue is built with Go: no go on PATH"
  echo "kueue.sh: building Kueue $KUEUE_VERSION from the Go module proxy" >&2
  mkdir -p "$DIR"
  GOBIN="$DIR" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" >&2
  # The CRDs as Kueue's release ships them (config/components/crd/bases of the same module).
  src=$(go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
  rm -rf "$DIR/crds"
  cp -r "$src/config/components/crd/bases" "$DIR/crds"
  chmod -R u+w "$DIR/crds"
fi
[ -x "$DIR/kueue" ] || die "no kueue binary in $DIR"
printf 'export E2E_KUEUE=%q E2E_KUEUE_CRDS=%q\n' "$DIR/kueue" "$DIR/crds"
