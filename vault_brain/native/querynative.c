/* The one-shot search's vector arm without numpy (vault_brain.native.querynative).
 *
 * A forked one-shot CLI search spent ~50 ms of its critical path importing numpy for
 * three small jobs: e5's light query encoder (embed/e5_query.py), the query's cosines
 * with every stored vector and the top k (index/sqlite/matrix.py). This module does them
 * over buffers (the kept pack's mapping, sqlite-vec's blobs), so that process never
 * imports numpy (docs/benchmarks.md, "The first search, round 10").
 *
 * Encoder: the int8 graph's arithmetic as e5_query computes it. The products of the
 * quantised rows with the int8 codes are summed in int32 (the same integers as
 * e5_query.exact_products), converted to float32 once, then scaled and corrected with
 * the same float32 operations in the same order: a linear layer's output has e5_query's
 * bits. LayerNorm, softmax attention, GELU and pooling sum in double here (numpy sums
 * pairwise in float32, BLAS in its own order): the vector is not bit-equal to numpy's
 * (cosine ~0.9997, as the graph's), so every process takes this encoder when the module
 * is built (embed/e5.py), and a query gives the same bytes wherever it is answered.
 *
 * Cosines: a row's dot product with the query in a fixed order (16 float32 lanes, lane j
 * summing the terms j, j + 16, ..., added pairwise at the end; no fused multiply-add):
 * the same bits on every CPU and whatever rows surround it. The resident's matrix and
 * the one-shot scan both take these products when the module is built.
 *
 * C99 and the CPython API; AVX2 only behind a runtime check (the integer kernel, whose
 * sums are exact in either path).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define HAVE_X86_DISPATCH 1
#include <immintrin.h>
#endif

/* ---------------------------------------------------------------------------------- */
/* integer products: out[t][o] = sum_i q[t][i] * codes[i][o], exact in int32           */

static void imatmul_portable(const int16_t *q, int T, const int8_t *codes, int n_in, int n_out,
                             int32_t *out)
{
    enum { OB = 64 };
    for (int ob = 0; ob < n_out; ob += OB) {
        int w = n_out - ob < OB ? n_out - ob : OB;
        for (int t = 0; t < T; t++) {
            int32_t acc[OB];
            memset(acc, 0, sizeof acc);
            const int16_t *qt = q + (size_t)t * n_in;
            for (int i = 0; i < n_in; i++) {
                int32_t qi = qt[i];
                const int8_t *row = codes + (size_t)i * n_out + ob;
                for (int o = 0; o < w; o++)
                    acc[o] += qi * (int32_t)row[o];
            }
            memcpy(out + (size_t)t * n_out + ob, acc, sizeof(int32_t) * w);
        }
    }
}

#ifdef HAVE_X86_DISPATCH
/* Two input rows at a time: their codes interleaved as int16 pairs, multiplied with the
 * pair of a token's quantised values and added in pairs (vpmaddwd), 32 outputs and two
 * tokens a step, the accumulators in registers. n_in even, n_out a multiple of 32. */
__attribute__((target("avx2"))) static void
imatmul_avx2(const int16_t *q, int T, const int8_t *codes, int n_in, int n_out, int32_t *out)
{
    int pairs = n_in / 2;
    int32_t *qp = malloc(sizeof(int32_t) * (size_t)T * (size_t)pairs);
    if (!qp) {
        imatmul_portable(q, T, codes, n_in, n_out, out);
        return;
    }
    for (int t = 0; t < T; t++)
        for (int p = 0; p < pairs; p++) {
            uint32_t lo = (uint16_t)q[(size_t)t * n_in + 2 * p];
            uint32_t hi = (uint16_t)q[(size_t)t * n_in + 2 * p + 1];
            qp[(size_t)t * pairs + p] = (int32_t)(lo | (hi << 16));
        }
    for (int ob = 0; ob < n_out; ob += 32) {
        for (int t = 0; t < T; t += 2) {
            int two = t + 1 < T;
            const int32_t *p0 = qp + (size_t)t * pairs;
            const int32_t *p1 = two ? p0 + pairs : p0;
            __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
            __m256i b0 = a0, b1 = a0, b2 = a0, b3 = a0;
            const int8_t *r = codes + ob;
            for (int p = 0; p < pairs; p++, r += 2 * (size_t)n_out) {
                __m128i x0 = _mm_loadu_si128((const __m128i *)r);
                __m128i y0 = _mm_loadu_si128((const __m128i *)(r + n_out));
                __m128i x1 = _mm_loadu_si128((const __m128i *)(r + 16));
                __m128i y1 = _mm_loadu_si128((const __m128i *)(r + n_out + 16));
                __m256i w0 = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x0, y0));
                __m256i w1 = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(x0, y0));
                __m256i w2 = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(x1, y1));
                __m256i w3 = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(x1, y1));
                __m256i s = _mm256_set1_epi32(p0[p]);
                a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(w0, s));
                a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(w1, s));
                a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(w2, s));
                a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(w3, s));
                __m256i u = _mm256_set1_epi32(p1[p]);
                b0 = _mm256_add_epi32(b0, _mm256_madd_epi16(w0, u));
                b1 = _mm256_add_epi32(b1, _mm256_madd_epi16(w1, u));
                b2 = _mm256_add_epi32(b2, _mm256_madd_epi16(w2, u));
                b3 = _mm256_add_epi32(b3, _mm256_madd_epi16(w3, u));
            }
            int32_t *o0 = out + (size_t)t * n_out + ob;
            _mm256_storeu_si256((__m256i *)o0, a0);
            _mm256_storeu_si256((__m256i *)(o0 + 8), a1);
            _mm256_storeu_si256((__m256i *)(o0 + 16), a2);
            _mm256_storeu_si256((__m256i *)(o0 + 24), a3);
            if (two) {
                int32_t *o1 = o0 + n_out;
                _mm256_storeu_si256((__m256i *)o1, b0);
                _mm256_storeu_si256((__m256i *)(o1 + 8), b1);
                _mm256_storeu_si256((__m256i *)(o1 + 16), b2);
                _mm256_storeu_si256((__m256i *)(o1 + 24), b3);
            }
        }
    }
    free(qp);
}
#endif

