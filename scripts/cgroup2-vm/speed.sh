#!/bin/bash
# speed.sh — print how much slower than the reference this machine starts
# processes right now, as a factor for the cgroup v2 guests' limits (suite.sh):
# the median of 5 rounds of 100 fork+execs of /bin/true, over the reference
# of 100 ms a round (this project's 2-core dev machine, quiet: 93-110 ms),
# clamped to [1, 2.5]. Process start is what the engine's tests spend their
# time on, and what the guest's emulated CPU and a busy host slow down
# alike (the root guest's container tests took 390 s on one machine and
# 555 s on one whose process start was 2-3 times slower). What it measured
# goes to stderr.
set -euo pipefail
ref_ms=100
rounds=()
for _ in 1 2 3 4 5; do
	s=$(date +%s%N)
	for ((i = 0; i < 100; i++)); do /bin/true; done
	e=$(date +%s%N)
	rounds+=($(((e - s) / 1000000)))
done
median=$(printf '%s\n' "${rounds[@]}" | sort -n | sed -n 3p)
factor=$(awk -v m="$median" -v r="$ref_ms" 'BEGIN { f = m / r; if (f < 1) f = 1; if (f > 2.5) f = 2.5; printf "%.2f", f }')
printf 'cgroup2-vm: 100 process starts took %s ms (rounds: %s; reference %s ms): limits x%s\n' \
	"$median" "${rounds[*]}" "$ref_ms" "$factor" >&2
echo "$factor"
