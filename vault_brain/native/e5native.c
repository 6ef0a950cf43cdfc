/* e5's passage encoder for the strong tier's batches (vault_brain.native.e5native).
 *
 * The int8 graph's arithmetic (embed/e5_graph.py `_Linear._int8`, as embed/e5_query.py
 * computes it) with the steps onnxruntime runs as separate passes fused around our own
 * integer GEMM: each token row quantised to uint8 over its own [min, max] while the
 * previous step's output is still in cache, u8 x s8 products summed exactly in int32
 * (AVX-512 VNNI vpdpbusd; AVX2 vpmaddwd on widened codes; plain C), the zero-point
 * correction, scale, bias and GELU in the GEMM's epilogue, the residual and LayerNorm
 * on each finished block of rows, and the FFN's two GEMMs on one block of rows at a time
 * (its 1,536-wide activations never leave the core's cache). Attention is float32.
 * docs/benchmarks.md, "The e5 tier's rate, round 11".
 *
 * The integer sums are e5_query's (exact on every path); the float steps round otherwise
 * than onnxruntime's (erf, exp, LayerNorm's sums), so the vectors are not its bits: the
 * engine is checked against the shipped reference vectors like any kernel (embed/e5.py).
 * A row's vector does not depend on the batch around it (every per-row step is per row).
 *
 * C99 and the CPython API; x86 SIMD only behind __builtin_cpu_supports.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__)
#define HAVE_X86 1
#include <immintrin.h>
#endif

#ifdef HAVE_X86
#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma")))

/* 4 codes of a row as one int32 (memcpy: no aliasing of uint8_t storage as int32_t) */
static inline int32_t load4(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* AVX-512 VNNI: 8 rows x 3 panels (48 columns) a step, 4 codes a lane (vpdpbusd sums
 * u8 x s8 products in int32 without saturation), the 24 sums in registers. Fewer rows
 * repeat the last one (computed, not stored). */
#define DP(r, a)                                                                              \
    c##r##0 = _mm512_dpbusd_epi32(c##r##0, a, w0);                                            \
    c##r##1 = _mm512_dpbusd_epi32(c##r##1, a, w1);                                            \
    c##r##2 = _mm512_dpbusd_epi32(c##r##2, a, w2)
#define BCAST(r) _mm512_set1_epi32(load4(a##r + 4 * k4))
#define STORE(r)                                                                              \
    if (r < rows) {                                                                           \
        _mm512_storeu_si512((void *)(out + (size_t)r * ldo), c##r##0);                       \
        _mm512_storeu_si512((void *)(out + (size_t)r * ldo + 16), c##r##1);                  \
        _mm512_storeu_si512((void *)(out + (size_t)r * ldo + 32), c##r##2);                  \
    }
#endif

#define MR 8      /* token rows a GEMM tile */
#define RB 32     /* token rows a block: a weight panel serves 4 tiles while in cache */
/* Row strides of the QKV output and the transposed keys, in floats: one cache line more
 * than the width, so that a column's walk down the rows does not map every row to the
 * same few sets of the L1 cache (3 x 384 floats and 128 floats are multiples of 512
 * bytes: 8 of its 64 sets). */
#define QKV_STRIDE(H) (3 * (H) + 16)
#define KT_STRIDE(L) ((((L) + 31) & ~31) + 16)
#define PANEL 16  /* output columns a packed panel */
#define ALIGN 64

enum { ISA_PORTABLE, ISA_AVX2, ISA_VNNI };
static int best_isa = ISA_PORTABLE; /* set at import */

typedef struct {
    int K, N;
    int8_t *packed;  /* [N / 16][K / 4][16][4]: panel p, step k4, column c, k4 * 4 + i */
    int16_t *wide;   /* the AVX2 path's copy, built on its first use: [N / 8][K / 2][8][2] */
    int32_t *colsum; /* sum over k of the codes of each column */
    float *scale, *sums, *bias;
} Mat;

typedef struct {
    Mat m[4]; /* qkv, ao, fi, fo */
    float *aln_w, *aln_b, *oln_w, *oln_b;
} Layer;

typedef struct {
    PyObject_HEAD
    int hidden, layers, heads, ffn, positions;
    float eps;
    float *pos, *ln_w, *ln_b;
    Layer *layer;
    int isa;
} Engine;

static void *amalloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, ALIGN, n ? n : ALIGN))
        return NULL;
    return p;
}

/* ---------------------------------------------------------------------------------- */
/* integer GEMM: acc[r][o] = sum_k A[r][k] * W[k][o], A uint8, W int8, exact int32       */

/* A tile of `rows` (<= MR) token rows times panels [p0, p1): out[r][o] int32. */
static void gemm_portable(const uint8_t *A, int lda, int rows, const Mat *m, int p0, int p1,
                          int32_t *out, int ldo)
{
    int K4 = m->K / 4;
    for (int p = p0; p < p1; p++) {
        const int8_t *panel = m->packed + (size_t)p * K4 * 64;
        for (int r = 0; r < rows; r++) {
            int32_t acc[PANEL] = {0};
            const uint8_t *a = A + (size_t)r * lda;
            for (int k4 = 0; k4 < K4; k4++) {
                const int8_t *b = panel + (size_t)k4 * 64;
                int32_t a0 = a[4 * k4], a1 = a[4 * k4 + 1], a2 = a[4 * k4 + 2],
                        a3 = a[4 * k4 + 3];
                for (int c = 0; c < PANEL; c++)
                    acc[c] += a0 * b[4 * c] + a1 * b[4 * c + 1] + a2 * b[4 * c + 2] +
                              a3 * b[4 * c + 3];
            }
            memcpy(out + (size_t)r * ldo + p * PANEL, acc, sizeof acc);
        }
    }
}

/* ---------------------------------------------------------------------------------- */
/* per-row float steps (portable C; the compiler vectorises what it can)                */

/* The step and zero point of a row's codes over [lo, hi] (a range that holds 0). */
static void quant_range(float lo, float hi, float *step_out, float *zero_out)
{
    float span = hi - lo;
    if (!(span > 1e-12f))
        span = 1e-12f;
    float step = span * (float)(1.0 / 255.0);
    float zero = rintf(-lo / step);
    *step_out = step;
    *zero_out = zero < 0.0f ? 0.0f : zero > 255.0f ? 255.0f : zero;
}

/* A row's step and zero point over its [min, max] (the range holds 0), and its codes. */
static void quantise_row(const float *x, int n, uint8_t *q, float *step_out, float *zero_out)
{
    float hi = x[0], lo = x[0];
    for (int i = 1; i < n; i++) {
        hi = x[i] > hi ? x[i] : hi;
        lo = x[i] < lo ? x[i] : lo;
    }
    if (!(hi > 0.0f))
        hi = 0.0f;
    if (!(lo < 0.0f))
        lo = 0.0f;
    float step, zero;
    quant_range(lo, hi, &step, &zero);
    float inv = 1.0f / step;
    for (int i = 0; i < n; i++) {
        float v = rintf(x[i] * inv) + zero;
        v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
        q[i] = (uint8_t)(int)v;
    }
    *step_out = step;
    *zero_out = zero;
}

/* y = LayerNorm(y + x) in place into x too (the residual stream), float sums. */
static void add_norm_row(float *x, const float *y, int n, const float *w, const float *b,
                         float eps)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = x[i] + y[i];
        s += x[i];
    }
    float mean = s / n, v = 0.0f;
    for (int i = 0; i < n; i++) {
        float c = x[i] - mean;
        v += c * c;
    }
    float inv = 1.0f / sqrtf(v / n + eps);
    for (int i = 0; i < n; i++)
        x[i] = (x[i] - mean) * inv * w[i] + b[i];
}

/* erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), as querynative's GELU. */
static float gelu1(float x)
{
    float z = fabsf(x) * 0.70710678f;
    float t = 1.0f / (z * 0.3275911f + 1.0f);
    float poly = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) *
                      t +
                  0.254829592f) *
                 t;
    float erf = 1.0f - poly * expf(-z * z);
    erf = x < 0.0f ? -erf : erf;
    return 0.5f * x * (1.0f + erf);
}

/* Every head's keys transposed, [H][KT_STRIDE(L)], zero past L up to L rounded to 32, in
 * one pass down the rows (a pass a head read each row's 128 bytes of it, 4.6 kB apart: a
 * fifth of attention's time in cache misses). Both SIMD attentions read them so. */
static void transpose_keys(const float *qkv, int L, int H, float *kt)
{
    int Lp = (L + 31) & ~31, ldk = KT_STRIDE(L), ld = QKV_STRIDE(H);
    for (int c = 0; c < H; c++)
        for (int j = L; j < Lp; j++)
            kt[(size_t)c * ldk + j] = 0.0f;
    for (int j = 0; j < L; j++) {
        const float *k = qkv + (size_t)j * ld + H;
        for (int c = 0; c < H; c++)
            kt[(size_t)c * ldk + j] = k[c];
    }
}

#ifdef HAVE_X86
/* ---------------------------------------------------------------------------------- */
/* the same per-row steps in AVX-512 (the VNNI path)                                    */

#define F16 __m512
VNNI_TARGET static inline F16 exp16(F16 x)
{
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.7f));
    F16 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    F16 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    F16 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

VNNI_TARGET static inline F16 gelu16(F16 x)
{
    F16 z = _mm512_mul_ps(_mm512_abs_ps(x), _mm512_set1_ps(0.70710678f));
    F16 den = _mm512_fmadd_ps(z, _mm512_set1_ps(0.3275911f), _mm512_set1_ps(1.0f));
    F16 t = _mm512_rcp14_ps(den); /* 2^-14, then one Newton step: ~2^-28 */
    t = _mm512_mul_ps(t, _mm512_fnmadd_ps(den, t, _mm512_set1_ps(2.0f)));
    F16 p = _mm512_set1_ps(1.061405429f);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
    p = _mm512_mul_ps(p, t);
    F16 e = exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), z), z));
    F16 erf = _mm512_fnmadd_ps(p, e, _mm512_set1_ps(1.0f));
    /* the sign of x onto erf */
    erf = _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_castps_si512(erf),
        _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x),
                         _mm512_add_ps(_mm512_set1_ps(1.0f), erf));
}

/* n a multiple of 16 */
VNNI_TARGET static void quantise_row16(const float *x, int n, uint8_t *q, float *step_out,
                                       float *zero_out)
{
    F16 hi = _mm512_setzero_ps(), lo = hi; /* the range holds 0 */
    for (int i = 0; i < n; i += 16) {
        F16 v = _mm512_loadu_ps(x + i);
        hi = _mm512_max_ps(hi, v);
        lo = _mm512_min_ps(lo, v);
    }
    float step, zero;
    quant_range(_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi), &step, &zero);
    F16 inv = _mm512_set1_ps(1.0f / step), zv = _mm512_set1_ps(zero);
    F16 top = _mm512_set1_ps(255.0f), bottom = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        F16 v = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), inv),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm512_min_ps(_mm512_max_ps(_mm512_add_ps(v, zv), bottom), top);
        _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
    }
    *step_out = step;
    *zero_out = zero;
}

VNNI_TARGET static void add_norm_row16(float *x, const float *y, int n, const float *w,
                                       const float *b, float eps)
{
    F16 s = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        F16 v = _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i));
        _mm512_storeu_ps(x + i, v);
        s = _mm512_add_ps(s, v);
    }
    float mean = _mm512_reduce_add_ps(s) / n;
    F16 m = _mm512_set1_ps(mean), var = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        F16 c = _mm512_sub_ps(_mm512_loadu_ps(x + i), m);
        var = _mm512_fmadd_ps(c, c, var);
    }
    F16 inv = _mm512_set1_ps(1.0f / sqrtf(_mm512_reduce_add_ps(var) / n + eps));
    for (int i = 0; i < n; i += 16) {
        F16 c = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), m), inv);
        _mm512_storeu_ps(x + i, _mm512_fmadd_ps(c, _mm512_loadu_ps(w + i), _mm512_loadu_ps(b + i)));
    }
}

/* Heads of 32: the scores of 8 queries against 32 keys a step (16 sums in registers), the
 * softmax's exponentials, then the 8 queries' weighted values, divided by their totals at
 * the end. kt: [32][Lp] (keys transposed, zero past L; Lp = L rounded up to 32),
 * probs: [8][Lp]. */
