#!/bin/sh
# VALIDATE: every staged row has an order id, a time and a non-negative amount.
# Reads FETCH's output ($LEASEHOLD_PREVIOUS); exits 65 on bad data (a
# permanent failure: no retry can fix the rows), 0 with its own output.
set -eu
file=$(sed -n 's/.*"file": *"\([^"]*\)".*/\1/p' "$LEASEHOLD_PREVIOUS")
if [ ! -f "$file" ]; then
    echo "staged file missing: $file" >&2
    exit 75
fi
bad=$(awk -F, 'NF != 3 || $1 == "" || $3 !~ /^[0-9]+(\.[0-9]+)?$/ { n++ } END { print n + 0 }' "$file")
if [ "$bad" -ne 0 ]; then
    echo "$bad bad rows in $file" >&2
    exit 65
fi
rows=$(wc -l < "$file" | tr -d ' ')
echo "validated $rows rows (job $LEASEHOLD_JOB_ID, fence $LEASEHOLD_FENCE)"
printf '{"file": "%s", "rows": %s}\n' "$file" "$rows" > "$LEASEHOLD_OUTPUT"
