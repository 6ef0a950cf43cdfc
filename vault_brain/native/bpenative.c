/* cl100k_base token counts and token byte lengths for the chunker (vault_brain/index/
 * chunking.py), the same as rs-bpe's encode (and tiktoken's encode_ordinary) token for token.
 * Chunking needs no ids: a section's count and, for a note cut into windows, each token's
 * length in UTF-8 bytes (the windows are cut on their cumulative offsets).
 *
 * - The pre-tokeniser: rs-bpe's cl100k pattern (bpe-openai's lib.rs), matched leftmost-first
 *   and anchored at each piece's start:
 *     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 *     | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+$        then \s+\s less its last character
 *     (for \s+(?!\S)), then \s+
 *   hand-coded over the UTF-8 bytes. \p{L} and \p{N} are Rust regex-syntax's tables
 *   (bpenative_classes.h, Unicode 16.0.0), \s is White_Space, (?i:s) also takes U+017F.
 * - Each piece: one token when the vocabulary has it whole (tiktoken's shortcut), else
 *   tiktoken's byte-pair merge (the lowest rank first, the leftmost of equal ones), its
 *   lengths kept in a bounded cache (a vault repeats most of its words).
 * - The vocabulary: the cl100k_base.tiktoken text (base64 token, rank per line) parsed once
 *   per process into an open-addressing table.
 *
 * C99 and the CPython API. The GIL is held throughout, which also guards the cache. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "bpenative_classes.h"

#define NO_RANK UINT32_MAX
#define MAX_TOKEN 128 /* cl100k's longest token, in bytes (lengths fit a byte) */

/* ------------------------------------------------------------------ character classes */

enum { C_OTHER = 0, C_LETTER = 1, C_NUMBER = 2, C_SPACE = 3 };

static uint8_t bmp_class[0x10000]; /* the class of every BMP code point */

