#!/usr/bin/env bash
# Runs a command with a real, local Kubernetes control plane when one can be started, then stops
# it whatever happened:
#
#   scripts/e2e-cluster.sh scripts/test.sh
#
# The control plane comes from $CLUSTER_SH (default: ../shared/k8s/cluster.sh beside the
# repository): etcd, kube-apiserver, kube-controller-manager and the real kube-scheduler on
# 127.0.0.1 (with the Workload API: PodGroups, gang and topology-aware scheduling), state in a
# fresh temporary folder. The command then sees:
#   E2E_KUBECONFIG             the admin kubeconfig (tests/tests/e2e*.rs, the client e2e tests)
#   E2E_RESTART_APISERVER      a command that restarts kube-apiserver (the API-server-restart
#                              tests); with E2E_RESTART_SIGNAL=KILL in its environment it kills
#                              the API server at once, as a crash or an OOM kill does
#   E2E_KUBE_SCHEDULER=1       the real kube-scheduler serves `default-scheduler` (comparison tests)
#   E2E_FEATURE_GATES          the kube feature gates the control plane runs with (WORKLOAD_GATES,
#                              or cluster.sh's default for --workload-api)
# When E2E_KUBECONFIG is already set (your own cluster), or no cluster script exists, the command
# runs as it is: the end-to-end tests use your cluster, or say they are skipped.
set -euo pipefail

ROOT=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
CLUSTER_SH=${CLUSTER_SH:-$ROOT/../shared/k8s/cluster.sh}
[ $# -gt 0 ] || { echo "usage: scripts/e2e-cluster.sh COMMAND [ARGS...]" >&2; exit 2; }

if [ "$1" = restart-apiserver ]; then
  # Used through E2E_RESTART_APISERVER: stop kube-apiserver, wait for it to exit, start it again.
  # kube-apiserver's graceful termination waits for open watches (and serves requests on open
  # connections meanwhile); after 10 s it is killed. E2E_RESTART_SIGNAL=KILL skips the grace.
  pid=$(cat "$K8S_STATE/run/kube-apiserver.pid")
  kill "-${E2E_RESTART_SIGNAL:-TERM}" "$pid"
  for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  exec bash "$CLUSTER_SH" up --controller-manager --scheduler --workload-api
fi

if [ -n "${E2E_KUBECONFIG:-}" ]; then
  echo "e2e-cluster: E2E_KUBECONFIG is set ($E2E_KUBECONFIG): using that cluster"
  exec "$@"
fi
if [ ! -f "$CLUSTER_SH" ]; then
  echo "e2e-cluster: no control plane script at $CLUSTER_SH: the end-to-end suite will be skipped"
  exec "$@"
fi

K8S_STATE=$(mktemp -d "${TMPDIR:-/tmp}/placement-e2e-k8s.XXXXXX")
export K8S_STATE
cluster() { bash "$CLUSTER_SH" "$@"; }
stop() {
  rc=$?
  echo "e2e-cluster: stopping the control plane ($K8S_STATE)"
  cluster down || true
  if [ "$rc" -ne 0 ]; then
    for log in "$K8S_STATE"/logs/*.log; do
      [ -f "$log" ] && { echo "--- last lines of $log"; tail -n 15 "$log"; }
    done
  fi
  rm -rf "$K8S_STATE"
  exit "$rc"
}
trap stop EXIT
trap 'exit 130' INT TERM

echo "e2e-cluster: starting a control plane with $CLUSTER_SH (state $K8S_STATE)"
E2E_KUBECONFIG=$(cluster up --controller-manager --scheduler --workload-api | tail -n 1)
export E2E_KUBECONFIG
export CLUSTER_SH
export E2E_RESTART_APISERVER="bash '$ROOT/scripts/e2e-cluster.sh' restart-apiserver"
export E2E_KUBE_SCHEDULER=1
# The gates cluster.sh gives the control plane (its default, or WORKLOAD_GATES): the in-process
# decision services of the tests decide under the same ones.
export E2E_FEATURE_GATES="${WORKLOAD_GATES:-GenericWorkload=true,TopologyAwareWorkloadScheduling=true}"
echo "e2e-cluster: E2E_KUBECONFIG=$E2E_KUBECONFIG"
echo "e2e-cluster: the end-to-end suite runs against $("$K8S_STATE/bin/kube-apiserver" --version) (kube-apiserver, kube-controller-manager, kube-scheduler)"
"$@"
