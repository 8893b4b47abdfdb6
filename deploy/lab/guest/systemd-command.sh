#!/bin/bash
# ExecStart of lab-command.service in a `deploy/lab/run --systemd` guest (guest/systemd-pid1.sh):
# runs /lab/run/<role>.cmd with its output on the second serial port (the host streams it),
# writes the exit status to /lab/run/<role>.status and the kernel log (systemd's own messages
# included) to /lab/run/<role>.dmesg, the journal to /lab/run/<role>.journal, and powers off
# without asking systemd: the run's result is already written. No `set -e`: it must reach the
# power-off, whatever fails.
set -uo pipefail
role=${1:-solo}
status=/lab/run/$role.status
rm -f "$status"
bash "/lab/run/$role.cmd" < /dev/null > /dev/ttyS1 2>&1
rc=$?
dmesg > "/lab/run/$role.dmesg" 2>/dev/null
journalctl -o short-monotonic --no-pager > "/lab/run/$role.journal" 2>/dev/null
echo "$rc" > "$status.new" && mv "$status.new" "$status"
sync
busybox poweroff -f
sleep 1000
