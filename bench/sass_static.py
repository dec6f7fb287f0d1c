#!/usr/bin/env python3
"""Static instruction counts of ptxas's SASS for msac's kernels, without a
disassembler (the development machine has ptxas but neither cuobjdump nor
nvdisasm; where they exist, `cuobjdump -sass` says more).

For each kernel whose name matches KERNEL (a regular expression) in the
PTX file (`msac compile ... --emit=ptx -o FILE.ptx`), ptxas assembles the
module for ARCH and this prints:
  - the kernel's instruction count (its .text section, 16 bytes each);
  - its loops: the ranges [target, branch] of backward BRA instructions
    of 50 or more instructions, each with its size and opcode classes;
  - per loop, how many IMAD are register copies (IMAD.MOV: both factors
    RZ), which ptxas emits for values a loop carries from slot to slot.
With --per N the loop counts are divided by N (e.g. the groups one loop
step of an unrolled loop handles).

Opcode classes come from the low 9 bits of each instruction word, learned
when the script starts by assembling one-instruction PTX kernels (MOV,
PRMT, F2FP, FMUL, HMMA, ...; the list is LEARN below), so that they follow
the installed ptxas rather than a table written here. Other opcodes print
as hex. Branch targets: the signed offset in bits 16-23 and 34-63 of the
first word, in 4-byte units from the next instruction (checked on
ptxas-made loops when the script starts).

Usage: bench/sass_static.py FILE.ptx [KERNEL] [--arch sm_90a] [--per N]
"""
import argparse
import collections
import os
import re
import struct
import subprocess
import sys
import tempfile

PTXAS = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ptxas")

# One distinctive PTX instruction per class (registers: %r 32-bit, %f f32,
# %h b16, %rd 64-bit, %p predicates; %r1-%r9, %f1-%f8 and %h1 are loaded).
LEARN = {
    "PRMT": "prmt.b32 %r10, %r1, %r2, %r3;",
    "F2FP": "cvt.rn.f16x2.e4m3x2 %r10, %h1;",
    "FMUL": "mul.rn.f32 %f10, %f1, %f2;",
    "FADD": "add.rn.f32 %f10, %f1, %f2;",
    "FFMA": "fma.rn.f32 %f10, %f1, %f2, %f3;",
    "MUFU": "ex2.approx.ftz.f32 %f10, %f1;",
    "FMNMX": "max.f32 %f10, %f1, %f2;",
    "LOP3": "and.b32 %r10, %r1, %r2;",
    "SHF": "shr.u32 %r10, %r1, %r2;",
    "IADD3": "add.s32 %r10, %r1, %r2;",
    "IMAD": "mul.lo.s32 %r10, %r1, %r2;",
    "FSETP": "setp.gt.f32 %p1, %f1, %f2; selp.b32 %r10, 1, 0, %p1;",
    "HMMA": "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
            "{%f10,%f11,%f12,%f13}, {%r1,%r2,%r3,%r4}, {%r5,%r6}, {%f1,%f2,%f3,%f4};",
    "LDS": "ld.shared.v4.b32 {%r10,%r11,%r12,%r13}, [%rd2];",
    "STS": "st.shared.b32 [%rd2], %r1;",
    "LDL": "ld.local.b32 %r10, [%rd2];",
    "STL": "st.local.b32 [%rd2], %r1;",
}


def sections(path):
    """Section name -> bytes of an ELF64 file (a cubin)."""
    b = open(path, "rb").read()
    if b[:4] != b"\x7fELF":
        raise SystemExit(f"{path}: not an ELF file")
    shoff = struct.unpack_from("<Q", b, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize)
            for i in range(shnum)]
    names = hdrs[shstrndx][4]

    def name(o):
        return b[names + o:b.index(b"\0", names + o)].decode()
    return {name(h[0]): b[h[4]:h[4] + h[5]] for h in hdrs}


def assemble(ptx, arch, tmp):
    src, cubin = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
    with open(src, "w") as f:
        f.write(ptx)
    r = subprocess.run([PTXAS, f"-arch={arch}", src, "-o", cubin],
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"ptxas failed:\n{r.stderr}")
    return sections(cubin)


def words(text):
    """(first 64-bit word, second) of each 16-byte instruction."""
    return [(int.from_bytes(text[i:i + 8], "little"),
             int.from_bytes(text[i + 8:i + 16], "little"))
            for i in range(0, len(text), 16)]


