/* The instant tier's batch encode for the parse workers (vault_brain/embed/piece_tokens.py and
 * static.py), the same ids and the same vectors byte for byte, without bytecode per piece,
 * per part or per row.
 *
 * - split_lookup: str.split()'s pieces (Py_UNICODE_ISSPACE, the predicate str.split uses),
 *   each looked up in the piece dict (a new one gets the next row and waits in `pending`);
 *   a text with a character the tokenizer deletes, or with an added token, is one piece.
 * - piece_ids: the ids of new pieces, from their parts (cut at ASCII punctuation) in the parts
 *   dict; a new ASCII part through the BERT pipeline here (clean_text, lower case, WordPiece
 *   over the vocabulary in a C table), any other new part through a Python callable (the
 *   tokenizer) in one batch.
 * - join: the texts' ids from their pieces' rows, each text cut to max_length.
 * - mean_rows: each text's mean of its known tokens' rows, summed as numpy's
 *   `table[ids].mean(axis=1)` sums them: from 0.0, row after row in float32, then divided in
 *   double and rounded to float32. Rows are read from the float16 table where the CPU has
 *   F16C (widening is exact), else from a float32 one.
 *
 * C99 and the CPython API; x86 SIMD only behind __builtin_cpu_supports. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define VB_X86 1
#include <immintrin.h>
#endif

/* ------------------------------------------------------------------ growing arrays */

typedef struct {
    char *data;
    Py_ssize_t used, size; /* in bytes */
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t more) {
    if (b->used + more <= b->size)
        return 0;
    Py_ssize_t size = b->size ? b->size : 4096;
    while (size < b->used + more)
        size *= 2;
    char *data = PyMem_Realloc(b->data, (size_t)size);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->size = size;
    return 0;
}

static int buf_i64(Buf *b, int64_t v) {
    if (buf_reserve(b, 8) < 0)
        return -1;
    memcpy(b->data + b->used, &v, 8);
    b->used += 8;
    return 0;
}

static PyObject *buf_bytes(Buf *b) {
    PyObject *out = PyBytes_FromStringAndSize(b->data ? b->data : "", b->used);
    PyMem_Free(b->data);
    b->data = NULL;
    b->used = b->size = 0;
    return out;
}

/* ------------------------------------------------------------------ split_lookup */

#define FNV_BASIS 1469598103934665603ULL
#define FNV_PRIME 1099511628211ULL

static inline uint64_t fnv(uint64_t h, const char *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * FNV_PRIME;
    return h;
}

/* A front for the piece dict: the rows of pieces met before (short ones, of one-byte texts)
 * by their bytes, direct-mapped, so a frequent piece costs a hash of its bytes and a compare
 * instead of a str, its SipHash and a probe of a dict of 250k pieces (cache misses). It takes
 * a piece when the dict gives its row, and the caller takes a new front whenever a piece of
 * FRONT_CHARS characters or fewer leaves the dict (a clear, a failed batch). */
#define FRONT_SLOTS 8192
#define FRONT_CHARS 28

typedef struct {
    uint64_t hash;
    int64_t row;
    uint32_t len; /* 0: empty */
    char data[FRONT_CHARS];
} Front;

static void front_free(PyObject *capsule) {
    PyMem_Free(PyCapsule_GetPointer(capsule, "vault_brain.front"));
}

/* front() -> an empty front for split_lookup. */
static PyObject *front(PyObject *self, PyObject *noargs) {
    Front *f = PyMem_Calloc(FRONT_SLOTS, sizeof(Front));
    if (f == NULL)
        return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(f, "vault_brain.front", front_free);
    if (capsule == NULL)
        PyMem_Free(f);
    return capsule;
}


/* The row of `piece` in `rows`, a new one (appended to `pending`) when it has none. */
static int64_t row_of(PyObject *rows, PyObject *piece, int64_t *next, PyObject *pending,
                      int *is_new) {
    PyObject *row = PyDict_GetItemWithError(rows, piece); /* borrowed */
    if (row != NULL) {
        *is_new = 0;
        return (int64_t)PyLong_AsLongLong(row);
    }
    if (PyErr_Occurred())
        return -1;
    PyObject *value = PyLong_FromLongLong(*next);
    if (value == NULL)
        return -1;
    int failed = PyDict_SetItem(rows, piece, value);
    Py_DECREF(value);
    if (failed || PyList_Append(pending, piece) < 0)
        return -1;
    *is_new = 1;
    return (*next)++;
}

static int holds_added(PyObject *piece, PyObject *added) {
    Py_ssize_t n = PyTuple_GET_SIZE(added);
    for (Py_ssize_t k = 0; k < n; k++) {
        int found = PyUnicode_Contains(piece, PyTuple_GET_ITEM(added, k));
        if (found != 0)
            return found; /* 1, or -1 on error */
    }
    return 0;
}

static int is_odd(Py_UCS4 c, const Py_UCS4 *odd, Py_ssize_t n_odd) {
    for (Py_ssize_t k = 0; k < n_odd; k++)
        if (odd[k] == c)
            return 1;
    return 0;
}

/* split_lookup(texts, rows, next, odd, added, pending, whole, front)
 *   -> (rows of the pieces: int64 bytes, pieces per text: int64 bytes, next)
 * `whole` (a set) receives the texts that are one piece; `front` is from front(). */
