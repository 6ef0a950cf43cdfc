/* vault_brain.native.textnative: text/analysis.py's per-word loops in C.
 *
 * analyze() of a text without CJK, no-space scripts or combining marks (text/analysis.py's
 * "slow" class) is: its words (runs of str.isalnum() characters, as the `re` pattern
 * [^\W_]+ and the ASCII translate-and-split find them), each word's indexed form, the
 * non-empty forms joined with a space. Python did that with one str object, one dict
 * look-up and one list slot per word: ~6 million words on cpp-docs. Here the words are
 * hashed from the text's own code units and looked up in a word -> form table held by the
 * Forms object; the words never seen of a text go to Python in one call (stopwords,
 * PyStemmer's stemWords), so the forms are Python's by construction. The language detection's word counts (its sample's
 * words, the distinct ones, each language's stopword hits) come from one such walk too
 * (Vocab.count).
 *
 * Both return None for a text that holds a character of the slow class: the Python path
 * (the `regex` module's Unicode classes, grapheme clusters) answers for those. ASCII A-Z
 * are lowered here, so an ASCII text need not be lowered first (str.lower() of an ASCII
 * str is exactly that); any other text must come _normalize()d.
 *
 * The GIL is held throughout; forms() may release it, so no pointer into the table is kept
 * across that call (another thread may grow or clear the table meanwhile).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* --- the slow class: code points the Python path must split ------------------------ */

typedef struct {
    uint8_t bmp[0x10000 / 8];
    Py_UCS4 (*astral)[2]; /* ranges above the BMP */
    Py_ssize_t nastral;
} Slow;

static void slow_set(Slow *s, Py_UCS4 lo, Py_UCS4 hi)
{
    for (Py_UCS4 c = lo; c <= hi && c < 0x10000; c++)
        s->bmp[c >> 3] |= (uint8_t)(1u << (c & 7));
}

/* A regex character class's body with no escapes (what text/analysis.py's _SLOW_CLASS
 * holds): single characters and "a-b" ranges. */
static int slow_parse(Slow *s, PyObject *cls)
{
    if (!PyUnicode_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "the slow class must be a str");
        return -1;
    }
    memset(s->bmp, 0, sizeof s->bmp);
    s->astral = NULL;
    s->nastral = 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(cls);
    int kind = PyUnicode_KIND(cls);
    const void *data = PyUnicode_DATA(cls);
    for (Py_ssize_t i = 0; i < n;) {
        Py_UCS4 lo = PyUnicode_READ(kind, data, i), hi = lo;
        if (i + 2 < n && PyUnicode_READ(kind, data, i + 1) == '-') {
            hi = PyUnicode_READ(kind, data, i + 2);
            i += 3;
        } else {
            i += 1;
        }
        if (hi < lo) {
            PyErr_SetString(PyExc_ValueError, "a bad range in the slow class");
            return -1;
        }
        slow_set(s, lo, hi);
        if (hi >= 0x10000) {
            Py_UCS4(*p)[2] = PyMem_Realloc(s->astral, (size_t)(s->nastral + 1) * sizeof *p);
            if (p == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            s->astral = p;
            p[s->nastral][0] = lo < 0x10000 ? 0x10000 : lo;
            p[s->nastral][1] = hi;
            s->nastral++;
        }
    }
    return 0;
}

static inline int slow_has(const Slow *s, Py_UCS4 c)
{
    if (c < 0x10000)
        return (s->bmp[c >> 3] >> (c & 7)) & 1;
    for (Py_ssize_t i = 0; i < s->nastral; i++)
        if (c >= s->astral[i][0] && c <= s->astral[i][1])
            return 1;
    return 0;
}

/* ASCII letters and digits (str.isalnum() of an ASCII character). */
static uint8_t ascii_alnum[128];
static uint8_t ascii_lower[128];

static void ascii_tables(void)
{
    for (int c = 0; c < 128; c++) {
        ascii_alnum[c] = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        ascii_lower[c] = (uint8_t)((c >= 'A' && c <= 'Z') ? c + 32 : c);
    }
}

/* --- byte buffers ------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    char *p = PyMem_Realloc(b->p, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static inline int buf_add(Buf *b, const char *s, size_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

/* UTF-8 of one code point (no surrogates reach here: they are not alphanumeric). */
static inline size_t utf8_put(char *o, Py_UCS4 c)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xC0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (char)(0xE0 | (c >> 12));
        o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (c >> 18));
    o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

