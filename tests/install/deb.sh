#!/usr/bin/env bash
# The Debian package as an operator installs it: tools/make-deb.sh builds it
# (its own release tree for /usr and /etc, kept beside the build directory:
# BUILD-deb, at the same depth under the source, so that with ccache, which
# tools/setup.sh installs, its objects are the release tree's, cached),
# dpkg -i installs it into a scratch root (dpkg --root: the host's own
# package database is not touched), and the installed railgated --check and
# railctl --version run from there. Then the package's metadata: its
# Depends from dpkg-shlibdeps, /etc/railgate/railgated.toml a conffile kept
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
