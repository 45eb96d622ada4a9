#!/bin/bash
# The floor: what one script call and the state model's primitive commands cost
# Redis, measured on a private redis-server (not part of CI).
#
# Part 1 runs redis-benchmark: FCALL and EVALSHA of a trivial script (`return 1`),
# without keys and with settle's fixed 9 keys and 9 values, one client plain and
# pipelined (-P 16); and the primitive commands at the sizes the state model uses
# (HSET of 3 fields on a 20-field job hash, HMGET of 10 fields, XADD of 7 field
# pairs to a capped stream, ZADD, ZPOPMIN, ZREM on a 100,000-member sorted set).
# For each: requests/s, 1e6/rps (for one client un-pipelined that is the round
# trip, not CPU), usec_per_call from INFO commandstats (the command alone), and
# Redis CPU per call (INFO cpu used_cpu_user+sys delta over the run / calls:
# reading, parsing, executing, replying; what bounds throughput).
#
# Part 2 runs the inner commands of one job as a Lua script runs them
# (redis.call, on 20,000 distinct 20-field job hashes, 500 jobs per EVAL call so
# the call's fixed cost is amortised away): today's W1 set (lease, start, finish)
# and the fused one (lease+start, finish), Redis CPU per job.
#
# usage: benches/floor.sh            (N=200000 requests per redis-benchmark run)
#   PORT=... picks the port (default: a free one); N=... the requests per run.
# The script stops only the redis-server it started, by its PID.
set -u
N=${N:-200000}
if [ -z "${PORT:-}" ]; then
    PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fi
R="redis-cli -p $PORT"
if $R ping >/dev/null 2>&1; then
    echo "error: something already answers on port $PORT; set PORT to a free one" >&2
    exit 1
fi
LOG=$(mktemp /tmp/floor-redis.XXXXXX)
redis-server --port "$PORT" --save '' --appendonly no --logfile "$LOG" >/dev/null &
RP=$!
cleanup() { kill "$RP" 2>/dev/null; wait "$RP" 2>/dev/null; rm -f "$LOG"; }
trap cleanup EXIT
for _ in $(seq 100); do $R ping >/dev/null 2>&1 && break; sleep 0.1; done
$R ping >/dev/null || { echo "error: redis-server did not start" >&2; exit 1; }

cpu() { $R info cpu | awk -F: '/^used_cpu_(sys|user):/{s+=$2} END{printf "%.6f", s}'; }
# calls and usec_per_call of one command from INFO commandstats
cmdstat() { $R info commandstats | awk -F'[:=,]' -v c="cmdstat_$1" '$1==c{print $3, $7}'; }

# a job hash of 20 fields, as a W1 job carries them
JOB_FIELDS=(id 01JF8Z5W3Q9M2N7K4X6V8B0C1D pipeline w1 state RUNNING input '{"i":12345}'
    attempt 1 max_attempts 1 priority 0 created_at 1764600000123 updated_at 1764600000
    not_before 1764600000123 token 6f1c2a9e4b7d3f80 fence 12345 worker w-7f3a9c
    leased_at 1764600000200 lease_deadline 1764600030200 started_at 1764600000201
    step noop steps - last_step - queue bench)
prepare() {
    $R flushall >/dev/null
    $R hset job:1 "${JOB_FIELDS[@]}" >/dev/null
    $R function load REPLACE "#!lua name=floor
redis.register_function('one', function() return 1 end)" >/dev/null
}
prepare
SHA=$($R script load "return 1")
KEYS9="k:{q}:1 k:{q}:2 k:{q}:3 k:{q}:4 k:{q}:5 k:{q}:6 k:{q}:7 k:{q}:8 k:{q}:9"
ARGS9="v1 bench 1 worker-7f3a9c 30000 45000 2 1 10"