static PyObject *split_lookup(PyObject *self, PyObject *args) {
    PyObject *texts, *rows, *odd_str, *added, *pending, *whole, *front_capsule;
    long long next_arg;
    if (!PyArg_ParseTuple(args, "O!O!LUO!O!O!O", &PyList_Type, &texts, &PyDict_Type, &rows,
                          &next_arg, &odd_str, &PyTuple_Type, &added, &PyList_Type, &pending,
                          &PySet_Type, &whole, &front_capsule))
        return NULL;
    Front *fronts = PyCapsule_GetPointer(front_capsule, "vault_brain.front");
    if (fronts == NULL)
        return NULL;
    int64_t next = next_arg;
    Py_UCS4 *odd = PyUnicode_AsUCS4Copy(odd_str);
    if (odd == NULL)
        return NULL;
    Py_ssize_t n_odd = PyUnicode_GET_LENGTH(odd_str);
    Buf found = {0}, per_text = {0};
    Py_ssize_t *cuts = NULL, cuts_size = 0;
    Py_ssize_t n = PyList_GET_SIZE(texts);
    for (Py_ssize_t t = 0; t < n; t++) {
        PyObject *text = PyList_GET_ITEM(texts, t);
        if (!PyUnicode_Check(text)) {
            PyErr_SetString(PyExc_TypeError, "texts must be str");
            goto fail;
        }
        int kind = PyUnicode_KIND(text);
        const void *data = PyUnicode_DATA(text);
        Py_ssize_t len = PyUnicode_GET_LENGTH(text);
        /* the pieces' bounds, as str.split() finds them */
        if (len + 2 > cuts_size) {
            Py_ssize_t size = len + 2 > 2 * cuts_size ? len + 2 : 2 * cuts_size;
            Py_ssize_t *grown = PyMem_Realloc(cuts, (size_t)size * sizeof(Py_ssize_t));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            cuts = grown;
            cuts_size = size;
        }
        Py_ssize_t n_cuts = 0, i = 0;
        int whole_text = 0;
        while (i < len) {
            Py_UCS4 c = PyUnicode_READ(kind, data, i);
            if (Py_UNICODE_ISSPACE(c)) {
                if (n_odd && is_odd(c, odd, n_odd))
                    whole_text = 1;
                i++;
                continue;
            }
            Py_ssize_t start = i++;
            while (i < len && !Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i)))
                i++;
            cuts[n_cuts++] = start;
            cuts[n_cuts++] = i;
        }
        Py_ssize_t mark = found.used;
        int64_t pieces = 0;
        for (Py_ssize_t k = 0; k < n_cuts && !whole_text; k += 2) {
            Py_ssize_t size = cuts[k + 1] - cuts[k];
            Front *slot = NULL;
            uint64_t hash = 0;
            if (kind == PyUnicode_1BYTE_KIND && size <= FRONT_CHARS) {
                const char *bytes = (const char *)data + cuts[k];
                hash = fnv(FNV_BASIS, bytes, size);
                slot = fronts + (hash & (FRONT_SLOTS - 1));
                if (slot->len == (uint32_t)size && slot->hash == hash &&
                    memcmp(slot->data, bytes, (size_t)size) == 0) {
                    if (buf_i64(&found, slot->row) < 0)
                        goto fail;
                    pieces++;
                    continue;
                }
            }
            PyObject *piece = (cuts[k] == 0 && cuts[k + 1] == len && PyUnicode_CheckExact(text))
                                  ? Py_NewRef(text)
                                  : PyUnicode_Substring(text, cuts[k], cuts[k + 1]);
            if (piece == NULL)
                goto fail;
            int is_new = 0;
            int64_t row = row_of(rows, piece, &next, pending, &is_new);
            if (row < 0) {
                Py_DECREF(piece);
                goto fail;
            }
            if (is_new && PyTuple_GET_SIZE(added)) {
                /* an added token is matched before normalising: the text goes whole (the
                 * pieces before this one stay: their ids are their own) */
                int held = holds_added(piece, added);
                if (held < 0) {
                    Py_DECREF(piece);
                    goto fail;
                }
                if (held) { /* this piece never enters the table */
                    Py_ssize_t last = PyList_GET_SIZE(pending) - 1;
                    if (PyDict_DelItem(rows, piece) < 0 ||
                        PyList_SetSlice(pending, last, last + 1, NULL) < 0) {
                        Py_DECREF(piece);
                        goto fail;
                    }
                    next--;
                    whole_text = 1;
                    Py_DECREF(piece);
                    break;
                }
            }
            Py_DECREF(piece);
            if (slot != NULL && !is_new) { /* a piece the dict held before this call */
                slot->hash = hash;
                slot->row = row;
                slot->len = (uint32_t)size;
                memcpy(slot->data, (const char *)data + cuts[k], (size_t)size);
            }
            if (buf_i64(&found, row) < 0)
                goto fail;
            pieces++;
        }
        if (whole_text) {
            found.used = mark;
            int is_new = 0;
            int64_t row = row_of(rows, text, &next, pending, &is_new);
            if (row < 0 || PySet_Add(whole, text) < 0 || buf_i64(&found, row) < 0)
                goto fail;
            pieces = 1;
        }
        if (buf_i64(&per_text, pieces) < 0)
            goto fail;
    }
    PyMem_Free(cuts);
    PyMem_Free(odd);
    PyObject *a = buf_bytes(&found), *b = buf_bytes(&per_text);
    if (a == NULL || b == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        return NULL;
    }
    return Py_BuildValue("NNL", a, b, (long long)next);
