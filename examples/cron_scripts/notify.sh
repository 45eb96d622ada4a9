#!/bin/sh
# The demo's notice hook: leasehold runs it once per event (a FAILED or STALE
# job, a failing schedule) with the event's JSON on stdin. It keeps each notice
# as a line of data/notices.jsonl; examples/notify/mail.sh mails it instead,
# as cron's MAILTO did.
mkdir -p data
{ cat; echo; } >> data/notices.jsonl
