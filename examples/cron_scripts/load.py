"""LOAD: the validated rows into a SQLite warehouse, fenced.

The window's rows are replaced in one transaction. The lease's fencing
number ($LEASEHOLD_FENCE) is recorded per window, and a load carrying a lower
fence than one already recorded is refused: an attempt whose lease was lost
(its worker cut off, the job retried elsewhere) can never overwrite the newer
attempt's rows. The refusal exits 65 (permanent).
"""
import csv
import json
import os
import sqlite3
import sys

previous = json.load(open(os.environ["LEASEHOLD_PREVIOUS"]))
source = json.load(open(os.environ["LEASEHOLD_INPUT"]))["source"]
# the hour the window carries (shifted by the schedule's window_offset)
start = json.load(open(os.environ["LEASEHOLD_INPUT"]))["window"]["start"]
fence = int(os.environ["LEASEHOLD_FENCE"])

db = sqlite3.connect(os.path.join(os.environ.get("DATA_DIR", "data"), "warehouse.db"), timeout=30)
db.executescript(
    "CREATE TABLE IF NOT EXISTS sales (source TEXT, window_start TEXT, order_id TEXT, amount REAL);"
    "CREATE TABLE IF NOT EXISTS loads (source TEXT, window_start TEXT, fence INTEGER, rows INTEGER,"
    " PRIMARY KEY (source, window_start));"
)
with db:
    row = db.execute(
        "SELECT fence FROM loads WHERE source = ? AND window_start = ?", (source, start)
    ).fetchone()
    if row and row[0] > fence:
        print(f"refused: {source} {start} was loaded with fence {row[0]} > {fence}", file=sys.stderr)
        sys.exit(65)
    db.execute("DELETE FROM sales WHERE source = ? AND window_start = ?", (source, start))
    with open(previous["file"]) as f:
        rows = [(source, start, r[0], float(r[2])) for r in csv.reader(f)]
    db.executemany("INSERT INTO sales VALUES (?, ?, ?, ?)", rows)
    db.execute(
        "INSERT OR REPLACE INTO loads VALUES (?, ?, ?, ?)", (source, start, fence, len(rows))
    )
print(f"loaded {len(rows)} rows of {source} {start} with fence {fence}")
json.dump({"loaded": len(rows)}, open(os.environ["LEASEHOLD_OUTPUT"], "w"))