fail:
    PyMem_Free(cuts);
    PyMem_Free(odd);
    PyMem_Free(found.data);
    PyMem_Free(per_text.data);
    return NULL;
}

/* ------------------------------------------------------------------ piece_ids */

/* The ASCII punctuation the BERT pre-tokenizer makes a word of its own: !-/ :-@ [-` {-~ */
static inline int is_punct(Py_UCS4 c) {
    return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
           (c >= '{' && c <= '~');
}

/* A part's ids are kept as bytes of int32 (compact, not tracked by the GC, copied whole);
 * the tokenizer's lists and the whole texts' ids are lists of ints. */
static PyObject *ids_bytes(PyObject *list) {
    if (!PyList_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "token ids must be a list");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject *out = PyBytes_FromStringAndSize(NULL, 4 * n);
    if (out == NULL)
        return NULL;
    int32_t *at = (int32_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t k = 0; k < n; k++) {
        long v = PyLong_AsLong(PyList_GET_ITEM(list, k));
        if ((v == -1 && PyErr_Occurred()) || v < INT32_MIN || v > INT32_MAX) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_OverflowError, "token id out of int32");
            Py_DECREF(out);
            return NULL;
        }
        at[k] = (int32_t)v;
    }
    return out;
}

static int append_ids(Buf *ids, PyObject *held, int64_t *count) {
    if (PyList_Check(held)) {
        PyObject *packed = ids_bytes(held);
        if (packed == NULL)
            return -1;
        int failed = append_ids(ids, packed, count);
        Py_DECREF(packed);
        return failed;
    }
    if (!PyBytes_Check(held) || PyBytes_GET_SIZE(held) % 4) {
        PyErr_SetString(PyExc_TypeError, "a part's ids must be int32 bytes");
        return -1;
    }
    Py_ssize_t size = PyBytes_GET_SIZE(held);
    if (buf_reserve(ids, size) < 0)
        return -1;
    memcpy(ids->data + ids->used, PyBytes_AS_STRING(held), (size_t)size);
    ids->used += size;
    *count += size / 4;
    return 0;
}

/* The model's ASCII vocabulary entries in an open-addressing table (FNV-1a), for WordPiece
 * on ASCII parts without a str object and a dict probe per candidate. */
typedef struct {
    uint64_t hash;
    uint32_t off, len;
    int32_t id;
} Entry;

typedef struct {
    Entry *entries;
    int32_t *slots; /* index into entries, -1: empty */
    uint64_t mask;
    char *arena;
    char prefix[16]; /* continuing_subword_prefix */
    Py_ssize_t prefix_len;
    long unk;              /* the unknown token's id */
    Py_ssize_t max_chars;  /* max_input_chars_per_word */
    Py_ssize_t longest;    /* the longest entry, in characters */
    int lowercase;
} WordPiece;

/* The id of head + tail (head: the prefix or nothing), -1 when it is not an entry. */
static int32_t vocab_find(const WordPiece *wp, uint64_t hash, const char *head, Py_ssize_t n_head,
                          const char *tail, Py_ssize_t n_tail) {
    for (uint64_t s = hash & wp->mask;; s = (s + 1) & wp->mask) {
        int32_t e = wp->slots[s];
        if (e < 0)
            return -1;
        const Entry *entry = wp->entries + e;
        if (entry->hash == hash && entry->len == (uint32_t)(n_head + n_tail) &&
            memcmp(wp->arena + entry->off, head, (size_t)n_head) == 0 &&
            memcmp(wp->arena + entry->off + n_head, tail, (size_t)n_tail) == 0)
            return entry->id;
    }
}

static void wordpiece_free(PyObject *capsule) {
    WordPiece *wp = PyCapsule_GetPointer(capsule, "vault_brain.wordpiece");
    if (wp == NULL)
        return;
    PyMem_Free(wp->entries);
    PyMem_Free(wp->slots);
    PyMem_Free(wp->arena);
    PyMem_Free(wp);
}