printf '%-44s %5s %4s %10s %9s %11s %11s\n' "command" "conns" "-P" "req/s" "1e6/rps" "usec/call" "CPU us/call"
run() { # name cmdstat-name clients pipeline command...
    local name=$1 stat=$2 c=$3 p=$4
    shift 4
    $R config resetstat >/dev/null
    local c0 c1 rps calls upc
    c0=$(cpu)
    rps=$(redis-benchmark -p "$PORT" -n "$N" -c "$c" -P "$p" -r 100000 --csv "$@" 2>/dev/null |
        awk -F'","' 'NR==2{gsub(/"/,"",$2); print $2}')
    c1=$(cpu)
    read -r calls upc <<<"$(cmdstat "$stat")"
    awk -v n="$name" -v c="$c" -v p="$p" -v r="$rps" -v u="$upc" -v k="$calls" -v a="$c0" -v b="$c1" \
        'BEGIN{printf "%-44s %5d %4d %10.0f %9.2f %11.2f %11.2f\n", n, c, p, r, 1e6/r, u, (b-a)*1e6/k}'
}
run "FCALL one 0" fcall 1 1 fcall one 0
run "FCALL one 0" fcall 1 16 fcall one 0
run "FCALL one 0" fcall 10 16 fcall one 0
# shellcheck disable=SC2086
run "FCALL one 9 <9 keys> <9 values>" fcall 1 1 fcall one 9 $KEYS9 $ARGS9
# shellcheck disable=SC2086
run "FCALL one 9 <9 keys> <9 values>" fcall 1 16 fcall one 9 $KEYS9 $ARGS9
run "EVALSHA <return 1> 0" evalsha 1 1 evalsha "$SHA" 0
run "EVALSHA <return 1> 0" evalsha 1 16 evalsha "$SHA" 0
run "HSET job (20 fields) 3 fields" hset 1 16 hset job:1 state SUCCEEDED updated_at 1764600001 finished_at 1764600001234
run "HMGET job (20 fields) 10 fields" hmget 1 16 hmget job:1 state token id attempt pipeline input resource last_step not_before flow
run "XADD events MAXLEN ~ 100000, 7 pairs" xadd 1 16 xadd events MAXLEN '~' 100000 '*' op finish job 01JF8Z5W3Q9M2N7K4X6V8B0C1D attempt 1 from RUNNING to SUCCEEDED by w-7f3a9c reason ''
run "ZADD (~100,000 members)" zadd 1 16 zadd z 1764600030200 m:__rand_int__
run "ZADD (more, to fill for ZPOPMIN/ZREM)" zadd 1 16 zadd z 1764600030200 m:__rand_int__
run "ZREM (~100,000 members, most present)" zrem 1 16 zrem z m:__rand_int__
run "ZADD (refill)" zadd 1 16 zadd z 1764600030200 m:__rand_int__
run "ZPOPMIN 1" zpopmin 1 16 zpopmin z
run "HDEL (a field that is absent)" hdel 1 16 hdel job:1 absent_field