#define HASH_START 1469598103934665603ULL /* FNV-1a, then a fold of the high bits */
#define HASH_STEP(h, byte) (((h) ^ (uint8_t)(byte)) * 1099511628211ULL)
#define HASH_END(h) ((h) ^ ((h) >> 29))

static inline uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = HASH_START;
    for (size_t i = 0; i < n; i++)
        h = HASH_STEP(h, s[i]);
    return HASH_END(h);
}

/* --- a table of UTF-8 keys ------------------------------------------------------------ */

typedef struct {
    uint64_t hash;
    size_t key, klen; /* the key's bytes in the arena */
    size_t val, vlen; /* Forms: the form's bytes in the arena */
    Py_ssize_t count; /* Vocab.count: the word's count */
    uint64_t bits;    /* Vocab: the stopword's languages (0: not one of two letters or more) */
} Entry;

typedef struct {
    uint32_t *slots; /* index + 1 into entries, 0: empty */
    size_t mask;
    Entry *entries;
    size_t used, cap;
    Buf arena;
} Table;

static int table_init(Table *t, size_t slots)
{
    size_t n = 16;
    while (n < slots)
        n *= 2;
    t->slots = PyMem_Calloc(n, sizeof(uint32_t));
    if (t->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    t->mask = n - 1;
    t->entries = NULL;
    t->used = t->cap = 0;
    t->arena = (Buf){NULL, 0, 0};
    return 0;
}

static void table_free(Table *t)
{
    PyMem_Free(t->slots);
    PyMem_Free(t->entries);
    PyMem_Free(t->arena.p);
    t->slots = NULL;
    t->entries = NULL;
    t->arena = (Buf){NULL, 0, 0};
    t->used = t->cap = 0;
}

static Entry *table_find(const Table *t, const char *key, size_t n, uint64_t h)
{
    for (size_t i = (size_t)h & t->mask;; i = (i + 1) & t->mask) {
        uint32_t s = t->slots[i];
        if (s == 0)
            return NULL;
        Entry *e = &t->entries[s - 1];
        if (e->hash == h && e->klen == n && memcmp(t->arena.p + e->key, key, n) == 0)
            return e;
    }
}

static int table_grow(Table *t)
{
    size_t n = (t->mask + 1) * 2;
    uint32_t *slots = PyMem_Calloc(n, sizeof(uint32_t));
    if (slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t k = 0; k < t->used; k++) {
        size_t i = (size_t)t->entries[k].hash & (n - 1);
        while (slots[i])
            i = (i + 1) & (n - 1);
        slots[i] = (uint32_t)(k + 1);
    }
    PyMem_Free(t->slots);
    t->slots = slots;
    t->mask = n - 1;
    return 0;
}

/* A new entry for a key known to be absent; NULL on no memory. */
static Entry *table_add(Table *t, const char *key, size_t n, uint64_t h)
{
    if (2 * (t->used + 1) > t->mask + 1 && table_grow(t) < 0)
        return NULL;
    if (t->used == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        Entry *p = PyMem_Realloc(t->entries, cap * sizeof(Entry));
        if (p == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        t->entries = p;
        t->cap = cap;
    }
    size_t at = t->arena.len;
    if (buf_add(&t->arena, key, n) < 0)
        return NULL;
    size_t i = (size_t)h & t->mask;
    while (t->slots[i])
        i = (i + 1) & t->mask;
    t->slots[i] = (uint32_t)(t->used + 1);
    Entry *e = &t->entries[t->used++];
    *e = (Entry){h, at, n, 0, 0, 0, 0};
    return e;
}

/* --- the word walk ---------------------------------------------------------------------- */

/* The next word of text from *pos: its UTF-8 (ASCII lowered) in *word; 0 at the end, -1 on
 * a slow character (the Python path answers), -2 on no memory. */
typedef struct {
    int kind;
    const void *data;
    Py_ssize_t len, pos;
    int ascii;
    const Slow *slow;
} Walk;

static int walk_init(Walk *w, PyObject *text, const Slow *slow)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "text must be a str");
        return -1;
    }
    w->kind = PyUnicode_KIND(text);
    w->data = PyUnicode_DATA(text);
    w->len = PyUnicode_GET_LENGTH(text);
    w->pos = 0;
    w->ascii = PyUnicode_IS_ASCII(text);
    w->slow = slow;
    return 0;
}

