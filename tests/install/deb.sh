#!/usr/bin/env bash
# The Debian package as an operator installs it: tools/make-deb.sh builds it
# (its own release tree for /usr and /etc, kept beside the build directory:
# BUILD-deb, at the same depth under the source, so that with ccache, which
# tools/setup.sh installs, its objects are the release tree's, cached),
# dpkg -i installs it into a scratch root (dpkg --root: the host's own
# package database is not touched), and the installed railgated --check and
# railctl --version run from there. Then the package's metadata: its
# Depends from dpkg-shlibdeps, librailgate's symbols file (what a package
# built against it depends on), /etc/railgate/railgated.toml a conffile kept
# on remove and gone on purge.
#   deb.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 src=$2
log=$(mktemp -d) r=$(mktemp -d)
trap 'rm -rf "$log" "$r"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }
command -v dpkg-deb > /dev/null && command -v dpkg-shlibdeps > /dev/null || { echo "SKIP: no dpkg-deb/dpkg-shlibdeps"; exit 77; }

deb=$("$src/tools/make-deb.sh" "$log" "$build-deb" 2> "$log/make.err") || fail "make-deb.sh: $(cat "$log/make.err")"
[ -s "$deb" ] || fail "no .deb"
info=$(dpkg-deb --info "$deb")
echo "$info" | grep -q "^ Package: railgate$" || fail "control: $info"
echo "$info" | grep -E "^ Depends: " | grep -qE "librte-eal[0-9]+ " && echo "$info" | grep -E "^ Depends: " | grep -q "libibverbs1 " || fail "Depends lacks DPDK or verbs: $(echo "$info" | grep Depends)"
ok "$(basename "$deb"): $(du -k "$deb" | cut -f1) KiB, $(echo "$info" | grep -o 'Depends: .*' | tr ',' '\n' | wc -l) dependencies"

# librailgate's symbols file: a package built against the library depends
# on the release that brought what it calls. A program calling 0.2's
# rg_get_stats needs railgate (>= 0.2.0); one calling only 0.1's functions,
# (>= 0.1.0). dpkg-shlibdeps reads the file from the unpacked package, as in
# a package build tree (debian/PACKAGE/DEBIAN/symbols).
pkg=$log/shlibs/debian/railgate
mkdir -p "$(dirname "$pkg")"
dpkg-deb -R "$deb" "$pkg" || fail "dpkg-deb -R"
grep -q "^ rg_get_stats@RAILGATE_0.2 0.2.0$" "$pkg/DEBIAN/symbols" && grep -q "^ rg_get_stats@RAILGATE_0 0.1.0$" "$pkg/DEBIAN/symbols" ||
  fail "DEBIAN/symbols: $(cat "$pkg/DEBIAN/symbols")"
printf 'Source: x\n\nPackage: x\nArchitecture: any\n' > "$log/shlibs/debian/control"
libdir=$(dirname "$(find "$pkg/usr/lib" -name librailgate.so.0 | head -n 1)")
needs() { # NAME C-BODY -> the railgate dependency dpkg-shlibdeps gives a program of that body
  printf '#include <railgate.h>\nint main(void) { %s }\n' "$2" > "$log/shlibs/$1.c"
  cc -I"$pkg/usr/include" "$log/shlibs/$1.c" "$libdir/librailgate.so.0" -o "$log/shlibs/$1" || fail "cc $1"
  (cd "$log/shlibs" && dpkg-shlibdeps -O -l"$libdir" "$1" 2> /dev/null) | grep -o 'railgate ([^)]*)'
}
v02=$(needs stats 'rg_stats s = RG_STATS_INIT; return rg_get_stats(0, &s);')
v01=$(needs config 'rg_config c; rg_config_init(&c); return 0;')
[ "$v02" = "railgate (>= 0.2.0)" ] && [ "$v01" = "railgate (>= 0.1.0)" ] ||
  fail "dpkg-shlibdeps against the package's symbols: '$v02' for rg_get_stats, '$v01' for rg_config_init"
ok "librailgate's symbols file: a program calling rg_get_stats needs $v02, one calling rg_config_init $v01"

mkdir -p "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates" "$r/var/lib/dpkg/triggers"
touch "$r/var/lib/dpkg/status"
dpkg --root="$r" --log=/dev/null --force-depends --force-script-chrootless -i "$deb" > "$log/dpkg.log" 2>&1 ||
  fail "dpkg -i: $(cat "$log/dpkg.log")"
dpkg --root="$r" -s railgate | grep -q "^Status: install ok installed" || fail "not installed: $(dpkg --root="$r" -s railgate)"
dpkg-query --admindir="$r/var/lib/dpkg" -W -f='${Conffiles}\n' railgate | grep -q "/etc/railgate/railgated.toml" ||
  fail "railgated.toml is not a conffile"
ok "dpkg -i into a scratch root: installed, /etc/railgate/railgated.toml a conffile"

# The installed programs, run from the scratch root.
"$r/usr/bin/railctl" --version | head -n 1 | grep -q "^railctl " || fail "railctl --version"
ok "$("$r/usr/bin/railctl" --version | head -n 1)"
"$r/usr/bin/railgated" --check > "$log/check.log" 2>&1 || fail "railgated --check (embedded default): $(cat "$log/check.log")"
"$r/usr/bin/railgated" --config "$r/etc/railgate/railgated.toml" --check > "$log/etc.log" 2>&1; rc=$?
[ $rc -le 1 ] && grep -q "is valid" "$log/etc.log" || fail "--check of the installed config exited $rc: $(cat "$log/etc.log")"
grep -q "^ExecStart=/usr/bin/railgated --config /etc/railgate/railgated.toml$" "$r/usr/lib/systemd/system/railgated.service" ||
  fail "the unit's ExecStart"
for m in man8/railgated.8 man5/railgated.toml.5; do
  w=$(zcat "$r/usr/share/man/$m.gz" | groff -man -ww -z -Tutf8 2>&1)
  [ -z "$w" ] || fail "$m.gz: $w"
done
[ -f "$r/usr/lib/python3/dist-packages/railgate/__init__.py" ] || fail "the Python binding is not in dist-packages"
ok "railgated --check from the package: the embedded default ready; /etc/railgate/railgated.toml valid (exit $rc here: $(grep -c 'host: problem' "$log/etc.log") host problem(s), no NIC)"

dpkg --root="$r" --log=/dev/null --force-script-chrootless -r railgate > "$log/rm.log" 2>&1 || fail "dpkg -r: $(cat "$log/rm.log")"
[ ! -e "$r/usr/bin/railgated" ] && [ -f "$r/etc/railgate/railgated.toml" ] || fail "remove: binaries left or config lost"
dpkg --root="$r" --log=/dev/null --force-script-chrootless -P railgate > "$log/rm.log" 2>&1 || fail "dpkg -P: $(cat "$log/rm.log")"
[ ! -e "$r/etc/railgate/railgated.toml" ] || fail "purge left the config"
ok "dpkg -r keeps the config, dpkg -P removes it"
echo PASS
