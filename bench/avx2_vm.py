"""Run a command on an AVX2-only CPU: a 2-vCPU KVM guest whose CPUID has AVX2 and FMA but no
AVX-512 (issue 23).

Why: the e5 tier's target (>= 45 chunks/s whole-process) is set for a 2-core AVX2-only CPU,
and the machines at hand have AVX-512 and VNNI. A KVM guest on the same silicon with every
AVX-512 bit (and AVX-VNNI) removed from its CPUID runs at near-native speed, and every
program in it (onnxruntime's MLAS, our e5native.c with `__builtin_cpu_supports`) takes its
AVX2 paths: the kernel's XCR0 has no AVX-512 state, so an AVX-512 instruction would fault.
It is the closest thing to an AVX2-only machine that can be had here. `--cpu host` gives the
same guest the full host CPUID, to measure what the VM itself costs.

How: the guest kernel is Debian's (linux-image-amd64) and the initramfs is Debian's
busybox-static with the kernel's virtio/9p modules; both are built on first use with
`apt-get download` into the cache (`--cache`, default ~/.cache/vault-brain-avx2-vm). The
guest mounts this host's / read-write over virtio-9p, mounts its own /proc /sys /dev, a
tmpfs on /tmp and on /dev/shm, chroots into the host's tree and runs the command there with
the same paths, working directory and a few of the caller's variables (PATH, HOME, LANG,
PYTHON*, VAULT_BRAIN_*, XDG_*, OMP_*), so `/work/.../.venv/bin/python` works unchanged. Its
output comes back over the serial console; the script exits with the command's status.

The guest's /tmp is its own tmpfs (SQLite over 9p is not to be trusted: keep indexes and
vault copies there, which tempfile does by itself); `--share DIR` bind-mounts a host folder
under /tmp at the same path (e.g. `--share /tmp/lead` for the bench vaults, read-only use).
Needs /dev/kvm, qemu-system-x86 and root (apt-get). Not run by CI or the tests.

    .venv/bin/python bench/avx2_vm.py [--cpu avx2|host] [--mem 10G] [--share /tmp/lead] \\
        -- .venv/bin/python -c "from vault_brain.native import load; print(load('e5native').ISA)"
"""

from __future__ import annotations

import argparse
import gzip
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

# qemu 7.2's names of the CPUID bits an AVX2-only CPU lacks (AVX-512 of every kind, the VNNI
# of AVX and AVX-512, AMX); names this host does not have are accepted and ignored by qemu.
NOT_AVX2 = (
    "avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx512-bf16 avx512vbmi "
    "avx512vbmi2 avx512vnni avx512bitalg avx512-vpopcntdq avx512-fp16 avx512-vp2intersect "
    "avx512-4vnniw avx512-4fmaps avx512pf avx512er avx-vnni amx-bf16 amx-int8 amx-tile"
).split()
# arch-capabilities: the nested KVM here refuses qemu's write of MSR 0x10a.
CPU = {
    "avx2": "host,-arch-capabilities," + ",".join("-" + f for f in NOT_AVX2),
    "host": "host,-arch-capabilities",
}
MODULES = ("9p", "9pnet_virtio", "virtio_pci")  # with their dependencies, in load order
ENV_PREFIXES = ("PYTHON", "VAULT_BRAIN_", "XDG_", "OMP_", "ORT_", "LC_")
ENV_NAMES = ("PATH", "HOME", "LANG", "TERM")
START, END = "@@avx2-vm start@@", "@@avx2-vm exit="