/* wordpiece(vocab, prefix, unk, max_chars, lowercase) -> the table for piece_ids. */
static PyObject *wordpiece(PyObject *self, PyObject *args) {
    PyObject *vocab, *prefix;
    long unk;
    Py_ssize_t max_chars;
    int lowercase;
    if (!PyArg_ParseTuple(args, "O!Ulnp", &PyDict_Type, &vocab, &prefix, &unk, &max_chars,
                          &lowercase))
        return NULL;
    Py_ssize_t prefix_len;
    const char *p = PyUnicode_AsUTF8AndSize(prefix, &prefix_len);
    if (p == NULL)
        return NULL;
    if (!PyUnicode_IS_ASCII(prefix) || prefix_len > 16 || max_chars < 0 || max_chars > 128) {
        PyErr_SetString(PyExc_ValueError, "wordpiece: an unexpected configuration");
        return NULL;
    }
    WordPiece *wp = PyMem_Calloc(1, sizeof(WordPiece));
    if (wp == NULL)
        return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(wp, "vault_brain.wordpiece", wordpiece_free);
    if (capsule == NULL) {
        PyMem_Free(wp);
        return NULL;
    }
    memcpy(wp->prefix, p, (size_t)prefix_len);
    wp->prefix_len = prefix_len;
    wp->unk = unk;
    wp->max_chars = max_chars;
    wp->lowercase = lowercase;
    Py_ssize_t n = PyDict_GET_SIZE(vocab), size = 1, chars = 0, at = 0, pos = 0;
    while (size < 2 * n + 2)
        size *= 2;
    wp->mask = (uint64_t)size - 1;
    wp->entries = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Entry));
    wp->slots = PyMem_Malloc((size_t)size * sizeof(int32_t));
    PyObject *key, *value;
    while (PyDict_Next(vocab, &pos, &key, &value))
        if (PyUnicode_Check(key) && PyUnicode_IS_ASCII(key))
            chars += PyUnicode_GET_LENGTH(key);
    wp->arena = PyMem_Malloc((size_t)(chars ? chars : 1));
    if (wp->entries == NULL || wp->slots == NULL || wp->arena == NULL) {
        Py_DECREF(capsule);
        return PyErr_NoMemory();
    }
    memset(wp->slots, 0xff, (size_t)size * sizeof(int32_t));
    Py_ssize_t count = 0;
    pos = 0;
    while (PyDict_Next(vocab, &pos, &key, &value)) {
        if (!PyUnicode_Check(key) || !PyUnicode_IS_ASCII(key))
            continue; /* an ASCII word never meets it */
        long id = PyLong_AsLong(value);
        if (id == -1 && PyErr_Occurred()) {
            Py_DECREF(capsule);
            return NULL;
        }
        Py_ssize_t len = PyUnicode_GET_LENGTH(key);
        memcpy(wp->arena + at, PyUnicode_1BYTE_DATA(key), (size_t)len);
        Entry *e = wp->entries + count;
        e->hash = fnv(FNV_BASIS, wp->arena + at, len);
        e->off = (uint32_t)at;
        e->len = (uint32_t)len;
        e->id = (int32_t)id;
        uint64_t s = e->hash & wp->mask;
        while (wp->slots[s] >= 0)
            s = (s + 1) & wp->mask;
        wp->slots[s] = (int32_t)count++;
        at += len;
        if (len > wp->longest)
            wp->longest = len;
    }
    return capsule;
}

/* The BERT pipeline on an ASCII part (no whitespace; no punctuation, or one punctuation
 * character alone): BertNormalizer's clean_text drops the control characters (every ASCII one
 * left in a part: \x00-\x1f and \x7f are Cc), lowercase maps A-Z (no accents to strip, no
 * CJK), the pre-tokenizer leaves one word, and WordPiece cuts it greedily, longest match
 * first, as tokenizers' models/wordpiece does: a word past max_chars, or with a rest no entry
 * starts, is the unknown token alone. The ids as int32 bytes. */
