#!/usr/bin/env bash
# host-deps.sh — install the Debian packages the lab and the payload build
# need, only those that are missing. Needs root (or sudo) when it installs.
set -euo pipefail

need=()
command -v qemu-system-aarch64 >/dev/null || need+=(qemu-system-arm)
command -v cpio >/dev/null || need+=(cpio)
# TestPromtoolCheck lints the metrics with promtool (Debian: prometheus).
command -v promtool >/dev/null || need+=(prometheus)
command -v aarch64-linux-gnu-as >/dev/null || need+=(binutils-aarch64-linux-gnu)
command -v dtc >/dev/null || need+=(device-tree-compiler)
command -v xz >/dev/null || need+=(xz-utils)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
# make test renders the HTML reports in a real browser (report/browser_test.go).
command -v chromium >/dev/null || need+=(chromium)
command -v apt-get >/dev/null || { [[ ${#need[@]} -eq 0 ]] && exit 0; echo "lab: missing ${need[*]} and no apt-get to install them" >&2; exit 1; }
[[ ${#need[@]} -eq 0 ]] && exit 0

sudo=
if [[ $(id -u) -ne 0 ]]; then
	command -v sudo >/dev/null || { echo "lab: need root to install ${need[*]}" >&2; exit 1; }
	sudo=sudo
fi
echo "lab: installing ${need[*]}" >&2
$sudo apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${need[@]}" >/dev/null