static int use_avx2 = 0;     /* set at import */
static int force_portable = 0; /* tests: the portable kernel's sums must be the same */

static void imatmul(const int16_t *q, int T, const int8_t *codes, int n_in, int n_out,
                    int32_t *out)
{
#ifdef HAVE_X86_DISPATCH
    if (use_avx2 && !force_portable && n_in % 2 == 0 && n_out % 32 == 0) {
        imatmul_avx2(q, T, codes, n_in, n_out, out);
        return;
    }
#endif
    imatmul_portable(q, T, codes, n_in, n_out, out);
}

/* ---------------------------------------------------------------------------------- */
/* the encoder                                                                         */

enum { A_CODES, A_SCALE, A_SUMS, A_BIAS, PER_MATRIX };
enum { M_QKV, M_AO, M_FI, M_FO, MATRICES };
enum { N_ALN_W = MATRICES * PER_MATRIX, N_ALN_B, N_OLN_W, N_OLN_B, PER_LAYER };
enum { E_POS, E_LN_W, E_LN_B, EMB_ARRAYS };

typedef struct {
    PyObject_HEAD
    int hidden, layers, heads, ffn, positions, vocab_rows;
    float eps;
    Py_buffer words; /* Q4_0 blocks [vocab_rows][hidden / 32], 18 bytes each */
    Py_buffer *arrays;
    int n_arrays;
} Encoder;