VNNI_TARGET static void attention16(const float *qkv, int L, int H, int heads, float *att,
                                    float *kt, float *probs)
{
    enum { size = 32, Q = 8 };
    int Lp = (L + 31) & ~31, ldk = KT_STRIDE(L), ld = QKV_STRIDE(H);
    F16 sc = _mm512_set1_ps(1.0f / sqrtf((float)size));
    transpose_keys(qkv, L, H, kt);
    const float *kt_all = kt;
    for (int h = 0; h < heads; h++) {
        kt = (float *)kt_all + (size_t)h * size * ldk;
        for (int i0 = 0; i0 < L; i0 += Q) {
            int n = L - i0 < Q ? L - i0 : Q;
            const float *q[Q];
            for (int r = 0; r < Q; r++)
                q[r] = qkv + (size_t)(i0 + (r < n ? r : n - 1)) * ld + h * size;
            for (int jb = 0; jb < Lp; jb += 32) {
                F16 z = _mm512_setzero_ps();
                F16 a0 = z, a1 = z, a2 = z, a3 = z, a4 = z, a5 = z, a6 = z, a7 = z;
                F16 b0 = z, b1 = z, b2 = z, b3 = z, b4 = z, b5 = z, b6 = z, b7 = z;
                const float *k = kt + jb;
                for (int d = 0; d < size; d++, k += ldk) {
                    F16 k0 = _mm512_loadu_ps(k), k1 = _mm512_loadu_ps(k + 16), x;
#define QK(r)                                                                                 \
    x = _mm512_set1_ps(q[r][d]);                                                              \
    a##r = _mm512_fmadd_ps(x, k0, a##r);                                                      \
    b##r = _mm512_fmadd_ps(x, k1, b##r)
                    QK(0);
                    QK(1);
                    QK(2);
                    QK(3);
                    QK(4);
                    QK(5);
                    QK(6);
                    QK(7);
#undef QK
                }
                float *p = probs + jb;
#define ST(r)                                                                                 \
    _mm512_storeu_ps(p + (size_t)r * Lp, _mm512_mul_ps(a##r, sc));                            \
    _mm512_storeu_ps(p + (size_t)r * Lp + 16, _mm512_mul_ps(b##r, sc))
                ST(0);
                ST(1);
                ST(2);
                ST(3);
                ST(4);
                ST(5);
                ST(6);
                ST(7);
#undef ST
            }
            float inv[Q];
            for (int r = 0; r < Q; r++) {
                float *p = probs + (size_t)r * Lp;
                F16 top = _mm512_set1_ps(-INFINITY);
                int j = 0;
                for (; j + 16 <= L; j += 16)
                    top = _mm512_max_ps(top, _mm512_loadu_ps(p + j));
                __mmask16 tail = (__mmask16)((1u << (L - j)) - 1);
                if (j < L)
                    top = _mm512_mask_max_ps(top, tail, top, _mm512_loadu_ps(p + j));
                F16 t = _mm512_set1_ps(_mm512_reduce_max_ps(top)), total = _mm512_setzero_ps();
                for (j = 0; j + 16 <= L; j += 16) {
                    F16 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(p + j), t));
                    _mm512_storeu_ps(p + j, e);
                    total = _mm512_add_ps(total, e);
                }
                if (j < L) {
                    F16 e = _mm512_maskz_mov_ps(tail, exp16(_mm512_sub_ps(_mm512_loadu_ps(p + j), t)));
                    _mm512_storeu_ps(p + j, e);
                    total = _mm512_add_ps(total, e);
                }
                inv[r] = 1.0f / _mm512_reduce_add_ps(total);
            }
            F16 z = _mm512_setzero_ps();
            F16 o00 = z, o01 = z, o10 = z, o11 = z, o20 = z, o21 = z, o30 = z, o31 = z;
            F16 o40 = z, o41 = z, o50 = z, o51 = z, o60 = z, o61 = z, o70 = z, o71 = z;
            const float *v = qkv + 2 * H + h * size;
            for (int j = 0; j < L; j++, v += ld) {
                F16 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16), x;
#define PV(r)                                                                                 \
    x = _mm512_set1_ps(probs[(size_t)r * Lp + j]);                                            \
    o##r##0 = _mm512_fmadd_ps(x, v0, o##r##0);                                                \
    o##r##1 = _mm512_fmadd_ps(x, v1, o##r##1)
                PV(0);
                PV(1);
                PV(2);
                PV(3);
                PV(4);
                PV(5);
                PV(6);
                PV(7);
#undef PV
            }
            float *o = att + (size_t)i0 * H + h * size;
#define OUT(r)                                                                                \
    if (r < n) {                                                                              \
        F16 s_ = _mm512_set1_ps(inv[r]);                                                      \
        _mm512_storeu_ps(o + (size_t)r * H, _mm512_mul_ps(o##r##0, s_));                     \
        _mm512_storeu_ps(o + (size_t)r * H + 16, _mm512_mul_ps(o##r##1, s_));                \
    }
            OUT(0)
            OUT(1)
            OUT(2)
            OUT(3)
            OUT(4)
            OUT(5)
            OUT(6)
            OUT(7)
#undef OUT
        }
    }
}

/* The GEMM with its epilogue in the tile: the sums go from registers to float (zero-point
 * correction, scale, bias, GELU on request) and are stored once, as float. Without an
 * epilogue (the tests' and the bench's entry) the int32 sums are stored. */
typedef struct {
    const Mat *m;
    const float *step, *zero;
    float *y;
    int ldy, gelu;
} Epi;

#define EPI1(r, k)                                                                            \
    {                                                                                         \
        int o_ = col0 + 16 * k;                                                               \
        __m512i i_ = _mm512_sub_epi32(                                                        \
            c##r##k, _mm512_slli_epi32(_mm512_loadu_si512((const void *)(m->colsum + o_)), 7)); \
        F16 v_ = _mm512_mul_ps(_mm512_cvtepi32_ps(i_),                                        \
                               _mm512_mul_ps(st, _mm512_loadu_ps(m->scale + o_)));            \
        v_ = _mm512_sub_ps(v_, _mm512_mul_ps(shift, _mm512_loadu_ps(m->sums + o_)));          \
        v_ = _mm512_add_ps(v_, _mm512_loadu_ps(m->bias + o_));                                \
        if (ep->gelu)                                                                         \
            v_ = gelu16(v_);                                                                  \
        _mm512_storeu_ps(ep->y + (size_t)r * ep->ldy + o_, v_);                               \
    }
#define EPI(r)                                                                                \
    if (r < rows) {                                                                           \
        F16 st = _mm512_set1_ps(ep->step[r]);                                                 \
        F16 shift = _mm512_set1_ps((ep->zero[r] - 128.0f) * ep->step[r]);                     \
        EPI1(r, 0) EPI1(r, 1) EPI1(r, 2)                                                      \
    }

/* AVX-512 VNNI: 8 rows x 3 panels (48 columns, from col0) a step; `ep` NULL stores the
 * int32 sums into out. */
VNNI_TARGET static void tile_vnni(const uint8_t *A, int lda, int rows, const int8_t *b,
                                  size_t pstride, int K4, const Epi *ep, int col0, int32_t *out,
                                  int ldo)
{
    const uint8_t *a0 = A, *a1 = A + (size_t)(rows > 1 ? 1 : 0) * lda,
                  *a2 = A + (size_t)(rows > 2 ? 2 : rows - 1) * lda,
                  *a3 = A + (size_t)(rows > 3 ? 3 : rows - 1) * lda,
                  *a4 = A + (size_t)(rows > 4 ? 4 : rows - 1) * lda,
                  *a5 = A + (size_t)(rows > 5 ? 5 : rows - 1) * lda,
                  *a6 = A + (size_t)(rows > 6 ? 6 : rows - 1) * lda,
                  *a7 = A + (size_t)(rows > 7 ? 7 : rows - 1) * lda;
    __m512i z = _mm512_setzero_si512();
    __m512i c00 = z, c01 = z, c02 = z, c10 = z, c11 = z, c12 = z, c20 = z, c21 = z, c22 = z;
    __m512i c30 = z, c31 = z, c32 = z, c40 = z, c41 = z, c42 = z, c50 = z, c51 = z, c52 = z;
    __m512i c60 = z, c61 = z, c62 = z, c70 = z, c71 = z, c72 = z;
    for (int k4 = 0; k4 < K4; k4++, b += 64) {
        __m512i w0 = _mm512_load_si512((const void *)b);
        __m512i w1 = _mm512_load_si512((const void *)(b + pstride));
        __m512i w2 = _mm512_load_si512((const void *)(b + 2 * pstride));
        __m512i x;
        x = BCAST(0);
        DP(0, x);
        x = BCAST(1);
        DP(1, x);
        x = BCAST(2);
        DP(2, x);
        x = BCAST(3);
        DP(3, x);
        x = BCAST(4);
        DP(4, x);
        x = BCAST(5);
        DP(5, x);
        x = BCAST(6);
        DP(6, x);
        x = BCAST(7);
        DP(7, x);
    }
    if (!ep) {
        out += col0;
        STORE(0)
        STORE(1)
        STORE(2)
        STORE(3)
        STORE(4)
        STORE(5)
        STORE(6)
        STORE(7)
        return;
    }
    const Mat *m = ep->m;
    EPI(0)
    EPI(1)
    EPI(2)
    EPI(3)
    EPI(4)
    EPI(5)
    EPI(6)
    EPI(7)
}
#undef EPI
#undef EPI1

/* `rows` rows times m, a block of 48 columns at a time for every tile of MR rows; with
 * the epilogue `ep` (y), else the int32 sums (out). N a multiple of 48 (checked at load). */
VNNI_TARGET static void gemm_vnni(const uint8_t *A, int lda, int rows, const Mat *m,
                                  const Epi *ep, int32_t *out, int ldo)
{
    int K4 = m->K / 4;
    size_t pstride = (size_t)K4 * 64;
    for (int p = 0; p + 3 <= m->N / PANEL; p += 3)
        for (int r0 = 0; r0 < rows; r0 += MR) {
            Epi tile;
            if (ep) {
                tile = *ep;
                tile.step += r0;
                tile.zero += r0;
                tile.y += (size_t)r0 * ep->ldy;
            }
            tile_vnni(A + (size_t)r0 * lda, lda, rows - r0 < MR ? rows - r0 : MR,
                      m->packed + (size_t)p * pstride, pstride, K4, ep ? &tile : NULL,
                      p * PANEL, out + (size_t)r0 * ldo, ldo);
        }
}

/* ---------------------------------------------------------------------------------- */
/* the AVX2 + FMA path: the same steps 8 floats wide, the GEMM on int16 (vpmaddwd)      */

#define AVX2_TARGET __attribute__((target("avx2,fma")))
#define F8 __m256

AVX2_TARGET static inline float hsum8(F8 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2_TARGET static inline float hmax8(F8 v)
{
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AVX2_TARGET static inline float hmin8(F8 v)
{
    __m128 s = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_min_ps(s, _mm_movehl_ps(s, s));
    s = _mm_min_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* exp16's polynomial; 2^n built in the exponent bits (n >= -126 by the clamp; the callers'
 * arguments are <= 0) */
AVX2_TARGET static inline F8 exp8(F8 x)
{
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    F8 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    F8 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    F8 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)),
                                  23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

AVX2_TARGET static inline F8 gelu8(F8 x)
{
    F8 sign = _mm256_set1_ps(-0.0f);
    F8 z = _mm256_mul_ps(_mm256_andnot_ps(sign, x), _mm256_set1_ps(0.70710678f));
    F8 den = _mm256_fmadd_ps(z, _mm256_set1_ps(0.3275911f), _mm256_set1_ps(1.0f));
    F8 t = _mm256_rcp_ps(den); /* 2^-12, then one Newton step: ~2^-23 */
    t = _mm256_mul_ps(t, _mm256_fnmadd_ps(den, t, _mm256_set1_ps(2.0f)));
    F8 p = _mm256_set1_ps(1.061405429f);
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
    p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
    p = _mm256_mul_ps(p, t);
    F8 e = exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), z), z));
    F8 erf = _mm256_fnmadd_ps(p, e, _mm256_set1_ps(1.0f));
    erf = _mm256_or_ps(erf, _mm256_and_ps(x, sign)); /* the sign of x onto erf */
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x),
                         _mm256_add_ps(_mm256_set1_ps(1.0f), erf));
}

/* n a multiple of 16 */
AVX2_TARGET static void quantise_row8(const float *x, int n, uint8_t *q, float *step_out,
                                      float *zero_out)
{
    F8 hi = _mm256_setzero_ps(), lo = hi; /* the range holds 0 */
    for (int i = 0; i < n; i += 8) {
        F8 v = _mm256_loadu_ps(x + i);
        hi = _mm256_max_ps(hi, v);
        lo = _mm256_min_ps(lo, v);
    }
    float step, zero;
    quant_range(hmin8(lo), hmax8(hi), &step, &zero);
    F8 inv = _mm256_set1_ps(1.0f / step), zv = _mm256_set1_ps(zero);
    F8 top = _mm256_set1_ps(255.0f), bottom = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        F8 v0 = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        F8 v1 = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), inv),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v0 = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v0, zv), bottom), top);
        v1 = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v1, zv), bottom), top);
        /* 16 int32 in [0, 255] to 16 bytes in order (the packs work per 128-bit lane) */
        __m256i w = _mm256_permute4x64_epi64(
            _mm256_packs_epi32(_mm256_cvtps_epi32(v0), _mm256_cvtps_epi32(v1)), 0xD8);
        _mm_storeu_si128((__m128i *)(q + i), _mm_packus_epi16(_mm256_castsi256_si128(w),
                                                              _mm256_extracti128_si256(w, 1)));
    }
    *step_out = step;
    *zero_out = zero;
}

