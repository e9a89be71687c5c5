#!/usr/bin/env bash
# Builds raidcore's Cortex-M self-test image and runs it in QEMU (mps2-an386, Cortex-M4F) on
# seven disk images in a temp dir (six members + one hot spare), reached through semihosting:
# first the parity-level self-test, then the pool-level one (a RAID-6 pool) on fresh images.
# Exit 0 only if the image reports that the self-test passed AND the host-side checks agree
# (the spare holds exactly what the failed member held). A hang is a failure (timeout).
#
# Needs: rustup target thumbv7em-none-eabihf, Debian package qemu-system-arm (>= 7.2).
# Environment: QEMU_SELFTEST_MIB (image size, default 1), QEMU_SELFTEST_TIMEOUT (s, default 300).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mib="${QEMU_SELFTEST_MIB:-4}"
limit="${QEMU_SELFTEST_TIMEOUT:-300}"
failed_member=2 # must match `failed` in qemu-selftest/src/main.rs

command -v qemu-system-arm >/dev/null || { echo "qemu-selftest: qemu-system-arm not installed" >&2; exit 2; }

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/qemu-selftest/target}"
(cd "$here/qemu-selftest" && cargo build --release --quiet)
elf="$CARGO_TARGET_DIR/thumbv7em-none-eabihf/release/raidcore-qemu-selftest"

if command -v arm-none-eabi-size >/dev/null; then
  echo "footprint (arm-none-eabi-size):"; arm-none-eabi-size "$elf"
fi

dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
for i in 0 1 2 3 4 5 6; do truncate -s "${mib}M" "$dir/disk$i.img"; done

# run MODE: boots the image in $dir; MODE "" is the self-test, "panic" / "fault" the failure paths.
# -icount shift=0: one instruction = 1 ns of virtual time (the image's cost figures rely on it).
run() {
  (cd "$dir" && timeout --kill-after=5 "$limit" qemu-system-arm -M mps2-an386 -cpu cortex-m4 \
    -nographic -monitor none -serial none -icount shift=0 \
    -semihosting-config "enable=on,target=native,arg=raidcore,arg=${1:-selftest}" -kernel "$elf")
}

# A panic and a HardFault must end QEMU with status 1 (not hang it, not pass).
for mode in panic fault; do
  set +e; run "$mode" >"$dir/$mode.log" 2>&1; rc=$?; set -e
  if [ "$rc" -ne 1 ]; then
    cat "$dir/$mode.log" >&2
    echo "qemu-selftest: FAILED: the $mode path exited with status $rc, not 1" >&2; exit 1
  fi
done

set +e; run; rc=$?; set -e
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "qemu-selftest: FAILED: timed out after ${limit}s" >&2; exit 1
fi
if [ "$rc" -ne 0 ]; then
  echo "qemu-selftest: FAILED: the image exited with status $rc" >&2; exit 1
fi

# Host-side checks of the parity self-test, independent of the image's own verify pass.
if ! cmp -s "$dir/disk$failed_member.img" "$dir/disk6.img"; then
  echo "qemu-selftest: FAILED: the spare differs from the member it replaced" >&2; exit 1
fi
for i in 0 1 2 3 4 5; do
  if cmp -s "$dir/disk$i.img" <(head -c "${mib}M" /dev/zero); then
    echo "qemu-selftest: FAILED: disk$i.img was never written" >&2; exit 1
  fi
done
# The pool-level self-test (RAID-6 pool, LUN written from a seed, member 2 failed, rebuilt onto
# the spare by maintenance steps, every block verified) on fresh images.
for i in 0 1 2 3 4 5 6; do rm -f "$dir/disk$i.img"; truncate -s "${mib}M" "$dir/disk$i.img"; done
set +e; run pool; rc=$?; set -e
if [ "$rc" -ne 0 ]; then
  echo "qemu-selftest: FAILED: the pool self-test exited with status $rc" >&2; exit 1
fi
if cmp -s "$dir/disk6.img" <(head -c "${mib}M" /dev/zero); then
  echo "qemu-selftest: FAILED: nothing was rebuilt onto the spare image" >&2; exit 1
fi
echo "qemu-selftest: passed"
