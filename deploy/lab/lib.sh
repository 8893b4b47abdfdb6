# Host-side helpers shared by the lab scripts (sourced, not run).

die() { echo "lab: error: $*" >&2; exit 2; }
note() { echo "lab: $*" >&2; }

# need CMD...: fail with a pointer to the setup step when a tool is missing.
need() {
  local c
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || die "'$c' is not installed: run deploy/setup.sh --lab"
  done
}

# The Debian kernel the lab boots: LAB_KERNEL, else the newest /boot/vmlinuz-* whose modules exist.
lab_kernel_version() {
  local v best=""
  for f in /boot/vmlinuz-*; do
    [ -e "$f" ] || continue
    v=${f#/boot/vmlinuz-}
    [ -d "/lib/modules/$v/kernel" ] || continue
    if [ -z "$best" ] || [ "$(printf '%s\n%s\n' "$best" "$v" | sort -V | tail -n1)" = "$v" ]; then
      best=$v
    fi
  done
  [ -n "$best" ] || die "no Debian kernel in /boot with modules in /lib/modules: run deploy/setup.sh --lab"
  echo "$best"
}
