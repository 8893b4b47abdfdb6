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

# The Debian kernel the lab boots: LAB_KERNEL (an exact version, or a series such as 6.12),
# else the newest /boot/vmlinuz-* of series 6.1 (Debian 12's default) whose modules exist.
# A check that needs another kernel says so (`# lab-run: --kernel 6.12`); installing a newer
# kernel package never moves the other checks.
lab_kernel_version() {
  local want=${1:-${LAB_KERNEL:-6.1}} v best=""
  if [ -r "/boot/vmlinuz-$want" ] && [ -d "/lib/modules/$want/kernel" ]; then
    echo "$want"
    return
  fi
  [[ $want =~ ^[0-9]+\.[0-9]+$ ]] ||
    die "no kernel $want in /boot with modules in /lib/modules (give a version or a series such as 6.12)"
  for f in /boot/vmlinuz-"$want".*; do
    [ -e "$f" ] || continue
    v=${f#/boot/vmlinuz-}
    [ -d "/lib/modules/$v/kernel" ] || continue
    if [ -z "$best" ] || [ "$(printf '%s\n%s\n' "$best" "$v" | sort -V | tail -n1)" = "$v" ]; then
      best=$v
    fi
  done
  [ -n "$best" ] || die "no Debian $want kernel in /boot with modules in /lib/modules: run deploy/setup.sh --lab"
  echo "$best"
}
