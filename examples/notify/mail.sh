#!/bin/sh
# A notice hook that mails the data team, as cron's MAILTO did: leasehold
# runs it with the event as JSON on standard input (docs/operations.md,
# "Failure notices"). Needs `sendmail` (any MTA provides it) or `mail`.
# The subject is the notice's one-line summary; the body is the whole JSON.
set -eu
to=${LEASEHOLD_MAILTO:-data-team@example.com}
notice=$(cat)
summary=$(printf '%s' "$notice" | python3 -c 'import json, sys; print(json.load(sys.stdin)["summary"][:200])')
if command -v sendmail >/dev/null 2>&1; then
    printf 'To: %s\nSubject: leasehold: %s\n\n%s\n' "$to" "$summary" "$notice" | sendmail -t
else
    printf '%s\n' "$notice" | mail -s "leasehold: $summary" "$to"
fi
