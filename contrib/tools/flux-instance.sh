#!/bin/sh
# flux-instance.sh URIFILE: the initial program of a Flux test instance
# (flux start --test-size=N flux-instance.sh URIFILE), for the Flux tests
# and make bench's Flux rows. It makes each broker's scheduler see 32
# cores (a test broker has this host's, and Flux does not oversubscribe:
# as Flux's own tests do; jobs run with -o cpu-affinity=off), writes the
# instance's URI to URIFILE and its own pid to URIFILE.pid, and waits:
# the instance ends when this ends.
set -e
flux module remove sched-simple
flux kvs put resource.R="$(flux kvs get resource.R | jq -c '.execution.R_lite[0].children.core="0-31"')"
flux module reload resource noverify
flux module load sched-simple
echo $$ > "$1.pid" # the sleep's: ending it ends the instance
echo "$FLUX_URI" > "$1.tmp" && mv "$1.tmp" "$1"
exec sleep 100000
