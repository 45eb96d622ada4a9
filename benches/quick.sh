#!/bin/bash
# Quick A/B throughput check (not part of CI): a private redis-server on port 6411,
# N jobs bulk-enqueued, one `bench_peer worker`, jobs/s until ZCARD done = N, Redis CPU
# and commands per job from INFO, used_memory after minus before the enqueue per job.
# VERBOSE=1 adds INFO commandstats, the MEMORY USAGE of one finished job, of the done
# index and the events stream per job, and the HGETALL of that job.
# usage: benches/quick.sh <w1|w2> <concurrency> [N] [path to bench_peer]   (KEEP=1 leaves Redis running;
#   PORT=... picks another port; the script stops only the processes it started, by PID)
#   cargo build --release --example bench_peer && benches/quick.sh w1 10 20000 target/release/examples/bench_peer
WL=${1:-w1}; C=${2:-10}; N=${3:-20000}; BIN=${4:-target/release/examples/bench_peer}
PORT=${PORT:-6411}
R="redis-cli -p $PORT"
if $R ping >/dev/null 2>&1; then
    echo "error: something already answers on port $PORT; set PORT to a free one" >&2
    exit 1
fi
# This script's own redis-server, in the foreground of a background job: it is
# stopped by its PID (below, or on any exit), never by a name pattern.
redis-server --port $PORT --save '' --appendonly no --logfile /tmp/r$PORT.log >/dev/null &
RP=$!
WP=""
cleanup() {
    [ -n "$WP" ] && kill "$WP" 2>/dev/null
    if [ -z "$KEEP" ]; then kill "$RP" 2>/dev/null; wait "$RP" 2>/dev/null; fi
}
trap cleanup EXIT
for i in $(seq 50); do $R ping >/dev/null 2>&1 && break; sleep 0.1; done
export REDIS_PORT=$PORT
mem0=$($R info memory | awk -F: '/^used_memory:/{print $2+0}')
$BIN enqueue --n $N --mode bulk --workload $WL >/dev/null
$R config resetstat >/dev/null
cpu0=$($R info cpu | awk -F: '/used_cpu_sys:|used_cpu_user:/{s+=$2} END{print s}')
t0=$(date +%s.%N)
$BIN worker --concurrency $C --workload $WL & WP=$!
while true; do d=$($R zcard 'leasehold:{bench}:done'); [ "$d" -ge "$N" ] && break; sleep 0.01; done
t1=$(date +%s.%N)
wcpu=$(awk "{print (\$14+\$15)/100}" /proc/$WP/stat)
kill $WP; wait $WP 2>/dev/null; WP=""
cpu1=$($R info cpu | awk -F: '/used_cpu_sys:|used_cpu_user:/{s+=$2} END{print s}')
mem1=$($R info memory | awk -F: '/^used_memory:/{print $2+0}')
calls=$($R info commandstats | awk -F'[=,:]' '/^cmdstat_/{s+=$3} END{print s}')
ev=$($R info commandstats | awk -F'[=,:]' '/^cmdstat_(fcall|evalsha):/{s+=$3} END{print s+0}')
echo "$WL C=$C N=$N jobs/s=$(echo "$N/($t1-$t0)" | bc) redis_cpu_us/job=$(echo "($cpu1-$cpu0)*1000000/$N" | bc) script_calls/job=$(echo "scale=2;$ev/$N"|bc) inner_cmds/job=$(echo "scale=1;$calls/$N"|bc) worker_cpu_s=$wcpu mem_bytes/job=$(( (mem1 - mem0) / N ))"
if [ -n "$VERBOSE" ]; then
    $R info commandstats | sort -t= -k2 -n -r | head -20
    JK="leasehold:{bench}:job:$($R zrange 'leasehold:{bench}:done' 0 0)"
    echo "job hash: $($R memory usage "$JK" samples 0) B ($($R object encoding "$JK")); done: $(( $($R memory usage 'leasehold:{bench}:done' samples 0) / N )) B/job; events: $(( $($R memory usage 'leasehold:{bench}:events' samples 0) / N )) B/job"
    $R hgetall "$JK" | paste - -
fi
[ -n "$KEEP" ] && echo "redis-server left running on port $PORT (pid $RP)"
