#!/bin/sh
# gotest.sh REPO BINDIR [NAME=VALUE|PKG[@SECS]]... [-- TESTFLAGS...] — runs in the
# guest (busybox sh): for each PKG (e.g. ./container, ./tests/integration) cd
# REPO/PKG and run BINDIR/<pkg with / as _>.test (built on the host with
# `go test -c`), printing `ok`/`FAIL` lines the way `go test` does. A NAME=VALUE
# word is exported for the packages after it. Exits 1 if any package failed.
#
# PKG@SECS gives the package a limit of its own: SECS times NSBOX_VM_SPEED
# (suite.sh's speed factor, default 1), passed as -test.timeout after the
# TESTFLAGS, so a package that runs long fails alone, printing its
# goroutines, and the next one runs.
#
# If NSBOX_VM_NSBOX_BIN names a prebuilt nsbox binary, a `go` shim is put first
# in PATH whose `go build ... -o OUT ...` copies that binary to OUT: the guest
# has no Go toolchain, and tests/integration's TestMain runs
# `go build -o DIR/nsbox ./cmd/nsbox`.
#
# In run.sh --delegated mode (NSBOX_VM_CGROUP is not /) each test binary gets a
# fresh delegated cgroup of its own, /system.slice/nsbox-test-<n>.service,
# and is alone in it, as a daemon started by systemd with Delegate=yes would
# be; this runner moves itself to the root cgroup.
set -u
[ $# -ge 3 ] || { echo "usage: gotest.sh REPO BINDIR [NAME=VALUE|PKG[@SECS]]... [-- TESTFLAGS...]" >&2; exit 2; }
repo=$1
bindir=$2
shift 2
pkgs=
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	pkgs="$pkgs $1"
	shift
done
[ $# -gt 0 ] && shift # the --; what is left are test flags

if [ -n "${NSBOX_VM_NSBOX_BIN:-}" ]; then
	shim=$(mktemp -d /tmp/nsbox-vm-shim.XXXXXX)
	cat >"$shim/go" <<-'EOF'
		#!/bin/sh
		while [ $# -gt 0 ]; do
			if [ "$1" = -o ]; then exec cp "$NSBOX_VM_NSBOX_BIN" "$2"; fi
			shift
		done
		echo "go shim (cgroup2 VM): only 'go build -o OUT' is supported" >&2
		exit 2
	EOF
	chmod +x "$shim/go"
	PATH=$shim:$PATH
	export PATH
fi

failed=0
for p in $pkgs; do
	case $p in
	*=*)
		export "${p?}"
		continue
		;;
	esac
	limit=
	case $p in
	*@*)
		limit=$(awk -v t="${p##*@}" -v s="${NSBOX_VM_SPEED:-1}" 'BEGIN { printf "%d", t * s }')
		p=${p%@*}
		;;
	esac
	rel=${p#./}
	bin=$bindir/$(echo "$rel" | tr / _).test
	[ -z "$limit" ] || echo "=== $rel: limit ${limit}s"
	start=$(cut -d' ' -f1 /proc/uptime)
	if [ ! -x "$bin" ]; then
		echo "FAIL	$rel	(no test binary $bin)"
		failed=1
		continue
	fi
	svc=
	if [ "${NSBOX_VM_CGROUP:-/}" != / ]; then
		[ -n "${parent:-}" ] || {
			parent=$(dirname "$NSBOX_VM_CGROUP")
			echo $$ >/sys/fs/cgroup/cgroup.procs
		}
		n=$((${n:-0} + 1))
		svc=$parent/nsbox-test-$n.service
		mkdir "/sys/fs/cgroup$svc"
	fi
	if (
		cd "$repo/$rel" || exit 1
		if [ -n "$svc" ]; then
			echo 0 >"/sys/fs/cgroup$svc/cgroup.procs" || exit 1
			export NSBOX_VM_CGROUP="$svc"
		fi
		if [ -n "$limit" ]; then exec "$bin" "$@" -test.timeout "${limit}s"; fi
		exec "$bin" "$@"
	); then
		res=ok
	else
		res=FAIL
		failed=1
	fi
	# Like systemd after the service stops: remove what it left, leaves first.
	[ -z "$svc" ] || find "/sys/fs/cgroup$svc" -depth -type d -exec rmdir {} \; 2>/dev/null
	end=$(cut -d' ' -f1 /proc/uptime)
	echo "$res	$rel	$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.3fs", b - a}')"
done
exit $failed
