#!/bin/bash
# run.sh [options] -- COMMAND [ARGS...] — boot the pure-cgroup-v2 test VM, run
# COMMAND as root in it and exit with COMMAND's exit status. See README.md.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

usage() {
	cat <<-'EOF'
		usage: run.sh [options] -- COMMAND [ARGS...]
		  --delegated        run COMMAND in /system.slice/nsbox.service (a delegated
		                     subtree, like systemd Delegate=yes) instead of the root cgroup
		  --root-cgroup      run COMMAND in the root cgroup (the default)
		  --timeout SECS     kill the VM after SECS seconds (default 900); exit 124
		  --share DIR        share host DIR read-write at the same path in the guest
		                     (repeatable)
		  --ro-share DIR     same, read-only (repeatable)
		  --host-usr         share the host's /usr read-only at /usr (dynamically
		                     linked binaries, host tools)
		  --cwd DIR          working directory of COMMAND (default: the host's current
		                     directory if it is inside a share, else /root)
		  --env NAME=VALUE   extra environment for COMMAND (repeatable)
		  --accel auto|tcg|kvm  (default auto: kvm only if /proc/cpuinfo has vmx/svm)
		  --mem MIB          guest memory (default 2048)
		  --smp N            guest CPUs (default 2)
		  --cache DIR        build cache (default <repo>/.cache/cgroup2-vm)
		  --verbose          show kernel messages and guest setup steps
		Exit status: COMMAND's; 124 if the VM timed out; 125 if the guest never
		reported an exit status (boot or setup failure, crash).
	EOF
}

die() {
	printf 'cgroup2-vm: %s\n' "$*" >&2
	exit 125
}

# q quotes one word for a POSIX shell.
q() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }

timeout_s=900
delegated=0
verbose=0
accel=auto
mem=2048
smp=2
cwd=
cache=${NSBOX_VM_CACHE:-$repo/.cache/cgroup2-vm}
shares=()
envs=()
while [ $# -gt 0 ]; do
	case $1 in
	--delegated) delegated=1 ;;
	--root-cgroup) delegated=0 ;;
	--timeout) timeout_s=${2:?--timeout needs SECS}; shift ;;
	--share) shares+=("rw:$(realpath -e "${2:?--share needs DIR}")") || die "--share $2: no such directory"; shift ;;
	--ro-share) shares+=("ro:$(realpath -e "${2:?--ro-share needs DIR}")") || die "--ro-share $2: no such directory"; shift ;;
	--host-usr) shares+=("ro:/usr") ;;
	--cwd) cwd=${2:?--cwd needs DIR}; shift ;;
	--env) envs+=("${2:?--env needs NAME=VALUE}"); shift ;;
	--accel) accel=${2:?--accel needs auto, tcg or kvm}; shift ;;
	--mem) mem=${2:?--mem needs MIB}; shift ;;
	--smp) smp=${2:?--smp needs N}; shift ;;
	--cache) cache=${2:?--cache needs DIR}; shift ;;
	--verbose) verbose=1 ;;
	-h | --help) usage; exit 0 ;;
	--) shift; break ;;
	*) usage >&2; die "unknown option $1 (put the command after --)" ;;
	esac
	shift
done
[ $# -gt 0 ] || { usage >&2; die "no COMMAND given"; }
for d in "${shares[@]}"; do [ -d "${d#*:}" ] || die "share ${d#*:} is not a directory"; done

command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found: run $here/build.sh first (or apt-get install qemu-system-x86)"
# Instant when nothing changed; rebuilds the initramfs when the guest init did.
NSBOX_VM_QUIET=1 "$here/build.sh" "$cache" || die "build.sh failed"
# shellcheck source=/dev/null
. "$cache/current.env"
[ -f "$KERNEL" ] && [ -f "$INITRD" ] || die "cache $cache is stale: run $here/build.sh $cache"

case $accel in
auto) if [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then accel=kvm; else accel=tcg; fi ;;
tcg | kvm) ;;
*) die "--accel $accel: want auto, tcg or kvm" ;;
esac
if [ "$accel" = kvm ]; then
	accel_args=(-accel kvm -cpu host)
else
	accel_args=(-accel tcg,thread=multi -cpu max)
fi