INIT = r"""#!/bin/sh
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /modules.order); do insmod /lib/modules/$m.ko || echo "insmod $m failed"; done
mkdir -p /root
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose hostroot /root \
    || { echo "9p mount failed"; poweroff -f; }
run=$(sed -n 's/.*avx2vm.run=\([^ ]*\).*/\1/p' /proc/cmdline)
cp /root$run/cmd.sh /cmd.sh
shares=$(cat /root$run/shares)
mount -t proc proc /root/proc
mount -t sysfs sys /root/sys
mount -t devtmpfs dev /root/dev
mount -t tmpfs -o mode=1777 tmp /root/dev/shm
mkdir -p /hosttmp
mount --bind /root/tmp /hosttmp
mount -t tmpfs -o mode=1777,size=80% tmp /root/tmp
for d in $shares; do mkdir -p /root$d && mount --bind /hosttmp${d#/tmp} /root$d; done
cp /cmd.sh /root/tmp/.avx2-vm-cmd.sh
stty -onlcr 2>/dev/null
echo "@@avx2-vm start@@"
chroot /root /bin/sh /tmp/.avx2-vm-cmd.sh
echo "@@avx2-vm exit=$?@@"
sync
poweroff -f
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", choices=sorted(CPU), default="avx2")
    parser.add_argument("--mem", default="10G")
    parser.add_argument("--smp", type=int, default=2)
    parser.add_argument("--share", action="append", default=[], metavar="DIR")
    parser.add_argument("--cache", default=str(Path.home() / ".cache/vault-brain-avx2-vm"))
    parser.add_argument("--boot-log", action="store_true", help="show the kernel's messages")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    kernel, initrd = guest_image(Path(args.cache))
    run = Path(tempfile.mkdtemp(prefix="avx2-vm-", dir=args.cache))
    try:
        (run / "cmd.sh").write_text(command_script(command))
        (run / "shares").write_text(" ".join(shares(args.share)) + "\n")
        return boot(kernel, initrd, run, args)
    finally:
        shutil.rmtree(run, ignore_errors=True)


def command_script(command: list[str]) -> str:
    """The shell script the guest runs in the chroot: the caller's variables, cwd, command."""
    lines = ["export TMPDIR=/tmp"]
    for key, value in sorted(os.environ.items()):
        if key in ENV_NAMES or key.startswith(ENV_PREFIXES):
            lines.append(f"export {key}={shlex.quote(value)}")
    lines.append(f"cd {shlex.quote(os.getcwd())} || exit 125")
    lines.append("exec " + shlex.join(command))
    return "\n".join(lines) + "\n"


def shares(dirs: list[str]) -> list[str]:
    out = []
    for d in dirs:
        path = os.path.realpath(d)
        if not os.path.isdir(path) or not path.startswith("/tmp/"):
            sys.exit(f"--share {d}: not a folder under /tmp")
        out.append(path)
    return out