static PyObject *wordpiece_ascii(const WordPiece *wp, PyObject *part) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(part), n = 0, n_ids = 0;
    const unsigned char *raw = PyUnicode_1BYTE_DATA(part);
    char w[128];
    int32_t ids[128];
    uint64_t hashes[128];
    for (Py_ssize_t i = 0; i < len; i++) {
        unsigned char c = raw[i];
        if (c < 0x20 || c == 0x7f)
            continue;
        if (n == wp->max_chars) /* past max_chars: the unknown token */
            goto unknown;
        w[n++] = (char)(wp->lowercase && c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    for (Py_ssize_t start = 0; start < n;) {
        Py_ssize_t last = n - start > wp->longest ? start + wp->longest : n;
        const char *head = start ? wp->prefix : "";
        Py_ssize_t n_head = start ? wp->prefix_len : 0;
        uint64_t h = fnv(FNV_BASIS, head, n_head);
        for (Py_ssize_t k = start; k < last; k++)
            hashes[k] = h = (h ^ (unsigned char)w[k]) * FNV_PRIME;
        int32_t id = -1;
        Py_ssize_t end = last;
        for (; end > start; end--) {
            id = vocab_find(wp, hashes[end - 1], head, n_head, w + start, end - start);
            if (id >= 0)
                break;
        }
        if (id < 0) /* no entry starts the rest: the whole word is unknown */
            goto unknown;
        ids[n_ids++] = id;
        start = end;
    }
    return PyBytes_FromStringAndSize((const char *)ids, 4 * n_ids);
unknown:
    ids[0] = (int32_t)wp->unk;
    return PyBytes_FromStringAndSize((const char *)ids, 4);
}

/* piece_ids(pieces, direct, parts, tokenize, wordpiece) -> (ids: int32 bytes, counts: int64)
 * A piece in `direct` (a whole text) has its ids there; any other is cut into parts whose ids
 * (int32 bytes) are in `parts`. A new ASCII part gets its ids here when `wordpiece` (a table
 * from wordpiece()) is given; the other new parts go to tokenize(list) -> list of id lists,
 * and all are added to `parts`. */
static PyObject *piece_ids(PyObject *self, PyObject *args) {
    PyObject *pieces, *direct, *parts, *tokenize, *wp_capsule;
    if (!PyArg_ParseTuple(args, "O!O!O!OO", &PyList_Type, &pieces, &PyDict_Type, &direct,
                          &PyDict_Type, &parts, &tokenize, &wp_capsule))
        return NULL;
    const WordPiece *wp = NULL;
    if (wp_capsule != Py_None) {
        wp = PyCapsule_GetPointer(wp_capsule, "vault_brain.wordpiece");
        if (wp == NULL)
            return NULL;
    }
    PyObject *plan = PyList_New(0); /* per piece: its direct ids, or its parts one by one */
    PyObject *fresh = PyDict_New(); /* new part -> None, in order of first sight */
    Buf ends = {0}, ids = {0}, counts = {0};
    PyObject *new = NULL, *got = NULL;
    if (plan == NULL || fresh == NULL)
        goto fail;
    Py_ssize_t n = PyList_GET_SIZE(pieces);
    for (Py_ssize_t p = 0; p < n; p++) {
        PyObject *piece = PyList_GET_ITEM(pieces, p);
        PyObject *own = PyDict_GetItemWithError(direct, piece);
        if (own != NULL) {
            if (PyList_Append(plan, own) < 0)
                goto fail;
        } else if (PyErr_Occurred()) {
            goto fail;
        } else if (!PyUnicode_Check(piece)) {
            PyErr_SetString(PyExc_TypeError, "pieces must be str");
            goto fail;
        } else {
            int kind = PyUnicode_KIND(piece);
            const void *data = PyUnicode_DATA(piece);
            Py_ssize_t len = PyUnicode_GET_LENGTH(piece), i = 0;
            while (i < len) {
                Py_ssize_t start = i;
                if (is_punct(PyUnicode_READ(kind, data, i)))
                    i++;
                else
                    while (i < len && !is_punct(PyUnicode_READ(kind, data, i)))
                        i++;
                PyObject *part = (start == 0 && i == len && PyUnicode_CheckExact(piece))
                                     ? Py_NewRef(piece)
                                     : PyUnicode_Substring(piece, start, i);
                if (part == NULL)
                    goto fail;
                int known = PyDict_Contains(parts, part);
                if (known == 0 && wp != NULL && PyUnicode_IS_ASCII(part)) {
                    PyObject *own_ids = wordpiece_ascii(wp, part);
                    known = own_ids == NULL                               ? -1
                            : PyDict_SetItem(parts, part, own_ids) < 0 ? -1
                                                                       : 1;
                    Py_XDECREF(own_ids);
                }
                if (known == 0)
                    known = PyDict_SetDefault(fresh, part, Py_None) == NULL ? -1 : 0;
                if (known < 0 || PyList_Append(plan, part) < 0) {
                    Py_DECREF(part);
                    goto fail;
                }
                Py_DECREF(part);
            }
        }
        if (buf_i64(&ends, PyList_GET_SIZE(plan)) < 0)
            goto fail;
    }
    if (PyDict_GET_SIZE(fresh)) {
        new = PyDict_Keys(fresh);
        if (new == NULL)
            goto fail;
        got = PyObject_CallOneArg(tokenize, new);
        if (got == NULL)
            goto fail;
        if (!PyList_Check(got) || PyList_GET_SIZE(got) != PyList_GET_SIZE(new)) {
            PyErr_SetString(PyExc_ValueError, "tokenize must return a list, one per text");
            goto fail;
        }
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(new); k++) {
            PyObject *packed = ids_bytes(PyList_GET_ITEM(got, k));
            int failed = packed == NULL || PyDict_SetItem(parts, PyList_GET_ITEM(new, k), packed);
            Py_XDECREF(packed);
            if (failed)
                goto fail;
        }
    }
    const int64_t *end = (const int64_t *)ends.data;
    Py_ssize_t at = 0;
    for (Py_ssize_t p = 0; p < n; p++) {
        int64_t count = 0;
        for (; at < end[p]; at++) {
            PyObject *item = PyList_GET_ITEM(plan, at), *held = item;
            if (PyUnicode_Check(item)) {
                held = PyDict_GetItemWithError(parts, item);
                if (held == NULL) {
                    if (!PyErr_Occurred())
                        PyErr_SetObject(PyExc_KeyError, item);
                    goto fail;
                }
            }
            if (append_ids(&ids, held, &count) < 0)
                goto fail;
        }
        if (buf_i64(&counts, count) < 0)
            goto fail;
    }
    Py_DECREF(plan);
    Py_DECREF(fresh);
    Py_XDECREF(new);
    Py_XDECREF(got);
    PyMem_Free(ends.data);
    PyObject *a = buf_bytes(&ids), *b = buf_bytes(&counts);
    if (a == NULL || b == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        return NULL;
    }
    return Py_BuildValue("NN", a, b);
fail:
    Py_XDECREF(plan);
    Py_XDECREF(fresh);
    Py_XDECREF(new);
    Py_XDECREF(got);
    PyMem_Free(ends.data);
    PyMem_Free(ids.data);
    PyMem_Free(counts.data);
    return NULL;
}

/* ------------------------------------------------------------------ buffers */

/* A C-contiguous buffer of `ndim` dimensions (0: any) holding one of `formats`' items. */
static int get_buffer(PyObject *obj, Py_buffer *view, const char *formats, int writable,
                      const char *what) {
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0)
        return -1;
    const char *f = view->format ? view->format : "B";
    if (*f == '=' || *f == '@') /* native order only: '<' or '>' is refused */
        f++;
    int ok = f[0] != '\0' && f[1] == '\0' && strchr(formats, f[0]) != NULL;
    /* int64 is 'q', or 'l' where long has 8 bytes */
    if (ok && (f[0] == 'l' || f[0] == 'q') && view->itemsize != 8)
        ok = 0;
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s: unexpected item format %s", what, view->format);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ join */

