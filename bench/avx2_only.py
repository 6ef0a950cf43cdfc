"""Run a command as on an AVX2-only CPU (no AVX-512, no VNNI), on this machine's silicon at
native speed (issue 23: the e5 tier's target is set for a 2-core AVX2-only CPU, and the
machines at hand have AVX-512 and VNNI).

A KVM guest with those CPUID bits removed would be the usual way, but /dev/kvm here is PVM
(kvm_pvm, the nested hypervisor of this sandbox), which boots only PVM-enlightened guest
kernels: Debian's hangs after its setup code (docs/benchmarks.md, round 12, helper kvm).
So the CPUID is changed in the process instead, as rr does: bench/avx2_only.c, preloaded,
turns on CPUID faulting and answers every CPUID with the real one less AVX-512 (all of it),
AVX-VNNI and AMX, and less their XSAVE state. onnxruntime's MLAS and cpuinfo, numpy and
our e5native (`__builtin_cpu_supports`) all read CPUID, so they take their AVX2 paths. The
rest is masked around the command: glibc's own choice by GLIBC_TUNABLES, and /proc/cpuinfo
(read by e5's kept-graph key and bench's records) by a filtered copy bind-mounted over it
in a private mount namespace (root and util-linux's unshare; skipped otherwise, with a
warning). XGETBV still shows the AVX-512 state: every reader above also needs the CPUID
bit. Programs that run AVX-512 without asking (built with -march=native) are not fooled.

The library and a probe are compiled with gcc into the cache folder on first use; the probe
checks the masking before the command runs. Not run by CI or the tests.

    .venv/bin/python bench/avx2_only.py -- .venv/bin/python -c \\
        "from vault_brain.native import load; print(load('e5native').ISA)"
    flock /tmp/bench.lock .venv/bin/python bench/avx2_only.py -- \\
        .venv/bin/python -m bench.e5_phase --notes 2000 --rounds 2

`--passthrough` traps every CPUID the same way and masks nothing (what the trapping costs);
`--library` prints the preload library's path, for an A/B inside one benchmark
(`bench.e5_phase --with-env LD_PRELOAD=<path>`: CPUID masked, glibc and /proc/cpuinfo not).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "avx2_only.c"
# glibc's names (its x86 cpu tunables) of what its string functions would pick AVX-512 for
GLIBC_MASK = "glibc.cpu.hwcaps=-AVX512F,-AVX512CD,-AVX512BW,-AVX512DQ,-AVX512VL,-AVX512ER,-AVX512PF"
# /proc/cpuinfo flags an AVX2-only CPU does not show
HIDDEN_FLAGS = re.compile(r"^(avx512.*|avx_vnni.*|avx_ifma|avx_ne_convert|amx.*)$")
PROBE = r"""#include <cpuid.h>
#include <stdio.h>
int main(void) {
    unsigned a, b, c, d, a1, b1, c1, d1;
    __cpuid_count(7, 0, a, b, c, d);
    __cpuid_count(7, 1, a1, b1, c1, d1);
    __builtin_cpu_init();
    printf("avx2=%d fma=%d avx512f=%d avx512_vnni=%d avx_vnni=%d builtin_avx512f=%d\n",
           !!(b & (1u << 5)), __builtin_cpu_supports("fma") > 0, !!(b & (1u << 16)),
           !!(c & (1u << 11)), !!(a1 & (1u << 4)), __builtin_cpu_supports("avx512f") > 0);
    return 0;
}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default=str(Path.home() / ".cache/vault-brain-avx2-only"))
    parser.add_argument("--quiet", action="store_true", help="no line about the masking")
    parser.add_argument(
        "--passthrough", action="store_true", help="trap CPUID but mask nothing (its overhead)"
    )
    parser.add_argument(
        "--library", action="store_true", help="print the preload library's path and exit"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    library, probe = build(Path(args.cache), args.passthrough)
    if args.library:
        print(library)
        return 0
    if not command:
        parser.error("no command")
    env = dict(os.environ)
    env["LD_PRELOAD"] = " ".join(filter(None, [str(library), env.get("LD_PRELOAD")]))
    env["GLIBC_TUNABLES"] = ":".join(filter(None, [env.get("GLIBC_TUNABLES"), GLIBC_MASK]))
    seen = subprocess.run([str(probe)], env=env, capture_output=True, text=True).stdout.strip()
    masked = "avx2=1" in seen and "avx512f=0" in seen and "builtin_avx512f=0" in seen
    if not masked and not args.passthrough:
        sys.exit(f"avx2_only: the CPUID is not masked here ({seen!r}): no CPUID faulting?")
    if not args.quiet:
        print(f"avx2_only: the command sees {seen}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="avx2-only-") as tmp:
        cpuinfo = Path(tmp) / "cpuinfo"
        cpuinfo.write_text(filtered_cpuinfo(Path("/proc/cpuinfo").read_text()))
        if args.passthrough:
            pass
        elif os.geteuid() == 0 and shutil.which("unshare"):
            # a private mount namespace: /proc/cpuinfo is the filtered copy for the command only
            script = 'mount --bind "$0" /proc/cpuinfo && exec "$@"'
            command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                       str(cpuinfo), *command]  # fmt: skip
        elif not args.quiet:
            print("avx2_only: /proc/cpuinfo still shows AVX-512 (needs root and unshare)",
                  file=sys.stderr)  # fmt: skip
        return subprocess.run(command, env=env).returncode


def filtered_cpuinfo(text: str) -> str:
    """/proc/cpuinfo without the flags of AVX-512, AVX-VNNI and AMX."""
    out = []
    for line in text.splitlines():
        if line.startswith("flags"):
            head, _, flags = line.partition(":")
            kept = [f for f in flags.split() if not HIDDEN_FLAGS.match(f)]
            line = f"{head}: {' '.join(kept)}"
        out.append(line)
    return "\n".join(out) + "\n"


def build(cache: Path, passthrough: bool = False) -> tuple[Path, Path]:
    """The preload library and the probe, compiled once for this source."""
    key = hashlib.sha256(SOURCE.read_bytes() + PROBE.encode()).hexdigest()[:12]
    kind = "avx2_only_passthrough" if passthrough else "avx2_only"
    library, probe = cache / f"{kind}-{key}.so", cache / f"avx2_only_probe-{key}"
    if library.exists() and probe.exists():
        return library, probe
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="build-", dir=cache) as tmp:
        so, exe, src = Path(tmp) / "lib.so", Path(tmp) / "probe", Path(tmp) / "probe.c"
        src.write_text(PROBE)
        cc = os.environ.get("CC", "gcc")
        defines = ["-DAVX2_ONLY_PASSTHROUGH"] if passthrough else []
        subprocess.run([cc, "-O2", "-shared", "-fPIC", *defines, "-o", so, SOURCE, "-ldl"],
                       check=True)  # fmt: skip
        subprocess.run([cc, "-O2", "-o", exe, src], check=True)
        so.replace(library)
        exe.replace(probe)
    return library, probe


if __name__ == "__main__":
    sys.exit(main())
