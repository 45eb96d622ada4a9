"""ROLLUP: one day's sales per source, from the warehouse LOAD fills.

The crontab passed `--day` (yesterday); leasehold fills it from the nightly
schedule's window (`{window.start:%Y-%m-%d}`, the window shifted back to
midnight by `window_offset`). The day's totals are replaced in one
transaction, so a re-run gives the same table.
"""
import argparse
import json
import os
import sqlite3

args = argparse.ArgumentParser()
args.add_argument("--day", required=True, help="the day to roll up, YYYY-MM-DD (UTC)")
day = args.parse_args().day

db = sqlite3.connect(os.path.join(os.environ.get("DATA_DIR", "data"), "warehouse.db"), timeout=30)
db.executescript(
    "CREATE TABLE IF NOT EXISTS sales (source TEXT, window_start TEXT, order_id TEXT, amount REAL);"
    "CREATE TABLE IF NOT EXISTS daily (day TEXT, source TEXT, orders INTEGER, amount REAL,"
    " PRIMARY KEY (day, source));"
)
with db:
    db.execute("DELETE FROM daily WHERE day = ?", (day,))
    db.execute(
        "INSERT INTO daily SELECT ?, source, COUNT(*), ROUND(SUM(amount), 2) FROM sales"
        " WHERE substr(window_start, 1, 10) = ? GROUP BY source",
        (day, day),
    )
    totals = db.execute("SELECT source, orders, amount FROM daily WHERE day = ?", (day,)).fetchall()
print(f"rolled up {day}: {totals or 'no sales'}")
json.dump({"day": day, "sources": len(totals)}, open(os.environ["LEASEHOLD_OUTPUT"], "w"))