/* join(rows, per_text, starts, counts, table_ids, max_length) -> (ids, lengths): int64 bytes.
 * max_length < 0: no cut. */
static PyObject *join(PyObject *self, PyObject *args) {
    PyObject *o_rows, *o_per, *o_starts, *o_counts, *o_ids;
    long long max_length;
    if (!PyArg_ParseTuple(args, "OOOOOL", &o_rows, &o_per, &o_starts, &o_counts, &o_ids,
                          &max_length))
        return NULL;
    Py_buffer rows, per, starts, counts, table;
    PyObject *result = NULL;
    if (get_buffer(o_rows, &rows, "lq", 0, "rows") < 0)
        return NULL;
    if (get_buffer(o_per, &per, "lq", 0, "per_text") < 0)
        goto r1;
    if (get_buffer(o_starts, &starts, "lq", 0, "starts") < 0)
        goto r2;
    if (get_buffer(o_counts, &counts, "lq", 0, "counts") < 0)
        goto r3;
    if (get_buffer(o_ids, &table, "i", 0, "table_ids") < 0)
        goto r4;
    const int64_t *row = rows.buf, *pt = per.buf, *st = starts.buf, *ct = counts.buf;
    const int32_t *tid = table.buf;
    Py_ssize_t n_rows = rows.len / 8, n_texts = per.len / 8, n_table = starts.len / 8;
    Py_ssize_t n_ids = table.len / 4;
    if (counts.len != starts.len) {
        PyErr_SetString(PyExc_ValueError, "starts and counts differ in length");
        goto r5;
    }
    /* the output's size first: every text's ids, cut */
    Py_ssize_t total = 0, at = 0;
    for (Py_ssize_t t = 0; t < n_texts; t++) {
        int64_t length = 0;
        if (pt[t] < 0 || at + pt[t] > n_rows) {
            PyErr_SetString(PyExc_ValueError, "per_text does not match rows");
            goto r5;
        }
        for (int64_t k = 0; k < pt[t]; k++, at++) {
            int64_t r = row[at];
            if (r < 0 || r >= n_table || st[r] < 0 || ct[r] < 0 || st[r] + ct[r] > n_ids) {
                PyErr_SetString(PyExc_IndexError, "a piece's row is out of the table");
                goto r5;
            }
            length += ct[r];
        }
        total += (max_length >= 0 && length > max_length) ? max_length : length;
    }
    PyObject *ids = PyBytes_FromStringAndSize(NULL, 8 * total);
    PyObject *lengths = PyBytes_FromStringAndSize(NULL, 8 * n_texts);
    if (ids == NULL || lengths == NULL) {
        Py_XDECREF(ids);
        Py_XDECREF(lengths);
        goto r5;
    }
    int64_t *out = (int64_t *)PyBytes_AS_STRING(ids);
    int64_t *out_len = (int64_t *)PyBytes_AS_STRING(lengths);
    at = 0;
    for (Py_ssize_t t = 0; t < n_texts; t++) {
        int64_t left = max_length >= 0 ? max_length : INT64_MAX, length = 0;
        for (int64_t k = 0; k < pt[t]; k++, at++) {
            int64_t r = row[at], c = ct[r] < left ? ct[r] : left;
            const int32_t *src = tid + st[r];
            for (int64_t j = 0; j < c; j++)
                *out++ = src[j];
            left -= c;
            length += c;
        }
        out_len[t] = length;
    }
    result = Py_BuildValue("NN", ids, lengths);
r5:
    PyBuffer_Release(&table);
r4:
    PyBuffer_Release(&counts);
r3:
    PyBuffer_Release(&starts);
r2:
    PyBuffer_Release(&per);
r1:
    PyBuffer_Release(&rows);
    return result;
}

/* ------------------------------------------------------------------ mean_rows */

