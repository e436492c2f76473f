#!/bin/sh
# guest script: calibrate SIS_UTIL, a full scan and SIS_FIT under the same mixed hackbench
# load, then A/B SIS_UTIL against NO_SIS_UTIL and SIS_FIT against SIS_UTIL on hackbench.
# shellcheck source=SCRIPTDIR/../calibrate-load.sh
. "$(dirname "$0")/../calibrate-load.sh"
sched_start
phase() {
  name=$1; shift
  scx_sisutil features "$@" >/dev/null
  echo "=== calibrate $name: $(scx_sisutil features | awk '$2=="on"{printf "%s ", $1}')"
  echo "\$ scx_sisutil calibrate --interval 20 --plot /tmp/$name.png"
  scx_sisutil calibrate --interval 20 --plot /tmp/"$name".png
  scx_sisutil calibrate --interval 20 --json > /tmp/"$name".json
  echo "--- json $name"; cat /tmp/"$name".json
  echo "--- png $name"; base64 /tmp/"$name".png; echo "--- end png"
}
bursty & L=$!
phase sis_util SIS_UTIL NO_SIS_FIT
phase full_scan NO_SIS_UTIL NO_SIS_PROP NO_SIS_FIT
phase sis_fit SIS_UTIL SIS_FIT
kill $L; sleep 1; killall hackbench 2>/dev/null; sleep 1
scx_sisutil features SIS_UTIL NO_SIS_FIT >/dev/null
echo "=== ab SIS_UTIL vs NO_SIS_UTIL"
echo '$ scx_sisutil ab --a SIS_UTIL --b NO_SIS_UTIL --rounds 8 -- hackbench -g 4 -l 200'
scx_sisutil ab --a SIS_UTIL --b NO_SIS_UTIL --rounds 8 -- hackbench -g 4 -l 200
echo "=== ab SIS_UTIL vs SIS_UTIL,SIS_FIT"
echo '$ scx_sisutil ab --a SIS_UTIL,NO_SIS_FIT --b SIS_UTIL,SIS_FIT --rounds 8 -- hackbench -g 4 -l 200'
scx_sisutil ab --a SIS_UTIL,NO_SIS_FIT --b SIS_UTIL,SIS_FIT --rounds 8 -- hackbench -g 4 -l 200
sched_stop
tail -3 /tmp/sched.log