static void Encoder_dealloc(Encoder *self)
{
    if (self->arrays) {
        for (int i = 0; i < self->n_arrays; i++)
            if (self->arrays[i].obj)
                PyBuffer_Release(&self->arrays[i]);
        PyMem_Free(self->arrays);
    }
    if (self->words.obj)
        PyBuffer_Release(&self->words);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static const void *arr(const Encoder *e, int i) { return e->arrays[i].buf; }
static const void *layer_arr(const Encoder *e, int layer, int i)
{
    return e->arrays[EMB_ARRAYS + layer * PER_LAYER + i].buf;
}

static Py_ssize_t expected_bytes(const Encoder *e, int index)
{
    int H = e->hidden, F = e->ffn;
    if (index < EMB_ARRAYS)
        return index == E_POS ? (Py_ssize_t)e->positions * H * 4 : (Py_ssize_t)H * 4;
    int i = (index - EMB_ARRAYS) % PER_LAYER;
    if (i >= N_ALN_W)
        return (Py_ssize_t)H * 4;
    int m = i / PER_MATRIX, part = i % PER_MATRIX;
    int n_in = m == M_FO ? F : H;
    int n_out = m == M_QKV ? 3 * H : m == M_FI ? F : H;
    return part == A_CODES ? (Py_ssize_t)n_in * n_out : (Py_ssize_t)n_out * 4;
}

static int Encoder_init(Encoder *self, PyObject *args, PyObject *kwds)
{
    int hidden, layers, heads, ffn, positions, vocab_rows;
    double eps;
    PyObject *words, *arrays;
    static char *names[] = {"hidden", "layers", "heads", "ffn", "positions", "vocab_rows",
                            "eps", "words", "arrays", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "iiiiiidOO", names, &hidden, &layers, &heads,
                                     &ffn, &positions, &vocab_rows, &eps, &words, &arrays))
        return -1;
    if (self->arrays) {
        PyErr_SetString(PyExc_RuntimeError, "Encoder is initialised once");
        return -1;
    }
    if (hidden <= 0 || hidden % 32 || heads <= 0 || hidden % heads || ffn <= 0 || ffn % 2 ||
        layers <= 0 || positions <= 0 || vocab_rows <= 0) {
        PyErr_SetString(PyExc_ValueError, "implausible encoder shape");
        return -1;
    }
    self->hidden = hidden;
    self->layers = layers;
    self->heads = heads;
    self->ffn = ffn;
    self->positions = positions;
    self->vocab_rows = vocab_rows;
    self->eps = (float)eps;
    PyObject *seq = PySequence_Fast(arrays, "arrays must be a sequence of buffers");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n != EMB_ARRAYS + (Py_ssize_t)layers * PER_LAYER) {
        Py_DECREF(seq);
        PyErr_SetString(PyExc_ValueError, "wrong number of encoder arrays");
        return -1;
    }
    self->arrays = PyMem_Calloc((size_t)n, sizeof(Py_buffer));
    if (!self->arrays) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    self->n_arrays = (int)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, i), &self->arrays[i],
                               PyBUF_C_CONTIGUOUS) < 0) {
            Py_DECREF(seq);
            return -1;
        }
        if (self->arrays[i].len != expected_bytes(self, (int)i)) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "encoder array %zd has %zd bytes, %zd expected", i,
                         self->arrays[i].len, expected_bytes(self, (int)i));
            return -1;
        }
    }
    Py_DECREF(seq);
    if (PyObject_GetBuffer(words, &self->words, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (self->words.len != (Py_ssize_t)vocab_rows * (hidden / 32) * 18) {
        PyErr_SetString(PyExc_ValueError, "the word vectors do not fit the encoder");
        return -1;
    }
    return 0;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1F, mant = h & 0x3FF, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: normalise it */
            exp = 127 - 15 + 1;
            while (!(mant & 0x400)) {
                mant <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((mant & 0x3FF) << 13);
        }
    } else if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* LayerNorm of each row, in place: (x - mean) / sqrt(var + eps) * w + b, the mean and
 * the variance summed in double. */
static void norm_rows(float *x, int T, int H, const float *w, const float *b, float eps)
{
    for (int t = 0; t < T; t++) {
        float *r = x + (size_t)t * H;
        double s = 0.0;
        for (int i = 0; i < H; i++)
            s += r[i];
        float mean = (float)(s / H);
        double v = 0.0;
        for (int i = 0; i < H; i++) {
            float c = r[i] - mean;
            r[i] = c;
            v += (double)(c * c);
        }
        float denom = sqrtf((float)(v / H) + eps);
        for (int i = 0; i < H; i++)
            r[i] = r[i] / denom * w[i] + b[i];
    }
}

/* x [T][n_in] times a matrix as e5_query's _linear computes it, plus the bias. */
static void linear(const float *x, int T, int n_in, int n_out, const int8_t *codes,
                   const float *scale, const float *sums, const float *bias, int16_t *qbuf,
                   int32_t *ibuf, float *steps, float *y)
{
    float *zeros = steps + T; /* steps: 2 T floats, each row's step and zero point */
    const float inv255 = (float)(1.0 / 255.0);
    for (int t = 0; t < T; t++) {
        const float *r = x + (size_t)t * n_in;
        float hi = r[0], lo = r[0];
        for (int i = 1; i < n_in; i++) {
            if (r[i] > hi)
                hi = r[i];
            if (r[i] < lo)
                lo = r[i];
        }
        if (!(hi > 0.0f))
            hi = 0.0f;
        if (!(lo < 0.0f))
            lo = 0.0f;
        float span = hi - lo;
        if (!(span > 1e-12f))
            span = 1e-12f;
        float step = span * inv255;
        float zero = rintf(-lo / step);
        zero = zero < 0.0f ? 0.0f : zero > 255.0f ? 255.0f : zero;
        steps[t] = step;
        zeros[t] = zero;
        int16_t *qt = qbuf + (size_t)t * n_in;
        for (int i = 0; i < n_in; i++) {
            float q = rintf(r[i] / step) + zero;
            q = q < 0.0f ? 0.0f : q > 255.0f ? 255.0f : q;
            qt[i] = (int16_t)((int)q - 128);
        }
    }
    imatmul(qbuf, T, codes, n_in, n_out, ibuf);
    for (int t = 0; t < T; t++) {
        float step = steps[t], shift = (zeros[t] - 128.0f) * step;
        const int32_t *it = ibuf + (size_t)t * n_out;
        float *yt = y + (size_t)t * n_out;
        for (int o = 0; o < n_out; o++) {
            float v = (float)it[o];
            v = v * (step * scale[o]);
            v = v - shift * sums[o];
            yt[o] = v + bias[o];
        }
    }
}

/* onnxruntime's Gelu, 0.5 x (1 + erf(x / sqrt 2)), erf by Abramowitz & Stegun 7.1.26 in
 * double, in e5_query._gelu's order. */
static float gelu(float xf)
{
    static const double P = 0.3275911;
    static const double A[5] = {1.061405429, -1.453152027, 1.421413741, -0.284496736,
                                0.254829592};
    double z = fabs((double)xf) * (1 / sqrt(2.0));
    double t = 1.0 / (z * P + 1.0);
    double poly = t * A[0];
    poly += A[1];
    for (int k = 2; k < 5; k++) {
        poly *= t;
        poly += A[k];
    }
    poly *= t;
    poly *= exp(-z * z);
    poly = copysign(1.0 - poly, (double)xf);
    float erf = (float)poly;
    erf += 1.0f;
    erf *= xf;
    erf *= 0.5f;
    return erf;
}

/* The mean of the last hidden states of `ids` (one text) into out[hidden]; 0 or -1 with
 * no memory. */
static int forward(const Encoder *e, const int64_t *ids, int T, float *out)
{
    int H = e->hidden, F = e->ffn, heads = e->heads, size = H / heads, blocks = H / 32;
    size_t widest = (size_t)(F > 3 * H ? F : 3 * H);
    float *x = malloc(sizeof(float) * (size_t)T * H);
    float *big = malloc(sizeof(float) * (size_t)T * widest);
    float *att = malloc(sizeof(float) * (size_t)T * H);
    float *tmp = malloc(sizeof(float) * (size_t)T * H);
    float *probs = malloc(sizeof(float) * (size_t)T);
    float *steps = malloc(sizeof(float) * 2 * (size_t)T);
    int16_t *qbuf = malloc(sizeof(int16_t) * (size_t)T * (F > H ? F : H));
    int32_t *ibuf = malloc(sizeof(int32_t) * (size_t)T * widest);
    int ok = x && big && att && tmp && probs && steps && qbuf && ibuf;
    if (ok) {
        const uint8_t *words = e->words.buf;
        const float *pos = arr(e, E_POS);
        for (int t = 0; t < T; t++) {
            const uint8_t *row = words + (size_t)ids[t] * blocks * 18;
            float *xt = x + (size_t)t * H;
            for (int b = 0; b < blocks; b++) {
                const uint8_t *blk = row + (size_t)b * 18;
                float d = half_to_float((uint16_t)(blk[0] | (blk[1] << 8)));
                for (int j = 0; j < 16; j++) {
                    float lo = (float)(blk[2 + j] & 0x0F) - 8.0f;
                    float hi = (float)(blk[2 + j] >> 4) - 8.0f;
                    xt[b * 32 + j] = lo * d;
                    xt[b * 32 + 16 + j] = hi * d;
                }
            }
            for (int i = 0; i < H; i++)
                xt[i] = xt[i] + pos[(size_t)t * H + i];
        }
        norm_rows(x, T, H, arr(e, E_LN_W), arr(e, E_LN_B), e->eps);
        float scale = (float)(1.0 / sqrt((double)size));
        for (int layer = 0; layer < e->layers; layer++) {
#define M(m, part) layer_arr(e, layer, (m) * PER_MATRIX + (part))
            linear(x, T, H, 3 * H, M(M_QKV, A_CODES), M(M_QKV, A_SCALE), M(M_QKV, A_SUMS),
                   M(M_QKV, A_BIAS), qbuf, ibuf, steps, big);
            for (int h = 0; h < heads; h++) {
                for (int i = 0; i < T; i++) {
                    const float *q = big + (size_t)i * 3 * H + h * size;
                    float top = -INFINITY;
                    for (int j = 0; j < T; j++) {
                        const float *k = big + (size_t)j * 3 * H + H + h * size;
                        double s = 0.0;
                        for (int d = 0; d < size; d++)
                            s += (double)q[d] * k[d];
                        probs[j] = (float)s * scale;
                        if (probs[j] > top)
                            top = probs[j];
                    }
                    double total = 0.0;
                    for (int j = 0; j < T; j++) {
                        probs[j] = expf(probs[j] - top);
                        total += probs[j];
                    }
                    float sum = (float)total;
                    for (int j = 0; j < T; j++)
                        probs[j] = probs[j] / sum;
                    float *a = att + (size_t)i * H + h * size;
                    for (int d = 0; d < size; d++) {
                        double s = 0.0;
                        for (int j = 0; j < T; j++)
                            s += (double)probs[j] * big[(size_t)j * 3 * H + 2 * H + h * size + d];
                        a[d] = (float)s;
                    }
                }
            }
            linear(att, T, H, H, M(M_AO, A_CODES), M(M_AO, A_SCALE), M(M_AO, A_SUMS),
                   M(M_AO, A_BIAS), qbuf, ibuf, steps, tmp);
            for (size_t i = 0; i < (size_t)T * H; i++)
                x[i] = tmp[i] + x[i];
            norm_rows(x, T, H, layer_arr(e, layer, N_ALN_W), layer_arr(e, layer, N_ALN_B),
                      e->eps);
            linear(x, T, H, F, M(M_FI, A_CODES), M(M_FI, A_SCALE), M(M_FI, A_SUMS),
                   M(M_FI, A_BIAS), qbuf, ibuf, steps, big);
            for (size_t i = 0; i < (size_t)T * F; i++)
                big[i] = gelu(big[i]);
            linear(big, T, F, H, M(M_FO, A_CODES), M(M_FO, A_SCALE), M(M_FO, A_SUMS),
                   M(M_FO, A_BIAS), qbuf, ibuf, steps, tmp);
            for (size_t i = 0; i < (size_t)T * H; i++)
                x[i] = tmp[i] + x[i];
            norm_rows(x, T, H, layer_arr(e, layer, N_OLN_W), layer_arr(e, layer, N_OLN_B),
                      e->eps);
#undef M
        }
        for (int i = 0; i < H; i++) {
            double s = 0.0;
            for (int t = 0; t < T; t++)
                s += x[(size_t)t * H + i];
            out[i] = (float)(s / T);
        }
    }
    free(x);
    free(big);
    free(att);
    free(tmp);
    free(probs);
    free(steps);
    free(qbuf);
    free(ibuf);
    return ok ? 0 : -1;
}

/* Unit length in double, as embed/base.l2_normalise: scaled by the largest magnitude,
 * then by the norm; a zero vector stays zero. */
static void unit(float *v, int n)
{
    double peak = 0.0, s = 0.0;
    for (int i = 0; i < n; i++)
        if (fabs((double)v[i]) > peak)
            peak = fabs((double)v[i]);
    if (!(peak > 0.0))
        return;
    for (int i = 0; i < n; i++) {
        double d = (double)v[i] / peak;
        s += d * d;
    }
    double norm = sqrt(s);
    for (int i = 0; i < n; i++)
        v[i] = (float)(((double)v[i] / peak) / norm);
}

static PyObject *encoder_run(Encoder *self, PyObject *arg, int normalise)
{
    PyObject *seq = PySequence_Fast(arg, "ids must be a sequence of ints");
    if (!seq)
        return NULL;
    Py_ssize_t T = PySequence_Fast_GET_SIZE(seq);
    if (T <= 0 || T > self->positions) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "%zd tokens: 1 to %d are encoded", T, self->positions);
        return NULL;
    }
    int64_t *ids = PyMem_Malloc(sizeof(int64_t) * (size_t)T);
    if (!ids) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t t = 0; t < T; t++) {
        long long id = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, t));
        if (id == -1 && PyErr_Occurred()) {
            PyMem_Free(ids);
            Py_DECREF(seq);
            return NULL;
        }
        if (id < 0 || id >= self->vocab_rows) {
            PyMem_Free(ids);
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "token id %lld out of range", id);
            return NULL;
        }
        ids[t] = id;
    }
    Py_DECREF(seq);
    PyObject *result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)self->hidden * 4);
    if (!result) {
        PyMem_Free(ids);
        return NULL;
    }
    float *out = (float *)PyBytes_AS_STRING(result);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = forward(self, ids, (int)T, out);
    if (rc == 0 && normalise)
        unit(out, self->hidden);
    Py_END_ALLOW_THREADS
    PyMem_Free(ids);
    if (rc != 0) {
        Py_DECREF(result);
        return PyErr_NoMemory();
    }
    return result;
}

