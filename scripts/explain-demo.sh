#!/usr/bin/env bash
# The cluster of the `kubectl placement explain` examples (README, docs/explain.md), on a cluster
# without kubelets such as ../shared/k8s/cluster.sh's: Node objects whose status is patched in,
# and pods that name placement-scheduler (run no binder meanwhile, or they get bound).
#
#   KUBECONFIG=/tmp/placement-k8s/pki/admin.kubeconfig scripts/explain-demo.sh up
#   PATH=$PWD/target/debug:$PATH kubectl placement explain web -n demo
#   scripts/explain-demo.sh down
#
# Nodes (prefix demo-): big (8 cpu, disk=ssd), small (4 cpu, disk=ssd, with the bound pod
# `filler` using 2500m and 6Gi), gpu (taint gpu=true:NoSchedule), hdd (disk=hdd), cordoned.
# Pods in the namespace demo: web (1 cpu, nodeSelector disk=ssd), huge (10 cpu, same), filler.
set -euo pipefail

NODES="big:8:ssd small:4:ssd gpu:8:ssd hdd:8:hdd cordoned:8:ssd"

pod() { # name cpu memory [nodeName]
  local node=""
  [ -n "${4:-}" ] && node="\"nodeName\": \"demo-$4\","
  cat <<JSON
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$1", "namespace": "demo"},
 "spec": {$node "schedulerName": "placement-scheduler", "nodeSelector": {"disk": "ssd"},
  "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
   "resources": {"requests": {"cpu": "$2", "memory": "$3"}}}]}}
JSON
}

case "${1:-}" in
up)
  for spec in $NODES; do
    IFS=: read -r name cpu disk <<<"$spec"
    taints='[]'; unschedulable=false
    [ "$name" = gpu ] && taints='[{"key": "gpu", "value": "true", "effect": "NoSchedule"}]'
    [ "$name" = cordoned ] && unschedulable=true
    kubectl create -f - <<JSON
{"apiVersion": "v1", "kind": "Node",
 "metadata": {"name": "demo-$name", "labels": {"kubernetes.io/hostname": "demo-$name", "disk": "$disk"}},
 "spec": {"taints": $taints, "unschedulable": $unschedulable}}
JSON
    kubectl patch node "demo-$name" --subresource=status --type=merge -p "{\"status\": {
      \"allocatable\": {\"cpu\": \"$cpu\", \"memory\": \"8Gi\", \"pods\": \"110\"},
      \"capacity\": {\"cpu\": \"$cpu\", \"memory\": \"8Gi\", \"pods\": \"110\"},
      \"conditions\": [{\"type\": \"Ready\", \"status\": \"True\"}]}}"
  done
  kubectl create namespace demo
  pod filler 2500m 6Gi small | kubectl create -f -
  pod web 1 64Mi | kubectl create -f -
  pod huge 10 64Mi | kubectl create -f -
  ;;
down)
  kubectl delete namespace demo --ignore-not-found --wait=false
  for spec in $NODES; do kubectl delete node "demo-${spec%%:*}" --ignore-not-found; done
  ;;
*)
  echo "usage: scripts/explain-demo.sh up|down" >&2
  exit 2
  ;;
esac
