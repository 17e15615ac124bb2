#!/bin/sh
# run-fuzz.sh SEEDS FUZZER CORPUS SECONDS: writes the seeds into CORPUS
# (kept between runs, so the corpus grows) and fuzzes for SECONDS.
set -eu
seeds=$1 fuzzer=$2 corpus=$3 secs=$4
mkdir -p "$corpus"
"$seeds" "$corpus"
exec "$fuzzer" -max_total_time="$secs" -print_final_stats=1 "$corpus"