def micro(body, arch, tmp, loop=False):
    head = f""".version 8.4
.target {arch}
.address_size 64
.visible .entry k(.param .u64 p, .param .u32 n)
{{
 .reg .b32 %r<16>; .reg .f32 %f<16>; .reg .b64 %rd<4>; .reg .pred %p<4>;
 .reg .b16 %h<4>; .shared .align 16 .b8 sm[256];
 ld.param.u64 %rd1, [p]; cvta.to.global.u64 %rd1, %rd1; mov.u64 %rd2, sm;
 ld.global.v4.b32 {{%r1,%r2,%r3,%r4}}, [%rd1+16];
 ld.global.v4.b32 {{%r5,%r6,%r7,%r8}}, [%rd1+32];
 ld.global.v4.f32 {{%f1,%f2,%f3,%f4}}, [%rd1+48]; ld.global.u16 %h1, [%rd1+68];
"""
    if loop:
        body = (" ld.param.u32 %r9, [n]; mov.u32 %r14, 0;\nL1:\n" + body +
                "\n add.s32 %r14, %r14, 1; setp.lt.s32 %p2, %r14, %r9;"
                " @%p2 bra L1;")
    tail = """
 st.global.v4.b32 [%rd1], {%r10,%r11,%r12,%r13};
 st.global.v4.f32 [%rd1+80], {%f10,%f11,%f12,%f13};
 ret;
}
"""
    return words(assemble(head + body + tail, arch, tmp)[".text.k"])


def learn(arch, tmp):
    """Opcode (low 9 bits) -> class name, and the BRA opcode."""
    base = collections.Counter(lo & 0x1FF for lo, _ in micro("", arch, tmp))
    added = {}
    for name, body in LEARN.items():
        c = collections.Counter(lo & 0x1FF for lo, _ in micro(body, arch, tmp))
        added[name] = {op: n - base.get(op, 0) for op, n in c.items()
                       if n > base.get(op, 0)}
    # Each body also adds loads of its operands and padding: the class is
    # the opcode it added that the fewest other bodies added.
    seen = collections.Counter(op for ops in added.values() for op in ops)
    names = {}
    for name, ops in added.items():
        own = sorted(ops, key=lambda op: (seen[op], -ops[op]))
        if own and seen[own[0]] == 1:
            names[own[0]] = name
    # A loop of volatile loads: its backward branch names BRA.
    body = "\n".join(f" ld.volatile.global.f32 %f5, [%rd1+{4 * i}];"
                     f" fma.rn.f32 %f10, %f5, %f5, %f10;" for i in range(40))
    ins = micro(" mov.f32 %f10, 0f00000000;\n" + body, arch, tmp, loop=True)
    bra = None
    for i, (lo, _) in enumerate(ins):
        t = target(lo, i)
        if t is not None and 0 <= t < i - 30:
            bra = lo & 0x1FF
            break
    if bra is None:
        raise SystemExit("could not find the backward branch of a ptxas loop")
    names[bra] = "BRA"
    return names, bra


def target(lo, i):
    """Branch target index of instruction i if its first word is a BRA."""
    hi30 = lo >> 34
    if hi30 & (1 << 29):
        hi30 -= 1 << 30
    off4 = (hi30 << 8) | ((lo >> 16) & 0xFF)
    if off4 % 4:
        return None
    return i + 1 + off4 // 4


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ptx")
    ap.add_argument("kernel", nargs="?", default=".")
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--per", type=float, default=1.0,
                    help="divide loop counts by this (groups per loop step)")
    ap.add_argument("--min-loop", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        names, bra = learn(args.arch, tmp)
        secs = assemble(open(args.ptx).read(), args.arch, tmp)
    kre = re.compile(args.kernel)
    for sec, text in sorted(secs.items()):
        if not sec.startswith(".text.") or not kre.search(sec[6:]):
            continue
        ins = words(text)
        print(f"{sec[6:]}: {len(ins)} instructions")
        loops = []
        for i, (lo, _) in enumerate(ins):
            if lo & 0x1FF != bra:
                continue
            t = target(lo, i)
            if t is not None and 0 <= t < i and i - t + 1 >= args.min_loop:
                loops.append((t, i))
        for t, i in sorted(loops, key=lambda l: l[0] - l[1]):
            body = ins[t:i + 1]
            c = collections.Counter(names.get(lo & 0x1FF, hex(lo & 0x1FF))
                                    for lo, _ in body)
            movs = sum(1 for lo, hi in body
                       if names.get(lo & 0x1FF) == "IMAD"
                       and (lo >> 24) & 0xFF == 0xFF and (lo >> 32) & 0xFF == 0xFF)
            per = args.per
            print(f"  loop [{t}, {i}]: {(i - t + 1) / per:.0f} instructions, "
                  f"{movs / per:.0f} IMAD.MOV; " +
                  " ".join(f"{k} {v / per:.0f}" for k, v in c.most_common(16)))


if __name__ == "__main__":
    main()
