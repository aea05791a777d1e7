#!/bin/bash
# selftest.sh — build the selftest (static, CGO_ENABLED=0) and run it in the
# cgroup2 VM in both cgroup layouts. Exits non-zero if either run fails.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${NSBOX_VM_CACHE:-$repo/.cache/cgroup2-vm}/bin
mkdir -p "$out"
(cd "$repo" && CGO_ENABLED=0 go build -o "$out/selftest" ./scripts/cgroup2-vm/selftest)
rc=0
for mode in --root-cgroup --delegated; do
	echo "--- selftest $mode"
	"$here/run.sh" "$mode" --share "$out" -- "$out/selftest" || rc=1
done
exit $rc
