#!/usr/bin/env bash
# Placement against kube-scheduler and the raw Binding ceiling on a real control plane
# (tests/src/bin/cluster-bench/main.rs; docs/performance-cluster.md has the results and how to read them).
#
#   scripts/cluster-bench.sh [cluster-bench run flags]   e.g. --nodes 1000 --pods 5000
#   scripts/cluster-bench.sh --smoke                      20 nodes, 50 pods: checks that it runs
#   scripts/cluster-bench.sh --smoke --workload dra       20 nodes of 8 devices, 30 pods with a claim
#                                                         (needs kube-controller-manager)
#   scripts/cluster-bench.sh --smoke --workload podgroups 2 racks of 20 nodes, 4 PodGroups (140 pods);
#                                                         skipped, saying so, without the Workload API
#
# Environment:
#   KUBECONFIG (or E2E_KUBECONFIG)  admin kubeconfig of the control plane (required)
#   KUBE_SCHEDULER_BIN  kube-scheduler binary; default: the one ../shared/k8s/cluster.sh unpacked
#                       (${K8S_STATE:-${TMPDIR:-/tmp}/placement-k8s}/bin/kube-scheduler) if present;
#                       without one the kube-scheduler contender is left out (said so)
#   ETCD_METRICS_URL    etcd's plain-HTTP /metrics for its CPU time; default with K8S_STATE set (a
#                       cluster.sh control plane): http://127.0.0.1:${ETCD_PORT:-2379}/metrics
#   PROFILE             cargo profile of the binaries: release (default) or debug (--smoke's default)
set -euo pipefail

ROOT=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$ROOT"

KUBECONFIG=${KUBECONFIG:-${E2E_KUBECONFIG:-}}
if [[ -z $KUBECONFIG ]]; then
  echo "cluster-bench: set KUBECONFIG (or E2E_KUBECONFIG) to the control plane's admin kubeconfig" >&2
  exit 2
fi
export KUBECONFIG

smoke=0
if [[ ${1:-} == --smoke ]]; then
  smoke=1
  shift
fi
PROFILE=${PROFILE:-$([[ $smoke == 1 ]] && echo debug || echo release)}

flags=()
[[ $PROFILE == release ]] && flags+=(--release)
cargo build -q "${flags[@]}" -p scheduler-service --bin scheduler-service -p binder-agent --bin binder-agent \
  -p placement-tests --bin cluster-bench
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE"

KUBE_SCHEDULER_BIN=${KUBE_SCHEDULER_BIN:-${K8S_STATE:-${TMPDIR:-/tmp}/placement-k8s}/bin/kube-scheduler}
args=(--service-bin "$BIN/scheduler-service" --binder-bin "$BIN/binder-agent")
if [[ -x $KUBE_SCHEDULER_BIN ]]; then
  args+=(--kube-scheduler-bin "$KUBE_SCHEDULER_BIN")
  contenders=raw,raw-events,kube-scheduler,placement
else
  echo "cluster-bench: no kube-scheduler binary at $KUBE_SCHEDULER_BIN (set KUBE_SCHEDULER_BIN): kube-scheduler left out" >&2
  contenders=raw,raw-events,placement
fi
if [[ -z ${ETCD_METRICS_URL:-} && -n ${K8S_STATE:-} && -f $K8S_STATE/run/etcd.pid ]]; then
  ETCD_METRICS_URL=http://127.0.0.1:${ETCD_PORT:-2379}/metrics
fi
[[ -n ${ETCD_METRICS_URL:-} ]] && args+=(--etcd-metrics-url "$ETCD_METRICS_URL")

if [[ $smoke == 1 ]]; then
  # Own names, so it can run beside other users of the cluster; every pod must be bound (and the
  # workload's checks pass).
  workload=plain
  for ((i = 1; i <= $#; i++)); do
    case ${!i} in
      --workload) j=$((i + 1)); workload=${!j:-plain} ;;
      --workload=*) workload=${!i#--workload=} ;;
    esac
  done
  case $workload in
    dra) size=(--nodes 20 --pods 30) ;;
    podgroups) size=(--nodes 40 --rack-nodes 20 --groups 4 --skip-unserved) ;;
    *) size=(--nodes 20 --pods 50 --paced-pods 20 --paced-rate 20) ;;
  esac
  exec "$BIN/cluster-bench" run "${args[@]}" --contenders "$contenders" "${size[@]}" \
    --idle-window-secs 0 --prefix "bench-smoke-$$" --timeout-secs 300 "$@"
fi
# Your --contenders replace the default list.
[[ " $* " == *" --contenders"* ]] || args+=(--contenders "$contenders")
exec "$BIN/cluster-bench" run "${args[@]}" "$@"
