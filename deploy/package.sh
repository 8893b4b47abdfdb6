#!/usr/bin/env bash
# Builds the Debian package build/package/raidline_<version>_amd64.deb (dpkg-deb, no extra
# tools) and prints its contents (`dpkg -c`):
#   /usr/bin/raidline, /usr/bin/raidline-initiator       release builds of this tree
#   /usr/sbin/rxe-setup                                   deploy/rxe-setup
#   /lib/systemd/system/raidline.service                  deploy/raidline.service, paths for /usr
#   /lib/systemd/system/rxe-setup@.service                deploy/rxe-setup@.service, likewise
#   /etc/raidline/raidline.toml                           the example configuration, a conffile
#   /usr/share/man/man1/raidline.1.gz, raidline-initiator.1.gz   generated now (`… man`)
#   /usr/share/bash-completion/completions/, zsh vendor-completions, fish vendor_completions.d
#                                                         generated now (`… completions SHELL`)
#   /usr/share/doc/raidline/README.md, copyright
# Installing it starts nothing: a storage daemon whose example configuration names /dev/nvme*
# waits for its operator. Then: edit /etc/raidline/raidline.toml, `raidline check-config`,
# `systemctl enable --now raidline`. Removing it stops the unit; purging it also removes
# /etc/raidline (never the arrays' devices or /var/lib/raidline's remembered members).
#   deploy/package.sh [--no-build]     (--no-build: package the binaries already in build/release)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=1
for a in "$@"; do
  case "$a" in
    --no-build) build=0 ;;
    -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "package.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
for t in dpkg-deb gzip sed install strip; do
  command -v "$t" >/dev/null || { echo "package.sh: '$t' is missing (apt-get install dpkg)" >&2; exit 2; }
done

cd "$root"
if [ "$build" = 1 ]; then
  # One package at a time, as the lab's checks build them: together, cargo unifies their
  # dependencies' features, rebuilds five crates (74 s in a CI run) and packages a daemon other
  # than the one the checks before ran.
  cargo build --release --locked -p raidline-target --bin raidline
  cargo build --release --locked -p raidline-initiator --bin raidline-initiator
fi
rl=$root/build/release/raidline ri=$root/build/release/raidline-initiator
for b in "$rl" "$ri"; do [ -x "$b" ] || { echo "package.sh: no $b (run without --no-build)" >&2; exit 2; }; done

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
[ -n "$version" ] || { echo "package.sh: no workspace version in Cargo.toml" >&2; exit 2; }
arch=$(dpkg --print-architecture)
name=raidline_${version}_${arch}
out=$root/build/package
stage=$out/$name
rm -rf "$stage"
mkdir -p "$stage/DEBIAN"

# Without the debug information the release profile keeps for profiling (52 MB → a few).
install -D -m 0755 "$rl" "$stage/usr/bin/raidline"
install -D -m 0755 "$ri" "$stage/usr/bin/raidline-initiator"
strip --strip-debug "$stage/usr/bin/raidline" "$stage/usr/bin/raidline-initiator"
install -D -m 0755 deploy/rxe-setup "$stage/usr/sbin/rxe-setup"
# The units as installed by hand name /usr/local; the package's files live under /usr.
sed -e 's|/usr/local/bin/raidline|/usr/bin/raidline|g' \
    -e 's|/usr/local/share/doc/raidline|/usr/share/doc/raidline|g' \
    deploy/raidline.service > "$stage/raidline.service"
install -D -m 0644 "$stage/raidline.service" "$stage/lib/systemd/system/raidline.service"
rm "$stage/raidline.service"
sed -e 's|/usr/local/sbin/rxe-setup|/usr/sbin/rxe-setup|g' deploy/rxe-setup@.service > "$stage/rxe.service"
install -D -m 0644 "$stage/rxe.service" "$stage/lib/systemd/system/rxe-setup@.service"
rm "$stage/rxe.service"
if grep -n '/usr/local' "$stage/lib/systemd/system/"*.service | grep -v '^[^:]*:[0-9]*:#'; then
  echo "package.sh: a unit still names /usr/local outside its comments" >&2
  exit 1
