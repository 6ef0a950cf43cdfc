/* An LD_PRELOAD shim that makes this CPU look AVX2-only to a process (issue 23): CPUID
 * faulting (arch_prctl ARCH_SET_CPUID, as rr does) turns every CPUID instruction into a
 * SIGSEGV, and the handler answers with the real CPUID less every AVX-512 bit, AVX-VNNI
 * and AMX, and less their XSAVE state in leaf 0xD. onnxruntime's MLAS, cpuinfo, numpy and
 * libgcc's __builtin_cpu_supports all ask CPUID (and XGETBV, which cannot be trapped and
 * still shows the AVX-512 state: each of them also needs the CPUID bit), so they take their
 * AVX2 paths on the same silicon at native speed. glibc's own choice (made in ld.so before
 * this library runs) is masked by GLIBC_TUNABLES, set by bench/avx2_only.py.
 *
 * The faulting is per thread, kept by new threads and forks, reset by execve (the
 * preloaded library sets it again). A SIGSEGV handler the program installs later is kept
 * and called for every fault that is not a CPUID. Built and used by bench/avx2_only.py;
 * with -DAVX2_ONLY_PASSTHROUGH it traps every CPUID and masks nothing (its overhead). */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static struct sigaction app_handler; /* the program's SIGSEGV handler, SIG_DFL at first */
static int (*real_sigaction)(int, const struct sigaction *, struct sigaction *);
static int active;

#define BIT(n) (1u << (n))
/* leaf 7.0 EBX: AVX512F DQ IFMA PF ER CD BW VL */
#define L7_EBX (BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31))
/* leaf 7.0 ECX: AVX512_VBMI VBMI2 VNNI BITALG VPOPCNTDQ */
#define L7_ECX (BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14))
/* leaf 7.0 EDX: AVX512_4VNNIW 4FMAPS VP2INTERSECT AMX_BF16 AVX512_FP16 AMX_TILE AMX_INT8 */
#define L7_EDX (BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) | BIT(24) | BIT(25))
/* leaf 7.1 EAX: AVX_VNNI AVX512_BF16 AMX_FP16 AVX_IFMA; EDX: AVX_VNNI_INT8 AVX_NE_CONVERT */
#define L71_EAX (BIT(4) | BIT(5) | BIT(21) | BIT(23))
#define L71_EDX (BIT(4) | BIT(5))
/* leaf 0xD.0 EAX: XSAVE state of opmask, ZMM_Hi256, Hi16_ZMM, AMX tile config and data */
#define LD_EAX (BIT(5) | BIT(6) | BIT(7) | BIT(17) | BIT(18))

static void cpuid_masked(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
#ifdef AVX2_ONLY_PASSTHROUGH /* the same traps, nothing masked: what the trapping costs */
    return;
#endif
    if (leaf == 7 && sub == 0) {
        r[1] &= ~L7_EBX;
        r[2] &= ~L7_ECX;
        r[3] &= ~L7_EDX;
    } else if (leaf == 7 && sub == 1) {
        r[0] &= ~L71_EAX;
        r[3] &= ~L71_EDX;
    } else if (leaf == 0xd && sub == 0) {
        r[0] &= ~LD_EAX;
    } else if (leaf == 0xd && (sub == 5 || sub == 6 || sub == 7 || sub == 17 || sub == 18)) {
        r[0] = r[1] = r[2] = r[3] = 0;
    }
}

static void on_segv(int sig, siginfo_t *info, void *context) {
    ucontext_t *uc = context;
    greg_t *g = uc->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)g[REG_RIP];
    if (ip && ip[0] == 0x0f && ip[1] == 0xa2) { /* CPUID */
        uint32_t r[4];
        cpuid_masked((uint32_t)g[REG_RAX], (uint32_t)g[REG_RCX], r);
        g[REG_RAX] = r[0];
        g[REG_RBX] = r[1];
        g[REG_RCX] = r[2];
        g[REG_RDX] = r[3];
        g[REG_RIP] += 2;
        return;
    }
    if (app_handler.sa_flags & SA_SIGINFO) {
        app_handler.sa_sigaction(sig, info, context);
    } else if (app_handler.sa_handler != SIG_DFL && app_handler.sa_handler != SIG_IGN) {
        app_handler.sa_handler(sig);
    } else { /* die of the fault as without this library: it happens again on return */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        real_sigaction(SIGSEGV, &dfl, NULL);
    }
}

/* The program's SIGSEGV handler is recorded, not installed: ours stays and calls it. */
int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    if (!real_sigaction)
        real_sigaction = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(
            RTLD_NEXT, "sigaction");
    if (sig != SIGSEGV || !active)
        return real_sigaction(sig, act, old);
    if (old)
        *old = app_handler;
    if (act)
        app_handler = *act;
    return 0;
}

sighandler_t signal(int sig, sighandler_t handler) {
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    act.sa_flags = SA_RESTART;
    sigemptyset(&act.sa_mask);
    if (sigaction(sig, &act, &old) != 0)
        return SIG_ERR;
    return old.sa_handler;
}

__attribute__((constructor)) static void avx2_only_init(void) {
    struct sigaction act;
    real_sigaction = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(
        RTLD_NEXT, "sigaction");
    memset(&app_handler, 0, sizeof app_handler);
    app_handler.sa_handler = SIG_DFL;
    memset(&act, 0, sizeof act);
    act.sa_sigaction = on_segv;
    act.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&act.sa_mask);
    if (real_sigaction(SIGSEGV, &act, NULL) != 0)
        return;
    if (syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0) != 0)
        return; /* no CPUID faulting on this kernel or CPU: bench/avx2_only.py checks */
    active = 1;
}