AVX2_TARGET static void add_norm_row8(float *x, const float *y, int n, const float *w,
                                      const float *b, float eps)
{
    F8 s = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
        F8 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i));
        _mm256_storeu_ps(x + i, v);
        s = _mm256_add_ps(s, v);
    }
    float mean = hsum8(s) / n;
    F8 m = _mm256_set1_ps(mean), var = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
        F8 c = _mm256_sub_ps(_mm256_loadu_ps(x + i), m);
        var = _mm256_fmadd_ps(c, c, var);
    }
    F8 inv = _mm256_set1_ps(1.0f / sqrtf(hsum8(var) / n + eps));
    for (int i = 0; i < n; i += 8) {
        F8 c = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m), inv);
        _mm256_storeu_ps(x + i, _mm256_fmadd_ps(c, _mm256_loadu_ps(w + i), _mm256_loadu_ps(b + i)));
    }
}

/* attention16's steps for 16 ymm registers: heads of 32, the scores of 6 queries x 16
 * keys a step (12 sums), the softmax, then the 6 queries' weighted values 16 dimensions a
 * pass. kt, probs as attention16's ([32 * heads][ldk], [8][Lp]). */
AVX2_TARGET static void attention8(const float *qkv, int L, int H, int heads, float *att,
                                   float *kt, float *probs)
{
    enum { size = 32, Q = 6 };
    int Lp = (L + 31) & ~31, ldk = KT_STRIDE(L), ld = QKV_STRIDE(H);
    F8 sc = _mm256_set1_ps(1.0f / sqrtf((float)size));
    transpose_keys(qkv, L, H, kt);
    const float *kt_all = kt;
    __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int h = 0; h < heads; h++) {
        kt = (float *)kt_all + (size_t)h * size * ldk;
        for (int i0 = 0; i0 < L; i0 += Q) {
            int n = L - i0 < Q ? L - i0 : Q;
            const float *q[Q];
            for (int r = 0; r < Q; r++)
                q[r] = qkv + (size_t)(i0 + (r < n ? r : n - 1)) * ld + h * size;
            for (int jb = 0; jb < L; jb += 16) {
                F8 z = _mm256_setzero_ps();
                F8 a0 = z, a1 = z, a2 = z, a3 = z, a4 = z, a5 = z;
                F8 b0 = z, b1 = z, b2 = z, b3 = z, b4 = z, b5 = z;
                const float *k = kt + jb;
                for (int d = 0; d < size; d++, k += ldk) {
                    F8 k0 = _mm256_loadu_ps(k), k1 = _mm256_loadu_ps(k + 8), x;
#define QK(r)                                                                                 \
    x = _mm256_broadcast_ss(q[r] + d);                                                        \
    a##r = _mm256_fmadd_ps(x, k0, a##r);                                                      \
    b##r = _mm256_fmadd_ps(x, k1, b##r)
                    QK(0);
                    QK(1);
                    QK(2);
                    QK(3);
                    QK(4);
                    QK(5);
#undef QK
                }
                float *p = probs + jb;
#define ST(r)                                                                                 \
    _mm256_storeu_ps(p + (size_t)r * Lp, _mm256_mul_ps(a##r, sc));                            \
    _mm256_storeu_ps(p + (size_t)r * Lp + 8, _mm256_mul_ps(b##r, sc))
                ST(0);
                ST(1);
                ST(2);
                ST(3);
                ST(4);
                ST(5);
#undef ST
            }
            float inv[Q];
            for (int r = 0; r < Q; r++) {
                float *p = probs + (size_t)r * Lp;
                F8 top = _mm256_set1_ps(-INFINITY);
                int j = 0;
                for (; j + 8 <= L; j += 8)
                    top = _mm256_max_ps(top, _mm256_loadu_ps(p + j));
                /* the lanes of the last block past L: out of the max, exp to 0 */
                F8 tail = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(L - j), iota));
                if (j < L)
                    top = _mm256_max_ps(top, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY),
                                                              _mm256_loadu_ps(p + j), tail));
                F8 t = _mm256_set1_ps(hmax8(top)), total = _mm256_setzero_ps();
                for (j = 0; j + 8 <= L; j += 8) {
                    F8 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(p + j), t));
                    _mm256_storeu_ps(p + j, e);
                    total = _mm256_add_ps(total, e);
                }
                if (j < L) {
                    F8 e = _mm256_and_ps(tail, exp8(_mm256_sub_ps(_mm256_loadu_ps(p + j), t)));
                    _mm256_storeu_ps(p + j, e);
                    total = _mm256_add_ps(total, e);
                }
                inv[r] = 1.0f / hsum8(total);
            }
            for (int half = 0; half < size; half += 16) {
                F8 z = _mm256_setzero_ps();
                F8 o00 = z, o01 = z, o10 = z, o11 = z, o20 = z, o21 = z, o30 = z, o31 = z;
                F8 o40 = z, o41 = z, o50 = z, o51 = z;
                const float *v = qkv + 2 * H + h * size + half;
                for (int j = 0; j < L; j++, v += ld) {
                    F8 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8), x;
#define PV(r)                                                                                 \
    x = _mm256_broadcast_ss(probs + (size_t)r * Lp + j);                                      \
    o##r##0 = _mm256_fmadd_ps(x, v0, o##r##0);                                                \
    o##r##1 = _mm256_fmadd_ps(x, v1, o##r##1)
                    PV(0);
                    PV(1);
                    PV(2);
                    PV(3);
                    PV(4);
                    PV(5);
#undef PV
                }
                float *o = att + (size_t)i0 * H + h * size + half;
