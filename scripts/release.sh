#!/usr/bin/env bash
# Release artifacts of kubectl-placement: a tar.gz per platform (the binary, stripped, and LICENSE,
# byte-for-byte reproducible: sorted names, fixed times and owners), SHA256SUMS, and the krew
# manifest (deploy/krew/placement.yaml) with this release's version, URIs and checksums filled in:
#
#   scripts/release.sh                      # cargo build --release, stripped, for this machine
#   scripts/release.sh --binary PATH        # package a binary built elsewhere (CI: the debug one)
#
# Options: --out DIR (default dist/), --version V (default: the workspace's version),
# --url BASE (where the archives will be downloaded from; default the GitHub release of the tag).
# Only this machine's platform is built (linux/amd64 or linux/arm64); the manifest lists the
# platforms whose archive is in DIR, so archives built on other machines into the same DIR are
# picked up by running the script again there with --binary.
set -euo pipefail

ROOT=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$ROOT"
die() { echo "release.sh: $*" >&2; exit 1; }

OUT="$ROOT/dist"
BINARY=""
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
URL=""
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --binary) BINARY=$2; shift 2 ;;
    --version) VERSION=$2; shift 2 ;;
    --url) URL=$2; shift 2 ;;
    *) die "unknown argument $1 (see the header of $0)" ;;
  esac
done
[ -n "$VERSION" ] || die "no version: give --version"
TAG="v${VERSION#v}"
URL=${URL:-https://github.com/placement/placement/releases/download/$TAG}

case "$(uname -s)/$(uname -m)" in
  Linux/x86_64) PLATFORM=linux_amd64 ;;
  Linux/aarch64) PLATFORM=linux_arm64 ;;
  *) die "no release for $(uname -s)/$(uname -m): the manifest's platforms are linux/amd64 and linux/arm64" ;;
esac

if [ -z "$BINARY" ]; then
  cargo build --release --locked -p binder-agent --bin kubectl-placement
  BINARY="${CARGO_TARGET_DIR:-$ROOT/target}/release/kubectl-placement"
fi
[ -x "$BINARY" ] || die "$BINARY is not an executable"
"$BINARY" --version >/dev/null || die "$BINARY does not run"

mkdir -p "$OUT/krew"
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
# Stripped: without symbols and line tables the binary is a fraction of the profile's size.
strip --strip-all -o "$STAGE/kubectl-placement" "$BINARY"
chmod 0755 "$STAGE/kubectl-placement"
install -m 0644 LICENSE "$STAGE/LICENSE"
ARCHIVE="kubectl-placement_${TAG}_${PLATFORM}.tar.gz"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$STAGE" -cf - kubectl-placement LICENSE |
  gzip -n -9 >"$OUT/$ARCHIVE"
echo "release.sh: $OUT/$ARCHIVE ($(du -h "$OUT/$ARCHIVE" | cut -f1))"

# Checksums and the manifest from every archive of this tag in OUT.
python3 - "$ROOT/deploy/krew/placement.yaml" "$OUT" "$TAG" "$URL" <<'PY'
import hashlib, pathlib, re, sys

template, out, tag, url = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3], sys.argv[4]
sums = {}
for archive in sorted(out.glob(f"kubectl-placement_{tag}_*.tar.gz")):
    sums[archive.name] = hashlib.sha256(archive.read_bytes()).hexdigest()
(out / "SHA256SUMS").write_text("".join(f"{h}  {n}\n" for n, h in sums.items()))

text = template.read_text()
header, _, body = text.partition("apiVersion:")
body = "apiVersion:" + body.replace("version: VERSION", f"version: {tag}")
head, _, rest = body.partition("  platforms:\n")
# One block per platform: "    - selector:" up to the next one.
blocks = re.split(r"(?m)^(?=    - selector:)", rest)
kept = []
for block in blocks:
    if not block.strip():
        continue
    os_ = re.search(r"os: (\S+)", block).group(1)
    arch = re.search(r"arch: (\S+)", block).group(1)
    name = f"kubectl-placement_{tag}_{os_}_{arch}.tar.gz"
    if name not in sums:
        continue
    block = block.replace("uri: URI", f"uri: {url}/{name}").replace("sha256: SHA256", f"sha256: {sums[name]}")
    kept.append(block)
if not kept:
    sys.exit("release.sh: no archive of a platform of the manifest in " + str(out))
(out / "krew" / "placement.yaml").write_text(head + "  platforms:\n" + "".join(kept))
print(f"release.sh: {out / 'krew' / 'placement.yaml'}: {len(kept)} platform(s) of {tag}")
PY
