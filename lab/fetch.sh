#!/usr/bin/env bash
# fetch.sh CACHE_DIR — download Debian trixie's arm64 cloud kernel and
# busybox-static:arm64 into CACHE_DIR with a private apt configuration, so the
# host's own apt sources, lists and architectures stay untouched.
#
# Result: CACHE_DIR/vmlinuz (plain arm64 Image), CACHE_DIR/busybox (static) and
# CACHE_DIR/modules/*.ko: the kernel's modules that mvm's guests (virtio) and the
# lab machine (tun) load, decompressed, from the same kernel package as vmlinuz;
# and CACHE_DIR/modules-xz/*.ko.xz: some of them as the package ships them
# (xz-compressed), for command mode's compressed-module test.
# Re-running with all present is a no-op; a cache that lacks some of them (from
# before they were kept, or before one was added to the list) gets them from the
# package of its cached kernel version, added beside the others, and the cached
# kernel is left as it is.
set -euo pipefail

cache=${1:?usage: fetch.sh CACHE_DIR}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
# Modules kept (file names in the package, without .ko.xz).
# overlay: command mode's --overlay (cmdmode), a module in Debian's kernels.
modules=(virtio_mmio virtio_blk failover net_failover virtio_net virtio-rng tun overlay)
# Kept as shipped, .ko.xz (also decompressed above): the module command
# mode's init must load for any boot, so a boot shows the kernel took it.
xz_modules=(virtio_mmio)
missing=()
for m in "${modules[@]}"; do
	[[ -s $cache/modules/$m.ko ]] || missing+=("$m")
done
for m in "${xz_modules[@]}"; do
	[[ -s $cache/modules-xz/$m.ko.xz ]] || missing+=("xz:$m")
done
if [[ -s $cache/vmlinuz && -s $cache/busybox && -f $cache/modules/.complete && ${#missing[@]} -eq 0 ]]; then
	exit 0
fi
command -v xz >/dev/null || { echo "lab: xz is missing (install xz-utils; make lab-deps does)" >&2; exit 1; }

. "$(dirname "$0")/apt.sh"
lab_apt_update

# The kernel already cached, if trixie still lists it (so modules match it);
# else the newest 6.12 cloud kernel image package that trixie lists.
listed=$(apt-cache "${opts[@]}" pkgnames linux-image-6.12 2>/dev/null |
	grep -E '^linux-image-6\.12\.[^ ]*-cloud-arm64$' | sort -V || true)
kpkg=$(tail -n1 <<<"$listed")
if [[ -s $cache/vmlinuz && -s $cache/kernel-version ]]; then
	cached=linux-image-$(sed 's/^vmlinuz-//' "$cache/kernel-version")
	if grep -qxF -- "$cached" <<<"$listed"; then kpkg=$cached; fi
	if [[ -s $cache/busybox && -f $cache/modules/.complete && $kpkg != "$cached" ]]; then
		# Only modules are missing: another kernel's would not load into
		# the cached one, and replacing that kernel under the lab runs of
		# others sharing this cache is not this script's to do.
		echo "lab: $cached is no longer in trixie's lists; its modules ${missing[*]} cannot be fetched (rm -rf $cache and make lab-fetch for the newest kernel)" >&2
		exit 1
	fi
fi
if [[ -z $kpkg ]]; then
	echo "lab: no linux-image-6.12.*-cloud-arm64 package in trixie's lists" >&2
	exit 1
fi
if [[ -s $cache/vmlinuz && -s $cache/busybox && -f $cache/modules/.complete ]]; then
	# Add the missing modules of the cached kernel beside the others, each
	# renamed into place: lab runs reading the directory meanwhile see
	# every file whole.
	echo "lab: downloading $kpkg for its modules ${missing[*]}" >&2
	(cd "$apt/deb" && apt-get -q "${opts[@]}" download "$kpkg:arm64" >"$apt/download.log" 2>&1) || {
		cat "$apt/download.log" >&2
		echo "lab: downloading $kpkg failed" >&2
		exit 1
	}
	x=$apt/x
	rm -rf "$x" && mkdir -p "$x"
	for deb in "$apt"/deb/*.deb; do dpkg-deb -x "$deb" "$x"; done
	mkdir -p "$cache/modules-xz"
	for m in "${missing[@]}"; do
		ko=$(find "$x/usr/lib/modules" -name "${m#xz:}.ko.xz" | head -n1)
		if [[ -z $ko ]]; then
			echo "lab: the kernel package has no module ${m#xz:}" >&2
			exit 1
		fi
		if [[ $m == xz:* ]]; then
			cp "$ko" "$cache/modules-xz/${m#xz:}.ko.xz.tmp.$$"
			mv "$cache/modules-xz/${m#xz:}.ko.xz.tmp.$$" "$cache/modules-xz/${m#xz:}.ko.xz"
			continue
		fi
		xz -dc "$ko" >"$cache/modules/$m.ko.tmp.$$"
		mv "$cache/modules/$m.ko.tmp.$$" "$cache/modules/$m.ko"
	done
	rm -rf "$x" "$apt/deb"
	echo "lab: added the modules ${missing[*]} of $(cat "$cache/kernel-version") to $cache/modules (xz: kept compressed in $cache/modules-xz)" >&2
	exit 0
fi
echo "lab: downloading $kpkg and busybox-static (arm64)" >&2
(cd "$apt/deb" && apt-get -q "${opts[@]}" download "$kpkg:arm64" busybox-static:arm64 >"$apt/download.log" 2>&1) || {
	cat "$apt/download.log" >&2
	echo "lab: downloading arm64 packages failed" >&2
	exit 1
}

x=$apt/x
rm -rf "$x" && mkdir -p "$x"
for deb in "$apt"/deb/*.deb; do dpkg-deb -x "$deb" "$x"; done
k=$(ls "$x"/boot/vmlinuz-* | head -n1)
bb=$(ls "$x"/usr/bin/busybox "$x"/bin/busybox 2>/dev/null | head -n1 || true)
if [[ -z $k || -z $bb ]]; then
	echo "lab: the downloaded packages hold no kernel Image or busybox binary" >&2
	exit 1
fi
cp "$k" "$cache/vmlinuz.tmp"
mv "$cache/vmlinuz.tmp" "$cache/vmlinuz"
cp "$bb" "$cache/busybox.tmp"
mv "$cache/busybox.tmp" "$cache/busybox"
basename "$k" >"$cache/kernel-version"
mods=$cache/modules.tmp.$$
rm -rf "$mods" && mkdir -p "$mods"
for m in "${modules[@]}"; do
	ko=$(find "$x/usr/lib/modules" -name "$m.ko.xz" | head -n1)
	if [[ -z $ko ]]; then
		echo "lab: the kernel package has no module $m" >&2
		exit 1
	fi
	xz -dc "$ko" >"$mods/$m.ko"
done
xzmods=$cache/modules-xz.tmp.$$
rm -rf "$xzmods" && mkdir -p "$xzmods"
for m in "${xz_modules[@]}"; do
	cp "$(find "$x/usr/lib/modules" -name "$m.ko.xz" | head -n1)" "$xzmods/$m.ko.xz"
done
touch "$mods/.complete"
rm -rf "$cache/modules" && mv "$mods" "$cache/modules"
rm -rf "$cache/modules-xz" && mv "$xzmods" "$cache/modules-xz"
rm -rf "$x" "$apt/deb"
echo "lab: cached $(cat "$cache/kernel-version"), its modules and busybox in $cache" >&2
