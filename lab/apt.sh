# apt.sh — sourced by the lab's fetch scripts: a private apt configuration for
# Debian trixie arm64 under $cache/apt, so the host's own apt sources, lists,
# status and architectures stay untouched (DESIGN.md section 4). It sets
# `apt` (the directory) and `opts` (the apt-get/apt-cache options); call
# lab_apt_update before the first apt-get download.

# Reuse the Debian mirror the host already uses (deb822 or one-line format).
mirror=$(grep -rhvE '^[[:space:]]*#' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
	grep -oE 'https?://[^ ]+/debian/?( |$)' | grep -v -- '-security' | head -n1 | tr -d ' ' || true)
mirror=${mirror:-http://deb.debian.org/debian}
mirror=${mirror%/}

apt=$cache/apt
mkdir -p "$apt/lists/partial" "$apt/archives/partial" "$apt/deb" "$apt/cache/archives/partial"
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

lab_apt_update() {
	echo "lab: fetching the trixie arm64 package lists from $mirror" >&2
	apt-get -q "${opts[@]}" update >"$apt/update.log" 2>&1 && ! grep -q '^[WE]: Failed to fetch' "$apt/update.log" || {
		cat "$apt/update.log" >&2
		echo "lab: apt-get update for trixie arm64 failed (see above)" >&2
		exit 1
	}
}