#define OUT(r)                                                                                \
    if (r < n) {                                                                              \
        F8 s_ = _mm256_set1_ps(inv[r]);                                                       \
        _mm256_storeu_ps(o + (size_t)r * H, _mm256_mul_ps(o##r##0, s_));                     \
        _mm256_storeu_ps(o + (size_t)r * H + 8, _mm256_mul_ps(o##r##1, s_));                 \
    }
                OUT(0)
                OUT(1)
                OUT(2)
                OUT(3)
                OUT(4)
                OUT(5)
#undef OUT
            }
        }
    }
}

/* The int16 copy the AVX2 GEMM reads: each column's codes in pairs down k, 8 columns a
 * panel ([N / 8][K / 2][8][2]), so that vpmaddwd's lane c sums two k of column c: 2 bytes a
 * weight (42 MB for e5-small beside the 21 MB of int8), built on the path's first use. */
static int widen_mat(Mat *m)
{
    if (m->wide)
        return 0;
    int K = m->K, N = m->N, K2 = K / 2, K4 = K / 4;
    int16_t *w = amalloc(sizeof(int16_t) * (size_t)K * N);
    if (!w)
        return -1;
    for (int o = 0; o < N; o++)
        for (int k = 0; k < K; k++)
            w[((size_t)(o / 8) * K2 + k / 2) * 16 + (o % 8) * 2 + k % 2] =
                m->packed[((size_t)(o / PANEL) * K4 + k / 4) * 64 + (o % PANEL) * 4 + k % 4];
    m->wide = w;
    return 0;
}

/* u8 codes to int16, rows of K (a multiple of 16) */
AVX2_TARGET static void widen_rows(const uint8_t *A, int lda, int rows, int K, int16_t *a16)
{
    for (int r = 0; r < rows; r++)
        for (int k = 0; k < K; k += 16)
            _mm256_storeu_si256(
                (__m256i *)(a16 + (size_t)r * K + k),
                _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(A + (size_t)r * lda + k))));
}

/* AVX2: 4 rows x 24 columns a step, the 12 int32 sums in registers; the codes of a row as
 * int16 in pairs (one broadcast), the weights' int16 pairs straight from the copy
 * (vpmaddwd: u8 x s8 products summed in int32 without saturation, where vpmaddubsw's
 * 16-bit pairs would at 255 x 127 x 2). Fewer rows repeat the last one (not stored). */
#define MR2 4
#define MADD(r, x)                                                                            \
    c##r##0 = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(x, _mm256_load_si256((const __m256i *)b))); \
    c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(x, _mm256_load_si256((const __m256i *)(b + pstride)))); \
    c##r##2 = _mm256_add_epi32(c##r##2, _mm256_madd_epi16(x, _mm256_load_si256((const __m256i *)(b + 2 * pstride))))