echo
echo "Inner commands per job as a script runs them (20,000 job hashes, 500 jobs per EVAL):"
# 20,000 job hashes of 20 fields and a ready set holding them
$R flushall >/dev/null
# shellcheck disable=SC2016
$R eval '
local f = {}
for w in string.gmatch(ARGV[1], "%S+") do f[#f + 1] = w end
for i = 1, tonumber(ARGV[2]) do
  redis.call("HSET", "job:" .. i, unpack(f))
  redis.call("ZADD", "ready", i, tostring(i))
end
return 1' 0 "${JOB_FIELDS[*]}" 20000 >/dev/null
# shellcheck disable=SC2016
TODAY='
local ids = redis.call("ZPOPMIN", "ready", tonumber(ARGV[1]))
local now = "1764600000200"
for i = 1, #ids, 2 do
  local id = ids[i]
  local jk = "job:" .. id
  -- lease
  redis.call("HMGET", jk, "state", "resource", "attempt", "pipeline", "input", "last_step", "not_before", "flow", "group", "trace")
  redis.call("HSET", jk, "state", "LEASED", "token", "6f1c2a9e4b7d3f80", "fence", id, "worker", "w-7f3a9c", "leased_at", now, "lease_deadline", now, "updated_at", now)
  redis.call("XADD", "events", "*", "op", "lease", "job", id, "attempt", "1", "from", "QUEUED", "to", "LEASED", "by", "w-7f3a9c", "reason", "")
  redis.call("ZADD", "leases", now, id)
  -- start
  redis.call("HMGET", jk, "state", "token", "id", "cancel_reason", "attempt", "resource")
  redis.call("HSET", jk, "state", "RUNNING", "started_at", now, "step", "noop", "updated_at", now)
  redis.call("XADD", "events", "*", "op", "start", "job", id, "attempt", "1", "from", "LEASED", "to", "RUNNING", "by", "w-7f3a9c", "reason", "")
  -- finish
  redis.call("HMGET", jk, "state", "token", "id", "attempt", "pipeline", "steps", "started_at", "resource")
  redis.call("HSET", jk, "state", "SUCCEEDED", "finished_at", now, "updated_at", now, "last_step", "noop", "out:noop", "null")
  redis.call("HDEL", jk, "token", "lease_deadline")
  redis.call("XADD", "events", "*", "op", "finish", "job", id, "attempt", "1", "from", "RUNNING", "to", "SUCCEEDED", "by", "w-7f3a9c", "reason", "")
  redis.call("ZREM", "leases", id)
  redis.call("ZADD", "done", now, id)
end
return #ids / 2'
# shellcheck disable=SC2016
FUSED='
local ids = redis.call("ZPOPMIN", "ready", tonumber(ARGV[1]))
local now = "1764600000200"
for i = 1, #ids, 2 do
  local id = ids[i]
  local jk = "job:" .. id
  -- lease + start
  redis.call("HMGET", jk, "state", "resource", "attempt", "pipeline", "input", "last_step", "not_before", "flow", "group", "trace")
  redis.call("HSET", jk, "state", "RUNNING", "token", "6f1c2a9e4b7d3f80", "fence", id, "worker", "w-7f3a9c", "leased_at", now, "lease_deadline", now, "started_at", now, "step", "noop", "updated_at", now)
  redis.call("XADD", "events", "*", "op", "start", "job", id, "attempt", "1", "from", "QUEUED", "to", "RUNNING", "by", "w-7f3a9c", "reason", "")
  redis.call("ZADD", "leases", now, id)
  -- finish
  redis.call("HMGET", jk, "state", "token", "id", "attempt", "pipeline", "steps", "started_at", "resource")
  redis.call("HSET", jk, "state", "SUCCEEDED", "finished_at", now, "updated_at", now, "last_step", "noop", "out:noop", "null")
  redis.call("HDEL", jk, "token", "lease_deadline")
  redis.call("XADD", "events", "*", "op", "finish", "job", id, "attempt", "1", "from", "RUNNING", "to", "SUCCEEDED", "by", "w-7f3a9c", "reason", "")
  redis.call("ZREM", "leases", id)
  redis.call("ZADD", "done", now, id)
end
return #ids / 2'
inner() { # name script
    local name=$1 script=$2
    $R del events leases done >/dev/null
    $R config resetstat >/dev/null
    local c0 c1 jobs=0 got
    c0=$(cpu)
    while :; do
        got=$($R eval "$script" 0 500)
        [ "$got" -gt 0 ] || break
        jobs=$((jobs + got))
    done
    c1=$(cpu)
    local calls
    calls=$($R info commandstats | awk -F'[:=,]' '/^cmdstat_/ && $1!="cmdstat_eval" && $1!="cmdstat_config|resetstat" && $1!="cmdstat_info" {s+=$3} END{print s}')
    awk -v n="$name" -v j="$jobs" -v k="$calls" -v a="$c0" -v b="$c1" \
        'BEGIN{printf "%-44s jobs=%d  inner cmds/job=%.2f  Redis CPU us/job=%.2f\n", n, j, k/j, (b-a)*1e6/j}'
}
# the ready set is popped empty by each run: refill it from the job hashes
refill() { $R eval 'for i = 1, 20000 do redis.call("ZADD", "ready", i, tostring(i)) end return 1' 0 >/dev/null; }
for _ in 1 2 3; do
    inner "today: lease, start, finish (3 events)" "$TODAY"
    refill
    inner "fused: lease+start, finish (2 events)" "$FUSED"
    refill
done
