"""FETCH: the orders of one source's hour, staged as CSV.

A stand-in for an API call: rows are generated from the source and hour. The
crontab passed `--source` and `--hour`; leasehold fills the same arguments
from the job's input and window (`{source}`, `{window.start:%Y-%m-%dT%H}` in
pipelines.toml). The step's output (the staged file and its row count) goes to
$LEASEHOLD_OUTPUT as JSON and is passed on to VALIDATE.

Two failures on a first attempt, both retried by leasehold, starting again
at this step: shop-b's API is busy on odd hours (exit 75, "try again later"),
and shop-a's connection drops on hours divisible by three (an uncaught
exception: Python exits 1, an ordinary failure, retryable by default).
"""
import argparse
import hashlib
import json
import os
import sys

args = argparse.ArgumentParser()
args.add_argument("--source", required=True)
args.add_argument("--hour", required=True, help="the hour to fetch, YYYY-MM-DDTHH (UTC)")
opts = args.parse_args()
source = opts.source
start = opts.hour + ":00:00Z"
hour = int(opts.hour[11:13])
attempt = int(os.environ.get("LEASEHOLD_ATTEMPT", "1"))

if source == "shop-b" and hour % 2 == 1 and attempt == 1:
    print(f"{source}: API busy for {start}, try later", file=sys.stderr)
    sys.exit(75)
if source == "shop-a" and hour % 3 == 0 and attempt == 1:
    raise ConnectionError(f"{source}: connection reset while fetching {start}")

seed = int(hashlib.sha256(f"{source}{start}".encode()).hexdigest()[:8], 16)
count = 5 + seed % 20
staging = os.path.join(os.environ.get("DATA_DIR", "data"), "staging")
os.makedirs(staging, exist_ok=True)
path = os.path.join(staging, f"{source}_{start.replace(':', '')}.csv")
with open(path, "w") as f:
    for i in range(count):
        f.write(f"{source}-{seed % 1000}-{i},{start},{(seed >> (i % 16)) % 9000 / 100:.2f}\n")
        print(f"::progress {100 * (i + 1) // count}")
print(f"{source}: fetched {count} orders for {start}")
json.dump({"file": os.path.abspath(path), "rows": count}, open(os.environ["LEASEHOLD_OUTPUT"], "w"))