ctl=$(mktemp -d "${TMPDIR:-/tmp}/nsbox-vm.XXXXXX")
cleanup() {
	# timeout(1) passes the TERM on to qemu.
	if [ ! -f "$ctl/qemu.rc" ] && [ -f "$ctl/timeout.pid" ]; then
		kill "$(cat "$ctl/timeout.pid")" 2>/dev/null || true
	fi
	rm -rf "$ctl"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Shares, parents mounted before children (sort by path).
fsargs=(-fsdev "local,id=ctl,path=$ctl,security_model=none"
	-device "virtio-9p-pci,fsdev=ctl,mount_tag=nsboxctl")
share_words=
i=0
while IFS= read -r s; do
	[ -n "$s" ] || continue
	mode=${s%%:*}
	path=${s#*:}
	case $path in *[[:space:]]*) die "share path '$path' contains whitespace" ;; esac
	ro=
	[ "$mode" = ro ] && ro=,readonly=on
	fsargs+=(-fsdev "local,id=s$i,path=$path,security_model=none$ro"
		-device "virtio-9p-pci,fsdev=s$i,mount_tag=s$i")
	share_words+=" s$i:$mode:$path"
	i=$((i + 1))
done < <(printf '%s\n' "${shares[@]}" | sort -t: -k2 -u)

if [ -z "$cwd" ]; then
	cwd=/root
	for s in "${shares[@]}"; do
		p=${s#*:}
		case $PWD/ in "$p"/*) cwd=$PWD ;; esac
	done
fi

argv=
for a in "$@"; do argv+=" $(q "$a")"; done
envq=
for e in "${envs[@]}"; do envq+=" $(q "$e")"; done
{
	echo "DELEGATED=$delegated"
	echo "VERBOSE=$verbose"
	echo "CACHE_MODE=loose"
	echo "SHARES=$(q "$share_words")"
	echo "WORKDIR=$(q "$cwd")"
	echo "ARGV0=$(q "$1")"
	echo "ARGV=$(q "$argv")"
	echo "ENVS=$(q "$envq")"
} >"$ctl/config"

cmdline="console=ttyS0 panic=-1 reboot=t rdinit=/init cgroup_no_v1=all systemd.unified_cgroup_hierarchy=1"
cmdline+=" tsc=reliable nokaslr mitigations=off"
if [ "$verbose" = 1 ]; then cmdline+=" nsbox.verbose"; else cmdline+=" quiet loglevel=3"; fi

# The serial console streams through this loop, which drops the exit marker
# and remembers it; timeout(1) bounds the whole VM.
run_qemu() {
	timeout -k 10 "$timeout_s" qemu-system-x86_64 \
		-machine pc "${accel_args[@]}" -m "$mem" -smp "$smp" \
		-nodefaults -no-user-config -display none -vga none -no-reboot \
		-serial stdio \
		-kernel "$KERNEL" -initrd "$INITRD" -append "$cmdline" \
		"${fsargs[@]}" </dev/null 2>"$ctl/qemu.log" &
	echo $! >"$ctl/timeout.pid"
	local rc=0
	wait $! || rc=$?
	{ echo "$rc" >"$ctl/qemu.rc"; } 2>/dev/null || true # gone if interrupted
}
marker=
while IFS= read -r line || [ -n "$line" ]; do
	line=${line%$'\r'}
	case $line in
	*NSBOX-VM-EXIT=*)
		marker=${line##*NSBOX-VM-EXIT=}
		line=${line%%NSBOX-VM-EXIT=*}
		[ -z "$line" ] || printf '%s\n' "$line"
		;;
	*"reboot: Power down") [ "$verbose" = 1 ] && printf '%s\n' "$line" ;;
	*) printf '%s\n' "$line" ;;
	esac
done < <(run_qemu)
wait $! 2>/dev/null || true
rc=$(cat "$ctl/qemu.rc" 2>/dev/null || echo 125)
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
	printf 'cgroup2-vm: timed out after %ss; VM killed\n' "$timeout_s" >&2
	exit 124
fi
if [ -z "$marker" ] || ! [[ $marker =~ ^[0-9]+$ ]]; then
	printf 'cgroup2-vm: the guest reported no exit status (qemu exit %s); qemu said:\n' "$rc" >&2
	sed 's/^/  /' "$ctl/qemu.log" >&2
	exit 125
fi
exit "$marker"