#define PAIR(r) _mm256_set1_epi32(load4((const uint8_t *)(a##r + 2 * k2)))
#define STORE8(r)                                                                             \
    if (r < rows) {                                                                           \
        _mm256_storeu_si256((__m256i *)(out + (size_t)r * ldo), c##r##0);                    \
        _mm256_storeu_si256((__m256i *)(out + (size_t)r * ldo + 8), c##r##1);                \
        _mm256_storeu_si256((__m256i *)(out + (size_t)r * ldo + 16), c##r##2);               \
    }
/* The 4 x 24 sums (tile_avx2's, from a small buffer: the epilogue in the same function
 * as the loop made GCC spill its sums every step) to float: zero-point correction, scale,
 * bias, GELU on request, as EPI1 does 16 wide. */
AVX2_TARGET static void epi_avx2(const int32_t *sums, int rows, const Epi *ep, int col0)
{
    const Mat *m = ep->m;
    for (int r = 0; r < rows; r++) {
        F8 st = _mm256_set1_ps(ep->step[r]);
        F8 shift = _mm256_set1_ps((ep->zero[r] - 128.0f) * ep->step[r]);
        for (int k = 0; k < 24; k += 8) {
            int o = col0 + k;
            __m256i i = _mm256_sub_epi32(
                _mm256_loadu_si256((const __m256i *)(sums + 24 * r + k)),
                _mm256_slli_epi32(_mm256_loadu_si256((const __m256i *)(m->colsum + o)), 7));
            F8 v = _mm256_mul_ps(_mm256_cvtepi32_ps(i),
                                 _mm256_mul_ps(st, _mm256_loadu_ps(m->scale + o)));
            v = _mm256_sub_ps(v, _mm256_mul_ps(shift, _mm256_loadu_ps(m->sums + o)));
            v = _mm256_add_ps(v, _mm256_loadu_ps(m->bias + o));
            if (ep->gelu)
                v = gelu8(v);
            _mm256_storeu_ps(ep->y + (size_t)r * ep->ldy + o, v);
        }
    }
}

/* the int32 sums of `rows` (<= 4) rows x 24 columns into out (ldo); not inlined, so that
 * its 12 sums, the broadcast and the product have the 16 registers to themselves (inlined
 * into the loops over tiles, GCC without -fwrapv kept one sum on the stack: 1.5x slower) */
AVX2_TARGET __attribute__((noinline)) static void tile_avx2(const int16_t *A, int lda, int rows, const int16_t *b,
                                  size_t pstride, int K2, int32_t *out, int ldo)
{
    const int16_t *a0 = A, *a1 = A + (size_t)(rows > 1 ? 1 : 0) * lda,
                  *a2 = A + (size_t)(rows > 2 ? 2 : rows - 1) * lda,
                  *a3 = A + (size_t)(rows > 3 ? 3 : rows - 1) * lda;
    __m256i z = _mm256_setzero_si256();
    __m256i c00 = z, c01 = z, c02 = z, c10 = z, c11 = z, c12 = z;
    __m256i c20 = z, c21 = z, c22 = z, c30 = z, c31 = z, c32 = z;
    for (int k2 = 0; k2 < K2; k2++, b += 16) {
        __m256i x;
        x = PAIR(0);
        MADD(0, x);
        x = PAIR(1);
        MADD(1, x);
        x = PAIR(2);
        MADD(2, x);
        x = PAIR(3);
        MADD(3, x);
    }
    STORE8(0)
    STORE8(1)
    STORE8(2)
    STORE8(3)
}
#undef MADD
#undef PAIR
#undef STORE8

/* gemm_vnni's loops over tiles of 4 rows x 24 columns; A16: the rows' codes as int16
 * (widen_rows), m->wide built */
AVX2_TARGET static void gemm_avx2(const int16_t *A16, int rows, const Mat *m, const Epi *ep,
                                  int32_t *out, int ldo)
{
    int K = m->K, K2 = K / 2;
    size_t pstride = (size_t)K2 * 16;
    for (int c0 = 0; c0 + 24 <= m->N; c0 += 24)
        for (int r0 = 0; r0 < rows; r0 += MR2) {
            int n = rows - r0 < MR2 ? rows - r0 : MR2;
            const int16_t *b = m->wide + (size_t)(c0 / 8) * pstride;
            if (!ep) {
                tile_avx2(A16 + (size_t)r0 * K, K, n, b, pstride, K2,
                          out + (size_t)r0 * ldo + c0, ldo);
                continue;
            }
            int32_t sums[MR2 * 24];
            tile_avx2(A16 + (size_t)r0 * K, K, n, b, pstride, K2, sums, 24);
            Epi tile = *ep;
            tile.step += r0;
            tile.zero += r0;
            tile.y += (size_t)r0 * ep->ldy;
            epi_avx2(sums, n, &tile, c0);
        }
}
#endif

/* any number of rows: the int32 sums (the tests' and the bench's entry; a16: RB x K
 * int16 of scratch for the AVX2 path) */
static void gemm(int isa, const uint8_t *A, int lda, int rows, const Mat *m, int32_t *out,
                 int ldo, int16_t *a16)
{
#ifdef HAVE_X86
    if (isa == ISA_VNNI) {
        gemm_vnni(A, lda, rows, m, NULL, out, ldo);
        return;
    }
    if (isa == ISA_AVX2) {
        /* blocks of RB rows, as linear_rows runs it (their int16 codes stay in L1) */
        for (int r0 = 0; r0 < rows; r0 += RB) {
            int n = rows - r0 < RB ? rows - r0 : RB;
            widen_rows(A + (size_t)r0 * lda, lda, n, m->K, a16);
            gemm_avx2(a16, n, m, NULL, out + (size_t)r0 * ldo, ldo);
        }
        return;
    }
#endif
    (void)isa;
    (void)a16;
    gemm_portable(A, lda, rows, m, 0, m->N / PANEL, out, ldo);
}

/* ---------------------------------------------------------------------------------- */
/* one batch                                                                           */

typedef struct {
    int T, H, F, L, B;
    float *x, *qkv, *att, *ybuf, *kt, *probs;
    uint8_t *qa, *qf; /* quantised rows: [T][H] and [RB][F] */
    float *step, *zero, *fstep, *fzero;
    int32_t *acc; /* [RB][max(3H, F)] */
    int16_t *a16; /* [RB][F]: the AVX2 GEMM's rows as int16 */
} Work;

/* The epilogue of `rows` rows: float = I * (step scale) - (zero - 128) step sums + bias. */
static void dequant_rows(const int32_t *acc, int ldacc, int rows, const Mat *m,
                         const float *step, const float *zero, float *y, int ldy, int gelu)
{
    int N = m->N;
    for (int r = 0; r < rows; r++) {
        const int32_t *a = acc + (size_t)r * ldacc;
        float *yr = y + (size_t)r * ldy;
        float st = step[r], shift = (zero[r] - 128.0f) * st;
        for (int o = 0; o < N; o++) {
            float v = (float)(a[o] - 128 * m->colsum[o]);
            v = v * (st * m->scale[o]);
            v = v - shift * m->sums[o];
            yr[o] = v + m->bias[o];
        }
        if (gelu)
            for (int o = 0; o < N; o++)
                yr[o] = gelu1(yr[o]);
    }
}

static void attention(Work *w, int heads)
{
    int H = w->H, L = w->L, size = H / heads;
    float scale = 1.0f / sqrtf((float)size);
    for (int b = 0; b < w->B; b++) {
        int ld = QKV_STRIDE(H);
        const float *base = w->qkv + (size_t)b * L * ld;
        for (int h = 0; h < heads; h++) {
            /* K of this head transposed: kt[d][j] */
            for (int j = 0; j < L; j++)
                for (int d = 0; d < size; d++)
                    w->kt[(size_t)d * L + j] = base[(size_t)j * ld + H + h * size + d];
            for (int i = 0; i < L; i++) {
                const float *q = base + (size_t)i * ld + h * size;
                float *s = w->probs;
                for (int j = 0; j < L; j++)
                    s[j] = 0.0f;
                for (int d = 0; d < size; d++) {
                    float qd = q[d];
                    const float *kd = w->kt + (size_t)d * L;
                    for (int j = 0; j < L; j++)
                        s[j] += qd * kd[j];
                }
                float top = -INFINITY;
                for (int j = 0; j < L; j++) {
                    s[j] *= scale;
                    top = s[j] > top ? s[j] : top;
                }
                float total = 0.0f;
                for (int j = 0; j < L; j++) {
                    s[j] = expf(s[j] - top);
                    total += s[j];
                }
                float inv = 1.0f / total;
                float *o = w->att + ((size_t)b * L + i) * H + h * size;
                for (int d = 0; d < size; d++)
                    o[d] = 0.0f;
                for (int j = 0; j < L; j++) {
                    float p = s[j] * inv;
                    const float *v = base + (size_t)j * ld + 2 * H + h * size;
                    for (int d = 0; d < size; d++)
                        o[d] += p * v[d];
                }
            }
        }
    }
}


typedef void (*quantise_fn)(const float *, int, uint8_t *, float *, float *);
typedef void (*norm_fn)(float *, const float *, int, const float *, const float *, float);
/* y[r] = the epilogue of A's rows times m: fused in the tile on the SIMD paths, else the
 * int32 sums then dequant_rows' pass. */
static void linear_rows(int isa, const uint8_t *A, int lda, int rows, const Mat *m,
                        const float *step, const float *zero, float *y, int ldy, int gelu,
                        Work *w)
{
#ifdef HAVE_X86
    Epi ep = {m, step, zero, y, ldy, gelu};
    if (isa == ISA_VNNI) {
        gemm_vnni(A, lda, rows, m, &ep, NULL, 0);
        return;
    }
    if (isa == ISA_AVX2) {
        widen_rows(A, lda, rows, m->K, w->a16);
        gemm_avx2(w->a16, rows, m, &ep, NULL, 0);
        return;
    }
#endif
    gemm(isa, A, lda, rows, m, w->acc, m->N, NULL);
    dequant_rows(w->acc, m->N, rows, m, step, zero, y, ldy, gelu);
}

/* src: the word vectors [T][H]; dst: the pooled means [B][H] */
static void forward(const Engine *e, Work *w, int isa, const float *src, float *dst)
{
    int T = w->T, H = e->hidden, F = e->ffn;
    quantise_fn quantise = quantise_row;
    norm_fn add_norm = add_norm_row;
    int fast_attention = 0;
#ifdef HAVE_X86
    if (isa == ISA_VNNI) {
        quantise = quantise_row16;
        add_norm = add_norm_row16;
        fast_attention = H / e->heads == 32 ? ISA_VNNI : 0;
    } else if (isa == ISA_AVX2) {
        quantise = quantise_row8;
        add_norm = add_norm_row8;
        fast_attention = H / e->heads == 32 ? ISA_AVX2 : 0;
    }
#endif
    /* the positions added, the embeddings' LayerNorm (scalar on every path: the sums in
     * their order, as before; ~0.1 CPU-ms a chunk), the first quantisation */
    for (int t = 0; t < T; t++) {
        float *xt = w->x + (size_t)t * H;
        memcpy(xt, src + (size_t)t * H, sizeof(float) * H);
        add_norm_row(xt, e->pos + (size_t)(t % w->L) * H, H, e->ln_w, e->ln_b, e->eps);
        quantise(xt, H, w->qa + (size_t)t * H, &w->step[t], &w->zero[t]);
    }
    for (int l = 0; l < e->layers; l++) {
        const Layer *ly = &e->layer[l];
        const Mat *qkv = &ly->m[0], *ao = &ly->m[1], *fi = &ly->m[2], *fo = &ly->m[3];
        for (int t0 = 0; t0 < T; t0 += RB) {
            int rows = T - t0 < RB ? T - t0 : RB;
            linear_rows(isa, w->qa + (size_t)t0 * H, H, rows, qkv, w->step + t0, w->zero + t0,
                        w->qkv + (size_t)t0 * QKV_STRIDE(H), QKV_STRIDE(H), 0,
                        w);
        }
#ifdef HAVE_X86
        if (fast_attention)
            for (int b = 0; b < w->B; b++)
                (fast_attention == ISA_VNNI ? attention16 : attention8)(
                    w->qkv + (size_t)b * w->L * QKV_STRIDE(H), w->L, H, e->heads,
                    w->att + (size_t)b * w->L * H, w->kt, w->probs);
        else
#endif
            attention(w, e->heads);
        for (int t = 0; t < T; t++)
            quantise(w->att + (size_t)t * H, H, w->qa + (size_t)t * H, &w->step[t], &w->zero[t]);
        for (int t0 = 0; t0 < T; t0 += RB) {
            int rows = T - t0 < RB ? T - t0 : RB;
            uint8_t *qa = w->qa + (size_t)t0 * H;
            float *x = w->x + (size_t)t0 * H;
            /* attention's output projection, residual, norm */
            linear_rows(isa, qa, H, rows, ao, w->step + t0, w->zero + t0, w->ybuf, H, 0,
                        w);
            for (int r = 0; r < rows; r++) {
                add_norm(x + (size_t)r * H, w->ybuf + (size_t)r * H, H, ly->aln_w, ly->aln_b,
                         e->eps);
                quantise(x + (size_t)r * H, H, qa + (size_t)r * H, &w->step[t0 + r],
                         &w->zero[t0 + r]);
            }
            /* the FFN on these rows: in, GELU, quantised, out, residual, norm */
            linear_rows(isa, qa, H, rows, fi, w->step + t0, w->zero + t0, w->ybuf, F, 1,
                        w);
            for (int r = 0; r < rows; r++)
                quantise(w->ybuf + (size_t)r * F, F, w->qf + (size_t)r * F, &w->fstep[r],
                         &w->fzero[r]);
            linear_rows(isa, w->qf, F, rows, fo, w->fstep, w->fzero, w->ybuf, H, 0,
                        w);
            for (int r = 0; r < rows; r++) {
                add_norm(x + (size_t)r * H, w->ybuf + (size_t)r * H, H, ly->oln_w, ly->oln_b,
                         e->eps);
                quantise(x + (size_t)r * H, H, qa + (size_t)r * H, &w->step[t0 + r],
                         &w->zero[t0 + r]);
            }
        }
    }
    /* the mean of each text's last hidden states (down the tokens, a row at a time) */
    int L = w->L;
    for (int b = 0; b < w->B; b++) {
        float *d = dst + (size_t)b * H;
        for (int i = 0; i < H; i++)
            d[i] = 0.0f;
        for (int t = 0; t < L; t++) {
            const float *xt = w->x + ((size_t)b * L + t) * H;
            for (int i = 0; i < H; i++)
                d[i] += xt[i];
        }
        for (int i = 0; i < H; i++)
            d[i] /= L;
    }
}

/* ---------------------------------------------------------------------------------- */
/* Python                                                                              */

static void free_mat(Mat *m)
{
    free(m->packed);
    free(m->wide);
    free(m->colsum);
    free(m->scale);
    free(m->sums);
    free(m->bias);
}

static void Engine_dealloc(Engine *self)
{
    if (self->layer) {
        for (int l = 0; l < self->layers; l++) {
            for (int i = 0; i < 4; i++)
                free_mat(&self->layer[l].m[i]);
            free(self->layer[l].aln_w);
            free(self->layer[l].aln_b);
            free(self->layer[l].oln_w);
            free(self->layer[l].oln_b);
        }
        free(self->layer);
    }
    free(self->pos);
    free(self->ln_w);
    free(self->ln_b);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A copy of a buffer of exactly `bytes` bytes, or NULL with an exception. */
static void *copy_buffer(PyObject *obj, Py_ssize_t bytes, const char *what)
{
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (view.len != bytes) {
        PyErr_Format(PyExc_ValueError, "%s has %zd bytes, %zd expected", what, view.len, bytes);
        PyBuffer_Release(&view);
        return NULL;
    }
    void *out = amalloc((size_t)bytes);
    if (!out)
        PyErr_NoMemory();
    else
        memcpy(out, view.buf, (size_t)bytes);
    PyBuffer_Release(&view);
    return out;
}

static int load_mat(Mat *m, int K, int N, PyObject *codes, PyObject *scale, PyObject *sums,
                    PyObject *bias)
{
    m->K = K;
    m->N = N;
    int8_t *plain = copy_buffer(codes, (Py_ssize_t)K * N, "codes");
    if (!plain)
        return -1;
    m->packed = amalloc((size_t)K * N);
    m->colsum = amalloc(sizeof(int32_t) * (size_t)N);
    if (!m->packed || !m->colsum) {
        free(plain);
        PyErr_NoMemory();
        return -1;
    }
    int K4 = K / 4;
    for (int o = 0; o < N; o++) {
        int32_t s = 0;
        for (int k = 0; k < K; k++) {
            int8_t c = plain[(size_t)k * N + o];
            s += c;
            m->packed[((size_t)(o / PANEL) * K4 + k / 4) * 64 + (o % PANEL) * 4 + k % 4] = c;
        }
        m->colsum[o] = s;
    }
    free(plain);
    m->scale = copy_buffer(scale, (Py_ssize_t)N * 4, "scale");
    m->sums = m->scale ? copy_buffer(sums, (Py_ssize_t)N * 4, "sums") : NULL;
    m->bias = m->sums ? copy_buffer(bias, (Py_ssize_t)N * 4, "bias") : NULL;
    return m->bias ? 0 : -1;
}

/* Engine(hidden, layers, heads, ffn, positions, eps, arrays): `arrays` in
 * embed/e5_native.array_order's order (e5_query.encoder_arrays' values). */
static int Engine_init(Engine *self, PyObject *args, PyObject *kwds)
{
    int hidden, layers, heads, ffn, positions;
    double eps;
    PyObject *arrays;
    static char *names[] = {"hidden", "layers", "heads", "ffn", "positions", "eps", "arrays",
                            NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iiiiidO", names, &hidden, &layers, &heads,
                                     &ffn, &positions, &eps, &arrays))
        return -1;
    if (self->layer) {
        PyErr_SetString(PyExc_RuntimeError, "Engine is initialised once");
        return -1;
    }
    if (hidden <= 0 || hidden % (3 * PANEL) || heads <= 0 || hidden % heads || ffn <= 0 ||
        ffn % (3 * PANEL) || layers <= 0 || positions <= 0) {
        PyErr_SetString(PyExc_ValueError, "implausible encoder shape");
        return -1;
    }
    PyObject *seq = PySequence_Fast(arrays, "arrays must be a sequence of buffers");
    if (!seq)
        return -1;
    if (PySequence_Fast_GET_SIZE(seq) != 3 + (Py_ssize_t)layers * 20) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "wrong number of encoder arrays");
        return -1;
    }
    PyObject **a = PySequence_Fast_ITEMS(seq);
    self->hidden = hidden;
    self->heads = heads;
    self->ffn = ffn;
    self->positions = positions;
    self->eps = (float)eps;
    self->isa = best_isa;
    int H = hidden, F = ffn, ok = 0;
    self->layer = calloc((size_t)layers, sizeof(Layer));
    if (!self->layer) {
        PyErr_NoMemory();
        goto done;
    }
    self->layers = layers;
    if (!(self->pos = copy_buffer(a[0], (Py_ssize_t)positions * H * 4, "positions")) ||
        !(self->ln_w = copy_buffer(a[1], (Py_ssize_t)H * 4, "emb.ln.w")) ||
        !(self->ln_b = copy_buffer(a[2], (Py_ssize_t)H * 4, "emb.ln.b")))
        goto done;
    for (int l = 0; l < layers; l++) {
        PyObject **p = a + 3 + 20 * l;
        Layer *ly = &self->layer[l];
        int shape[4][2] = {{H, 3 * H}, {H, H}, {H, F}, {F, H}};
        for (int i = 0; i < 4; i++)
            if (load_mat(&ly->m[i], shape[i][0], shape[i][1], p[4 * i], p[4 * i + 1],
                         p[4 * i + 2], p[4 * i + 3]) < 0)
                goto done;
        if (!(ly->aln_w = copy_buffer(p[16], (Py_ssize_t)H * 4, "aln.w")) ||
            !(ly->aln_b = copy_buffer(p[17], (Py_ssize_t)H * 4, "aln.b")) ||
            !(ly->oln_w = copy_buffer(p[18], (Py_ssize_t)H * 4, "oln.w")) ||
            !(ly->oln_b = copy_buffer(p[19], (Py_ssize_t)H * 4, "oln.b")))
            goto done;
    }
    ok = 1;
done:
    Py_DECREF(seq);
    return ok ? 0 : -1;
}

static void free_work(Work *w)
{
    free(w->x);
    free(w->qkv);
    free(w->att);
    free(w->ybuf);
    free(w->kt);
    free(w->probs);
    free(w->qa);
    free(w->qf);
    free(w->step);
    free(w->zero);
    free(w->fstep);
    free(w->fzero);
    free(w->acc);
    free(w->a16);
}

static int alloc_work(Work *w, const Engine *e, int B, int L)
{
    int H = e->hidden, F = e->ffn, T = B * L;
    size_t wide = (size_t)(F > 3 * H ? F : 3 * H);
    memset(w, 0, sizeof *w);
    w->T = T;
    w->H = H;
    w->F = F;
    w->L = L;
    w->B = B;
    w->x = amalloc(sizeof(float) * (size_t)T * H);
    w->qkv = amalloc(sizeof(float) * (size_t)T * QKV_STRIDE(H));
    w->att = amalloc(sizeof(float) * (size_t)T * H);
    w->ybuf = amalloc(sizeof(float) * RB * wide);
    size_t Lp = ((size_t)L + 31) & ~(size_t)31;
    w->kt = amalloc(sizeof(float) * (size_t)H * KT_STRIDE(L));
    w->probs = amalloc(sizeof(float) * 8 * Lp);
    w->qa = amalloc((size_t)T * H + 64);
    w->qf = amalloc((size_t)RB * F + 64);
    w->step = amalloc(sizeof(float) * (size_t)T);
    w->zero = amalloc(sizeof(float) * (size_t)T);
    w->fstep = amalloc(sizeof(float) * RB);
    w->fzero = amalloc(sizeof(float) * RB);
    w->acc = amalloc(sizeof(int32_t) * RB * wide);
    w->a16 = amalloc(sizeof(int16_t) * RB * (size_t)(F > H ? F : H));
    if (!(w->x && w->qkv && w->att && w->ybuf && w->kt && w->probs && w->qa && w->qf &&
          w->step && w->zero && w->fstep && w->fzero && w->acc && w->a16)) {
        free_work(w);
        return -1;
    }
    return 0;
}

/* The AVX2 path's int16 copies of the weights, built once (under the GIL: the callers
 * hold it), or -1 with MemoryError. */
static int widen_engine(Engine *e)
{
#ifdef HAVE_X86
    for (int l = 0; l < e->layers; l++)
        for (int i = 0; i < 4; i++)
            if (widen_mat(&e->layer[l].m[i]) < 0) {
                PyErr_NoMemory();
                return -1;
            }
#else
    (void)e;
#endif
    return 0;
}

/* run(embeddings, rows, length, out[, isa]): embeddings float32 [rows][length][hidden]
 * (the word vectors, as the graph takes them), out float32 [rows][hidden] writable: the
 * mean of the last hidden states. The GIL is released while it runs. */
static PyObject *Engine_run(Engine *self, PyObject *args)
{
    PyObject *emb_obj, *out_obj;
    int B, L, isa = -1;
    if (!PyArg_ParseTuple(args, "OiiO|i", &emb_obj, &B, &L, &out_obj, &isa))
        return NULL;
    if (!self->layer) {
        PyErr_SetString(PyExc_RuntimeError, "Engine is not initialised");
        return NULL;
    }
    int H = self->hidden;
    if (B <= 0 || L <= 0 || L > self->positions) {
        PyErr_SetString(PyExc_ValueError, "rows and length out of range");
        return NULL;
    }
    if (isa < 0 || isa > best_isa)
        isa = self->isa;
    if (isa == ISA_AVX2 && widen_engine(self) < 0)
        return NULL;
    Py_buffer emb, out;
    if (PyObject_GetBuffer(emb_obj, &emb, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&emb);
        return NULL;
    }
    PyObject *result = NULL;
    if (emb.len != (Py_ssize_t)B * L * H * 4 || out.len != (Py_ssize_t)B * H * 4) {
        PyErr_SetString(PyExc_ValueError, "embeddings or out of the wrong size");
        goto done;
    }
    Work w;
    if (alloc_work(&w, self, B, L) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    forward(self, &w, isa, emb.buf, out.buf);
    Py_END_ALLOW_THREADS
    free_work(&w);
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&emb);
    PyBuffer_Release(&out);
    return result;
}

/* gemm(engine, layer, matrix, qrows, rows, out[, isa]): the int32 sums of quantised rows
 * (uint8 [rows][K]) with one of the engine's matrices, out int32 [rows][N] (tests, bench). */
static PyObject *Engine_gemm(Engine *self, PyObject *args)
{
    int layer, matrix, rows, isa = -1;
    PyObject *q_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "iiOiO|i", &layer, &matrix, &q_obj, &rows, &out_obj, &isa))
        return NULL;
    if (!self->layer || layer < 0 || layer >= self->layers || matrix < 0 || matrix > 3 ||
        rows <= 0) {
        PyErr_SetString(PyExc_ValueError, "no such matrix");
        return NULL;
    }
    if (isa < 0 || isa > best_isa)
        isa = self->isa;
    if (isa == ISA_AVX2 && widen_engine(self) < 0)
        return NULL;
    const Mat *m = &self->layer[layer].m[matrix];
    Py_buffer q, out;
    if (PyObject_GetBuffer(q_obj, &q, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&q);
        return NULL;
    }
    PyObject *result = NULL;
    int16_t *a16 = NULL;
    if (q.len != (Py_ssize_t)rows * m->K || out.len != (Py_ssize_t)rows * m->N * 4) {
        PyErr_SetString(PyExc_ValueError, "rows or out of the wrong size");
    } else if (!(a16 = amalloc(sizeof(int16_t) * RB * (size_t)m->K))) {
        PyErr_NoMemory();
    } else {
        Py_BEGIN_ALLOW_THREADS
        gemm(isa, (const uint8_t *)q.buf, m->K, rows, m, (int32_t *)out.buf, m->N, a16);
        Py_END_ALLOW_THREADS
        Py_INCREF(Py_None);
        result = Py_None;
    }
    free(a16);
    PyBuffer_Release(&q);
    PyBuffer_Release(&out);
    return result;
}

static PyObject *Engine_isa(Engine *self, void *unused)
{
    (void)unused;
    return PyLong_FromLong(self->isa);
}

static PyMethodDef Engine_methods[] = {
    {"run", (PyCFunction)Engine_run, METH_VARARGS, "the pooled means of a batch"},
    {"gemm", (PyCFunction)Engine_gemm, METH_VARARGS, "one matrix's integer sums"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Engine_getset[] = {
    {"isa", (getter)Engine_isa, NULL, "0 portable, 1 AVX2, 2 AVX-512 VNNI", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "vault_brain.native.e5native.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Engine_init,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_methods = Engine_methods,
    .tp_getset = Engine_getset,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "e5native",
                                    "e5's passage encoder (int8, fused)", -1, NULL,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_e5native(void)
{
#ifdef HAVE_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        best_isa = ISA_AVX2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni"))
        best_isa = ISA_VNNI;
#endif
    if (PyType_Ready(&EngineType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&EngineType);
    if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0 ||
        PyModule_AddIntConstant(m, "ISA", best_isa) < 0) {
        Py_DECREF(&EngineType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