static PyObject *Encoder_pooled(Encoder *self, PyObject *arg) { return encoder_run(self, arg, 0); }
static PyObject *Encoder_vector(Encoder *self, PyObject *arg) { return encoder_run(self, arg, 1); }

static PyMethodDef Encoder_methods[] = {
    {"pooled", (PyCFunction)Encoder_pooled, METH_O,
     "pooled(ids) -> bytes: float32 [hidden], the mean of the last hidden states of one text"},
    {"vector", (PyCFunction)Encoder_vector, METH_O,
     "vector(ids) -> bytes: float32 [hidden], pooled() at unit length"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "vault_brain.native.querynative.Encoder",
    .tp_basicsize = sizeof(Encoder),
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Encoder(hidden, layers, heads, ffn, positions, vocab_rows, eps, words, arrays):"
              " e5_query's int8 encoder over buffers (the kept pack's arrays, in"
              " e5_native.ARRAY_ORDER, and the weights file's Q4_0 word vectors).",
    .tp_methods = Encoder_methods,
    .tp_init = (initproc)Encoder_init,
    .tp_new = PyType_GenericNew,
};

/* ---------------------------------------------------------------------------------- */
/* cosines and the k best                                                              */

enum { LANES = 16 };

/* A row's product with the query in the fixed order described at the top. */
static float dot(const float *row, const float *q, int width)
{
    float acc[LANES] = {0};
    int i = 0;
    for (; i + LANES <= width; i += LANES)
        for (int j = 0; j < LANES; j++)
            acc[j] += row[i + j] * q[i + j];
    for (int j = 0; i < width; i++, j++)
        acc[j] += row[i] * q[i];
    for (int half = LANES / 2; half >= 1; half /= 2)
        for (int j = 0; j < half; j++)
            acc[j] += acc[j + half];
    return acc[0];
}

/* products(rows, width, vector, out): out (float32, writable) gets each row's product. */
static PyObject *products(PyObject *mod, PyObject *args)
{
    Py_buffer rows, vec, out;
    int width;
    if (!PyArg_ParseTuple(args, "y*iy*w*", &rows, &width, &vec, &out))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = width > 0 ? rows.len / (4 * (Py_ssize_t)width) : 0;
    if (width <= 0 || rows.len != n * 4 * width || vec.len != 4 * (Py_ssize_t)width ||
        out.len < 4 * n) {
        PyErr_SetString(PyExc_ValueError, "products: the buffers do not fit the width");
    } else {
        const float *r = rows.buf, *q = vec.buf;
        float *o = out.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++)
            o[i] = dot(r + (size_t)i * width, q, width);
        Py_END_ALLOW_THREADS
        result = PyLong_FromSsize_t(n);
    }
    PyBuffer_Release(&rows);
    PyBuffer_Release(&vec);
    PyBuffer_Release(&out);
    return result;
}

