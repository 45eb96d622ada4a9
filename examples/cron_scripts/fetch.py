"""FETCH: the orders of one source's window, staged as CSV.

A stand-in for an API call: rows are generated from the source and window.
leasehold gives the job's input (source, window) in $LEASEHOLD_INPUT; the
step's output (the staged file and its row count) goes to $LEASEHOLD_OUTPUT as
JSON and is passed on to VALIDATE. Exit 75 means "try again later" (shop-b's
API is busy on the first attempt of odd hours): leasehold retries the job,
starting again at this step.
"""
import hashlib
import json
import os
import sys

job = json.load(open(os.environ["LEASEHOLD_INPUT"]))
source = job["source"]
start = os.environ["LEASEHOLD_WINDOW_START"]
attempt = int(os.environ["LEASEHOLD_ATTEMPT"])

if source == "shop-b" and int(start[11:13]) % 2 == 1 and attempt == 1:
    print(f"{source}: API busy for {start}, try later", file=sys.stderr)
    sys.exit(75)

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
