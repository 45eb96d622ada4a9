#!/bin/bash
# Profile of redis-server and the worker while one `bench_peer worker` drains a
# W1 or W2 backlog (not part of CI): a private redis-server on $PORT (6412),
# N jobs bulk-enqueued, `perf record` on both processes for $SECS seconds in
# the middle of the run, then the top symbols of each (perf report --no-children)
# and Redis commands and CPU per job over the same window (INFO).
# usage: benches/profile.sh <w1|w2> <concurrency> [N] [path to bench_peer]
#   perf must be allowed to attach to processes of this user (perf_event_paranoid <= 2).
#   The script stops only the processes it started, by PID.
WL=${1:-w1}; C=${2:-10}; N=${3:-200000}; BIN=${4:-target/release/examples/bench_peer}
PORT=${PORT:-6412}; SECS=${SECS:-4}; OUT=${OUT:-target/profile-$WL}
R="redis-cli -p $PORT"
if $R ping >/dev/null 2>&1; then
    echo "error: something already answers on port $PORT; set PORT to a free one" >&2
    exit 1
fi
mkdir -p "$OUT"
redis-server --port $PORT --save '' --appendonly no --logfile "$OUT/redis.log" >/dev/null &
RP=$!
WP=""
cleanup() {
    [ -n "$WP" ] && kill "$WP" 2>/dev/null
    kill "$RP" 2>/dev/null; wait "$RP" 2>/dev/null
}
trap cleanup EXIT
for i in $(seq 50); do $R ping >/dev/null 2>&1 && break; sleep 0.1; done
export REDIS_PORT=$PORT
$BIN enqueue --n $N --mode bulk --workload $WL >/dev/null
$BIN worker --concurrency $C --workload $WL & WP=$!
# let it reach its steady state, then measure a window
while [ "$($R zcard 'leasehold:{bench}:done')" -lt $((N / 10)) ]; do sleep 0.05; done
$R config resetstat >/dev/null
cpu0=$($R info cpu | awk -F: '/used_cpu_sys:|used_cpu_user:/{s+=$2} END{print s}')
d0=$($R zcard 'leasehold:{bench}:done')
w0=$(awk '{print $14+$15}' /proc/$WP/stat)
perf record -q -F 999 -g -p $RP -o "$OUT/redis.data" -- sleep $SECS 2>/dev/null &
PR=$!
perf record -q -F 999 -g -p $WP -o "$OUT/worker.data" -- sleep $SECS 2>/dev/null
wait $PR
d1=$($R zcard 'leasehold:{bench}:done')
w1=$(awk '{print $14+$15}' /proc/$WP/stat)
cpu1=$($R info cpu | awk -F: '/used_cpu_sys:|used_cpu_user:/{s+=$2} END{print s}')
jobs=$((d1 - d0))
calls=$($R info commandstats | awk -F'[=,:]' '/^cmdstat_/{s+=$3} END{print s}')
echo "$WL C=$C jobs in window=$jobs redis_cpu_us/job=$(echo "($cpu1-$cpu0)*1000000/$jobs" | bc) worker_cpu_us/job=$(echo "($w1-$w0)*10000/$jobs" | bc) cmds/job=$(echo "scale=1;$calls/$jobs" | bc)"
$R info commandstats | sort -t= -k3 -n -r | head -12 > "$OUT/commandstats.txt"
for p in redis worker; do
    perf report -i "$OUT/$p.data" --no-children --stdio --percent-limit 1.5 2>/dev/null \
        | grep -E '^ +[0-9]' | head -25 > "$OUT/$p-top.txt"
    echo "== $p: top symbols (self time) =="; cat "$OUT/$p-top.txt"
done
