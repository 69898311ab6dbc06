#!/usr/bin/env bash
# THE one command that runs every test of the repository; README and CI (.ci/run) use it.
# Steps run in order and the first failure stops the run, naming the step that failed.
set -euo pipefail

ROOT=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$ROOT"

STEP="start"
START_SECS=$SECONDS
STEP_SECS=$SECONDS
# Each step's header says how long the one before took and the time since the start, so a slow
# step shows in any run's log.
step() {
  [ "$STEP" = "start" ] || printf '(%s: %ds; %ds in all)\n' "$STEP" $((SECONDS - STEP_SECS)) $((SECONDS - START_SECS))
  STEP=$*; STEP_SECS=$SECONDS; printf '\n==> %s\n' "$STEP"
}
RELEASE_PID=""
trap 'rc=$?; [ -z "$RELEASE_PID" ] || { pkill -P "$RELEASE_PID" 2>/dev/null; kill "$RELEASE_PID" 2>/dev/null; } || true
      [ "$rc" -eq 0 ] || echo "placement tests: FAILED at step \"$STEP\" (exit $rc)" >&2' EXIT

step "install tools (scripts/install-tools.sh)"
bash scripts/install-tools.sh
# Rust tests find grpcurl through $GRPCURL (or PATH); buf is on PATH for the steps below.
export PATH="$ROOT/.tools/bin:$PATH"
export GRPCURL="$ROOT/.tools/bin/grpcurl"

# Kueue (scripts/kueue.sh, Go module proxy) for tests/tests/kueue.rs on the control plane of
# scripts/e2e-cluster.sh (never on a cluster of your own, which may run a Kueue already; set
# E2E_KUEUE and E2E_KUEUE_CRDS yourself there): built in the background while the steps below
# compile, joined before `cargo test`.
KUEUE_OUT=$(mktemp -d)
KUEUE_PID=""
if [ -n "${E2E_KUBECONFIG:-}" ] && [ -n "${CLUSTER_SH:-}" ] && [ -z "${E2E_KUEUE:-}" ]; then
  bash scripts/kueue.sh >"$KUEUE_OUT/env" 2>"$KUEUE_OUT/log" &
  KUEUE_PID=$!
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "engine and binder module dependencies (scripts/engine-deps.py)"
# Fails when two modules of the engine (or of the binder) import each other, or on any longer import cycle.
python3 scripts/engine-deps.py --cycles
python3 scripts/engine-deps.py --binder --cycles

step "source file sizes (scripts/file-sizes.py)"
# Fails naming any *.rs file of the workspace over 1,000 lines (test files left out).
python3 scripts/file-sizes.py

step "buf lint"
buf lint

step "buf breaking"
# Compares the proto files with a git ref through buf's git input (the ref's buf.yaml at the
# root defines the module, as in the work tree, so no subdir= is needed). HEAD catches
# uncommitted changes, HEAD~1 the last commit. A ref without proto/ or buf.yaml (no commit
# yet, the first commit, a shallow clone) has nothing to break, so it is skipped.
breaking_against() {
  if git cat-file -e "$1:proto" 2>/dev/null && git cat-file -e "$1:buf.yaml" 2>/dev/null; then
    echo "against $1"
    buf breaking --against ".git#ref=$1"
  else
    echo "skipped against $1: no such commit, or no proto/ and buf.yaml in it"
  fi
}
breaking_against HEAD
breaking_against HEAD~1

step "Helm chart: helm lint, helm template, the chart against deploy/base (scripts/chart-check.py)"
# The defaults, then every option on (ci/all-on-values.yaml) with --strict; values.schema.json
# rejects bad values in both. chart-check.py fails on any object the chart and deploy/base (and
# the TLS overlay) render differently.
CHART=deploy/chart/placement
helm lint "$CHART"
helm lint --strict "$CHART" -f "$CHART/ci/all-on-values.yaml"
helm template placement "$CHART" --namespace placement-system >/dev/null
helm template placement "$CHART" --namespace placement-system -f "$CHART/ci/all-on-values.yaml" >/dev/null
python3 scripts/chart-check.py