static int walk_next(Walk *w, Buf *word, int *ascii_word, uint64_t *hash)
{
    word->len = 0;
    *ascii_word = 1;
    if (w->ascii) {
        const uint8_t *s = w->data;
        Py_ssize_t i = w->pos, n = w->len;
        while (i < n && !ascii_alnum[s[i]])
            i++;
        if (i == n) {
            w->pos = n;
            return 0;
        }
        Py_ssize_t start = i;
        while (i < n && ascii_alnum[s[i]])
            i++;
        if (buf_reserve(word, (size_t)(i - start)) < 0)
            return -2;
        uint64_t h = HASH_START;
        char *o = word->p;
        for (Py_ssize_t k = start; k < i; k++) {
            uint8_t c = ascii_lower[s[k]];
            o[k - start] = (char)c;
            h = HASH_STEP(h, c);
        }
        *hash = HASH_END(h);
        word->len = (size_t)(i - start);
        w->pos = i;
        return 1;
    }
    int kind = w->kind;
    const void *data = w->data;
    Py_ssize_t i = w->pos, n = w->len;
    for (; i < n; i++) { /* to the next word */
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 128) {
            if (ascii_alnum[c])
                break;
        } else if (slow_has(w->slow, c)) {
            return -1;
        } else if (Py_UNICODE_ISALNUM(c)) {
            break;
        }
    }
    if (i == n) {
        w->pos = n;
        return 0;
    }
    for (; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c < 128) {
            if (!ascii_alnum[c])
                break;
            if (buf_reserve(word, 1) < 0)
                return -2;
            word->p[word->len++] = (char)ascii_lower[c];
            continue;
        }
        if (slow_has(w->slow, c))
            return -1;
        if (!Py_UNICODE_ISALNUM(c))
            break;
        if (buf_reserve(word, 4) < 0)
            return -2;
        word->len += utf8_put(word->p + word->len, c);
        *ascii_word = 0;
    }
    w->pos = i;
    *hash = hash_bytes(word->p, word->len);
    return 1;
}

/* --- Forms: a language's word -> form table and analyze() --------------------------- */

/* The word -> form table: the slot holds what a look-up needs (a known word costs one slot
 * and one arena line, where the word and its form sit side by side). klen 0: empty. */
typedef struct {
    uint32_t h32, off, klen, vlen; /* the hash's high half; the word at off, its form after */
} FSlot;

typedef struct {
    FSlot *slots;
    size_t mask, used;
    Buf arena;
} FTable;

