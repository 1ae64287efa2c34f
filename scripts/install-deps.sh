#!/bin/sh
# scripts/install-deps.sh — install the Debian packages ward needs to build,
# test and benchmark, only those that are missing. Needs root to install.
set -eu
pkgs="meson ninja-build pkg-config gcc clang libc6-dev libseccomp-dev libjansson-dev
libsodium-dev libmicrohttpd-dev libssl-dev libc-ares-dev libhttp-parser-dev libnftnl-dev libmnl-dev libcurl4-openssl-dev
openssl git nftables python3-requests python3 python3-numpy python3-pandas python3-matplotlib python3-pip python3-venv
nodejs bubblewrap util-linux procps libclang-rt-14-dev curl hyperfine"
missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
# npm comes with nodejs from some archives and as its own package in Debian's
command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "ward: missing packages:$missing (run 'make deps' as root)" >&2
	exit 1
fi
echo "ward: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
