#!/usr/bin/env bash
# LAG versus rail, measured: railbench --embedded with both rails shaped to
# 200 Mbit/s by railgated's transmit scheduler. One flow under the rail
# policy must get about the sum of the links, one flow under LAG about one
# link, and four flows under LAG more than one link. Where the l3l4 hash
# puts flows depends on the job's token, which railbench draws at random:
# one run in eight put all four on one member and the check failed (CI of
# 7e83c8e, three times in a row). Job 1 and token 2 put them 1:3, so about
# 4/3 of a link; railbench's note must say so. Margins are generous; the
# figures are the benchmark's (doc/performance.md).
#   lag_vs_rail.sh RAILBENCH
set -u
# The machine is shared: a run that a neighbour starved may miss the
# margins, so the ordering must hold in one of three runs.
attempt() {
  out=$("$1" --embedded --job 1 --token 2 --rail-rate 200Mbit --lag-table --flows 4 -b 512K -e 512K -n 3 -w 1 2>&1)
  rc=$?
  echo "$out"
  [ $rc -eq 0 ] || { echo "FAIL: railbench exit $rc"; return 1; }
  echo "$out" | grep -q '^# lag, 4 flows: 1:3 on the members' || { echo "FAIL: railbench does not say the four LAG flows are 1:3"; return 1; }
  echo "$out" | awk '
    $1 == "rail" && $2 == 1 { rail1 = $4 }
    $1 == "lag" && $2 == 1 { lag1 = $4 }
    $1 == "lag" && $2 == 4 { lag4 = $4 }
    END {
      if (rail1 == "" || lag1 == "" || lag4 == "") { print "FAIL: table rows missing"; exit 1 }
      if (!(lag1 > 0.6 && lag1 < 1.1)) { print "FAIL: one LAG flow at " lag1 " links, not about one"; exit 1 }
      if (!(rail1 > 1.5 * lag1)) { print "FAIL: one flow under rail (" rail1 ") not well above LAG (" lag1 ")"; exit 1 }
      if (!(rail1 > 1.4 && rail1 < 2.1)) { print "FAIL: one flow under rail at " rail1 " links, not about two"; exit 1 }
      if (!(lag4 > 1.1 * lag1 && lag4 < 1.6 * lag1)) { print "FAIL: four LAG flows 1:3 at " lag4 " links, not about 4/3 of one flow (" lag1 ")"; exit 1 }
      print "PASS: rail 1 flow " rail1 ", lag 1 flow " lag1 ", lag 4 flows " lag4 " (links)"
    }'
}
for try in 1 2 3; do
  attempt "$1" && exit 0
  echo "(attempt $try missed; the machine may be busy)"
done
exit 1