static int ftable_init(FTable *t, size_t slots)
{
    t->slots = PyMem_Calloc(slots, sizeof(FSlot));
    if (t->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    t->mask = slots - 1;
    t->used = 0;
    t->arena = (Buf){NULL, 0, 0};
    return 0;
}

static void ftable_free(FTable *t)
{
    PyMem_Free(t->slots);
    PyMem_Free(t->arena.p);
    t->slots = NULL;
    t->arena = (Buf){NULL, 0, 0};
}

static inline int same_bytes(const char *a, const char *b, size_t n)
{
    if (n > 16)
        return memcmp(a, b, n) == 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

static inline const FSlot *ftable_find(const FTable *t, const char *key, size_t n, uint64_t h)
{
    uint32_t h32 = (uint32_t)(h >> 32);
    for (size_t i = (size_t)h & t->mask;; i = (i + 1) & t->mask) {
        const FSlot *s = &t->slots[i];
        if (s->klen == 0)
            return NULL;
        if (s->h32 == h32 && s->klen == n && same_bytes(t->arena.p + s->off, key, n))
            return s;
    }
}

/* Keep a word (known to be absent) and its form; the table starts over at `limit` words. */
static int ftable_add(FTable *t, const char *key, size_t n, uint64_t h, const char *val,
                      size_t vlen, size_t limit)
{
    if (n == 0 || n > UINT32_MAX || vlen > UINT32_MAX) /* (never: words are short) */
        return 0;
    if (t->used >= limit || t->arena.len + n + vlen > UINT32_MAX) {
        memset(t->slots, 0, (t->mask + 1) * sizeof(FSlot));
        t->used = 0;
        t->arena.len = 0;
    }
    if (2 * (t->used + 1) > t->mask + 1) { /* grow: the slots again from their words */
        size_t size = (t->mask + 1) * 2;
        FSlot *slots = PyMem_Calloc(size, sizeof(FSlot));
        if (slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t k = 0; k <= t->mask; k++) {
            FSlot *s = &t->slots[k];
            if (s->klen == 0)
                continue;
            size_t i = (size_t)hash_bytes(t->arena.p + s->off, s->klen) & (size - 1);
            while (slots[i].klen)
                i = (i + 1) & (size - 1);
            slots[i] = *s;
        }
        PyMem_Free(t->slots);
        t->slots = slots;
        t->mask = size - 1;
    }
    size_t off = t->arena.len;
    if (buf_add(&t->arena, key, n) < 0 || buf_add(&t->arena, val, vlen) < 0)
        return -1;
    size_t i = (size_t)h & t->mask;
    while (t->slots[i].klen)
        i = (i + 1) & t->mask;
    t->slots[i] = (FSlot){(uint32_t)(h >> 32), (uint32_t)off, (uint32_t)n, (uint32_t)vlen};
    t->used++;
    return 0;
}

typedef struct {
    PyObject_HEAD
    PyObject *forms; /* forms(words) -> their indexed forms, "" for a stopword */
    Slow slow;
    FTable table;
    Py_ssize_t limit; /* words kept before the table starts over (as Python's cache) */
} Forms;

static int forms_init(Forms *self, PyObject *args, PyObject *Py_UNUSED(kwds))
{
    PyObject *forms, *cls;
    Py_ssize_t limit = 300000;
    if (!PyArg_ParseTuple(args, "OU|n:Forms", &forms, &cls, &limit))
        return -1;
    if (limit < 1) {
        PyErr_SetString(PyExc_ValueError, "limit must be positive");
        return -1;
    }
    self->limit = limit;
    if (!PyCallable_Check(forms)) {
        PyErr_SetString(PyExc_TypeError, "forms must be callable");
        return -1;
    }
    if (self->table.slots != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Forms is initialised once");
        return -1;
    }
    if (slow_parse(&self->slow, cls) < 0 || ftable_init(&self->table, 1024) < 0)
        return -1;
    Py_INCREF(forms);
    self->forms = forms;
    return 0;
}

static void forms_dealloc(Forms *self)
{
    Py_CLEAR(self->forms);
    PyMem_Free(self->slow.astral);
    ftable_free(&self->table);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* What follows a text's first new word: its words in order, each a form already known (its
 * bytes in `known`) or a new word (its index in the batch forms() answers). */
typedef struct {
    Py_ssize_t miss; /* -1: known */
    size_t off, len;
} Item;

typedef struct {
    Item *v;
    size_t n, cap;
} Items;

static int items_add(Items *it, Py_ssize_t miss, size_t off, size_t len)
{
    if (it->n == it->cap) {
        size_t cap = it->cap ? 2 * it->cap : 64;
        Item *p = PyMem_Realloc(it->v, cap * sizeof(Item));
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        it->v = p;
        it->cap = cap;
    }
    it->v[it->n++] = (Item){miss, off, len};
    return 0;
}

static inline int out_add(Buf *out, int *first, const char *s, size_t n)
{
    if (n == 0)
        return 0;
    if (buf_reserve(out, n + 1) < 0)
        return -1;
    if (!*first)
        out->p[out->len++] = ' ';
    memcpy(out->p + out->len, s, n);
    out->len += n;
    *first = 0;
    return 0;
}

/* The new words' forms from Python (one call), written after `out` in the items' order,
 * then kept in the table. The table is looked up again: it may have changed while the
 * Python ran (another thread). */
static int forms_resolve(Forms *self, PyObject *words, const Table *batch, const Items *items,
                         const Buf *known, Buf *out, int *first)
{
    PyObject *got = PyObject_CallOneArg(self->forms, words);
    if (got == NULL)
        return -1;
    Py_ssize_t n = (Py_ssize_t)batch->used; /* (not the list's size: forms() may change it) */
    if (!PyList_Check(got) || PyList_GET_SIZE(got) != n) {
        Py_DECREF(got);
        PyErr_SetString(PyExc_TypeError, "forms() must return a list of as many strs");
        return -1;
    }
    const char **utf8 = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(char *));
    Py_ssize_t *lens = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(Py_ssize_t));
    int rc = -1;
    if (utf8 == NULL || lens == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *f = PyList_GET_ITEM(got, i);
        if (!PyUnicode_Check(f)) {
            PyErr_SetString(PyExc_TypeError, "forms() must return strs");
            goto done;
        }
        if ((utf8[i] = PyUnicode_AsUTF8AndSize(f, &lens[i])) == NULL)
            goto done;
    }
    for (size_t k = 0; k < items->n; k++) {
        const Item *it = &items->v[k];
        int r = it->miss < 0 ? out_add(out, first, known->p + it->off, it->len)
                             : out_add(out, first, utf8[it->miss], (size_t)lens[it->miss]);
        if (r < 0)
            goto done;
    }
    FTable *t = &self->table;
    for (Py_ssize_t i = 0; i < n; i++) {
        const Entry *b = &batch->entries[i];
        const char *key = batch->arena.p + b->key;
        if (ftable_find(t, key, b->klen, b->hash) == NULL &&
            ftable_add(t, key, b->klen, b->hash, utf8[i], (size_t)lens[i], (size_t)self->limit) < 0)
            goto done;
    }
    rc = 0;
done:
    PyMem_Free(utf8);
    PyMem_Free(lens);
    Py_DECREF(got);
    return rc;
}