/* float16 -> float32, exact (numpy's npy_halfbits_to_floatbits) */
static inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = h & 0x7c00u, man = h & 0x03ffu, bits;
    if (exp == 0x7c00u) {
        bits = sign | 0x7f800000u | (man << 13); /* inf, nan */
    } else if (exp != 0) {
        bits = sign | (((exp >> 10) + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while (!(man & 0x0400u));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x03ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static void add_f32(float *acc, const float *row, Py_ssize_t dim) {
    for (Py_ssize_t d = 0; d < dim; d++)
        acc[d] += row[d];
}

static void add_f16(float *acc, const uint16_t *row, Py_ssize_t dim) {
    for (Py_ssize_t d = 0; d < dim; d++)
        acc[d] += half_to_float(row[d]);
}

/* A text's sums: acc[d] = 0.0 + row_1[d] + row_2[d] + ... over its ids other than unk, in
 * order, in float32 (each dimension on its own: SIMD lanes change no order). */
typedef void (*SumFn)(float *acc, const char *base, Py_ssize_t stride, const int64_t *ids,
                      int64_t n, int64_t unk, Py_ssize_t dim);

static void sum_f16(float *acc, const char *base, Py_ssize_t stride, const int64_t *ids,
                    int64_t n, int64_t unk, Py_ssize_t dim) {
    memset(acc, 0, (size_t)dim * sizeof(float));
    for (int64_t k = 0; k < n; k++)
        if (ids[k] != unk)
            add_f16(acc, (const uint16_t *)(base + ids[k] * stride), dim);
}

static void sum_f32(float *acc, const char *base, Py_ssize_t stride, const int64_t *ids,
                    int64_t n, int64_t unk, Py_ssize_t dim) {
    memset(acc, 0, (size_t)dim * sizeof(float));
    for (int64_t k = 0; k < n; k++)
        if (ids[k] != unk)
            add_f32(acc, (const float *)(base + ids[k] * stride), dim);
}

#ifdef VB_X86
/* 64 dimensions at a time in eight registers, every row of the text for each block (the
 * rows stay in cache between blocks); the dimensions past the last block row by row. */
__attribute__((target("avx2,f16c"))) static void sum_f16_avx2(float *acc, const char *base,
                                                              Py_ssize_t stride,
                                                              const int64_t *ids, int64_t n,
                                                              int64_t unk, Py_ssize_t dim) {
    Py_ssize_t d = 0;
    for (; d + 64 <= dim; d += 64) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int64_t k = 0; k < n; k++) {
            if (ids[k] == unk)
                continue;
            const __m128i *r = (const __m128i *)(base + ids[k] * stride + 2 * d);
            a0 = _mm256_add_ps(a0, _mm256_cvtph_ps(_mm_loadu_si128(r)));
            a1 = _mm256_add_ps(a1, _mm256_cvtph_ps(_mm_loadu_si128(r + 1)));
            a2 = _mm256_add_ps(a2, _mm256_cvtph_ps(_mm_loadu_si128(r + 2)));
            a3 = _mm256_add_ps(a3, _mm256_cvtph_ps(_mm_loadu_si128(r + 3)));
            a4 = _mm256_add_ps(a4, _mm256_cvtph_ps(_mm_loadu_si128(r + 4)));
            a5 = _mm256_add_ps(a5, _mm256_cvtph_ps(_mm_loadu_si128(r + 5)));
            a6 = _mm256_add_ps(a6, _mm256_cvtph_ps(_mm_loadu_si128(r + 6)));
            a7 = _mm256_add_ps(a7, _mm256_cvtph_ps(_mm_loadu_si128(r + 7)));
        }
        _mm256_storeu_ps(acc + d, a0);
        _mm256_storeu_ps(acc + d + 8, a1);
        _mm256_storeu_ps(acc + d + 16, a2);
        _mm256_storeu_ps(acc + d + 24, a3);
        _mm256_storeu_ps(acc + d + 32, a4);
        _mm256_storeu_ps(acc + d + 40, a5);
        _mm256_storeu_ps(acc + d + 48, a6);
        _mm256_storeu_ps(acc + d + 56, a7);
    }
    if (d < dim)
        sum_f16(acc + d, base + 2 * d, stride, ids, n, unk, dim - d);
}

__attribute__((target("avx2"))) static void sum_f32_avx2(float *acc, const char *base,
                                                         Py_ssize_t stride, const int64_t *ids,
                                                         int64_t n, int64_t unk,
                                                         Py_ssize_t dim) {
    Py_ssize_t d = 0;
    for (; d + 64 <= dim; d += 64) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
               a7 = a0;
        for (int64_t k = 0; k < n; k++) {
            if (ids[k] == unk)
                continue;
            const float *r = (const float *)(base + ids[k] * stride) + d;
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(r));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(r + 8));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(r + 16));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(r + 24));
            a4 = _mm256_add_ps(a4, _mm256_loadu_ps(r + 32));
            a5 = _mm256_add_ps(a5, _mm256_loadu_ps(r + 40));
            a6 = _mm256_add_ps(a6, _mm256_loadu_ps(r + 48));
            a7 = _mm256_add_ps(a7, _mm256_loadu_ps(r + 56));
        }
        _mm256_storeu_ps(acc + d, a0);
        _mm256_storeu_ps(acc + d + 8, a1);
        _mm256_storeu_ps(acc + d + 16, a2);
        _mm256_storeu_ps(acc + d + 24, a3);
        _mm256_storeu_ps(acc + d + 32, a4);
        _mm256_storeu_ps(acc + d + 40, a5);
        _mm256_storeu_ps(acc + d + 48, a6);
        _mm256_storeu_ps(acc + d + 56, a7);
    }
    if (d < dim)
        sum_f32(acc + d, base + 4 * d, stride, ids, n, unk, dim - d);
}
#endif

static int simd_allowed = 1; /* use_simd(False): the portable loops, for the tests */

static int has_f16c(void) {
    if (!simd_allowed)
        return 0;
#ifdef VB_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
#else
    return 0;
#endif
}

static int has_avx2(void) {
    if (!simd_allowed)
        return 0;
#ifdef VB_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
#else
    return 0;
#endif
}

/* mean_rows(ids, lengths, table, unk, out): out[t] = the mean of the rows of text t's ids
 * other than unk (unk < 0: none), zeros when it has none. ids int64, lengths int64, table
 * [rows, dim] float16 or float32, out [texts, dim] float32. */
