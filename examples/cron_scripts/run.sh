#!/bin/bash
# The cron-to-leasehold demo in one command: bash examples/cron_scripts/run.sh
#
# Builds the `leasehold` binary, starts a throwaway redis-server on a free
# port (stopped by its PID when the demo ends), copies pipelines.toml and the
# scripts into a temporary directory (the hourly schedules' start moved to
# five hours ago, so the catch-up has windows to run), and runs
# `leasehold worker --pipelines pipelines.toml`. It shows: the catch-up of
# both sources and last night's rollup; a fetch that exited 1 (an uncaught
# Python exception) retried and resumed at its step; a backfill of the hours
# before the start, then the same backfill again (nothing new); a schedule
# whose ticks fail raising the notice hook once, after a reload (SIGHUP) of an
# edited file; and what the warehouse holds.
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
cp "$HERE"/fetch.py "$HERE"/validate.sh "$HERE"/load.py "$HERE"/rollup.py "$HERE"/notify.sh "$WORK/"
hours_ago() {
    python3 -c 'import datetime as d, sys; t = d.datetime.now(d.timezone.utc).replace(minute=15, second=0, microsecond=0) - d.timedelta(hours=int(sys.argv[1])); print(t.strftime("%Y-%m-%dT%H:%M:%SZ"))' "$1"
}
START=$(hours_ago 5)
sed "s/^start = .*/start = \"$START\"/" "$HERE/pipelines.toml" > "$WORK/pipelines.toml"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$PORT" --save '' --appendonly no --logfile "$WORK/redis.log" &
RP=$!
export LEASEHOLD_REDIS_URL=redis://127.0.0.1:$PORT
for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

# the jobs of queue `sales` that ended
ended() {
    "$BIN" --json jobs --queue sales --limit 200 2>/dev/null | python3 -c '
import json, sys
try:
    page = json.load(sys.stdin)
except ValueError:
    print(0); sys.exit()
jobs = page.get("jobs", page) if isinstance(page, dict) else page
print(sum(1 for j in jobs if j.get("state") in ("SUCCEEDED", "FAILED", "CANCELLED")))' || echo 0
}
wait_ended() {
    for _ in $(seq 600); do
        [ "$(ended)" -ge "$1" ] && return 0
        sleep 0.5
    done
    echo "(still waiting for $1 jobs to end; see $WORK/worker.log)"
}

echo "== the pipelines file, checked (every mistake would be listed at once, with its line)"
(cd "$WORK" && "$BIN" worker --pipelines pipelines.toml --check)
echo
echo "== the worker catches up the hours since $START for both sources, and runs last night's rollup"
(cd "$WORK" && RUST_LOG=info exec "$BIN" worker --pipelines pipelines.toml 2> worker.log) &
WP=$!
wait_ended 11
"$BIN" jobs --queue sales
echo
echo "== a fetch that raised an exception (exit 1) on its first attempt: retried, resumed at fetch"
RETRIED=$("$BIN" --json jobs --queue sales --limit 100 | python3 -c '
import json, sys
page = json.load(sys.stdin)
jobs = page.get("jobs", page) if isinstance(page, dict) else page
print(next((j["id"] for j in jobs if j.get("attempt", 1) > 1 and "shop-a" in (j.get("resource") or "")), jobs[0]["id"]))')
"$BIN" show "$RETRIED"
echo
FROM=$(hours_ago 8)
echo "== a backfill of shop-a's three hours before the start ($FROM to $START), then the same again"
"$BIN" backfill hourly_sales --schedule shop-a-hourly --from "$FROM" --to "$START"
"$BIN" backfill hourly_sales --schedule shop-a-hourly --from "$FROM" --to "$START"
wait_ended 14
echo
echo "== an edited file, reloaded with SIGHUP: a partner feed whose schema (pinned to one hour, as a"
echo "   feed that stopped publishing) refuses every window after the first: its schedule fails"
PINNED=$(hours_ago 2 | sed 's/:15:00Z$/:00:00Z/')
cat >> "$WORK/pipelines.toml" <<TOML

[[pipeline]]
name = "partner_feed"
queue = "sales"
input_schema = { type = "object", properties = { window = { type = "object", properties = { start = { type = "string", pattern = "^$PINNED\$" } } } } }
[[pipeline.schedule]]
name = "partner-hourly"
every = "1h"
start = "$PINNED"
catch_up = "all"
[[pipeline.step]]
name = "import"
run = ["true"]
[pipeline.notify]
run = ["sh", "notify.sh"]
TOML
(cd "$WORK" && "$BIN" worker --pipelines pipelines.toml --check) >/dev/null
kill -HUP "$WP"
for _ in $(seq 200); do
    grep -q schedule_failing "$WORK/data/notices.jsonl" 2>/dev/null && break
    sleep 0.2
done
"$BIN" schedules | grep -A1 '^partner-hourly' || true
echo
echo "== the notices the hook received (cron's MAILTO: examples/notify/mail.sh mails them)"
python3 - "$WORK/data/notices.jsonl" <<'PY'
import json, sys
try:
    lines = open(sys.argv[1]).read().split("\n")
except FileNotFoundError:
    lines = []
for line in lines:
    if line.strip():
        print("  " + json.loads(line)["summary"])
PY
echo
echo "== the warehouse (SQLite): rows loaded per source and hour, with the fence of the load"
python3 - "$WORK/data/warehouse.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for row in db.execute("SELECT source, window_start, rows, fence FROM loads ORDER BY source, window_start"):
    print("  %s  %s  %3d rows  fence %d" % row)
for row in db.execute("SELECT day, source, orders, amount FROM daily ORDER BY day, source"):
    print("  daily %s  %s  %3d orders  %.2f" % row)
PY