PyDoc_STRVAR(analyze_doc, "analyze(text) -> str | None\n\n"
                          "The non-empty forms of text's words joined by spaces; None when\n"
                          "text holds a character of the slow class (the Python path).");

static PyObject *forms_analyze(Forms *self, PyObject *text)
{
    Walk w;
    if (walk_init(&w, text, &self->slow) < 0)
        return NULL;
    Buf word = {NULL, 0, 0}, out = {NULL, 0, 0}, known = {NULL, 0, 0};
    Items items = {NULL, 0, 0};
    Table batch = {NULL, 0, NULL, 0, 0, {NULL, 0, 0}}; /* the new words, once each */
    PyObject *result = NULL, *words = NULL;
    int first = 1, ascii_word;
    uint64_t h;
    for (;;) {
        int rc = walk_next(&w, &word, &ascii_word, &h);
        if (rc == 0)
            break;
        if (rc == -1) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        if (rc < 0)
            goto done;
        const FTable *t = &self->table;
        const FSlot *e = ftable_find(t, word.p, word.len, h);
        if (e != NULL) {
            const char *form = t->arena.p + e->off + e->klen;
            if (words == NULL) { /* no new word yet: straight to the output */
                if (out_add(&out, &first, form, e->vlen) < 0)
                    goto done;
            } else if (e->vlen) {
                size_t at = known.len;
                if (buf_add(&known, form, e->vlen) < 0 || items_add(&items, -1, at, e->vlen) < 0)
                    goto done;
            }
            continue;
        }
        if (words == NULL) {
            if ((words = PyList_New(0)) == NULL || table_init(&batch, 64) < 0)
                goto done;
        }
        Entry *b = table_find(&batch, word.p, word.len, h);
        Py_ssize_t at;
        if (b != NULL) {
            at = b->count;
        } else {
            PyObject *s = PyUnicode_DecodeUTF8(word.p, (Py_ssize_t)word.len, "strict");
            if (s == NULL)
                goto done;
            at = PyList_GET_SIZE(words);
            int bad = PyList_Append(words, s);
            Py_DECREF(s);
            if (bad < 0 || (b = table_add(&batch, word.p, word.len, h)) == NULL)
                goto done;
            b->count = at;
        }
        if (items_add(&items, at, 0, 0) < 0)
            goto done;
    }
    if (words != NULL && forms_resolve(self, words, &batch, &items, &known, &out, &first) < 0)
        goto done;
    result = PyUnicode_DecodeUTF8(out.p ? out.p : "", (Py_ssize_t)out.len, "strict");
done:
    Py_XDECREF(words);
    if (batch.slots != NULL)
        table_free(&batch);
    PyMem_Free(items.v);
    PyMem_Free(word.p);
    PyMem_Free(out.p);
    PyMem_Free(known.p);
    return result;
}

