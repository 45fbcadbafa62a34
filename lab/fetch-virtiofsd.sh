#!/usr/bin/env bash
# fetch-virtiofsd.sh CACHE_DIR — build CACHE_DIR/virtiofsd.cpio: Debian
# trixie's arm64 virtiofsd (/usr/libexec/virtiofsd) with the shared libraries
# it loads and the dynamic loader, as an uncompressed newc cpio archive laid
# out as a merged-/usr root (/lib -> usr/lib). The lab unpacks it into the lab
# machine's root (lab -cpio) for the --share tests (DESIGN.md section 8).
#
# Packages come through lab/apt.sh's private apt configuration; this script
# keeps its downloads in a directory of its own so it can run next to
# fetch-qemu.sh. Re-running with the archive present is a no-op.
set -euo pipefail

cache=${1:?usage: fetch-virtiofsd.sh CACHE_DIR}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
if [[ -s $cache/virtiofsd.cpio ]]; then
	exit 0
fi
for tool in cpio aarch64-linux-gnu-readelf dpkg-deb; do
	command -v "$tool" >/dev/null || { echo "lab: $tool is missing (make lab-deps installs it)" >&2; exit 1; }
done

. "$(dirname "$0")/apt.sh"
lab_apt_update
dl=$apt/virtiofsd-cache
opts+=(-o "Dir::Cache=$dl")
rm -rf "$dl" && mkdir -p "$dl/archives/partial"

echo "lab: downloading virtiofsd (arm64) and its dependencies" >&2
apt-get -q "${opts[@]}" install --download-only -y --no-install-recommends virtiofsd:arm64 \
	>"$apt/virtiofsd-download.log" 2>&1 || {
	cat "$apt/virtiofsd-download.log" >&2
	echo "lab: downloading virtiofsd for arm64 failed" >&2
	exit 1
}

work=$apt/virtiofsd
rm -rf "$work" && mkdir -p "$work/x" "$work/root/usr/libexec" "$work/root/usr/lib/aarch64-linux-gnu"
for deb in "$dl"/archives/*.deb; do dpkg-deb -x "$deb" "$work/x"; done
x=$work/x root=$work/root
[[ -x $x/usr/libexec/virtiofsd ]] || { echo "lab: the packages hold no /usr/libexec/virtiofsd" >&2; exit 1; }

# Only virtiofsd and the closure of its DT_NEEDED libraries.
cp "$x/usr/libexec/virtiofsd" "$root/usr/libexec/"
todo=("$root/usr/libexec/virtiofsd")
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
cp -L "$x/usr/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1" "$root/usr/lib/aarch64-linux-gnu/" 2>/dev/null || true
ln -s aarch64-linux-gnu/ld-linux-aarch64.so.1 "$root/usr/lib/ld-linux-aarch64.so.1"
ln -s usr/lib "$root/lib"
version=$(dpkg-deb -f "$(ls "$dl"/archives/virtiofsd_*.deb)" Version)

(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$cache/virtiofsd.cpio.tmp"
mv "$cache/virtiofsd.cpio.tmp" "$cache/virtiofsd.cpio"
echo "$version" >"$cache/virtiofsd-version"
rm -rf "$work" "$dl"
echo "lab: cached virtiofsd $version ($(du -h "$cache/virtiofsd.cpio" | cut -f1)) in $cache/virtiofsd.cpio" >&2
