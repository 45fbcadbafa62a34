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

# Reuse the Debian mirror the host already uses (deb822 or one-line format).
mirror=$(grep -rhvE '^[[:space:]]*#' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
	grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v -- '-security' | head -n1 | tr -d ' ' || true)
mirror=${mirror:-http://deb.debian.org/debian}
mirror=${mirror%/}

apt=$cache/apt
mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/deb"
echo "deb [arch=arm64] $mirror trixie main" >"$apt/sources.list"
opts=(
	-o "Dir::Etc::SourceList=$apt/sources.list"
	-o "Dir::Etc::SourceParts=/dev/null"
	-o "Dir::State::Lists=$apt/lists"
	-o "Dir::Cache=$apt/cache"
	-o "Dir::State::status=/dev/null"
	-o "APT::Architectures=arm64"
	-o "APT::Architecture=arm64"
	-o "Debug::NoLocking=1"
)
mkdir -p "$apt/cache/archives/partial"
echo "lab: fetching the trixie arm64 package lists from $mirror" >&2
apt-get -q "${opts[@]}" update >"$apt/update.log" 2>&1 && ! grep -q '^[WE]: Failed to fetch' "$apt/update.log" || {
	cat "$apt/update.log" >&2
	echo "lab: apt-get update for trixie arm64 failed (see above)" >&2
	exit 1
}

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
