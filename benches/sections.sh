#!/bin/bash
# Where a settle call's Redis time goes (not part of CI): the function library a
# `bench_peer` loads, read back from a private redis-server (FUNCTION LIST
# WITHCODE), copied with timers added at the seams of `settle` (Redis TIME
# before and after each part, summed into the hash `prof`), loaded into a second
# private redis-server under the same name (so the worker, whose own FUNCTION
# LOAD then fails with "already exists", calls the timed copy), and one W1 or W2
# run on it as in benches/quick.sh. Prints, per job: Redis CPU, the time inside
# FCALL, the part of it spent in the commands the scripts ran (INFO
# commandstats), and each part of settle. A timer costs ~2 µs per seam per call
# (the `z_empty` line measures one), so the figures are for shares, not totals.
# The library's own file is never changed.
# usage: benches/sections.sh <w1|w2> [concurrency] [N] [path to bench_peer]
#   PORT=... picks the port (default 6413; the next one is used to read the library).
#   The script stops only the processes it started, by PID.
WL=${1:-w1}; C=${2:-10}; N=${3:-20000}; BIN=${4:-target/release/examples/bench_peer}
PORT=${PORT:-6413}; PORT2=$((PORT + 1))
R="redis-cli -p $PORT"
for p in $PORT $PORT2; do
    if redis-cli -p $p ping >/dev/null 2>&1; then
        echo "error: something already answers on port $p; set PORT to a free one" >&2
        exit 1
    fi
done
TMP=$(mktemp -d /tmp/sections.XXXXXX)
RP=""; RP2=""; WP=""
cleanup() {
    [ -n "$WP" ] && kill "$WP" 2>/dev/null
    for p in $RP $RP2; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
wait_ping() { for i in $(seq 50); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }

# 1. the library as the bench_peer loads it
redis-server --port $PORT2 --save '' --appendonly no --logfile "$TMP/r2.log" >/dev/null &
RP2=$!
wait_ping $PORT2 || { echo "error: redis-server did not start" >&2; exit 1; }
REDIS_PORT=$PORT2 $BIN enqueue --n 1 --mode bulk --workload "$WL" >/dev/null || exit 1
redis-cli -p $PORT2 --raw FUNCTION LIST WITHCODE | awk 'f{print} /^library_code$/{f=1}' > "$TMP/lib.lua"
kill $RP2; wait $RP2 2>/dev/null; RP2=""

# 2. the timed copy: a seam before each named line of settle's body
python3 - "$TMP/lib.lua" "$TMP/timed.lua" <<'EOF'
import re, sys
src = open(sys.argv[1]).read().split('\n')
start = next(i for i, l in enumerate(src) if re.search(r"register_function\('leasehold_[0-9a-f]+_settle'", l))
seams = [
    ("local bad = common_args('settle')",
     "local __p = 0 do local t = redis.call('TIME') __p = t[1] * 1000000 + t[2] end "
     "local function __m(n) local t = redis.call('TIME') local c = t[1] * 1000000 + t[2] "
     "redis.call('HINCRBY', 'prof', n, c - __p) redis.call('HINCRBY', 'prof', n .. ':calls', 1) "
     "t = redis.call('TIME') __p = t[1] * 1000000 + t[2] end"),
    ("local PURGE_MIN, PURGE_MAX", "__m('1 common and call arguments')"),
    ("local k, a, v, forged = walk(false)", "__m('2 closures') __m('z_empty (one timer)')"),
    ("walk(true)", "__m('3 every operation checked, keys and values')"),
    ("flush_indexes(batch.ix)", "__m('4 the operations run')"),
    ("if n_lease > 0 then", "__m('5 index writes')"),
    ("if ended > 0 then purge", "__m('6 lease')"),
    ("trim_events(batch.events)", "__m('7 retention')"),
    ("flush_stats(batch.stats)", "__m('8 events written')"),
    ("return out", "__m('9 outcome counts')"),
]
out, s = [], 0
for i, l in enumerate(src):
    if i > start and s < len(seams) and l.startswith(seams[s][0]):
        out.append(seams[s][1]); s += 1
    out.append(l)
if s != len(seams):
    sys.exit('settle has changed: seam %r not found' % seams[s][0])
open(sys.argv[2], 'w').write('\n'.join(out))
EOF
[ -s "$TMP/timed.lua" ] || exit 1

# 3. a run on the timed copy
redis-server --port $PORT --save '' --appendonly no --logfile "$TMP/r.log" >/dev/null &
RP=$!
wait_ping $PORT || { echo "error: redis-server did not start" >&2; exit 1; }
loaded=$($R -x FUNCTION LOAD < "$TMP/timed.lua")
case "$loaded" in leasehold_*) ;; *) echo "error: the timed library did not load: $loaded" >&2; exit 1 ;; esac
export REDIS_PORT=$PORT
$BIN enqueue --n $N --mode bulk --workload "$WL" >/dev/null || exit 1
$R del prof >/dev/null
$R config resetstat >/dev/null
cpu0=$($R info cpu | awk -F: '/used_cpu_sys:|used_cpu_user:/{s+=$2} END{print s}')
$BIN worker --concurrency $C --workload "$WL" >"$TMP/worker.log" 2>&1 & WP=$!
deadline=$((SECONDS + 300))
while [ "$($R zcard 'leasehold:{bench}:done')" -lt "$N" ]; do
    [ $SECONDS -gt $deadline ] && { echo "error: the run did not finish" >&2; tail -3 "$TMP/worker.log" >&2; exit 1; }
    sleep 0.02
done
kill $WP; wait $WP 2>/dev/null; WP=""
cpu1=$($R info cpu | awk -F: '/used_cpu_sys:|used_cpu_user:/{s+=$2} END{print s}')
stats=$($R info commandstats)
fcall=$(echo "$stats" | awk -F'[=,:]' '/^cmdstat_fcall:/{print $5}')
calls=$(echo "$stats" | awk -F'[=,:]' '/^cmdstat_fcall:/{print $3}')
# the commands the scripts ran, less the timers' own TIME and HINCRBY (and ZCARD,
# which this script polls with; a script's own ZCARD is left out with it)
inner=$(echo "$stats" | awk -F'[=,:]' '/^cmdstat_/ && !/fcall|info|config|cmdstat_time|hincrby|zcard/{s+=$5} END{print s+0}')
echo "$WL C=$C N=$N settle calls per job $(echo "scale=2; $calls / $N" | bc)"
echo "per job: Redis CPU $(echo "scale=1; ($cpu1 - $cpu0) * 1000000 / $N" | bc) µs, inside FCALL $(echo "scale=1; $fcall / $N" | bc) µs (timers included), of which commands $(echo "scale=1; $inner / $N" | bc) µs"
echo "settle, by part (µs per call, µs per job):"
$R --raw hgetall prof | paste - - | grep -v ':calls' | sort | while IFS=$'\t' read -r name us; do
    n=$($R hget prof "$name:calls")
    printf '  %-48s %7.1f %7.1f\n' "$name" "$(echo "scale=2; $us / $n" | bc)" "$(echo "scale=2; $us / $N" | bc)"
done