step "sample requests match the proto (scripts/sample/*.json)"
# buf convert drops unknown fields, so a round trip that changes the JSON means a misspelled
# or stale field in the samples that scripts/demo.sh sends.
for pair in snapshot:SyncSnapshotRequest batch:ScheduleRequest rank:RankRequest; do
  file="scripts/sample/${pair%%:*}.json"
  buf convert proto --type "placement.v1.${pair#*:}" --from "$file" --to '-#format=json' |
    python3 -c 'import json, sys
if json.load(open(sys.argv[1])) != json.load(sys.stdin): sys.exit(sys.argv[1] + ": fields unknown to the proto")' "$file"
  echo "$file ok"
done

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "cargo test"
if [ -n "${E2E_KUBECONFIG:-}" ]; then
  echo "e2e: E2E_KUBECONFIG=$E2E_KUBECONFIG: tests/tests/e2e.rs runs against that cluster"
else
  echo "e2e: E2E_KUBECONFIG is not set: the end-to-end suite against a real cluster (tests/tests/e2e.rs) is skipped"
fi
if [ -n "$KUEUE_PID" ]; then
  wait "$KUEUE_PID" || { cat "$KUEUE_OUT/log" >&2; echo "building Kueue (scripts/kueue.sh) failed" >&2; exit 1; }
  # shellcheck disable=SC1091
  source "$KUEUE_OUT/env"
  echo "e2e: Kueue for tests/tests/kueue.rs: $E2E_KUEUE"
fi
cargo test --workspace --no-run
# The release binaries of the images and of the README's release commands (the build
# scripts/images.sh makes, which then finds it fresh, and the README's kubectl-placement: one
# invocation, so every dependency is compiled once with one feature set), built at the lowest CPU
# priority while the tests run: most of the tests' time is spent waiting on the control plane.
RELEASE_LOG=$(mktemp)
nice -n 19 cargo build --release --locked -p binder-agent --bin binder-agent --bin kubectl-placement \
  -p scheduler-service --bin scheduler-service >"$RELEASE_LOG" 2>&1 &
RELEASE_PID=$!
cargo test --workspace

step "PodGroups under kube 1.37's default gates (a second control plane, TopologyAwareWorkloadScheduling off)"
# The suite above ran against a control plane with topology-aware PodGroup scheduling on; kube
# 1.37's default leaves it off, and kube decides groups differently then. A second control plane
# on other ports with WORKLOAD_GATES=GenericWorkload=true runs the tests that compare those (and
# the seeded PodGroup differential again, with the gate off).
# --workspace (not -p): the same feature unification as the suite above, so nothing is rebuilt.
if [ -n "${E2E_KUBECONFIG:-}" ] && [ -n "${CLUSTER_SH:-}" ] && [ -f "${CLUSTER_SH:-}" ]; then
  env -u E2E_KUBECONFIG WORKLOAD_GATES=GenericWorkload=true \
    APISERVER_PORT=16643 ETCD_PORT=12479 SCHEDULER_PORT=10359 CONTROLLER_MANAGER_PORT=10357 \
    bash scripts/e2e-cluster.sh cargo test --workspace --test e2e -- --nocapture \
    pod_groups_without_topology_aware_scheduling podgroup_diff::
else
  echo "skipped: needs the control plane of scripts/e2e-cluster.sh (CLUSTER_SH)"
fi

step "CompositePodGroups (a third control plane with the CompositePodGroup gate and scheduling.k8s.io/v1alpha3)"
# kube 1.37's alpha CompositePodGroup gate and its API version are off on the control planes
# above; the test comparing a two-level hierarchy with kube-scheduler runs on one that has them.
if [ -n "${E2E_KUBECONFIG:-}" ] && [ -n "${CLUSTER_SH:-}" ] && [ -f "${CLUSTER_SH:-}" ]; then
  env -u E2E_KUBECONFIG \
    WORKLOAD_GATES=GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true \
    WORKLOAD_API_VERSIONS=scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true \
    APISERVER_PORT=16743 ETCD_PORT=12579 SCHEDULER_PORT=10459 CONTROLLER_MANAGER_PORT=10457 \
    bash scripts/e2e-cluster.sh cargo test --workspace --test e2e -- --nocapture composite_pod_group