def boot(kernel: Path, initrd: Path, run: Path, args: argparse.Namespace) -> int:
    quiet = "" if args.boot_log else " quiet loglevel=1"
    cmd = [
        "qemu-system-x86_64",
        "-accel", "kvm",
        "-machine", "q35",
        "-cpu", CPU[args.cpu],
        "-smp", str(args.smp),
        "-m", args.mem,
        "-kernel", str(kernel),
        "-initrd", str(initrd),
        "-append", f"console=ttyS0 panic=-1 avx2vm.run={run}{quiet}",
        "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,multidevs=remap",
        "-display", "none",
        "-monitor", "none",
        "-chardev", "stdio,id=con,signal=off",
        "-serial", "chardev:con",
        "-no-reboot",
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    status, started = None, args.boot_log
    out = sys.stdout.buffer
    for raw in proc.stdout:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if line.endswith(START):
            started = True
            continue
        if END in line:
            m = re.search(r"exit=(\d+)@@", line)
            status = int(m.group(1)) if m else 1
            before = line[: line.index(END)]
            if before:
                out.write(before.encode() + b"\n")
            started = args.boot_log
            continue
        if started:
            out.write(raw.replace(b"\r\n", b"\n"))
            out.flush()
    proc.wait()
    if status is None:
        print(f"avx2_vm: the guest stopped without the command's status (qemu {proc.returncode})",
              file=sys.stderr)  # fmt: skip
        return 1
    return status


def guest_image(cache: Path) -> tuple[Path, Path]:
    """The kernel and initramfs, built from Debian's packages when the cache has none."""
    kernel, initrd = cache / "vmlinuz", cache / "initrd.gz"
    if kernel.exists() and initrd.exists():
        return kernel, initrd
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="avx2-vm-build-", dir=cache) as tmp:
        work = Path(tmp)
        subprocess.run(["apt-get", "download", "linux-image-amd64", "busybox-static"],
                       cwd=work, check=True)  # fmt: skip
        meta = next(work.glob("linux-image-amd64_*.deb"))
        image = deb_depends(meta, r"linux-image-[0-9][^ ,]*")
        subprocess.run(["apt-get", "download", image], cwd=work, check=True)
        kernel_files = deb_files(next(work.glob(f"{image}_*.deb")))
        busybox = deb_files(next(work.glob("busybox-static_*.deb")))["./bin/busybox"]
        vmlinuz = next(v for k, v in kernel_files.items() if k.startswith("./boot/vmlinuz-"))
        kos = {
            Path(k).name.removesuffix(".ko"): v
            for k, v in kernel_files.items()
            if k.startswith("./lib/modules/") and k.endswith(".ko")
        }
        order: list[str] = []
        for name in MODULES:
            load_order(name, kos, order)
        files = {"init": (INIT.encode(), 0o755), "bin/busybox": (busybox, 0o755)}
        files["modules.order"] = ("\n".join(order).encode() + b"\n", 0o644)
        for name in order:
            files[f"lib/modules/{name}.ko"] = (kos[name], 0o644)
        (work / "initrd.gz").write_bytes(gzip.compress(cpio(files, busybox_links()), 6))
        (work / "vmlinuz").write_bytes(vmlinuz)
        (work / "initrd.gz").replace(initrd)
        (work / "vmlinuz").replace(kernel)
    return kernel, initrd


def deb_depends(deb: Path, pattern: str) -> str:
    control = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True,
                             text=True, check=True).stdout  # fmt: skip
    return re.search(pattern, control).group(0)


def deb_files(deb: Path) -> dict[str, bytes]:
    data = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True,
                          check=True).stdout  # fmt: skip
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar:
            if member.isfile():
                out[member.name] = tar.extractfile(member).read()
    return out


def load_order(name: str, kos: dict[str, bytes], order: list[str]) -> None:
    """Append `name` after its dependencies (the `depends=` of its .modinfo section)."""
    key = name if name in kos else name.replace("_", "-")
    if key in order:
        return
    m = re.search(rb"depends=([^\0]*)\0", kos[key])
    for dep in filter(None, (m.group(1).decode().split(",") if m else [])):
        load_order(dep, kos, order)
    order.append(key)


def busybox_links() -> list[str]:
    return "sh mount insmod mkdir cat sed cp chroot stty poweroff sync echo ls dmesg".split()


def cpio(files: dict[str, tuple[bytes, int]], links: list[str]) -> bytes:
    """A newc cpio archive: folders, the files, and bin/<applet> symlinks to busybox."""
    entries: list[tuple[str, int, bytes]] = []
    dirs = {"bin", "proc", "sys", "dev", "root", "lib", "lib/modules"}
    for d in sorted(dirs):
        entries.append((d, 0o040755, b""))
    for name, (data, mode) in files.items():
        entries.append((name, 0o100000 | mode, data))
    for applet in links:
        entries.append((f"bin/{applet}", 0o120777, b"busybox"))
    out = io.BytesIO()
    for ino, (name, mode, data) in enumerate(entries + [("TRAILER!!!", 0, b"")], start=1):
        raw = name.encode() + b"\0"
        head = "070701" + "".join(
            f"{v:08x}" for v in (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(raw), 0)
        )
        out.write(head.encode() + raw)
        out.write(b"\0" * (-(110 + len(raw)) % 4))
        out.write(data)
        out.write(b"\0" * (-len(data) % 4))
    return out.getvalue()


if __name__ == "__main__":
    sys.exit(main())
