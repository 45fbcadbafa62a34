#!/usr/bin/env bash
# fetch-symbols.sh CACHE_DIR — the lab kernel's own symbol files, for the
# tests of `mvm run --guest-symbols`: CACHE_DIR/System.map and
# CACHE_DIR/vmlinux.sym, both from the kernel's Debian -dbg package
# (linux-image-VERSION-dbg, the version in CACHE_DIR/kernel-version, so the
# symbols are those of CACHE_DIR/vmlinuz).
#
# vmlinux.sym is that package's vmlinux (a 350 MB ELF with DWARF) reduced to
# its ELF headers and symbol table: objcopy --only-keep-debug makes every
# loaded section NOBITS, --strip-debug then drops the DWARF. It is still the
# kernel's ELF (same sections, addresses and symbols, about 15 MB), which is
# what mvm reads from a vmlinux; the DWARF and code are not needed for that.
# The package is about 320 MB; only the two files are kept. Re-running with
# both present is a no-op.
set -euo pipefail

cache=${1:?usage: fetch-symbols.sh CACHE_DIR}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
if [[ -s $cache/vmlinux.sym && -s $cache/System.map ]]; then
	exit 0
fi
for tool in aarch64-linux-gnu-objcopy dpkg-deb tar; do
	command -v "$tool" >/dev/null || { echo "lab: $tool is missing (make lab-deps installs it)" >&2; exit 1; }
done
[[ -s $cache/kernel-version ]] || { echo "lab: $cache/kernel-version is missing (run lab/fetch.sh first)" >&2; exit 1; }
ver=$(sed 's/^vmlinuz-//' "$cache/kernel-version")

. "$(dirname "$0")/apt.sh"
lab_apt_update

work=$apt/symbols
rm -rf "$work" && mkdir -p "$work/deb"
echo "lab: downloading linux-image-$ver-dbg (arm64, ~320 MB) for the kernel's symbol files" >&2
(cd "$work/deb" && apt-get -q "${opts[@]}" download "linux-image-$ver-dbg:arm64" >"$work/download.log" 2>&1) || {
	cat "$work/download.log" >&2
	echo "lab: downloading linux-image-$ver-dbg failed" >&2
	exit 1
}
deb=$(ls "$work"/deb/*.deb)
(cd "$work" && dpkg-deb --fsys-tarfile "$deb" |
	tar -x "./usr/lib/debug/boot/vmlinux-$ver" "./usr/lib/debug/boot/System.map-$ver")
boot=$work/usr/lib/debug/boot
aarch64-linux-gnu-objcopy --only-keep-debug "$boot/vmlinux-$ver" "$work/vmlinux.nobits"
aarch64-linux-gnu-objcopy --strip-debug "$work/vmlinux.nobits" "$cache/vmlinux.sym.tmp"
cp "$boot/System.map-$ver" "$cache/System.map.tmp"
mv "$cache/vmlinux.sym.tmp" "$cache/vmlinux.sym"
mv "$cache/System.map.tmp" "$cache/System.map"
rm -rf "$work"
echo "lab: cached the symbol files of $ver in $cache (vmlinux.sym, System.map)" >&2
