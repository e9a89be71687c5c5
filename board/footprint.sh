#!/usr/bin/env bash
# Footprint checks of the board (issue 22), run by .ci/run:
#
#   bash board/footprint.sh text       .text of raidcore + raidcore-hal + raidcore-board on
#                                      thumbv7em-none-eabihf (release, no features, one codegen
#                                      unit as the firmware images are built; the sum of
#                                      `.text*` sections in their rlibs, as core/footprint.sh
#                                      counts the core): fails above 64 KiB.
#   bash board/footprint.sh frames ELF NAME...
#                                      stack frame of the first function whose symbol matches
#                                      each NAME (a regex), read from its Thumb prologue
#                                      (`sub sp, #n` and `ldr rN, =-n; add sp, rN`): how the
#                                      boot stack figures of board/README.md were added up.
#   bash board/footprint.sh budget ELF RAM and flash budget of the RP2040 firmware ELF: static
#                                      RAM (.data + .bss + .uninit) of the 264 KiB, the stack
#                                      room left, flash (.text + .rodata + .data) of the 2 MiB;
#                                      fails when the stack room is under what boot needs: the
#                                      frames of the firmware's main and of its deeper boot path
#                                      (import, or create_blank + create), read from the ELF,
#                                      plus CALLEE_STACK for what those call.
#
# The rlibs hold the libraries' own object code: generic code (`Pool<D, ...>`) is compiled
# where a firmware instantiates it, so the firmware's own figures are printed by `budget`.
set -euo pipefail
cd "$(dirname "$0")/.."

TEXT_LIMIT=$((64 * 1024))
SRAM=$((264 * 1024))
FLASH=$((2048 * 1024 - 256))
# Below the boot path's frames: find_root (9.8 KiB on thumbv6m), the log replay and the
# reads they make. The Cortex-M4 self-test paints the stack and measures the whole (README).
CALLEE_STACK=${CALLEE_STACK:-$((32 * 1024))}

frame() { # ELF, regex of a symbol -> stack frame of its first match in bytes (0 if inlined)
  local addr pro n lit word le
  addr=$(arm-none-eabi-nm "$1" | grep -E " [tT] .*$2" | head -1 | awk '{print $1}')
  if [ -z "$addr" ]; then echo 0; return; fi
  pro=$(arm-none-eabi-objdump -d --start-address="0x$addr" \
    --stop-address="$(printf '0x%x' $((0x$addr + 40)))" "$1")
  n=$( (grep -E "sub(\.w)?\s+sp, (sp, )?#" <<<"$pro" || true) | grep -oE "#[0-9]+" | tr -d '#' |
    awk '{ s += $1 } END { print s + 0 }')
  if grep -qE "add\s+sp, r" <<<"$pro"; then
    lit=$(grep -m1 -E "ldr\s+r[0-9], \[pc" <<<"$pro" | grep -oE "@ \(1[0-9a-f]+" | tr -d '@ (')
    word=$(arm-none-eabi-objdump -s --start-address="0x$lit" \
      --stop-address="$(printf '0x%x' $((0x$lit + 4)))" "$1" | tail -1 | awk '{print $2}')
    le=$(sed 's/\(..\)\(..\)\(..\)\(..\)/\4\3\2\1/' <<<"$word")
    n=$((n + (1 << 32) - 0x$le))
  fi
  echo "$n"
}

section_sum() { # file, awk regex of section names -> sum of their sizes
  arm-none-eabi-size -A "$1" 2>/dev/null | awk -v re="$2" '$1 ~ re { s += $2 } END { print s + 0 }'
}

case "${1:-}" in
text)
  dir=${CARGO_TARGET_DIR:-target}/footprint-board
  # With the workspace's 4 codegen units each unit kept its own copies of generic code, and
  # the sum moved by kilobytes when a change elsewhere repartitioned them.
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 CARGO_TARGET_DIR="$dir" cargo build -q --release \
    -p raidcore-hal -p raidcore -p raidcore-board --target thumbv7em-none-eabihf
  total=0
  for lib in raidcore_hal raidcore raidcore_board; do
    n=$(section_sum "$dir/thumbv7em-none-eabihf/release/lib$lib.rlib" '^\.text')
    printf '%-16s %7d B .text (thumbv7em, release)\n' "$lib" "$n"
    total=$((total + n))
  done
  printf '%-16s %7d B of %d B allowed\n' total "$total" "$TEXT_LIMIT"
  if [ "$total" -gt "$TEXT_LIMIT" ]; then
    echo "footprint: FAILED: core + hal + board .text is $total B, over $TEXT_LIMIT B" >&2
    exit 1
  fi
  ;;
budget)
  elf=${2:?usage: footprint.sh budget ELF}
  arm-none-eabi-size "$elf"
  ram=$(section_sum "$elf" '^\.(data|bss|uninit)$')
  flash=$(section_sum "$elf" '^\.(vector_table|boot2|text|rodata|data)$')
  room=$((SRAM - ram))
  arena_hex=$(arm-none-eabi-nm -S -C "$elf" | awk '$4 ~ /::ARENA$/ { print $2 }')
  arena=$((16#${arena_hex:-0}))
  printf 'RP2040 pool:  %6d B arena (Pool::memory_bytes of raidcore_board::pico)\n' "$arena"
  fw=raidcore_fw_rp_pico
  main=$(frame "$elf" "${fw}18__cortex_m_rt_main")
  # The core's Pool::import, when the compiler keeps it out of the firmware's `import`
  # (its frame holds the pool value as it moves through results).
  import=$(($(frame "$elf" "${fw}6import") + $(frame "$elf" 'raidcore4pool6import67.*6import17')))
  create=$(($(frame "$elf" "${fw}12create_blank") + $(frame "$elf" "${fw}6create")))
  need=$((main + (import > create ? import : create) + CALLEE_STACK))
  printf 'RP2040 RAM:   %6d B static (.data + .bss + .uninit) of %d B; stack room %d B\n' \
    "$ram" "$SRAM" "$room"
  printf 'RP2040 boot:  %6d B of stack: main %d + max(import %d, create %d) + %d for callees\n' \
    "$need" "$main" "$import" "$create" "$CALLEE_STACK"
  printf 'RP2040 flash: %6d B of %d B\n' "$flash" "$FLASH"
  if [ "$main" -eq 0 ] || [ "$import" -eq 0 ]; then
    echo "footprint: FAILED: main or import has no frame of its own in $elf (inlined?)" >&2
    exit 1
  fi
  if [ "$room" -lt "$need" ] || [ "$flash" -gt "$FLASH" ]; then
    echo "footprint: FAILED: the firmware does not fit the RP2040" >&2
    exit 1
  fi
  ;;
frames)
  elf=${2:?usage: footprint.sh frames ELF NAME...}
  shift 2
  for f in "$@"; do
    n=$(frame "$elf" "$f")
    if [ "$n" -eq 0 ]; then echo "$f: no frame (inlined, or none)"; continue; fi
    printf '%8d B  %s\n' "$n" "$f"
  done
  ;;
*)
  echo "usage: bash board/footprint.sh text | frames ELF NAME... | budget ELF" >&2
  exit 2
  ;;
esac
