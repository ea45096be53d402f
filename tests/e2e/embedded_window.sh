#!/bin/sh
# railbench --embedded: railgated grants a job that asks for no pool 64 KiB
# of chunks per rail (16 of 4 KiB at 4200, at least 4), 64 chunks under
# 2 KiB (1408 bytes at MTU 1500), 4 jumbo chunks (8896 bytes at MTU 9000),
# and --pool still asks for its own.
#   embedded_window.sh RAILBENCH
set -u
railbench=$1
pool_of() { # ARGS... -> the pool railbench's notes report
  "$railbench" --embedded --workers 2 --count 100000 -n 1 -w 0 "$@" 2>&1 |
    sed -n 's/.*chunk [0-9]* B, pool \([0-9]*\),.*/\1/p'
}
check() { # WANT ARGS...
  want=$1
  shift
  got=$(pool_of "$@")
  [ "$got" = "$want" ] || { echo "FAIL: railbench --embedded $*: pool '$got', want $want" >&2; exit 1; }
  echo "ok: $* -> pool $got"
}
check 64 --mtu 1500
check 64 --mtu 1000
check 4 --mtu 9000
check 16 --mtu 4200
check 32 --mtu 9000 --pool 32