static PyObject *forms_len(Forms *self, PyObject *Py_UNUSED(ignored))
{
    return PyLong_FromSize_t(self->table.used);
}

static PyMethodDef forms_methods[] = {
    {"analyze", (PyCFunction)forms_analyze, METH_O, analyze_doc},
    {"cached", (PyCFunction)forms_len, METH_NOARGS, "The number of words in the table."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject FormsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "vault_brain.native.textnative.Forms",
    .tp_basicsize = sizeof(Forms),
    .tp_dealloc = (destructor)forms_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Forms(forms, slow_class, limit=300000): a language's analyze() with a word ->\n"
              "form table (of at most `limit` words: then it starts over); forms(words) gives\n"
              "the forms of a text's new words, in one call.",
    .tp_methods = forms_methods,
    .tp_init = (initproc)forms_init,
    .tp_new = PyType_GenericNew,
};

/* --- Vocab: the detection's word counts ------------------------------------------------- */

#define MAX_LANGS 64

typedef struct {
    PyObject_HEAD
    Slow slow;
    Table table;        /* stopword -> its languages' bits */
    Py_ssize_t nlangs;
    Py_ssize_t cap;     /* a word counts at most this many times */
} Vocab;

static int vocab_init(Vocab *self, PyObject *args, PyObject *Py_UNUSED(kwds))
{
    PyObject *index, *langs, *cls;
    Py_ssize_t cap;
    if (!PyArg_ParseTuple(args, "O!O!Un:Vocab", &PyDict_Type, &index, &PyTuple_Type, &langs, &cls,
                          &cap))
        return -1;
    if (self->table.slots != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Vocab is initialised once");
        return -1;
    }
    Py_ssize_t nlangs = PyTuple_GET_SIZE(langs);
    if (nlangs > MAX_LANGS) {
        PyErr_SetString(PyExc_ValueError, "more languages than Vocab counts");
        return -1;
    }
    self->nlangs = nlangs;
    self->cap = cap;
    if (slow_parse(&self->slow, cls) < 0 ||
        table_init(&self->table, 2 * (size_t)PyDict_GET_SIZE(index) + 16) < 0)
        return -1;
    PyObject *word, *codes;
    Py_ssize_t pos = 0;
    while (PyDict_Next(index, &pos, &word, &codes)) {
        if (!PyUnicode_Check(word) || !PyTuple_Check(codes)) {
            PyErr_SetString(PyExc_TypeError, "the index maps a str to a tuple of languages");
            return -1;
        }
        uint64_t bits = 0;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(codes); k++) {
            PyObject *code = PyTuple_GET_ITEM(codes, k);
            Py_ssize_t at = -1;
            for (Py_ssize_t j = 0; j < nlangs; j++) {
                int eq = PyObject_RichCompareBool(code, PyTuple_GET_ITEM(langs, j), Py_EQ);
                if (eq < 0)
                    return -1;
                if (eq) {
                    at = j;
                    break;
                }
            }
            if (at < 0) {
                PyErr_SetString(PyExc_ValueError, "a stopword's language is not in the list");
                return -1;
            }
            bits |= 1ULL << at;
        }
        Py_ssize_t len;
        const char *u = PyUnicode_AsUTF8AndSize(word, &len);
        if (u == NULL)
            return -1;
        uint64_t h = hash_bytes(u, (size_t)len);
        Entry *e = table_find(&self->table, u, (size_t)len, h);
        if (e == NULL && (e = table_add(&self->table, u, (size_t)len, h)) == NULL)
            return -1;
        e->bits = PyUnicode_GET_LENGTH(word) >= 2 ? bits : 0;
    }
    return 0;
}

