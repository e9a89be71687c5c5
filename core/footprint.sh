#!/usr/bin/env bash
# Flash cost of raidcore's SIMD and hardware-CRC paths (issue 10): the `.text` bytes of the
# `raidcore` library (release, no features) for each target, built normally and with
# `--cfg raidcore_force_portable` (the portable kernel and the `crc` crate only).
#
# The library's own object code is measured (the sum of `.text*` sections in its rlib), so
# generic code such as `Pool<D, …>` is counted only where a firmware instantiates it; the parity
# and CRC paths are not generic, so the difference between the two columns is exactly their cost.
# Cortex-M and RISC-V targets have no SIMD paths: both columns are equal there by construction.
#
# Usage: bash core/footprint.sh [target ...]   (default: the five targets below)
# Needs: the rust targets, and llvm-size (Debian package `llvm`) or binutils' size.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(thumbv7em-none-eabihf thumbv6m-none-eabi riscv32imac-unknown-none-elf x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu)
size_tool=$(command -v llvm-size || command -v size)
target_dir=${CARGO_TARGET_DIR:-target}/footprint

text_bytes() { # rlib -> sum of .text* section sizes of its objects
    "$size_tool" -A "$1" 2>/dev/null | awk '$1 ~ /^\.text/ { s += $2 } END { print s + 0 }'
}

build() { # target variant rustflags -> rlib path
    local dir="$target_dir/$2"
    RUSTFLAGS="$3" CARGO_TARGET_DIR="$dir" cargo build -q --release -p raidcore --target "$1" >&2
    echo "$dir/$1/release/libraidcore.rlib"
}

printf '%-28s %14s %14s %10s\n' target with-SIMD portable-only "SIMD cost"
for t in "${targets[@]}"; do
    simd=$(text_bytes "$(build "$t" simd "")")
    portable=$(text_bytes "$(build "$t" portable "--cfg raidcore_force_portable")")
    printf '%-28s %14s %14s %10s\n' "$t" "$simd" "$portable" "$((simd - portable))"
done