fi
install -D -m 0644 deploy/raidline.toml "$stage/etc/raidline/raidline.toml"

# Man pages and completions, from the binaries' own clap definitions.
man=$stage/usr/share/man/man1
mkdir -p "$man" "$stage/usr/share/bash-completion/completions" \
  "$stage/usr/share/zsh/vendor-completions" "$stage/usr/share/fish/vendor_completions.d"
for b in raidline raidline-initiator; do
  "$root/build/release/$b" man | gzip -9n > "$man/$b.1.gz"
  "$root/build/release/$b" completions bash > "$stage/usr/share/bash-completion/completions/$b"
  "$root/build/release/$b" completions zsh > "$stage/usr/share/zsh/vendor-completions/_$b"
  "$root/build/release/$b" completions fish > "$stage/usr/share/fish/vendor_completions.d/$b.fish"
done
chmod 0644 "$man"/*.gz "$stage"/usr/share/*/completions/* "$stage"/usr/share/zsh/vendor-completions/* \
  "$stage"/usr/share/fish/vendor_completions.d/* 2>/dev/null || true

doc=$stage/usr/share/doc/raidline
install -D -m 0644 README.md "$doc/README.md"
cat > "$doc/copyright" <<EOF
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: raidline
Source: $(sed -n 's/^repository = "\(.*\)"/\1/p' Cargo.toml | head -n1)

Files: *
License: Apache-2.0
 On Debian systems the full text of the Apache License 2.0 is in
 /usr/share/common-licenses/Apache-2.0.
EOF

size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<EOF
Package: raidline
Version: $version
Architecture: $arch
Maintainer: Raidline <raidline@example.invalid>
Installed-Size: $size
Depends: libc6 (>= 2.36), libgcc-s1
Recommends: rdma-core, ibverbs-providers, librdmacm1, libibverbs1
Suggests: nvme-cli
Section: admin
Priority: optional
Homepage: $(sed -n 's/^repository = "\(.*\)"/\1/p' Cargo.toml | head -n1)
Description: NVMe-over-Fabrics (RDMA) target serving RAID-5 namespaces
 raidline builds a RAID-5 array from local NVMe drives and serves it as one
 NVMe namespace over RDMA (RoCEv2, soft-RoCE included) to Linux hosts, which
 use the kernel's nvme-rdma initiator. raidline-initiator is a user-space host
 for discovery, identify, verify and load generation.
EOF
echo /etc/raidline/raidline.toml > "$stage/DEBIAN/conffiles"
cat > "$stage/DEBIAN/postinst" <<'EOF'
#!/bin/sh
# Installing starts nothing: the example configuration names devices the operator must choose.
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
fi
if [ "$1" = configure ] && [ -z "$2" ]; then
  echo "raidline: edit /etc/raidline/raidline.toml, check it with 'raidline check-config', then 'systemctl enable --now raidline'"
fi
exit 0
EOF
cat > "$stage/DEBIAN/prerm" <<'EOF'
#!/bin/sh
# Stops the daemon before its files go (a clean stop: in-flight I/O drained, arrays marked clean).
set -e
if [ "$1" = remove ] && [ -d /run/systemd/system ]; then
  systemctl stop raidline.service 2>/dev/null || true
  systemctl disable raidline.service 2>/dev/null || true
fi
exit 0
EOF
cat > "$stage/DEBIAN/postrm" <<'EOF'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then
  systemctl daemon-reload || true
fi
if [ "$1" = purge ]; then
  rm -rf /etc/raidline
fi
exit 0
EOF
chmod 0755 "$stage/DEBIAN/postinst" "$stage/DEBIAN/prerm" "$stage/DEBIAN/postrm"

dpkg-deb --root-owner-group -Zxz --build "$stage" "$out/$name.deb" > /dev/null
rm -rf "$stage"
echo "package: $out/$name.deb" >&2
dpkg -c "$out/$name.deb" | awk '{ print $1, $3, $6 }' >&2
echo "$out/$name.deb"