static PyObject *mean_rows(PyObject *self, PyObject *args) {
    PyObject *o_ids, *o_len, *o_table, *o_out;
    long long unk;
    if (!PyArg_ParseTuple(args, "OOOLO", &o_ids, &o_len, &o_table, &unk, &o_out))
        return NULL;
    Py_buffer ids, lens, table, out;
    PyObject *result = NULL;
    float *acc = NULL;
    if (get_buffer(o_ids, &ids, "lq", 0, "ids") < 0)
        return NULL;
    if (get_buffer(o_len, &lens, "lq", 0, "lengths") < 0)
        goto r1;
    if (get_buffer(o_table, &table, "ef", 0, "table") < 0)
        goto r2;
    if (get_buffer(o_out, &out, "f", 1, "out") < 0)
        goto r3;
    if (table.ndim != 2 || out.ndim != 2 || out.shape[1] != table.shape[1] ||
        out.shape[0] != lens.len / 8) {
        PyErr_SetString(PyExc_ValueError, "table [rows, dim], out [texts, dim] expected");
        goto r4;
    }
    const int64_t *id = ids.buf, *len = lens.buf;
    Py_ssize_t n_ids = ids.len / 8, n_texts = lens.len / 8;
    Py_ssize_t n_rows = table.shape[0], dim = table.shape[1];
    int half = table.itemsize == 2;
    Py_ssize_t total = 0;
    for (Py_ssize_t t = 0; t < n_texts; t++) {
        if (len[t] < 0) {
            PyErr_SetString(PyExc_ValueError, "a negative length");
            goto r4;
        }
        total += len[t];
    }
    if (total != n_ids) {
        PyErr_SetString(PyExc_ValueError, "lengths do not add up to the ids");
        goto r4;
    }
    for (Py_ssize_t k = 0; k < n_ids; k++)
        if (id[k] != unk && (id[k] < 0 || id[k] >= n_rows)) {
            PyErr_SetString(PyExc_IndexError, "a token id out of the table");
            goto r4;
        }
    acc = PyMem_Malloc((size_t)(dim ? dim : 1) * sizeof(float));
    if (acc == NULL) {
        PyErr_NoMemory();
        goto r4;
    }
    SumFn sum = half ? sum_f16 : sum_f32;
#ifdef VB_X86
    if (half && has_f16c())
        sum = sum_f16_avx2;
    if (!half && has_avx2())
        sum = sum_f32_avx2;
#endif
    const char *base = table.buf;
    Py_ssize_t stride = dim * table.itemsize;
    float *o = out.buf;
    Py_BEGIN_ALLOW_THREADS;
    const int64_t *at = id;
    for (Py_ssize_t t = 0; t < n_texts; t++, o += dim) {
        int64_t known = 0;
        for (int64_t k = 0; k < len[t]; k++)
            known += at[k] != unk;
        sum(acc, base, stride, at, len[t], unk, dim); /* numpy's sum starts at 0.0 */
        at += len[t];
        /* numpy divides the float32 sum by an intp count: in double, rounded to float32 */
        if (known)
            for (Py_ssize_t d = 0; d < dim; d++)
                o[d] = (float)((double)acc[d] / (double)known);
        else
            memset(o, 0, (size_t)dim * sizeof(float));
    }
    Py_END_ALLOW_THREADS;
    result = Py_NewRef(Py_None);
r4:
    PyMem_Free(acc);
    PyBuffer_Release(&out);
r3:
    PyBuffer_Release(&table);
r2:
    PyBuffer_Release(&lens);
r1:
    PyBuffer_Release(&ids);
    return result;
}

/* split_characters() -> str: every character str.split() cuts at, in code point order */
static PyObject *split_characters(PyObject *self, PyObject *noargs) {
    Py_UCS4 found[256];
    Py_ssize_t n = 0;
    for (Py_UCS4 c = 0; c <= 0x10ffff; c++)
        if (Py_UNICODE_ISSPACE(c)) {
            if (n == 256) {
                PyErr_SetString(PyExc_RuntimeError, "more than 256 whitespace characters");
                return NULL;
            }
            found[n++] = c;
        }
    return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, found, n);
}

static PyObject *fast_half(PyObject *self, PyObject *noargs) {
    return PyBool_FromLong(has_f16c());
}

static PyObject *use_simd(PyObject *self, PyObject *flag) {
    int on = PyObject_IsTrue(flag);
    if (on < 0)
        return NULL;
    simd_allowed = on;
    Py_RETURN_NONE;
}

static int add_constants(PyObject *m) {
    return PyModule_AddIntConstant(m, "FRONT_CHARS", FRONT_CHARS);
}

static PyMethodDef methods[] = {
    {"use_simd", use_simd, METH_O, "Allow the x86 SIMD loops (the default) or not (tests)."},
    {"front", front, METH_NOARGS, "An empty front for split_lookup's piece dict."},
    {"split_lookup", split_lookup, METH_VARARGS, "Pieces of texts looked up in the piece dict."},
    {"wordpiece", wordpiece, METH_VARARGS, "The ASCII vocabulary for piece_ids' WordPiece."},
    {"piece_ids", piece_ids, METH_VARARGS, "New pieces' ids from their parts."},
    {"join", join, METH_VARARGS, "Texts' ids from their pieces' rows, cut to max_length."},
    {"mean_rows", mean_rows, METH_VARARGS, "Each text's mean of its known tokens' rows."},
    {"split_characters", split_characters, METH_NOARGS, "The characters str.split() cuts at."},
    {"fast_half", fast_half, METH_NOARGS, "Whether float16 rows are widened in hardware."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "staticnative",
                                    "The instant tier's batch encode, compiled.", -1, methods};

PyMODINIT_FUNC PyInit_staticnative(void) {
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && add_constants(m) < 0)
        Py_CLEAR(m);
    return m;
}
