// The watchdog's /bin/sh script (see Watchdog): $1 the lease's limit in hundredths of a
// second (0 without a lease), $2 the hundredths of its first window gone already (the lease
// was last renewed before the watchdog started), $3 cronguard's pid, $4 the command's process
// group when known at the start (a watchdog started again for a command that runs).
//
// Otherwise it reads the group, then waits: a `done` line means cronguard finished normally;
// end of input without it means cronguard died (SIGKILL, the OOM killer) and its pipe closed,
// and then the whole group is killed. With a limit, a timer beside it kills the group too when
// no `beat` line came for $1 hundredths: cronguard is stopped and its lease running out. A
// beat line carries how many hundredths ago the proof it reports was sent (`beat N`): the
// limit counts from then, as the lease's expiry does, not from the line's arrival (a reply
// that came late still proves the lease). The timer reads the time since boot (/proc/uptime,
// in hundredths, by a builtin) rather than counting rounds of sleep: on a busy machine each
// takes longer than asked, and counted rounds let the command outlive the lease. It sleeps
// until the limit would be reached, not a second at a time: a `sleep` a second for each of
// hundreds of leased jobs is CPU taken from their renewals. A beat starts the timer again
// from its new start (a fork per renewal, a third of the ttl apart); the timer ends when the
// watchdog does, its sleep with it.
//
// cronguard writes the group right after the command's spawn, and may die or be stopped
// before it can: the command runs then, the group unknown. So the timer starts before the
// group is read, and is started again, still counting from the last beat, with the group once
// it comes. With no group to kill, the watchdog finds the command by the CRONGUARD_PID=$3 in
// its environment, which the command's descendants inherit, and kills each one's group (field
// 5 of /proc/PID/stat, after the name's last ')'). A child forked but not yet exec'd carries
// cronguard's own environment: after a second the watchdog looks once more. $3 comes as an
// argument, not as $PPID, which the shell reads at its start, when cronguard may be gone.
// The environment is matched whole (grep -z: one record per NUL-ended variable).
export const WATCHDOG_SCRIPT = `limit=$1 cg=$3 group=$4 timer=
now() { read -r up rest < /proc/uptime; now=\${up%.*}\${up#*.}; }
scan() {
  for f in $(grep -lxz "CRONGUARD_PID=$cg" /proc/[0-9]*/environ 2>/dev/null); do
    p=\${f#/proc/}; p=\${p%/environ}
    [ "$p" != $$ ] && [ "$p" != "$cg" ] && read -r stat 2>/dev/null < "/proc/$p/stat" || continue
    set -- \${stat##*)}
    [ "$3" -gt 1 ] 2>/dev/null && [ "$3" != $$ ] && kill -s KILL -- "-$3" 2>/dev/null
  done
}
end() { if [ -n "$group" ]; then kill -s KILL -- "-$group" 2>/dev/null; else scan; fi; }
tick() {
  [ "$limit" -gt 0 ] || return 0
  [ -n "$timer" ] && kill "$timer" 2>/dev/null
  (trap 'kill $s 2>/dev/null; exit' TERM
   while kill -0 $$ 2>/dev/null; do
     now; left=$((last + limit - now)); [ "$left" -le 0 ] && { end; exit; }
     sleep $(((left + 99) / 100)) & s=$!; wait $s; kill $s 2>/dev/null
   done) &
  timer=$!
}
beat() { now; at=$((now - \${1:-0})); [ "$at" -gt "$last" ] && { last=$at; tick; }; }
quit() { [ -n "$timer" ] && kill "$timer" 2>/dev/null; exit 0; }
now; last=$((now - $2))
tick
while [ -z "$group" ]; do
  read -r group ago || { scan; sleep 1; scan; quit; }
  case $group in
    done) quit;;
    beat) beat "$ago"; group=;;
    *) tick;;
  esac
done
while read -r word ago; do
  case $word in
    beat) beat "$ago";;
    done) quit;;
  esac
done
end
quit`;
