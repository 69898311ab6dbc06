#!/usr/bin/env bash
# Checks the krew manifest of kubectl-placement the way krew-index does, then installs it with krew:
#
#   scripts/krew-check.sh [--binary PATH]
#
# 1. scripts/release.sh makes the archive and fills the manifest (with --binary: that binary, e.g.
#    the debug build in CI; without: a stripped release build);
# 2. krew's own validate-krew-manifest (sigs.k8s.io/krew, pinned below, built from the Go module
#    proxy) checks it: the schema, the name against the file name, each platform selector
#    supported and none overlapping;
# 3. krew installs it into a temporary KREW_ROOT from the archive (`krew install --manifest
#    --archive`: krew checks the archive's sha256 against the manifest), and the installed
#    plugin must run from krew's bin folder, LICENSE beside it;
# 4. the same install with one character of the checksum changed must be refused.
set -euo pipefail

KREW_VERSION=v0.4.3
ROOT=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$ROOT"
die() { echo "krew-check.sh: $*" >&2; exit 1; }

TOOLS="$ROOT/.tools/krew/$KREW_VERSION"
if [ ! -x "$TOOLS/krew" ] || [ ! -x "$TOOLS/validate-krew-manifest" ]; then
  command -v go >/dev/null 2>&1 || die "krew is built with Go: no go on PATH"
  GOBIN="$TOOLS" go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION" "sigs.k8s.io/krew/cmd/validate-krew-manifest@$KREW_VERSION"
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
bash scripts/release.sh --out "$WORK/dist" "$@"
MANIFEST="$WORK/dist/krew/placement.yaml"
ARCHIVE=$(ls "$WORK"/dist/kubectl-placement_*.tar.gz | head -n 1)

"$TOOLS/validate-krew-manifest" -manifest "$MANIFEST" -skip-install

export KREW_ROOT="$WORK/krew-root"
"$TOOLS/krew" install --manifest="$MANIFEST" --archive="$ARCHIVE"
PLUGIN="$KREW_ROOT/bin/kubectl-placement"
[ -x "$PLUGIN" ] || die "krew installed no $PLUGIN"
"$PLUGIN" --help | grep -q "kubectl placement <COMMAND>" || die "the installed plugin does not answer --help as kubectl-placement"
"$PLUGIN" --version
installed=$(dirname "$(readlink -f "$PLUGIN")")
[ -f "$installed/LICENSE" ] || die "no LICENSE beside the installed plugin in $installed"
# krew's record of the install (what `krew list` reads once an index is there).
grep -q "name: placement" "$KREW_ROOT/receipts/placement.yaml" || die "krew wrote no receipt for placement"

# A wrong checksum must stop the install.
python3 - "$MANIFEST" "$WORK/placement.yaml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
# The first checksum's first hex digit replaced by another.
text = re.sub(r"sha256: ([0-9a-f])", lambda m: "sha256: " + ("1" if m.group(1) == "0" else "0"), text, count=1)
open(sys.argv[2], "w").write(text)
PY
cmp -s "$MANIFEST" "$WORK/placement.yaml" && die "could not change the checksum in the manifest"
if KREW_ROOT="$WORK/krew-bad" "$TOOLS/krew" install --manifest="$WORK/placement.yaml" --archive="$ARCHIVE" \
  >"$WORK/bad.log" 2>&1; then
  die "krew installed the plugin with a wrong checksum"
fi
grep -qi "sha256\|checksum" "$WORK/bad.log" || { cat "$WORK/bad.log" >&2; die "krew refused the wrong checksum for another reason"; }
echo "krew-check.sh: the manifest is valid, krew installs it from $(basename "$ARCHIVE") and refuses a wrong checksum"