/* chunk_products(blob, validity, rowids, size, width, vector, scores, ids, at): the valid
 * slots of one sqlite-vec chunk (validity bit i, least significant first) scored into
 * scores[at:] (float32) with their rowids into ids[at:] (int64); the count written. */
static PyObject *chunk_products(PyObject *mod, PyObject *args)
{
    Py_buffer blob, bits, rowids, vec, scores, ids;
    Py_ssize_t size, at;
    int width;
    if (!PyArg_ParseTuple(args, "y*y*y*niy*w*w*n", &blob, &bits, &rowids, &size, &width, &vec,
                          &scores, &ids, &at))
        return NULL;
    PyObject *result = NULL;
    if (width <= 0 || size < 0 || at < 0 || blob.len != 4 * size * (Py_ssize_t)width ||
        bits.len * 8 < size || rowids.len < 8 * size || vec.len != 4 * (Py_ssize_t)width) {
        PyErr_SetString(PyExc_ValueError, "chunk_products: the chunk is not laid out as read");
    } else {
        const uint8_t *valid = bits.buf;
        Py_ssize_t count = 0;
        for (Py_ssize_t i = 0; i < size; i++)
            count += (valid[i >> 3] >> (i & 7)) & 1;
        if (4 * (at + count) > scores.len || 8 * (at + count) > ids.len) {
            PyErr_SetString(PyExc_ValueError, "chunk_products: no room for the scores");
        } else {
            const float *r = blob.buf, *q = vec.buf;
            float *s = (float *)scores.buf + at;
            char *id_out = (char *)ids.buf + 8 * at;
            const char *id_in = rowids.buf;
            Py_BEGIN_ALLOW_THREADS
            for (Py_ssize_t i = 0; i < size; i++) {
                if (!((valid[i >> 3] >> (i & 7)) & 1))
                    continue;
                *s++ = dot(r + (size_t)i * width, q, width);
                memcpy(id_out, id_in + 8 * i, 8); /* sqlite-vec's int64, as stored */
                id_out += 8;
            }
            Py_END_ALLOW_THREADS
            result = PyLong_FromSsize_t(count);
        }
    }
    PyBuffer_Release(&blob);
    PyBuffer_Release(&bits);
    PyBuffer_Release(&rowids);
    PyBuffer_Release(&vec);
    PyBuffer_Release(&scores);
    PyBuffer_Release(&ids);
    return result;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The k-th smallest of v[0..n) (v reordered), by quickselect. */
static float select_kth(float *v, Py_ssize_t n, Py_ssize_t k)
{
    Py_ssize_t lo = 0, hi = n - 1;
    while (hi > lo) {
        if (hi - lo < 16) {
            qsort(v + lo, (size_t)(hi - lo + 1), sizeof(float), cmp_float);
            return v[k];
        }
        float a = v[lo], b = v[(lo + hi) / 2], c = v[hi];
        float pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        Py_ssize_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                float t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return v[k];
    }
    return v[k];
}

/* matrix._median's value: the middle one, or the float32 mean of the two middle ones. */
static double median_of(float *v, Py_ssize_t n)
{
    Py_ssize_t k = n / 2;
    float upper = select_kth(v, n, k);
    if (n % 2)
        return (double)upper;
    float lower = v[0];
    for (Py_ssize_t i = 1; i < k; i++) /* after the selection, v[0..k) are the smaller ones */
        if (v[i] > lower)
            lower = v[i];
    float m = (lower + upper) / 2.0f;
    return (double)m;
}

typedef struct {
    float score;
    Py_ssize_t at;
} Ranked;

/* Better first: the higher score, then the earlier row. */
static int cmp_ranked(const void *a, const void *b)
{
    const Ranked *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

static int allowed_has(const int64_t *allowed, Py_ssize_t n, int64_t id)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (allowed[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && allowed[lo] == id;
}

/* best(scores, ids, n, k, noise, allowed) -> (positions, scores, median, spread):
 * matrix._best's answer. A zero score matches nothing; the noise (median and MAD times
 * 1.4826 of the non-zero scores) when asked; `allowed` (sorted int64 rowids, or None)
 * keeps the rows whose id it holds; the k best rows, the higher score first and the
 * earlier row among equal scores. */
static PyObject *best(PyObject *mod, PyObject *args)
{
    Py_buffer sb, ib;
    Py_ssize_t n, k;
    int noise;
    PyObject *allowed_obj;
    if (!PyArg_ParseTuple(args, "y*y*nnpO", &sb, &ib, &n, &k, &noise, &allowed_obj))
        return NULL;
    Py_buffer ab = {0};
    int have_allowed = allowed_obj != Py_None;
    PyObject *result = NULL;
    float *tmp = NULL;
    Ranked *ranked = NULL;
    if (have_allowed && PyObject_GetBuffer(allowed_obj, &ab, PyBUF_SIMPLE) < 0)
        goto done;
    if (n < 0 || sb.len < 4 * n || ib.len < 8 * n || (have_allowed && ab.len % 8)) {
        PyErr_SetString(PyExc_ValueError, "best: the buffers are too short");
        goto done;
    }
    const float *scores = sb.buf;
    const int64_t *ids = ib.buf;
    double median = 0.0, spread = 0.0;
    if (noise) {
        tmp = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
        if (!tmp) {
            PyErr_NoMemory();
            goto done;
        }
        Py_ssize_t m = 0;
        for (Py_ssize_t i = 0; i < n; i++)
            if (scores[i] != 0.0f)
                tmp[m++] = scores[i];
        if (m) {
            median = median_of(tmp, m);
            float mf = (float)median;
            Py_ssize_t j = 0;
            for (Py_ssize_t i = 0; i < n; i++)
                if (scores[i] != 0.0f)
                    tmp[j++] = fabsf(scores[i] - mf);
            spread = 1.4826 * median_of(tmp, m);
        }
    }
    if (k > n)
        k = n;
    if (k < 0)
        k = 0;
    ranked = malloc(sizeof(Ranked) * (size_t)(k > 0 ? k : 1));
    if (!ranked) {
        PyErr_NoMemory();
        goto done;
    }
    /* The k best in a heap whose root is the worst kept (n log k at most; most rows
     * lose to the root at once). */
    Py_ssize_t c = 0;
    for (Py_ssize_t i = 0; i < n && k > 0; i++) {
        float s = scores[i];
        if (s == 0.0f || !(s > -INFINITY)) /* zero (or NaN / -inf): no match */
            continue;
        if (have_allowed && !allowed_has(ab.buf, ab.len / 8, ids[i]))
            continue;
        Ranked r = {s, i};
        Py_ssize_t at;
        if (c < k) {
            at = c++;
            while (at > 0 && cmp_ranked(&r, &ranked[(at - 1) / 2]) > 0) {
                ranked[at] = ranked[(at - 1) / 2];
                at = (at - 1) / 2;
            }
            ranked[at] = r;
            continue;
        }
        if (cmp_ranked(&r, &ranked[0]) >= 0)
            continue; /* no better than the worst kept */
        at = 0;
        for (;;) {
            Py_ssize_t child = 2 * at + 1;
            if (child >= c)
                break;
            if (child + 1 < c && cmp_ranked(&ranked[child + 1], &ranked[child]) > 0)
                child++;
            if (cmp_ranked(&ranked[child], &r) <= 0)
                break;
            ranked[at] = ranked[child];
            at = child;
        }
        ranked[at] = r;
    }
    qsort(ranked, (size_t)c, sizeof(Ranked), cmp_ranked);
    PyObject *positions = PyList_New(c), *values = PyList_New(c);
    if (!positions || !values) {
        Py_XDECREF(positions);
        Py_XDECREF(values);
        goto done;
    }
    for (Py_ssize_t i = 0; i < c; i++) {
        PyList_SET_ITEM(positions, i, PyLong_FromSsize_t(ranked[i].at));
        PyList_SET_ITEM(values, i, PyFloat_FromDouble((double)ranked[i].score));
    }
    result = Py_BuildValue("NNdd", positions, values, median, spread);
done:
    free(tmp);
    free(ranked);
    if (ab.obj)
        PyBuffer_Release(&ab);
    PyBuffer_Release(&sb);
    PyBuffer_Release(&ib);
    return result;
}

/* keep_heap(): free one untouched 4 MB block. glibc's malloc maps a block above its
 * mmap threshold afresh and unmaps it when freed; freeing a mapped block raises the
 * threshold to its size (mallopt(3)), so later blocks of a few MB (sqlite-vec's chunk
 * blobs) come from the heap, reused, instead of fresh mappings faulted in page by page.
 * Other allocators: no effect. */
static PyObject *keep_heap(PyObject *mod, PyObject *unused)
{
    void *volatile block = malloc((size_t)4 << 20);
    free(block);
    Py_RETURN_NONE;
}

static PyObject *set_portable(PyObject *mod, PyObject *arg)
{
    int flag = PyObject_IsTrue(arg);
    if (flag < 0)
        return NULL;
    force_portable = flag;
    Py_RETURN_NONE;
}

static PyObject *int_products(PyObject *mod, PyObject *args)
{
    /* int_products(q int16 [t][n_in], t, codes int8 [n_in][n_out], n_in, n_out) -> bytes
     * int32 [t][n_out]: the encoder's integer kernel, for the tests. */
    Py_buffer qb, cb;
    int T, n_in, n_out;
    if (!PyArg_ParseTuple(args, "y*iy*ii", &qb, &T, &cb, &n_in, &n_out))
        return NULL;
    PyObject *result = NULL;
    if (T <= 0 || n_in <= 0 || n_out <= 0 || qb.len != 2 * (Py_ssize_t)T * n_in ||
        cb.len != (Py_ssize_t)n_in * n_out) {
        PyErr_SetString(PyExc_ValueError, "int_products: the buffers do not fit");
    } else {
        result = PyBytes_FromStringAndSize(NULL, 4 * (Py_ssize_t)T * n_out);
        if (result)
            imatmul(qb.buf, T, cb.buf, n_in, n_out, (int32_t *)PyBytes_AS_STRING(result));
    }
    PyBuffer_Release(&qb);
    PyBuffer_Release(&cb);
    return result;
}

static PyMethodDef module_methods[] = {
    {"products", products, METH_VARARGS,
     "products(rows, width, vector, out) -> n: each float32 row's product with vector"},
    {"chunk_products", chunk_products, METH_VARARGS,
     "chunk_products(blob, validity, rowids, size, width, vector, scores, ids, at) -> count"},
    {"best", best, METH_VARARGS,
     "best(scores, ids, n, k, noise, allowed) -> (positions, scores, median, spread)"},
    {"int_products", int_products, METH_VARARGS, "the encoder's integer kernel (tests)"},
    {"set_portable", set_portable, METH_O, "use the portable integer kernel (tests)"},
    {"keep_heap", keep_heap, METH_NOARGS, "free one untouched 4 MB block (glibc's threshold)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "querynative",
                                    "e5's light query encoder and the vector scan in C.", -1,
                                    module_methods};

PyMODINIT_FUNC PyInit_querynative(void)
{
#ifdef HAVE_X86_DISPATCH
    __builtin_cpu_init();
    use_avx2 = __builtin_cpu_supports("avx2");
#endif
    if (PyType_Ready(&EncoderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&EncoderType);
    if (PyModule_AddObject(m, "Encoder", (PyObject *)&EncoderType) < 0) {
        Py_DECREF(&EncoderType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "LANES", LANES) < 0 ||
        PyModule_AddIntConstant(m, "AVX2", use_avx2) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
