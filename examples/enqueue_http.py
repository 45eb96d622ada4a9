#!/usr/bin/env python3
"""Backfill one day of hourly jobs through the leasehold dashboard's HTTP enqueue endpoint.

Standard library only. The token comes from LEASEHOLD_DASHBOARD_TOKEN:
  python3 examples/enqueue_http.py --url http://127.0.0.1:8080 \
      --queue shops --pipeline hourly_sync --shop a --day 2026-05-06
"""
import argparse, json, os, sys, urllib.error, urllib.parse, urllib.request

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("--url", default="http://127.0.0.1:8080")
p.add_argument("--queue", required=True)
p.add_argument("--pipeline", required=True)
p.add_argument("--shop", required=True)
p.add_argument("--day", required=True, help="YYYY-MM-DD")
p.add_argument("--rerun", action="store_true", help="run hours that SUCCEEDED again")
args = p.parse_args()

# one job per hour; the pipeline's templates compute resource and input key
jobs = [{"input": {"shop": args.shop, "hour": f"{args.day}T{h:02}"}} for h in range(24)]
q, pl = (urllib.parse.quote(s, safe="") for s in (args.queue, args.pipeline))
req = urllib.request.Request(
    f"{args.url.rstrip('/')}/api/queues/{q}/pipelines/{pl}/jobs",
    data=json.dumps({"jobs": jobs, "rerun": args.rerun}).encode(),
    headers={"Content-Type": "application/json",
             "Authorization": "Bearer " + os.environ.get("LEASEHOLD_DASHBOARD_TOKEN", "")},
    method="POST")
try:
    with urllib.request.urlopen(req, timeout=60) as resp:
        reply = json.load(resp)
except urllib.error.HTTPError as e:  # 4xx/5xx: the body says what and where
    err = json.loads(e.read() or b"{}")
    where = f" (job {err['job']}, field {err.get('field')})" if err.get("job") is not None else ""
    sys.exit(f"refused, HTTP {e.code} {err.get('error')}{where}: {err.get('message')}")
except urllib.error.URLError as e:
    sys.exit(f"cannot reach {args.url}: {e.reason}")
print(f"{args.pipeline} {args.day}: {reply['created']} created, {reply['rerun']} rerun, "
      f"{reply['existing']} existing, {reply['succeeded']} succeeded")