static const uint32_t space_ranges[][2] = {
    {0x9, 0xD},       {0x20, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},     {0x1680, 0x1680},
    {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid][0])
            hi = mid;
        else if (cp > r[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

static void fill(const uint32_t (*r)[2], size_t n, uint8_t cls) {
    for (size_t i = 0; i < n; i++)
        for (uint32_t cp = r[i][0]; cp <= r[i][1] && cp < 0x10000; cp++)
            bmp_class[cp] = cls;
}

static void init_classes(void) {
    fill(letter_ranges, COUNT(letter_ranges), C_LETTER);
    fill(number_ranges, COUNT(number_ranges), C_NUMBER);
    fill(space_ranges, COUNT(space_ranges), C_SPACE);
}

static int astral_class(uint32_t cp) { /* no astral code point is white space */
    if (in_ranges(letter_ranges, COUNT(letter_ranges), cp))
        return C_LETTER;
    if (in_ranges(number_ranges, COUNT(number_ranges), cp))
        return C_NUMBER;
    return C_OTHER;
}

/* The class of the character at s[i] (valid UTF-8, i < n) and its length in *len. */
static inline int char_class(const uint8_t *s, Py_ssize_t i, int *len) {
    uint8_t b = s[i];
    if (b < 0x80) {
        *len = 1;
        return bmp_class[b];
    }
    if (b < 0xE0) {
        *len = 2;
        return bmp_class[((uint32_t)(b & 0x1F) << 6) | (s[i + 1] & 0x3F)];
    }
    if (b < 0xF0) {
        *len = 3;
        return bmp_class[((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) |
                         (s[i + 2] & 0x3F)];
    }
    *len = 4;
    return astral_class(((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) |
                        ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F));
}

static inline int class_at(const uint8_t *s, Py_ssize_t i, Py_ssize_t n, int *len) {
    if (i >= n) {
        *len = 0;
        return -1;
    }
    return char_class(s, i, len);
}

static Py_ssize_t run_of(const uint8_t *s, Py_ssize_t i, Py_ssize_t n, int cls) {
    int len;
    while (i < n && char_class(s, i, &len) == cls)
        i += len;
    return i;
}

static inline int is_crlf(uint8_t b) { return b == '\r' || b == '\n'; }

/* The end of the piece that starts at i < n. */
static Py_ssize_t piece_end(const uint8_t *s, Py_ssize_t i, Py_ssize_t n) {
    int len, len2;
    uint8_t c = s[i];
    int cls = char_class(s, i, &len);
    Py_ssize_t j = i + len;
    if (c == '\'' && j < n) { /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
        uint8_t a = s[j] | 0x20;
        if (s[j] < 0x80 && (a == 's' || a == 't' || a == 'm' || a == 'd'))
            return j + 1;
        if (s[j] == 0xC5 && j + 1 < n && s[j + 1] == 0xBF) /* U+017F folds to s */
            return j + 2;
        if (j + 1 < n && s[j] < 0x80 && s[j + 1] < 0x80) {
            uint8_t b = s[j + 1] | 0x20;
            if (((a == 'r' || a == 'v') && b == 'e') || (a == 'l' && b == 'l'))
                return j + 2;
        }
    }
    if (cls == C_LETTER) /* \p{L}+ */
        return run_of(s, j, n, C_LETTER);
    int next = class_at(s, j, n, &len2);
    if (cls != C_NUMBER && !is_crlf(c) && next == C_LETTER) /* [^\r\n\p{L}\p{N}]\p{L}+ */
        return run_of(s, j + len2, n, C_LETTER);
    if (cls == C_NUMBER) { /* \p{N}{1,3} */
        for (int k = 1; k < 3 && j < n && char_class(s, j, &len2) == C_NUMBER; k++)
            j += len2;
        return j;
    }
    if (cls == C_OTHER || (c == ' ' && next == C_OTHER)) { /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
        j = run_of(s, cls == C_OTHER ? j : j + len2, n, C_OTHER);
        while (j < n && is_crlf(s[j]))
            j++;
        return j;
    }
    /* White space: \s*[\r\n]+ up to the run's last CR or LF; \s+$; \s+ less its last
     * character before a non-space; a lone one. */
    Py_ssize_t e = i, last_crlf = -1, last_start = i, chars = 0;
    while (e < n && char_class(s, e, &len) == C_SPACE) {
        if (is_crlf(s[e]))
            last_crlf = e;
        last_start = e;
        e += len;
        chars++;
    }
    if (last_crlf >= 0)
        return last_crlf + 1;
    if (e == n || chars < 2)
        return e;
    return last_start;
}

/* ------------------------------------------------------------------ hashing */

static inline uint32_t load32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* The first min(n, 8) bytes of p as one word, read without a variable-length copy: for
 * n < 8 from overlapping loads that together cover every byte (so, with n, the word still
 * tells the bytes apart). */
static inline uint64_t head_of(const uint8_t *p, Py_ssize_t n) {
    if (n >= 8)
        return load64(p);
    if (n >= 4)
        return (uint64_t)load32(p) | ((uint64_t)load32(p + n - 4) << 32);
    return (uint64_t)p[0] | ((uint64_t)p[n / 2] << 8) | ((uint64_t)p[n - 1] << 16);
}

static inline uint64_t hash_bytes(const uint8_t *p, Py_ssize_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)n * 0xC2B2AE3D27D4EB4FULL);
    Py_ssize_t left = n;
    while (left > 8) {
        h = (h ^ load64(p)) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 31;
        p += 8;
        left -= 8;
    }
    h = (h ^ head_of(p, left)) * 0x94D049BB133111EBULL; /* the last 1-8 bytes */
    h ^= h >> 29;
    h *= 0xD6E8FEB86659FD93ULL;
    h ^= h >> 32;
    return h;
}

/* a[0:n] == b[0:n], inline for the short keys of most lookups. */
static inline int same(const uint8_t *a, const uint8_t *b, Py_ssize_t n) {
    if (n > 16)
        return memcmp(a, b, (size_t)n) == 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

/* ------------------------------------------------------------------ the vocabulary */

#define VOCAB_BITS 18
#define VOCAB_SLOTS (1u << VOCAB_BITS)

/* A slot holds a token's first 8 bytes: most lookups read one slot and nothing else. */
typedef struct {
    uint64_t head;  /* the first 8 bytes, zero-padded */
    uint32_t rank;
    uint32_t check; /* the length | 24 bits of the hash << 8; 0: empty */
} Slot;

static uint8_t *vocab_bytes;    /* the tokens' bytes, by rank */
static uint32_t *vocab_offsets; /* rank -> offset in vocab_bytes; rank + 1 -> its end */
static Slot *vocab_table;
static uint32_t vocab_size;

static inline uint32_t check_of(uint64_t h, Py_ssize_t n) {
    return ((uint32_t)(h >> 40) << 8) | (uint32_t)n;
}

/* The rank of p[0:n] (n <= MAX_TOKEN) whose hash_bytes is h, or NO_RANK. */
static inline uint32_t rank_hashed(const uint8_t *p, Py_ssize_t n, uint64_t h) {
    uint64_t head = head_of(p, n);
    uint32_t check = check_of(h, n), slot = (uint32_t)h & (VOCAB_SLOTS - 1);
    for (;; slot = (slot + 1) & (VOCAB_SLOTS - 1)) {
        const Slot *e = &vocab_table[slot];
        if (e->check == 0)
            return NO_RANK;
        if (e->check == check && e->head == head &&
            (n <= 8 || same(vocab_bytes + vocab_offsets[e->rank] + 8, p + 8, n - 8)))
            return e->rank;
    }
}

static inline uint32_t rank_of(const uint8_t *p, Py_ssize_t n) {
    return n > MAX_TOKEN ? NO_RANK : rank_hashed(p, n, hash_bytes(p, n));
}

static int b64_value(uint8_t c) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

static void free_vocab(void) {
    PyMem_Free(vocab_bytes);
    PyMem_Free(vocab_offsets);
    PyMem_Free(vocab_table);
    vocab_bytes = NULL;
    vocab_offsets = NULL;
    vocab_table = NULL;
    vocab_size = 0;
}

static PyObject *bad_vocab(const char *why) {
    free_vocab();
    PyErr_Format(PyExc_ValueError, "not a cl100k_base.tiktoken file: %s", why);
    return NULL;
}

/* Lines "<base64 token> <rank>", ranks 0, 1, 2, ... in order (as cl100k_base's are). */
static PyObject *load(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (vocab_size)
        return PyLong_FromUnsignedLong(vocab_size);
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *s = view.buf;
    Py_ssize_t n = view.len, lines = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        lines += s[i] == '\n';
    lines += n > 0 && s[n - 1] != '\n';
    vocab_bytes = PyMem_Malloc((size_t)n + 1); /* decoded tokens are shorter than the text */
    vocab_offsets = PyMem_Malloc(((size_t)lines + 2) * sizeof(uint32_t));
    vocab_table = PyMem_Calloc(VOCAB_SLOTS, sizeof(Slot));
    if (!vocab_bytes || !vocab_offsets || !vocab_table) {
        free_vocab();
        PyBuffer_Release(&view);
        return PyErr_NoMemory();
    }
    uint32_t used = 0, rank = 0;
    Py_ssize_t i = 0;
    const char *why = NULL;
    while (i < n && why == NULL) {
        if (s[i] == '\n') {
            i++;
            continue;
        }
        uint32_t start = used, bits = 0;
        int nbits = 0;
        for (; i < n && s[i] != ' ' && s[i] != '\n'; i++) {
            if (s[i] == '=')
                continue;
            int v = b64_value(s[i]);
            if (v < 0) {
                why = "a character outside base64";
                break;
            }
            bits = (bits << 6) | (uint32_t)v;
            nbits += 6;
            if (nbits >= 8) {
                nbits -= 8;
                vocab_bytes[used++] = (uint8_t)(bits >> nbits);
                bits &= (1u << nbits) - 1;
            }
        }
        if (why)
            break;
        uint64_t value = 0;
        int digits = 0;
        if (i < n && s[i] == ' ')
            for (i++; i < n && s[i] >= '0' && s[i] <= '9' && digits < 10; i++, digits++)
                value = value * 10 + (uint64_t)(s[i] - '0');
        if (digits == 0 || (i < n && s[i] != '\n'))
            why = "a line is not <base64> <rank>";
        else if (value != rank)
            why = "ranks are not 0, 1, 2, ... in order";
        else if (used == start || used - start > MAX_TOKEN)
            why = "a token is empty or longer than 128 bytes";
        else if (rank + 1 > (uint32_t)(VOCAB_SLOTS / 2))
            why = "too many tokens";
        if (why)
            break;
        vocab_offsets[rank] = start;
        vocab_offsets[rank + 1] = used;
        rank++;
    }
    PyBuffer_Release(&view);
    if (why)
        return bad_vocab(why);
    if (rank < 256)
        return bad_vocab("fewer than 256 tokens");
    vocab_size = rank;
    for (uint32_t r = 0; r < vocab_size; r++) {
        const uint8_t *tok = vocab_bytes + vocab_offsets[r];
        Py_ssize_t tlen = vocab_offsets[r + 1] - vocab_offsets[r];
        if (rank_of(tok, tlen) != NO_RANK)
            return bad_vocab("a token appears twice");
        uint64_t h = hash_bytes(tok, tlen);
        uint32_t slot = (uint32_t)h & (VOCAB_SLOTS - 1);
        while (vocab_table[slot].check)
            slot = (slot + 1) & (VOCAB_SLOTS - 1);
        vocab_table[slot].head = head_of(tok, tlen);
        vocab_table[slot].rank = r;
        vocab_table[slot].check = check_of(h, tlen);
    }
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        if (rank_of(&byte, 1) == NO_RANK)
            return bad_vocab("a byte is not a token");
    }
    return PyLong_FromUnsignedLong(vocab_size);
}

/* ------------------------------------------------------------------ the piece cache */

/* Pieces of more than one token, with their tokens' lengths: a slot array over a pool of
 * keys and lengths, emptied whole when either fills (the pool bounds the memory). */
#define CACHE_SLOTS (1u << 18) /* cpp-docs has 102k distinct pieces of several tokens */
#define CACHE_MAX_ENTRIES (CACHE_SLOTS / 2)
#define CACHE_MAX_KEY 255
#define CACHE_POOL (8u << 20)

typedef struct {
    uint64_t hash;
    uint32_t off; /* in pool: the key's bytes, then its tokens' lengths */
    uint16_t key_len; /* 0: empty slot */
    uint16_t tokens;
} Entry;

static Entry *cache;
static uint8_t *pool;
static uint32_t pool_used, cache_entries;

static const uint8_t *cache_get(const uint8_t *p, Py_ssize_t n, uint64_t h, int *tokens) {
    if (cache == NULL)
        return NULL;
    uint32_t slot = (uint32_t)h & (CACHE_SLOTS - 1);
    for (;; slot = (slot + 1) & (CACHE_SLOTS - 1)) {
        Entry *e = &cache[slot];
        if (e->key_len == 0)
            return NULL;
        if (e->hash == h && e->key_len == n && same(pool + e->off, p, n)) {
            *tokens = e->tokens;
            return pool + e->off + n;
        }
    }
}

static void cache_put(const uint8_t *p, Py_ssize_t n, uint64_t h, const uint8_t *lengths,
                      int tokens) {
    if (cache == NULL) {
        cache = PyMem_Calloc(CACHE_SLOTS, sizeof(Entry));
        pool = PyMem_Malloc(CACHE_POOL);
        if (cache == NULL || pool == NULL) { /* no cache: only slower */
            PyMem_Free(cache);
            PyMem_Free(pool);
            cache = NULL;
            pool = NULL;
            return;
        }
    }
    if (cache_entries >= CACHE_MAX_ENTRIES || pool_used + n + tokens > CACHE_POOL) {
        memset(cache, 0, CACHE_SLOTS * sizeof(Entry));
        pool_used = cache_entries = 0;
    }
    uint32_t slot = (uint32_t)h & (CACHE_SLOTS - 1);
    while (cache[slot].key_len)
        slot = (slot + 1) & (CACHE_SLOTS - 1);
    Entry *e = &cache[slot];
    e->hash = h;
    e->off = pool_used;
    e->key_len = (uint16_t)n;
    e->tokens = (uint16_t)tokens;
    memcpy(pool + pool_used, p, (size_t)n);
    memcpy(pool + pool_used + n, lengths, (size_t)tokens);
    pool_used += (uint32_t)(n + tokens);
    cache_entries++;
}

/* ------------------------------------------------------------------ byte-pair merge */

#ifndef LONG_PIECE /* (-DLONG_PIECE=1: every piece through the heap, to test it) */
#define LONG_PIECE 128 /* from here on a piece merges through a heap */
#endif
#define GONE 0xFFFFFFFEu /* cur[] of a part merged into the one before it */

static void heap_push(uint64_t *heap, Py_ssize_t *size, uint64_t v) {
    Py_ssize_t i = (*size)++;
    while (i > 0 && heap[(i - 1) / 2] > v) {
        heap[i] = heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    heap[i] = v;
}

static uint64_t heap_pop(uint64_t *heap, Py_ssize_t *size) {
    uint64_t top = heap[0], last = heap[--*size];
    Py_ssize_t i = 0, n = *size;
    for (;;) {
        Py_ssize_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && heap[c + 1] < heap[c])
            c++;
        if (heap[c] >= last)
            break;
        heap[i] = heap[c];
        i = c;
    }
    if (n > 0)
        heap[i] = last;
    return top;
}

/* The same merge as merge()'s in O(n log n) for long pieces (a run of 100k letters
 * would take minutes in the quadratic one): parts are a linked list named by their first
 * byte, the pairs' (rank, position) in a heap, the lowest first, so the lowest rank and
 * the leftmost of equal ones as tiktoken takes them. Entries whose pair has changed since
 * are skipped (cur[] holds each part's pair's rank now). */
static Py_ssize_t merge_long(const uint8_t *p, Py_ssize_t n, uint8_t *out) {
    uint32_t *next = PyMem_Malloc(((size_t)n + 1) * sizeof(uint32_t));
    uint32_t *prev = PyMem_Malloc(((size_t)n + 1) * sizeof(uint32_t));
    uint32_t *cur = PyMem_Malloc(((size_t)n + 1) * sizeof(uint32_t));
    uint64_t *heap = PyMem_Malloc(((size_t)n * 3 + 1) * sizeof(uint64_t));
    Py_ssize_t size = 0, tokens = 0;
    if (next == NULL || prev == NULL || cur == NULL || heap == NULL) {
        tokens = -1;
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k <= n; k++) {
        next[k] = (uint32_t)(k + 1);
        prev[k] = (uint32_t)(k - 1);
        cur[k] = k + 1 < n ? rank_of(p + k, 2) : NO_RANK;
        if (cur[k] != NO_RANK)
            heap_push(heap, &size, ((uint64_t)cur[k] << 32) | (uint64_t)k);
    }
    while (size > 0) {
        uint64_t top = heap_pop(heap, &size);
        uint32_t k = (uint32_t)top, rank = (uint32_t)(top >> 32);
        if (cur[k] != rank)
            continue; /* stale */
        uint32_t gone = next[k], after = next[gone];
        cur[gone] = GONE;
        next[k] = after;
        prev[after] = k;
        if (k > 0) { /* the pair before: its part and this one, now longer */
            uint32_t before = prev[k];
            cur[before] = rank_of(p + before, after - before);
            if (cur[before] != NO_RANK)
                heap_push(heap, &size, ((uint64_t)cur[before] << 32) | before);
        }
        cur[k] = after < n ? rank_of(p + k, next[after] - k) : NO_RANK;
        if (cur[k] != NO_RANK)
            heap_push(heap, &size, ((uint64_t)cur[k] << 32) | k);
    }
    for (uint32_t k = 0; k < (uint32_t)n; k = next[k])
        out[tokens++] = (uint8_t)(next[k] - k);
done:
    PyMem_Free(next);
    PyMem_Free(prev);
    PyMem_Free(cur);
    PyMem_Free(heap);
    return tokens;
}

/* tiktoken's _byte_pair_merge over a piece of 2 <= n bytes: parts start at pos[], rank[k]
 * is the rank of parts k and k+1 joined; the lowest rank merges first, the leftmost of
 * equal ones. Writes the tokens' lengths to out; returns their number, or -1 (no memory). */
static Py_ssize_t merge(const uint8_t *p, Py_ssize_t n, uint8_t *out) {
    if (n > LONG_PIECE)
        return merge_long(p, n, out);
    uint32_t pos[LONG_PIECE + 1], rank[LONG_PIECE + 1];
    for (Py_ssize_t k = 0; k <= n; k++) {
        pos[k] = (uint32_t)k;
        rank[k] = k + 1 < n ? rank_of(p + k, 2) : NO_RANK;
    }
    Py_ssize_t m = n + 1; /* parts, the end sentinel included */
    for (;;) {
        uint32_t best = NO_RANK;
        Py_ssize_t at = 0;
        for (Py_ssize_t k = 0; k + 1 < m; k++)
            if (rank[k] < best) {
                best = rank[k];
                at = k;
            }
        if (best == NO_RANK)
            break;
        /* Parts at and at+1 join: the new pairs are (at-1, at) and (at, at+2). */
        if (at > 0)
            rank[at - 1] = at + 2 < m ? rank_of(p + pos[at - 1], pos[at + 2] - pos[at - 1]) : NO_RANK;
        rank[at] = at + 3 < m ? rank_of(p + pos[at], pos[at + 3] - pos[at]) : NO_RANK;
        memmove(pos + at + 1, pos + at + 2, (size_t)(m - at - 2) * sizeof(uint32_t));
        memmove(rank + at + 1, rank + at + 2, (size_t)(m - at - 2) * sizeof(uint32_t));
        m--;
    }
    for (Py_ssize_t k = 0; k + 1 < m; k++)
        out[k] = (uint8_t)(pos[k + 1] - pos[k]);
    return m - 1;
}

/* ------------------------------------------------------------------ encoding */

/* The tokens' lengths of s[0:n] into out (room for n), or only their number (out NULL).
 * Returns the number of tokens, or -1 with an exception set. */
#if defined(__GNUC__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)0)
#endif

#define BATCH 64

static Py_ssize_t encode(const uint8_t *s, Py_ssize_t n, uint8_t *out) {
    uint8_t scratch[256];
    Py_ssize_t tokens = 0, ends[BATCH];
    uint64_t hashes[BATCH];
    for (Py_ssize_t i = 0; i < n;) {
        /* A batch of pieces first, their vocabulary slots prefetched: the lookups below
         * find them in the CPU's cache instead of each waiting for memory in turn. */
        int batch = 0;
        for (Py_ssize_t p = i; batch < BATCH && p < n; batch++) {
            Py_ssize_t e = piece_end(s, p, n);
            ends[batch] = e;
            if (e - p > 1 && e - p <= MAX_TOKEN) {
                uint64_t h = hash_bytes(s + p, e - p);
                hashes[batch] = h;
                PREFETCH(&vocab_table[(uint32_t)h & (VOCAB_SLOTS - 1)]);
                if (cache != NULL)
                    PREFETCH(&cache[(uint32_t)h & (CACHE_SLOTS - 1)]);
            }
            p = e;
        }
        for (int b = 0; b < batch; i = ends[b++]) {
            Py_ssize_t len = ends[b] - i;
            if (len == 1 || (len <= MAX_TOKEN && rank_hashed(s + i, len, hashes[b]) != NO_RANK)) {
                if (out)
                    out[tokens] = (uint8_t)len;
                tokens++;
                continue;
            }
            if (len > CACHE_MAX_KEY) {
                uint8_t *dest = out ? out + tokens : NULL;
                uint8_t *tmp = NULL;
                if (dest == NULL && (dest = tmp = PyMem_Malloc((size_t)len)) == NULL) {
                    PyErr_NoMemory();
                    return -1;
                }
                Py_ssize_t k = merge(s + i, len, dest);
                PyMem_Free(tmp);
                if (k < 0)
                    return -1;
                tokens += k;
                continue;
            }
            uint64_t h = len <= MAX_TOKEN ? hashes[b] : hash_bytes(s + i, len);
            int k;
            const uint8_t *known = cache_get(s + i, len, h, &k);
            if (known == NULL) {
                k = (int)merge(s + i, len, scratch);
                if (k < 0)
                    return -1;
                cache_put(s + i, len, h, scratch, k);
                known = scratch;
            }
            if (out)
                memcpy(out + tokens, known, (size_t)k);
            tokens += k;
        }
    }
    return tokens;
}

static const uint8_t *utf8_of(PyObject *text, Py_ssize_t *n) {
    if (!vocab_size) {
        PyErr_SetString(PyExc_RuntimeError, "bpenative: load() the vocabulary first");
        return NULL;
    }
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "bpenative: a str is needed");
        return NULL;
    }
    return (const uint8_t *)PyUnicode_AsUTF8AndSize(text, n);
}

