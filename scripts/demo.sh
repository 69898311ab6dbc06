#!/usr/bin/env bash
# The main job, end to end: build scheduler-service (release), start it on 127.0.0.1:50051, and
# call every PlacementService method through server reflection with grpcurl (no proto files),
# using the sample requests in scripts/sample/. The server is stopped on exit, whatever happens.
#
# Env: PLACEMENT_ADDR / PLACEMENT_METRICS_ADDR change the addresses; SCHEDULER_BIN runs a
# prebuilt binary instead of building one.
set -euo pipefail

ROOT=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$ROOT"
ADDR=${PLACEMENT_ADDR:-127.0.0.1:50051}
METRICS_ADDR=${PLACEMENT_METRICS_ADDR:-127.0.0.1:9464}
SAMPLE="$ROOT/scripts/sample"

header() { printf '\n==> %s\n' "$*"; }

header "tools"
bash scripts/install-tools.sh
GRPCURL="$ROOT/.tools/bin/grpcurl"
call() { # call METHOD [grpcurl args...]: one RPC over plaintext, answer as indented JSON
  # (-emit-defaults so zero scores and counts show instead of vanishing)
  local method=$1; shift
  "$GRPCURL" -plaintext -emit-defaults -max-time 30 "$@" "$ADDR" "placement.v1.PlacementService/$method"
}

if [ -z "${SCHEDULER_BIN:-}" ]; then
  header "cargo build --release -p scheduler-service"
  cargo build --release -p scheduler-service
  SCHEDULER_BIN="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/scheduler-service"
fi

header "start $SCHEDULER_BIN --listen $ADDR --metrics-listen $METRICS_ADDR"
LOG=$(mktemp)
"$SCHEDULER_BIN" --listen "$ADDR" --metrics-listen "$METRICS_ADDR" >"$LOG" 2>&1 &
PID=$!
# SIGTERM starts a graceful shutdown; wait so the port is free when the script returns.
trap 'kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null; rm -f "$LOG"' EXIT

# Bounded wait (60 x 0.5 s) for the health service; bail out early if the process died
# (e.g. the port is taken), so we never talk to some other server on that port.
for i in $(seq 60); do
  kill -0 "$PID" 2>/dev/null || { echo "scheduler-service exited:"; cat "$LOG"; exit 1; }
  if "$GRPCURL" -plaintext -max-time 1 "$ADDR" grpc.health.v1.Health/Check 2>/dev/null | grep -q '"SERVING"'; then
    echo "serving after $i check(s)"
    break
  fi
  [ "$i" -lt 60 ] || { echo "scheduler-service not healthy after 30 s:"; cat "$LOG"; exit 1; }
  sleep 0.5
done

header "services (server reflection)"
"$GRPCURL" -plaintext "$ADDR" list

header "ListPolicies"
call ListPolicies -d '{}'

header "SyncSnapshot (scripts/sample/snapshot.json: 5 nodes, 5 bound pods)"
sync=$(call SyncSnapshot -d @ <"$SAMPLE/snapshot.json")
echo "$sync"
SNAPSHOT_ID=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshotId"])' <<<"$sync")

# The batch and rank samples are templates: put the snapshot id just returned into them.
with_snapshot() {
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r["snapshot"]={"snapshotId": sys.argv[2]}; print(json.dumps(r))' "$1" "$SNAPSHOT_ID"
}

header "Schedule (scripts/sample/batch.json: 6 pods, huge-0 fits nowhere)"
schedule=$(with_snapshot "$SAMPLE/batch.json" | call Schedule -d @)
echo "$schedule"
# One line per pod, in request order, for a quick read.
python3 -c '
import json, sys
pods = json.load(open(sys.argv[1]))["pods"]
for pod, p in zip(pods, json.loads(sys.argv[2])["placements"]):
    where = p.get("nodeName") or "unschedulable: " + p["unschedulable"]["message"]
    name = pod["namespace"] + "/" + pod["name"]
    print(f"  {name:<18} -> {where}")
' "$SAMPLE/batch.json" "$schedule"

header "Rank (scripts/sample/rank.json: web-2, topK 3)"
with_snapshot "$SAMPLE/rank.json" | call Rank -d @

header "demo done; stopping scheduler-service"