static void vocab_dealloc(Vocab *self)
{
    PyMem_Free(self->slow.astral);
    table_free(&self->table);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(count_doc,
             "count(text) -> (words, distinct, letters, hits, kinds) | None\n\n"
             "text's words: their number; the distinct ones in order of first occurrence\n"
             "(None when all are ASCII); the letters of the distinct words (their lengths'\n"
             "sum); per language (in the Vocab's order) the stopword hits (each distinct\n"
             "stopword of two letters or more counts min(its count, cap)) and the number of\n"
             "those distinct stopwords. None when text holds a character of the slow class\n"
             "(the Python path).");

static PyObject *vocab_count(Vocab *self, PyObject *text)
{
    Walk w;
    if (walk_init(&w, text, &self->slow) < 0)
        return NULL;
    Table seen;
    if (table_init(&seen, (size_t)w.len / 2 + 16) < 0)
        return NULL;
    Buf word = {NULL, 0, 0};
    PyObject *result = NULL, *distinct = NULL, *hits = NULL, *kinds = NULL;
    Py_ssize_t words = 0, letters = 0;
    Py_ssize_t hit[MAX_LANGS] = {0}, kind[MAX_LANGS] = {0};
    int all_ascii = 1, ascii_word;
    uint64_t h;
    for (;;) {
        int rc = walk_next(&w, &word, &ascii_word, &h);
        if (rc == 0)
            break;
        if (rc == -1) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
        if (rc < 0)
            goto done;
        words++;
        Entry *e = table_find(&seen, word.p, word.len, h);
        if (e == NULL) {
            e = table_add(&seen, word.p, word.len, h);
            if (e == NULL)
                goto done;
            Entry *v = table_find(&self->table, word.p, word.len, h);
            e->bits = v != NULL ? v->bits : 0;
            all_ascii &= ascii_word;
            letters += (Py_ssize_t)word.len;
        }
        e->count++;
    }
    if (!all_ascii && (distinct = PyList_New((Py_ssize_t)seen.used)) == NULL)
        goto done;
    for (size_t k = 0; k < seen.used; k++) {
        Entry *e = &seen.entries[k];
        if (distinct != NULL) {
            PyObject *s = PyUnicode_DecodeUTF8(seen.arena.p + e->key, (Py_ssize_t)e->klen, "strict");
            if (s == NULL)
                goto done;
            PyList_SET_ITEM(distinct, (Py_ssize_t)k, s);
        }
        uint64_t bits = e->bits;
        Py_ssize_t n = e->count < self->cap ? e->count : self->cap;
        for (Py_ssize_t j = 0; bits; j++, bits >>= 1)
            if (bits & 1) {
                hit[j] += n;
                kind[j] += 1;
            }
    }
    if ((hits = PyTuple_New(self->nlangs)) == NULL || (kinds = PyTuple_New(self->nlangs)) == NULL)
        goto done;
    for (Py_ssize_t j = 0; j < self->nlangs; j++) {
        PyObject *a = PyLong_FromSsize_t(hit[j]), *b = PyLong_FromSsize_t(kind[j]);
        if (a == NULL || b == NULL) {
            Py_XDECREF(a);
            Py_XDECREF(b);
            goto done;
        }
        PyTuple_SET_ITEM(hits, j, a);
        PyTuple_SET_ITEM(kinds, j, b);
    }
    if (distinct == NULL) {
        distinct = Py_None;
        Py_INCREF(distinct);
    }
    result = Py_BuildValue("(nOnOO)", words, distinct, letters, hits, kinds);
done:
    Py_XDECREF(distinct);
    Py_XDECREF(hits);
    Py_XDECREF(kinds);
    PyMem_Free(word.p);
    table_free(&seen);
    return result;
}

static PyMethodDef vocab_methods[] = {
    {"count", (PyCFunction)vocab_count, METH_O, count_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject VocabType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "vault_brain.native.textnative.Vocab",
    .tp_basicsize = sizeof(Vocab),
    .tp_dealloc = (destructor)vocab_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Vocab(stop_index, languages, slow_class, cap): the language detection's\n"
              "word counts (stop_index: stopword -> the tuple of its languages).",
    .tp_methods = vocab_methods,
    .tp_init = (initproc)vocab_init,
    .tp_new = PyType_GenericNew,
};

/* --- the module ------------------------------------------------------------------------- */

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "vault_brain.native.textnative",
    "text/analysis.py's word loops in C (analysis.py is the reference).",
    -1,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit_textnative(void)
{
    ascii_tables();
    if (PyType_Ready(&FormsType) < 0 || PyType_Ready(&VocabType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&FormsType);
    Py_INCREF(&VocabType);
    if (PyModule_AddObject(m, "Forms", (PyObject *)&FormsType) < 0 ||
        PyModule_AddObject(m, "Vocab", (PyObject *)&VocabType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