static PyObject *lengths(PyObject *self, PyObject *text) {
    Py_ssize_t n;
    const uint8_t *s = utf8_of(text, &n);
    if (s == NULL)
        return NULL;
    uint8_t *out = PyMem_Malloc(n ? (size_t)n : 1);
    if (out == NULL)
        return PyErr_NoMemory();
    Py_ssize_t tokens = encode(s, n, out);
    PyObject *result = tokens < 0 ? NULL : PyByteArray_FromStringAndSize((char *)out, tokens);
    PyMem_Free(out);
    return result;
}

static PyObject *count(PyObject *self, PyObject *text) {
    Py_ssize_t n;
    const uint8_t *s = utf8_of(text, &n);
    if (s == NULL)
        return NULL;
    Py_ssize_t tokens = encode(s, n, NULL);
    return tokens < 0 ? NULL : PyLong_FromSsize_t(tokens);
}

static PyObject *split(PyObject *self, PyObject *text) {
    Py_ssize_t n;
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "bpenative: a str is needed");
        return NULL;
    }
    const uint8_t *s = (const uint8_t *)PyUnicode_AsUTF8AndSize(text, &n);
    if (s == NULL)
        return NULL;
    PyObject *pieces = PyList_New(0);
    for (Py_ssize_t i = 0, e; pieces != NULL && i < n; i = e) {
        e = piece_end(s, i, n);
        PyObject *piece = PyBytes_FromStringAndSize((const char *)s + i, e - i);
        if (piece == NULL || PyList_Append(pieces, piece) < 0)
            Py_CLEAR(pieces);
        Py_XDECREF(piece);
    }
    return pieces;
}

