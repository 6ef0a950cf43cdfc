/* The instruction mixes an exact u8 x s8 GEMM could use on AVX2, in registers, one core
 * (docs/benchmarks.md, "The e5 tier's AVX2 path, round 12"): what this core's pipes allow
 * e5native's AVX2 tile, whatever its loads. x86-64 with AVX2 only; not part of the package.
 *
 *     gcc -O2 bench/e5_avx2_mix.c -o /tmp/mix && /tmp/mix
 */
#include <stdio.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void mixes(void){
  long n=100000000; double t0,t;
  t0=now();
  for(long i=0;i<n;i++) __asm__ volatile(
   "vpsignb %%ymm14,%%ymm15,%%ymm0\n vpmaddubsw %%ymm0,%%ymm10,%%ymm0\n vpmaddwd %%ymm0,%%ymm13,%%ymm0\n vpaddd %%ymm0,%%ymm1,%%ymm1\n"
   "vpsignb %%ymm12,%%ymm15,%%ymm2\n vpmaddubsw %%ymm2,%%ymm10,%%ymm2\n vpmaddwd %%ymm2,%%ymm13,%%ymm2\n vpaddd %%ymm2,%%ymm3,%%ymm3\n"
   "vpsignb %%ymm14,%%ymm11,%%ymm4\n vpmaddubsw %%ymm4,%%ymm9,%%ymm4\n vpmaddwd %%ymm4,%%ymm13,%%ymm4\n vpaddd %%ymm4,%%ymm5,%%ymm5\n"
   "vpsignb %%ymm12,%%ymm11,%%ymm6\n vpmaddubsw %%ymm6,%%ymm9,%%ymm6\n vpmaddwd %%ymm6,%%ymm13,%%ymm6\n vpaddd %%ymm6,%%ymm7,%%ymm7\n"
   :::"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8");
  t=now()-t0; printf("sign trick, 128 MACs: %.3f ns/iter = %.1f G MAC/s\n",t/n*1e9, 128.0*n/t/1e9);
  t0=now();
  for(long i=0;i<n;i++) __asm__ volatile(
   "vpmaddwd %%ymm14,%%ymm15,%%ymm0\n vpaddd %%ymm0,%%ymm1,%%ymm1\n"
   "vpmaddwd %%ymm13,%%ymm15,%%ymm2\n vpaddd %%ymm2,%%ymm3,%%ymm3\n"
   "vpmaddwd %%ymm12,%%ymm15,%%ymm4\n vpaddd %%ymm4,%%ymm5,%%ymm5\n"
   "vpmaddwd %%ymm14,%%ymm11,%%ymm6\n vpaddd %%ymm6,%%ymm7,%%ymm7\n"
   "vpmaddwd %%ymm13,%%ymm11,%%ymm0\n vpaddd %%ymm0,%%ymm8,%%ymm8\n"
   "vpmaddwd %%ymm12,%%ymm11,%%ymm2\n vpaddd %%ymm2,%%ymm9,%%ymm9\n"
   "vpmaddwd %%ymm14,%%ymm10,%%ymm4\n vpaddd %%ymm4,%%ymm5,%%ymm5\n"
   "vpmaddwd %%ymm13,%%ymm10,%%ymm6\n vpaddd %%ymm6,%%ymm7,%%ymm7\n"
   :::"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8","xmm9");
  t=now()-t0; printf("int16 madd+add, 128 MACs: %.3f ns/iter = %.1f G MAC/s\n",t/n*1e9, 128.0*n/t/1e9);
  t0=now();
  for(long i=0;i<n;i++) __asm__ volatile(
   "vpmaddubsw %%ymm14,%%ymm15,%%ymm0\n vpmaddwd %%ymm0,%%ymm13,%%ymm0\n vpaddd %%ymm0,%%ymm1,%%ymm1\n"
   "vpmaddubsw %%ymm12,%%ymm15,%%ymm2\n vpmaddwd %%ymm2,%%ymm13,%%ymm2\n vpaddd %%ymm2,%%ymm3,%%ymm3\n"
   "vpmaddubsw %%ymm14,%%ymm11,%%ymm4\n vpmaddwd %%ymm4,%%ymm13,%%ymm4\n vpaddd %%ymm4,%%ymm5,%%ymm5\n"
   "vpmaddubsw %%ymm12,%%ymm11,%%ymm6\n vpmaddwd %%ymm6,%%ymm13,%%ymm6\n vpaddd %%ymm6,%%ymm7,%%ymm7\n"
   :::"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8");
  t=now()-t0; printf("maddubs+madd+add, 128 MACs: %.3f ns/iter = %.1f G MAC/s\n",t/n*1e9, 128.0*n/t/1e9);
  t0=now();
  for(long i=0;i<n;i++) __asm__ volatile(
   "vpmaddubsw %%ymm14,%%ymm15,%%ymm0\n vpmaddubsw %%ymm12,%%ymm15,%%ymm2\n vpaddw %%ymm0,%%ymm2,%%ymm0\n vpmaddwd %%ymm0,%%ymm13,%%ymm0\n vpaddd %%ymm0,%%ymm1,%%ymm1\n"
   "vpmaddubsw %%ymm14,%%ymm11,%%ymm4\n vpmaddubsw %%ymm12,%%ymm11,%%ymm6\n vpaddw %%ymm4,%%ymm6,%%ymm4\n vpmaddwd %%ymm4,%%ymm13,%%ymm4\n vpaddd %%ymm4,%%ymm5,%%ymm5\n"
   :::"xmm0","xmm1","xmm2","xmm3","xmm4","xmm5","xmm6","xmm7","xmm8");
  t=now()-t0; printf("2 maddubs+addw+madd+add, 128 MACs: %.3f ns/iter = %.1f G MAC/s\n",t/n*1e9, 128.0*n/t/1e9);
}
#define MA "vpmaddwd %%ymm14,%%ymm15,%%ymm0\n vpaddd %%ymm0,%%ymm1,%%ymm1\n vpmaddwd %%ymm13,%%ymm15,%%ymm2\n vpaddd %%ymm2,%%ymm3,%%ymm3\n vpmaddwd %%ymm12,%%ymm15,%%ymm4\n vpaddd %%ymm4,%%ymm5,%%ymm5\n vpmaddwd %%ymm14,%%ymm11,%%ymm6\n vpaddd %%ymm6,%%ymm7,%%ymm7\n"
#define FM "vfmadd231ps %%ymm14,%%ymm15,%%ymm8\n vfmadd231ps %%ymm13,%%ymm15,%%ymm9\n vfmadd231ps %%ymm14,%%ymm15,%%ymm10\n vfmadd231ps %%ymm13,%%ymm11,%%ymm12\n"
/* whether fp32 FMAs run beside vpmaddwd + vpaddd or share their pipes */
static void with_fma(void)
{
    long n = 50000000;
    double t0 = now();
    for (long i = 0; i < n; i++)
        __asm__ volatile(MA MA ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7");
    double t = now() - t0;
    printf("8 vpmaddwd+vpaddd: %.3f ns an iteration\n", t / n * 1e9);
    t0 = now();
    for (long i = 0; i < n; i++)
        __asm__ volatile(MA MA FM ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6",
                         "xmm7", "xmm8", "xmm9", "xmm10", "xmm12");
    t = now() - t0;
    printf("8 vpmaddwd+vpaddd + 4 FMA: %.3f ns an iteration\n", t / n * 1e9);
}

int main(void)
{
    mixes();
    with_fma();
    return 0;
}
