#!/usr/bin/env bash
# fetch.sh CACHE_DIR — download Debian trixie's arm64 cloud kernel and
# busybox-static:arm64 into CACHE_DIR with a private apt configuration, so the
# host's own apt sources, lists and architectures stay untouched.
#
# Result: CACHE_DIR/vmlinuz (plain arm64 Image) and CACHE_DIR/busybox (static).
# Re-running with both present is a no-op.
set -euo pipefail

cache=${1:?usage: fetch.sh CACHE_DIR}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
if [[ -s $cache/vmlinuz && -s $cache/busybox ]]; then
	exit 0
fi

. "$(dirname "$0")/apt.sh"
lab_apt_update

# The newest 6.12 cloud kernel image package that trixie lists.
kpkg=$(apt-cache "${opts[@]}" pkgnames linux-image-6.12 2>/dev/null |
	grep -E '^linux-image-6\.12\.[^ ]*-cloud-arm64$' | sort -V | tail -n1 || true)
if [[ -z $kpkg ]]; then
	echo "lab: no linux-image-6.12.*-cloud-arm64 package in trixie's lists" >&2
	exit 1
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
rm -rf "$x" "$apt/deb"
echo "lab: cached $(cat "$cache/kernel-version") and busybox in $cache" >&2
