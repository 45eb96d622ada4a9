#!/bin/bash
# The cron-to-leasehold demo in one command: bash examples/cron_scripts/run.sh
#
# Builds the `leasehold` binary, starts a throwaway redis-server on a free
# port (stopped by its PID when the demo ends), copies pipelines.toml and the
# three scripts into a temporary directory (with the schedules' start moved to
# five hours ago, so the catch-up has windows to run), runs
# `leasehold worker --pipelines pipelines.toml` until every caught-up window
# ended, and shows what leasehold recorded and what the warehouse holds.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cargo build -q -p leasehold-cli --manifest-path "$ROOT/Cargo.toml"
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug/leasehold
WORK=$(mktemp -d)
RP=""
WP=""
cleanup() {
    [ -n "$WP" ] && kill "$WP" 2>/dev/null && wait "$WP" 2>/dev/null
    [ -n "$RP" ] && kill "$RP" 2>/dev/null && wait "$RP" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
cp "$HERE/fetch.py" "$HERE/validate.sh" "$HERE/load.py" "$WORK/"
START=$(python3 -c 'import datetime as d; t = d.datetime.now(d.timezone.utc).replace(minute=0, second=0, microsecond=0) - d.timedelta(hours=5); print(t.strftime("%Y-%m-%dT%H:%M:%SZ"))')
sed "s/^start = .*/start = \"$START\"/" "$HERE/pipelines.toml" > "$WORK/pipelines.toml"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$PORT" --save '' --appendonly no --logfile "$WORK/redis.log" &
RP=$!
export LEASEHOLD_REDIS_URL=redis://127.0.0.1:$PORT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

echo "== the pipelines file, checked"
"$BIN" worker --pipelines "$WORK/pipelines.toml" --check
echo
echo "== the worker catches up the windows since $START (logs: $WORK/worker.log)"
RUST_LOG=info "$BIN" worker --pipelines "$WORK/pipelines.toml" 2> "$WORK/worker.log" &
WP=$!
want=10
for _ in $(seq 600); do
    done=$("$BIN" --json jobs --queue sales --limit 100 2>/dev/null | python3 -c '
import json, sys
try:
    page = json.load(sys.stdin)
except ValueError:
    print(0); sys.exit()
jobs = page.get("jobs", page) if isinstance(page, dict) else page
print(sum(1 for j in jobs if j.get("state") in ("SUCCEEDED", "FAILED", "CANCELLED")))') || done=0
    [ "$done" -ge "$want" ] && break
    sleep 0.5
done
echo
"$BIN" jobs --queue sales
echo
echo "== a window whose fetch exited 75 (retryable) on its first attempt: the second attempt resumed at fetch"
RETRIED=$("$BIN" --json jobs --queue sales --limit 100 | python3 -c '
import json, sys
page = json.load(sys.stdin)
jobs = page.get("jobs", page) if isinstance(page, dict) else page
print(next((j["id"] for j in jobs if j.get("attempt", 1) > 1), jobs[0]["id"]))')
"$BIN" show "$RETRIED"
echo
echo "== the warehouse (SQLite): rows loaded per source and window, with the fence of the load"
python3 - "$WORK/data/warehouse.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for row in db.execute("SELECT source, window_start, rows, fence FROM loads ORDER BY source, window_start"):
    print("  %s  %s  %3d rows  fence %d" % row)
PY
