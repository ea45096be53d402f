#!/usr/bin/env bash
# Builds railgate_VERSION_ARCH.deb from `meson install`: a release tree
# configured for Debian's paths (/usr, /etc), installed into a staging root,
# with the package's Depends from dpkg-shlibdeps, librailgate's symbols file
# (for packages built against it), /etc/railgate/railgated.toml as a
# conffile, and maintainer scripts that create the railgate group and tell
# systemd about the unit (nothing is enabled or started: the operator edits
# the config, runs railgated --check, then systemctl enable --now).
#   tools/make-deb.sh [OUT_DIR [BUILD_DIR]]
# OUT_DIR defaults to the current directory; BUILD_DIR (default build-deb) is
# configured once and rebuilt incrementally.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-.}" && cd "${1:-.}" && pwd)
tree=${2:-$src/build-deb}
if [ ! -f "$tree/build.ninja" ]; then
  meson setup "$tree" "$src" --buildtype=release --prefix=/usr --sysconfdir=/etc --libdir=lib/x86_64-linux-gnu \
    -Dtests=false -Dfuzz=disabled > /dev/null
fi
ninja -C "$tree" > /dev/null
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
DESTDIR=$stage meson install -C "$tree" --no-rebuild --quiet > /dev/null

version=$(meson introspect "$tree" --projectinfo | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
arch=$(dpkg --print-architecture)
# Debian's python3 imports from /usr/lib/python3/dist-packages, not from
# the site-packages meson picks for prefix /usr.
for d in "$stage"/usr/lib/python3*/site-packages; do
  [ -d "$d" ] || continue
  mkdir -p "$stage/usr/lib/python3/dist-packages"
  mv "$d"/* "$stage/usr/lib/python3/dist-packages/"
  rm -rf "$(dirname "$d")"
done
# Man pages compressed, as Debian ships them.
find "$stage/usr/share/man" -type f -name '*.[1-8]' -exec gzip -9n {} +

# Depends: the shared libraries the ELF files need, by package.
work=$(mktemp -d)
trap 'rm -rf "$stage" "$work"' EXIT
mkdir -p "$work/debian"
printf 'Source: railgate\n\nPackage: railgate\nArchitecture: any\n' > "$work/debian/control"
elves=$(find "$stage/usr/bin" "$stage/usr/lib" -type f \( -perm -u+x -o -name '*.so*' \) -exec sh -c '[ "$(head -c 4 "$1" | tail -c 3)" = ELF ] && echo "$1"' sh {} \;)
# shellcheck disable=SC2086
depends=$(cd "$work" && dpkg-shlibdeps -O -l"$stage/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)" \
  --ignore-missing-info $elves 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || { echo "make-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

mkdir -p "$stage/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CTL
Package: railgate
Version: $version
Architecture: $arch
Maintainer: railgate developers <railgate@localhost>
Installed-Size: $size
Depends: $depends
Recommends: systemd, dpdk, rdma-core
Section: net
Priority: optional
Homepage: https://localhost/railgate
Description: multi-rail gradient aggregation data plane for AI training clusters
 railgated sums the gradient chunks that the ranks of a training job stripe
 over several rails (DPDK kernel-bypass Ethernet, or RoCE/InfiniBand through
 rdma-core) and returns the result to every rank, with traffic classes and a
 gateway. railctl controls it; railbench and raillat measure it; librailgate
 and its Python binding connect training jobs.
CTL
# librailgate's symbols file: a package built against it then depends on the
# version that brought the symbols it uses (dpkg-shlibdeps). Each symbol
# version node is a release: RAILGATE_0 is 0.1.0, RAILGATE_X.Y is X.Y.0.
lib=$(find "$stage/usr/lib" -name 'librailgate.so.0' | head -n 1)
[ -n "$lib" ] || { echo "make-deb: librailgate.so.0 not installed" >&2; exit 1; }
{
  echo "librailgate.so.0 railgate #MINVER#"
  objdump -T "$lib" | awk '$NF ~ /^(rg_|RAILGATE_)/ {
      v = $(NF - 1); gsub(/[()]/, "", v)
      r = v == "RAILGATE_0" ? "0.1.0" : substr(v, 10) ".0"
      print " " $NF "@" v " " r }' | sort
} > "$stage/DEBIAN/symbols"
grep -q ' rg_create@RAILGATE_0 ' "$stage/DEBIAN/symbols" || { echo "make-deb: no versioned symbols in $lib" >&2; exit 1; }
# Files under /etc are the operator's: kept, and asked about, on upgrade.
(cd "$stage" && find etc -type f | sed 's|^|/|') > "$stage/DEBIAN/conffiles"
cat > "$stage/DEBIAN/postinst" <<'SH'
#!/bin/sh
set -e
# Into a scratch root (dpkg --root), there is no system to tell.
[ -z "${DPKG_ROOT:-}" ] || exit 0
if [ "$1" = configure ]; then
  if command -v systemd-sysusers > /dev/null; then systemd-sysusers railgate.conf
  elif ! getent group railgate > /dev/null; then addgroup --system railgate; fi
  [ -d /run/systemd/system ] && systemctl daemon-reload || true
  command -v ldconfig > /dev/null && ldconfig || true
fi
exit 0
SH
cat > "$stage/DEBIAN/prerm" <<'SH'
#!/bin/sh
set -e
[ -z "${DPKG_ROOT:-}" ] || exit 0
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl stop railgated.service > /dev/null 2>&1 || true
fi
exit 0
SH
cat > "$stage/DEBIAN/postrm" <<'SH'
#!/bin/sh
set -e
[ -z "${DPKG_ROOT:-}" ] || exit 0
[ -d /run/systemd/system ] && systemctl daemon-reload || true
exit 0
SH
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"
deb=$out/railgate_${version}_${arch}.deb
dpkg-deb --root-owner-group --build "$stage" "$deb" > /dev/null
echo "$deb"
