#!/usr/bin/env bash
# Builds the two OCI images, scheduler-service and binder-agent, without a daemon and without a
# base image (none can be pulled here): each is one layer holding the release binary (stripped), the
# shared libraries it loads (read from ldd: glibc, libm, libgcc_s and the dynamic loader), the CA
# bundle, /etc/passwd and /etc/group naming uid/gid 65532 "nonroot", an empty /tmp, and nothing
# else: no shell, no package manager. umoci (Debian's package) writes the OCI layout.
#
#   scripts/images.sh                  # cargo build --release (stripped), then both images
#   scripts/images.sh --binaries DIR   # images of binaries built elsewhere (DIR/scheduler-service,
#                                      # DIR/binder-agent)
#
# Output: dist/images/<name> (an OCI image layout, tag = the workspace version), e.g. pushed with
#   skopeo copy oci:dist/images/scheduler-service:0.1.0 docker://ghcr.io/placement/scheduler-service:0.1.0
# Options: --out DIR (default dist/images), --version V. SOURCE_DATE_EPOCH (default: the last
# commit's time) sets every timestamp, so the same binaries give the same image digests.
# scripts/images-check.py checks the result and runs it.
set -euo pipefail

ROOT=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$ROOT"
die() { echo "images.sh: $*" >&2; exit 1; }

OUT="$ROOT/dist/images"
BINARIES=""
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --binaries) BINARIES=$2; shift 2 ;;
    --version) VERSION=$2; shift 2 ;;
    *) die "unknown argument $1 (see the header of $0)" ;;
  esac
done
command -v umoci >/dev/null 2>&1 || die "umoci is missing (Debian: apt-get install umoci)"
case "$(uname -m)" in
  x86_64) ARCH=amd64 ;;
  aarch64) ARCH=arm64 ;;
  *) die "no image for $(uname -m)" ;;
esac

if [ -z "$BINARIES" ]; then
  # The release profile as it is; the copy in the image is stripped below.
  # Both in one build: the binder depends on the service's library, so the features are those of
  # the README's `cargo run --release -p binder-agent` (which shares this build), and every
  # dependency is compiled once (a build of the service alone unifies fewer features and compiled
  # tokio, hyper, tonic and the engine a second time).
  cargo build --release --locked -p binder-agent --bin binder-agent -p scheduler-service --bin scheduler-service
  BINARIES="${CARGO_TARGET_DIR:-$ROOT/target}/release"
fi

EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
CREATED=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# image NAME DESCRIPTION PORTS CMD...: one image from $BINARIES/NAME.
image() {
  local name=$1 description=$2 ports=$3
  shift 3
  local bin="$BINARIES/$name"
  [ -x "$bin" ] || die "no executable $bin"
  local layout="$OUT/$name" bundle="$WORK/$name"
  rm -rf "$layout"
  mkdir -p "$OUT"
  umoci init --layout "$layout"
  umoci new --image "$layout:$VERSION"
  umoci unpack --image "$layout:$VERSION" "$bundle" >/dev/null
  local rootfs="$bundle/rootfs"

  # Stripped: symbols and line tables make up most of a release binary.
  install -d "$rootfs/usr/local/bin"
  strip --strip-all -o "$rootfs/usr/local/bin/$name" "$bin"
  chmod 0755 "$rootfs/usr/local/bin/$name"
  # The libraries the binary loads, at the paths the loader looks them up (ldd's view).
  ldd "$bin" | awk '/=> \//{print $3} /^\t\/[^ ]+ \(/{print $1}' | while read -r lib; do
    install -D -m 0755 "$(readlink -f "$lib")" "$rootfs$lib"
  done
  install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
    >"$rootfs/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$rootfs/etc/group"
  install -d -m 1777 "$rootfs/tmp"
  install -d -m 0700 -o 65532 -g 65532 "$rootfs/home/nonroot"
  find "$rootfs" -exec touch -h -d "@$EPOCH" {} +

  umoci repack --image "$layout:$VERSION" --history.created "$CREATED" \
    --history.created_by "scripts/images.sh: $name $VERSION" "$bundle"
  local args=(--image "$layout:$VERSION" --created "$CREATED" --history.created "$CREATED"
    --history.created_by "scripts/images.sh: config"
    --os linux --architecture "$ARCH" --config.user 65532:65532 --config.workingdir /
    --config.env PATH=/usr/local/bin --config.env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
    --config.entrypoint "/usr/local/bin/$name"
    --config.label "org.opencontainers.image.title=$name"
    --config.label "org.opencontainers.image.description=$description"
    --config.label "org.opencontainers.image.version=$VERSION"
    --config.label "org.opencontainers.image.revision=$REVISION"
    --config.label "org.opencontainers.image.created=$CREATED"
    --config.label "org.opencontainers.image.source=https://github.com/placement/placement"
    --config.label "org.opencontainers.image.url=https://github.com/placement/placement"
    --config.label "org.opencontainers.image.licenses=Apache-2.0")
  local port
  for port in $ports; do args+=(--config.exposedports "$port/tcp"); done
  local arg
  for arg in "$@"; do args+=(--config.cmd "$arg"); done
  umoci config "${args[@]}"
  umoci gc --layout "$layout"
  echo "images.sh: $layout:$VERSION ($(du -sh "$layout" | cut -f1) on disk)"
}

image scheduler-service "placement's stateless gRPC decision service" "50051 9464" \
  --listen=0.0.0.0:50051 --metrics-listen=0.0.0.0:9464
image binder-agent "placement's binder: watches the API server, asks a decision replica, writes Bindings" \
  "10251" run
