#!/usr/bin/env bash
# Instruction profile of the pool's write path on an emulated Cortex-M4: boots the QEMU
# self-test image in its `pool-write` mode (create the RP2040 firmware's pool on four 4 MiB
# images + a spare, write 128 seeded 4 KiB blocks with a flush every 64, exit), with QEMU
# logging every translated block and every block executed (`-d in_asm,exec,nochain`), and
# prints the guest instructions per function (and who calls memcpy). Includes boot, the
# timer calibration loop (2 000 000 instructions in main) and the test-data generator
# (`selftest::fill_block`); the rest is the pool.
#
# Needs: what qemu-selftest.sh needs, python3, ~300 MB in a temp dir. Not run by CI.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$here/qemu-selftest/target}"
(cd "$here/qemu-selftest" && cargo build --release --quiet)
elf="$CARGO_TARGET_DIR/thumbv7em-none-eabihf/release/raidcore-qemu-selftest"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
for i in 0 1 2 3 4 5 6; do truncate -s 4M "$dir/disk$i.img"; done
(cd "$dir" && qemu-system-arm -M mps2-an386 -cpu cortex-m4 -nographic -monitor none -serial none \
  -icount shift=0 -semihosting-config enable=on,target=native,arg=raidcore,arg=pool-write \
  -kernel "$elf" -d in_asm,exec,nochain -D trace.log >/dev/null)
python3 - "$elf" "$dir/trace.log" <<'PY'
import bisect, collections, subprocess, sys
elf, log = sys.argv[1], sys.argv[2]
syms = []
nm = subprocess.run(["arm-none-eabi-nm", "-C", "-S", elf], capture_output=True, text=True)
for line in nm.stdout.splitlines():
    p = line.split(None, 3)
    if len(p) == 4 and p[2] in "tTwW":
        syms.append((int(p[0], 16), int(p[1], 16), p[3]))
syms.sort()
starts = [s[0] for s in syms]
def name(pc):
    i = bisect.bisect_right(starts, pc) - 1
    return syms[i][2] if i >= 0 and pc < syms[i][0] + syms[i][1] else "?"
memcpy = next(s for s in syms if s[2] == "compiler_builtins::mem::memcpy")
shims = [(s[0], s[0] + s[1]) for s in syms if s[2].startswith("__aeabi_memcpy")]
size = {}          # translated block -> instructions
cur, n = None, 0
prof, callers = collections.Counter(), collections.Counter()
prev, caller, total = None, "?", 0
with open(log, errors="replace") as f:
    for line in f:
        if line.startswith("IN:"):
            cur, n = None, 0
        elif line.startswith("0x"):
            cur = int(line[2:10], 16) if cur is None else cur
            n += 1
        elif line.startswith("Trace"):
            if cur is not None:
                size[cur], cur, n = n, None, 0
            pc = int(line.split("[")[1].split("/")[1], 16)
            k = size.get(pc, 1)
            total += k
            prof[name(pc)] += k
            if memcpy[0] <= pc < memcpy[0] + memcpy[1]:
                if pc == memcpy[0]:
                    caller = name(prev) if prev is not None else "?"
                callers[caller] += k
            elif not any(a <= pc < b for a, b in shims):
                prev = pc
print(f"{total} guest instructions")
for f, k in prof.most_common(25):
    print(f"{k:10d} {100 * k / total:5.1f}%  {f[:110]}")
print("memcpy, by caller:")
for f, k in callers.most_common(8):
    print(f"{k:10d}  {f[:110]}")
PY
