#!/bin/bash
# build.sh [CACHE_DIR] — fetch Debian's kernel and build the slim initramfs of
# the pure-cgroup-v2 test VM. Everything lands in CACHE_DIR (default
# <repo>/.cache/cgroup2-vm), keyed on the kernel package version and on a hash
# of the guest init scripts, so a second run only checks the apt metadata.
# On success it writes CACHE_DIR/current.env (KERNEL=, INITRD=, KVER=) for run.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${1:-${NSBOX_VM_CACHE:-$repo/.cache/cgroup2-vm}}
# Modules the guest needs: virtio PCI transport, 9p over virtio for the shares,
# overlay (runc's exeseal seals /proc/self/exe with an overlayfs).
modules=(virtio_pci 9pnet_virtio 9p overlay)

log() { printf 'cgroup2-vm: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

need_tools() {
	local missing=() t
	for t in qemu-system-x86_64 cpio depmod modprobe dpkg-deb apt-get xz; do
		command -v "$t" >/dev/null || missing+=("$t")
	done
	[ ${#missing[@]} -eq 0 ] && return
	[ "$(id -u)" -eq 0 ] || die "missing ${missing[*]}: install qemu-system-x86 kmod cpio (as root)"
	log "installing host tools (missing: ${missing[*]})"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
		qemu-system-x86 kmod cpio xz-utils >&2 || die "apt-get install qemu-system-x86 kmod cpio failed"
}

# kernel_pkg prints the linux-image-X.Y.Z-N-amd64 package that
# linux-image-amd64 depends on, and its version, as "NAME VERSION".
kernel_pkg() {
	local dep ver
	dep=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-/ {print $2; exit}')
	[ -n "$dep" ] || return 1
	ver=$(apt-cache show --no-all-versions "$dep" 2>/dev/null | awk '/^Version:/ {print $2; exit}')
	[ -n "$ver" ] || return 1
	echo "$dep $ver"
}

need_tools
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
inithash=$(cat "$here/guest/init" "$here/guest/init2" "$0" | sha256sum | cut -c1-12)

# Fast path: nothing changed since the last build (same scripts, no apt
# metadata newer than the build).
if [ -f "$cache/current.env" ] && [ -z "$(find /var/lib/apt/lists -newer "$cache/current.env" -print -quit 2>/dev/null)" ]; then
	# shellcheck source=/dev/null
	. "$cache/current.env"
	if [ "${INITHASH:-}" = "$inithash" ] && [ -f "$KERNEL" ] && [ -f "$INITRD" ]; then
		[ -n "${NSBOX_VM_QUIET:-}" ] || log "ready (cached): kernel $KVER in $cache"
		exit 0
	fi
fi

if ! pkg=$(kernel_pkg); then
	log "apt metadata has no linux-image-amd64: running apt-get update"
	apt-get update -q >&2 || die "apt-get update failed"
	pkg=$(kernel_pkg) || die "no linux-image-amd64 in apt: check /etc/apt/sources.list"
fi
kpkg=${pkg% *}
kpkgver=${pkg#* }
kver=${kpkg#linux-image-}
kdir=$cache/kernel-$kver-$kpkgver

# 1. Kernel + the few modules, unpacked once per kernel package version.
if [ ! -f "$kdir/vmlinuz" ] || [ "$(cat "$kdir/modules/wanted" 2>/dev/null)" != "${modules[*]}" ]; then
	log "fetching $kpkg $kpkgver"
	tmp=$(mktemp -d "$cache/tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	chmod 0755 "$tmp" # apt-get download runs as _apt
	(cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$kpkg=$kpkgver" >&2) || die "apt-get download $kpkg failed"
	dpkg-deb -x "$tmp"/"$kpkg"_*.deb "$tmp/x"
	depmod -b "$tmp/x" "$kver"
	mkdir -p "$tmp/k/modules"
	modprobe -d "$tmp/x" -S "$kver" -a --show-depends "${modules[@]}" |
		awk '$1 == "insmod" {print $2}' | awk '!seen[$0]++' >"$tmp/list"
	[ -s "$tmp/list" ] || die "could not resolve modules ${modules[*]} in $kpkg"
	while read -r ko; do
		rel=${ko#"$tmp/x/lib/modules/$kver/"}
		mkdir -p "$tmp/k/modules/$(dirname "$rel")"
		cp "$ko" "$tmp/k/modules/$rel"
		echo "$rel" >>"$tmp/k/modules/load-order"
	done <"$tmp/list"
	cp "$tmp/x/lib/modules/$kver"/modules.builtin* "$tmp/k/modules/"
	echo "${modules[*]}" >"$tmp/k/modules/wanted"
	cp "$tmp/x/boot/vmlinuz-$kver" "$tmp/k/vmlinuz"
	# An uncompressed vmlinux boots ~3.5 s faster under TCG (qemu loads it
	# through its PVH entry point; no in-guest XZ decompression).
	off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$tmp/k/vmlinuz" | awk -F: 'NR == 1 {print $1}' || true)
	if [ -n "$off" ] && tail -c "+$((off + 1))" "$tmp/k/vmlinuz" >"$tmp/vmlinux.xz" &&
		xz -dc --single-stream "$tmp/vmlinux.xz" >"$tmp/k/vmlinux" 2>/dev/null &&
		[ "$(head -c4 "$tmp/k/vmlinux" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
		log "extracted vmlinux from vmlinuz"
	else
		log "could not extract vmlinux: booting the compressed vmlinuz"
		rm -f "$tmp/k/vmlinux"
	fi
	cp "$tmp/x/boot/config-$kver" "$tmp/k/config"
	rm -rf "$kdir"
	mv "$tmp/k" "$kdir"
	rm -rf "$tmp"
	trap - EXIT
fi

# 2. busybox-static, once per package version.
bbver=$(apt-cache show --no-all-versions busybox-static 2>/dev/null | awk '/^Version:/ {print $2; exit}')
[ -n "$bbver" ] || die "no busybox-static in apt metadata"
bbdir=$cache/busybox-${bbver//:/_}
if [ ! -x "$bbdir/busybox" ]; then
	log "fetching busybox-static $bbver"
	tmp=$(mktemp -d "$cache/tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	chmod 0755 "$tmp" # apt-get download runs as _apt
	(cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "busybox-static=$bbver" >&2) || die "apt-get download busybox-static failed"
	dpkg-deb -x "$tmp"/busybox-static_*.deb "$tmp/x"
	mkdir -p "$bbdir.tmp"
	cp "$tmp/x/bin/busybox" "$bbdir.tmp/busybox"
	rm -rf "$bbdir"
	mv "$bbdir.tmp" "$bbdir"
	rm -rf "$tmp"
	trap - EXIT
fi

# 3. The initramfs (uncompressed cpio: the kernel unpacks it fastest).
initrd=$kdir/initramfs-${bbver//:/_}-$inithash.cpio
if [ ! -f "$initrd" ]; then
	log "building initramfs for $kver"
	tmp=$(mktemp -d "$cache/tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	r=$tmp/root
	mkdir -p "$r"/{bin,sbin,etc,proc,sys,dev,tmp,run,root,newroot,lib/modules/"$kver"}
	chmod 1777 "$r/tmp"
	chmod 0700 "$r/root"
	cp "$bbdir/busybox" "$r/bin/busybox"
	for a in $("$r/bin/busybox" --list); do
		[ -e "$r/bin/$a" ] || ln -s busybox "$r/bin/$a"
	done
	cp "$here/guest/init" "$r/init"
	cp "$here/guest/init2" "$r/sbin/init2"
	chmod 0755 "$r/init" "$r/sbin/init2"
	cp -r "$kdir/modules/." "$r/lib/modules/$kver/"
	cp "$r/lib/modules/$kver/load-order" "$r/lib/modules/$kver/modules.order"
	depmod -b "$r" "$kver"
	cat >"$r/etc/passwd" <<-'EOF'
		root:x:0:0:root:/root:/bin/sh
		nobody:x:65534:65534:nobody:/nonexistent:/bin/false
	EOF
	cat >"$r/etc/group" <<-'EOF'
		root:x:0:
		nogroup:x:65534:
	EOF
	printf '127.0.0.1\tlocalhost\n::1\tlocalhost\n' >"$r/etc/hosts"
	echo nsbox-vm >"$r/etc/hostname"
	(cd "$r" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet -R 0:0) >"$tmp/initramfs.cpio"
	rm -f "$kdir"/initramfs-*.cpio
	mv "$tmp/initramfs.cpio" "$initrd"
	rm -rf "$tmp"
	trap - EXIT
fi

# Drop what older kernel and busybox packages left.
for d in "$cache"/kernel-* "$cache"/busybox-*; do
	[ "$d" = "$kdir" ] || [ "$d" = "$bbdir" ] || rm -rf "$d"
done
kernel=$kdir/vmlinuz
[ -f "$kdir/vmlinux" ] && kernel=$kdir/vmlinux
cat >"$cache/current.env.tmp" <<EOF
KVER=$kver
INITHASH=$inithash
KERNEL=$kernel
INITRD=$initrd
EOF
mv "$cache/current.env.tmp" "$cache/current.env"
log "ready: kernel $kver, $(du -h "$initrd" | cut -f1) initramfs in $cache"