static PyObject *char_classes(PyObject *self, PyObject *noargs) {
    /* Every code point's class (0 other, 1 \p{L}, 2 \p{N}, 3 \s), surrogates as other. */
    PyObject *out = PyBytes_FromStringAndSize(NULL, 0x110000);
    if (out == NULL)
        return NULL;
    char *d = PyBytes_AS_STRING(out);
    for (uint32_t cp = 0; cp < 0x110000; cp++)
        d[cp] = (char)(cp < 0x10000 ? bmp_class[cp] : astral_class(cp));
    return out;
}

static PyObject *loaded(PyObject *self, PyObject *noargs) {
    return PyLong_FromUnsignedLong(vocab_size);
}

static PyMethodDef methods[] = {
    {"load", load, METH_O, "Parse cl100k_base.tiktoken's text once; the number of tokens."},
    {"loaded", loaded, METH_NOARGS, "The number of tokens loaded (0: none yet)."},
    {"lengths", lengths, METH_O, "The UTF-8 byte length of each token of a str (a bytearray)."},
    {"count", count, METH_O, "The number of tokens of a str."},
    {"split", split, METH_O, "The pre-tokeniser's pieces of a str (UTF-8 bytes)."},
    {"char_classes", char_classes, METH_NOARGS, "Each code point's class, one byte each."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "bpenative",
                                    "cl100k_base token counts and lengths, compiled.", -1,
                                    methods};

PyMODINIT_FUNC PyInit_bpenative(void) {
    init_classes();
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddStringConstant(m, "UNICODE_VERSION", VB_CL100K_UNICODE) < 0)
        Py_CLEAR(m);
    return m;
}