else
  echo "skipped: needs the control plane of scripts/e2e-cluster.sh (CLUSTER_SH)"
fi

step "bench smoke (criterion in test mode: each benchmark runs once; the load tools, tiny)"
# Checks that the benchmarks still run; no timing is judged. docs/performance.md has the full runs.
# `cargo test` runs each criterion benchmark once in test mode, in the test profile whose
# dependencies the suite above built (`cargo bench -- --test` would build them all again).
cargo test --workspace --bench engine
cargo build -q --workspace --bins  # --workspace: reuses cargo test's dependency builds
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug"
"$BIN/placement-load" --replicas 2 --nodes 200 --pods 2000 --batch-size 32 --batches 6 \
  --rank-samples 20 --delta-samples 3 --in-flight 2
"$BIN/binder-memory" --nodes 100 --pods 1000 --pending 50 --timeout-secs 120
step "cluster-bench smoke (placement, kube-scheduler and raw Bindings on the control plane, tiny)"
if [ -n "${E2E_KUBECONFIG:-}" ]; then
  # placement, kube-scheduler (when its binary is found) and raw Bindings on the real cluster, tiny.
  KUBECONFIG="$E2E_KUBECONFIG" bash scripts/cluster-bench.sh --smoke
  # The same with a device claim per pod, and with gang PodGroups (skipped, saying so, on a cluster
  # without the Workload API).
  KUBECONFIG="$E2E_KUBECONFIG" bash scripts/cluster-bench.sh --smoke --workload dra
  KUBECONFIG="$E2E_KUBECONFIG" bash scripts/cluster-bench.sh --smoke --workload podgroups
else
  echo "cluster-bench smoke skipped: E2E_KUBECONFIG is not set"
fi

step "the OCI images: built without a daemon, checked and run (scripts/images.sh, scripts/images-check.py)"
WAIT_START=$SECONDS
wait "$RELEASE_PID" || { cat "$RELEASE_LOG" >&2; echo "the release build (started with cargo test) failed" >&2; exit 1; }
RELEASE_PID=""
echo "the release build (started with cargo test) finished $((SECONDS - WAIT_START)) s after this step began"
# From the release binaries (the README's `cargo run --release` commands, run last, reuse that
# build), stripped in the images. The check starts each image with runc where it can, and says
# why not. Packed twice from the same binaries: the same digests.
bash scripts/images.sh
python3 scripts/images-check.py
again=$(mktemp -d)
bash scripts/images.sh --binaries "${CARGO_TARGET_DIR:-$ROOT/target}/release" --out "$again" >/dev/null
for image in scheduler-service binder-agent; do
  cmp "dist/images/$image/index.json" "$again/$image/index.json" ||
    { echo "images.sh: $image built twice from the same binary has two digests" >&2; exit 1; }
done
rm -rf "$again"
echo "images.sh: the same binaries give the same image digests"

step "the krew manifest: validated by krew, installed by krew (scripts/krew-check.sh)"
# The debug kubectl-placement built just above stands in for the stripped release build.
bash scripts/krew-check.sh --binary "$BIN/kubectl-placement"

# --- Later steps go here (each as: step "..."; command) ---
step "Go and Python client tests (scripts/clients-test.sh)"; bash scripts/clients-test.sh

step "every command README.md gives a new user (scripts/readme-commands.py)"
# Read from the README itself (small sizes where a command takes them); a command no rule knows
# fails the step. The ones needing a cluster run against $E2E_KUBECONFIG, or are skipped saying so.
python3 scripts/readme-commands.py

step "done"
echo
echo "placement tests: all steps passed"
