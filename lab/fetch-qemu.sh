#!/usr/bin/env bash
# fetch-qemu.sh CACHE_DIR — build CACHE_DIR/qemu.cpio: Debian trixie's arm64
# qemu-system-aarch64 (package qemu-system-arm) with the shared libraries it
# loads and the dynamic loader, as an uncompressed newc cpio archive laid out
# as a merged-/usr root (/lib -> usr/lib). The lab unpacks it into the lab
# machine's root filesystem when asked to (lab -cpio), so tests can run QEMU
# with -accel kvm as a VMM for mvm to profile (DESIGN.md section 7).
#
# The packages come through the private apt configuration of lab/apt.sh; the
# host's apt setup is untouched. Re-running with the archive present is a
# no-op.
set -euo pipefail

cache=${1:?usage: fetch-qemu.sh CACHE_DIR}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
if [[ -s $cache/qemu.cpio ]]; then
	exit 0
fi
for tool in cpio aarch64-linux-gnu-readelf dpkg-deb; do
	command -v "$tool" >/dev/null || { echo "lab: $tool is missing (make lab-deps installs it)" >&2; exit 1; }
done

. "$(dirname "$0")/apt.sh"
lab_apt_update

# apt-get install --download-only with an empty dpkg status resolves the whole
# dependency closure (about 90 packages) and only downloads it.
echo "lab: downloading qemu-system-arm (arm64) and its dependencies" >&2
rm -rf "$apt/cache/archives" && mkdir -p "$apt/cache/archives/partial"
apt-get -q "${opts[@]}" install --download-only -y --no-install-recommends qemu-system-arm:arm64 \
	>"$apt/qemu-download.log" 2>&1 || {
	cat "$apt/qemu-download.log" >&2
	echo "lab: downloading qemu-system-arm for arm64 failed" >&2
	exit 1
}

work=$apt/qemu
rm -rf "$work" && mkdir -p "$work/x" "$work/root/usr/bin" "$work/root/usr/lib/aarch64-linux-gnu"
for deb in "$apt"/cache/archives/*.deb; do dpkg-deb -x "$deb" "$work/x"; done
x=$work/x root=$work/root
[[ -x $x/usr/bin/qemu-system-aarch64 ]] || { echo "lab: the packages hold no qemu-system-aarch64" >&2; exit 1; }

# Keep only qemu-system-aarch64 and the closure of its DT_NEEDED libraries
# (about a fifth of the unpacked 180 MB).
cp "$x/usr/bin/qemu-system-aarch64" "$root/usr/bin/"
todo=("$root/usr/bin/qemu-system-aarch64")
declare -A seen=()
while ((${#todo[@]})); do
	elf=${todo[0]} todo=("${todo[@]:1}")
	for lib in $(aarch64-linux-gnu-readelf -d "$elf" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
		[[ -n ${seen[$lib]:-} ]] && continue
		seen[$lib]=1
		src=$x/usr/lib/aarch64-linux-gnu/$lib
		[[ -e $src ]] || { echo "lab: $lib (needed by $(basename "$elf")) is in none of the packages" >&2; exit 1; }
		cp -L "$src" "$root/usr/lib/aarch64-linux-gnu/$lib"
		todo+=("$root/usr/lib/aarch64-linux-gnu/$lib")
	done
done
ln -s aarch64-linux-gnu/ld-linux-aarch64.so.1 "$root/usr/lib/ld-linux-aarch64.so.1"
ln -s usr/lib "$root/lib"
version=$(dpkg-deb -f "$(ls "$apt"/cache/archives/qemu-system-arm_*.deb)" Version)

(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$cache/qemu.cpio.tmp"
mv "$cache/qemu.cpio.tmp" "$cache/qemu.cpio"
echo "$version" >"$cache/qemu-version"
rm -rf "$work" "$apt/cache/archives"
echo "lab: cached qemu-system-aarch64 $version ($(du -h "$cache/qemu.cpio" | cut -f1)) in $cache/qemu.cpio" >&2
