#!/bin/bash
# suite.sh [run.sh options] -- REPO BINDIR [NAME=VALUE|PKG@SECS]... [-- TESTFLAGS...]
# — run gotest.sh's packages in one guest, each within its own limit: SECS
# (the package's time on a quiet reference machine, with room) times the
# speed factor speed.sh measures now (or NSBOX_VM_SPEED). The guest as a
# whole gets the sum of its packages' limits plus BOOT_SECS (120) times the
# same factor, so a package that runs long is cut by its own test timeout
# (its goroutines printed, the next package run), not by the guest's.
# If the guest hangs or never reports (run.sh exits 124 or 125), one more
# guest runs only the packages that printed no ok/FAIL line; a failed test
# is not retried. Exits 0 only if every package reported ok.
# See README.md ("suite.sh").
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
usage() { echo "usage: suite.sh [run.sh options] -- REPO BINDIR [NAME=VALUE|PKG@SECS]... [-- TESTFLAGS...]" >&2; exit 2; }

opts=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
[ $# -ge 3 ] || usage
shift
repo=$1 bindir=$2
shift 2
words=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	case $1 in
	*=* | ./*@[0-9]*) words+=("$1") ;;
	*) echo "suite.sh: $1: want NAME=VALUE or PKG@SECS" >&2; usage ;;
	esac
	shift
done
flags=("$@") # empty, or -- and the test flags

speed=${NSBOX_VM_SPEED:-$("$here/speed.sh")} || exit 1
log=$(mktemp "${TMPDIR:-/tmp}/nsbox-vm-suite.XXXXXX")
trap 'rm -f "$log"' EXIT
failed=0
for try in 1 2; do
	total=120
	for w in "${words[@]}"; do case $w in *=*) ;; *) total=$((total + ${w##*@})) ;; esac; done
	limit=$(awk -v t="$total" -v s="$speed" 'BEGIN { printf "%d", t * s }')
	echo "cgroup2-vm: try $try: guest limit ${limit} s ($total s x $speed)"
	"$here/run.sh" "${opts[@]}" --timeout "$limit" -- \
		"$here/gotest.sh" "$repo" "$bindir" "NSBOX_VM_SPEED=$speed" "${words[@]}" "${flags[@]}" | tee "$log"
	rc=${PIPESTATUS[0]}
	case $rc in
	124 | 125) ;;
	0) exit $failed ;;
	*) exit 1 ;;
	esac
	# The guest hung or never reported: keep the NAME=VALUE words and the
	# packages that printed no line.
	left=()
	pending=0
	for w in "${words[@]}"; do
		case $w in *=*) left+=("$w"); continue ;; esac
		rel=${w%@*}
		rel=${rel#./}
		if grep -q "^FAIL	$rel	" "$log"; then
			failed=1
		elif ! grep -q "^ok	$rel	" "$log"; then
			left+=("$w")
			pending=1
		fi
	done
	if [ "$pending" = 0 ]; then
		echo "cgroup2-vm: every package reported, then the guest did not end (exit $rc)"
		exit $failed
	fi
	words=("${left[@]}")
	echo "cgroup2-vm: the guest hung or never reported (exit $rc), try $try of 2; left:$(printf ' %s' "${words[@]}" | tr ' ' '\n' | grep -v = | tr '\n' ' ')"
done
exit 1
