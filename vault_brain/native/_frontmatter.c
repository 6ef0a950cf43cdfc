/* vault_brain.native._frontmatter: the frontmatter blocks most notes have, loaded without
 * PyYAML's parser (vault/frontmatter.py's load_block stays the reference and the fallback).
 *
 * PyYAML (libyaml's scanner, then a Python node and a constructor call per value) spends
 * ~45 us on a typical 6-key block: 0.45 CPU-s of a cpp-docs pass. Here the block is read
 * when, and only when, every line is one of a small subset whose YAML meaning is plain:
 *
 *   - a blank line (spaces only) or a comment line ('#' in column 0);
 *   - `key: value` in column 0: the key [A-Za-z0-9_][A-Za-z0-9_.-]* (at most 1000 chars),
 *     then ':' and either nothing (spaces only) or one or more spaces and a value:
 *       "text" (no backslash, no '"' inside), 'text' ('' for a quote), [item, ...] (items
 *       quoted, or plain words of [A-Za-z0-9_./ -] starting with [A-Za-z0-9_]; no trailing
 *       comma), or a plain scalar: not starting with a YAML indicator, holding no ": ",
 *       no " #", not ending with ':';
 *   - after `key:` with no value, block sequence items `- value` (one indentation for all,
 *     values quoted or plain as above); no items: the value is null.
 *
 * Anything else anywhere in the block (a tab, a CR or another line break, a control
 * character, a BOM, an indented line that is not an item, a nested mapping, a multi-line
 * scalar, an escape, an anchor, a tag, a flow mapping, ...) answers None and the caller
 * loads the block with PyYAML. Plain scalars are resolved and constructed by the caller's
 * `plain` (PyYAML's own resolver and constructors: ints, dates, booleans), memoised in
 * `cache`; `plain` answers NotImplemented for a tag it does not build (the caller then
 * loads with PyYAML too). The whole block is checked before any value is built, so a
 * value's constructor error is the first one PyYAML would raise as well.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define KEY_MAX 1000
#define CACHE_MAX 8192

enum { V_NULL, V_PLAIN, V_DQ, V_SQ, V_SEQ };

typedef struct {
    int kind;        /* V_PLAIN / V_DQ / V_SQ (an item or a scalar value) */
    Py_ssize_t a, b; /* its text: s[a:b] (V_SQ: with '' still doubled) */
} Scalar;

typedef struct {
    Py_ssize_t ka, kb; /* the key: s[ka:kb] */
    int kind;          /* V_NULL, a scalar kind, or V_SEQ */
    Scalar value;
    Py_ssize_t first, count; /* V_SEQ: items[first : first + count] */
} Entry;

typedef struct {
    Entry *entries;
    Py_ssize_t nentries, cap_entries;
    Scalar *items;
    Py_ssize_t nitems, cap_items;
} Parsed;

static void parsed_free(Parsed *p)
{
    PyMem_Free(p->entries);
    PyMem_Free(p->items);
}

static int push_entry(Parsed *p, Entry e)
{
    if (p->nentries == p->cap_entries) {
        Py_ssize_t size = p->cap_entries ? 2 * p->cap_entries : 16;
        Entry *v = PyMem_Realloc(p->entries, (size_t)size * sizeof(Entry));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->entries = v;
        p->cap_entries = size;
    }
    p->entries[p->nentries++] = e;
    return 0;
}

static int push_item(Parsed *p, Scalar sc)
{
    if (p->nitems == p->cap_items) {
        Py_ssize_t size = p->cap_items ? 2 * p->cap_items : 16;
        Scalar *v = PyMem_Realloc(p->items, (size_t)size * sizeof(Scalar));
        if (v == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        p->items = v;
        p->cap_items = size;
    }
    p->items[p->nitems++] = sc;
    return 0;
}

typedef struct {
    int kind;
    const void *data;
    Py_ssize_t n;
} Text;

#define AT(t, i) PyUnicode_READ((t)->kind, (t)->data, (i))

/* What libyaml reads as printable, less every line break but '\n', the BOM and the tab
 * (the subset has none of them). */
static int plain_char(Py_UCS4 c)
{
    return (c >= 0x20 && c <= 0x7E) || (c >= 0xA0 && c <= 0xD7FF && c != 0x2028 && c != 0x2029) ||
           (c >= 0xE000 && c <= 0xFFFD && c != 0xFEFF) || (c >= 0x10000 && c <= 0x10FFFF);
}

static int key_start(Py_UCS4 c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int key_char(Py_UCS4 c)
{
    return key_start(c) || c == '.' || c == '-';
}

static int indicator(Py_UCS4 c)
{
    return c < 128 && c != 0 && strchr("-?:,[]{}#&*!|>'\"%@`", (int)c) != NULL;
}

static Py_ssize_t skip_spaces(const Text *t, Py_ssize_t i, Py_ssize_t end)
{
    while (i < end && AT(t, i) == ' ')
        i++;
    return i;
}

/* A quoted scalar at i (its quote char q) closing before end: its end (after the closing
 * quote) and the content in *sc, or -1. */
static Py_ssize_t quoted(const Text *t, Py_ssize_t i, Py_ssize_t end, Scalar *sc)
{
    Py_UCS4 q = AT(t, i);
    Py_ssize_t j = i + 1;
    if (q == '"') {
        while (j < end && AT(t, j) != '"') {
            if (AT(t, j) == '\\')
                return -1;
            j++;
        }
        if (j >= end)
            return -1;
        sc->kind = V_DQ;
        sc->a = i + 1;
        sc->b = j;
        return j + 1;
    }
    for (;;) { /* '...' with '' for a quote */
        while (j < end && AT(t, j) != '\'')
            j++;
        if (j >= end)
            return -1;
        if (j + 1 < end && AT(t, j + 1) == '\'') {
            j += 2;
            continue;
        }
        sc->kind = V_SQ;
        sc->a = i + 1;
        sc->b = j;
        return j + 1;
    }
}

/* A plain scalar in block context from i to the line's end le: it must not start with an
 * indicator nor hold ": " or " #" nor end with ':'. Trailing spaces are not its own. */
static int plain_block(const Text *t, Py_ssize_t i, Py_ssize_t le, Scalar *sc)
{
    Py_ssize_t b = le;
    while (b > i && AT(t, b - 1) == ' ')
        b--;
    if (b == i || indicator(AT(t, i)))
        return -1;
    for (Py_ssize_t j = i; j < b; j++) {
        Py_UCS4 c = AT(t, j);
        if (c == ':' && (j + 1 == b || AT(t, j + 1) == ' '))
            return -1;
        if (c == '#' && AT(t, j - 1) == ' ')
            return -1;
    }
    sc->kind = V_PLAIN;
    sc->a = i;
    sc->b = b;
    return 0;
}

static int flow_word_char(Py_UCS4 c)
{
    return key_start(c) || c == '.' || c == '/' || c == '-' || c == ' ';
}

/* A flow sequence [...] at i ending on this line (le): its items pushed; -1 when not
 * in the subset. */
static int flow_seq(const Text *t, Py_ssize_t i, Py_ssize_t le, Parsed *p, Entry *e)
{
    e->kind = V_SEQ;
    e->first = p->nitems;
    e->count = 0;
    Py_ssize_t j = skip_spaces(t, i + 1, le);
    if (j < le && AT(t, j) == ']') {
        j++;
    } else {
        for (;;) {
            Scalar sc;
            if (j >= le)
                return -1;
            Py_UCS4 c = AT(t, j);
            if (c == '"' || c == '\'') {
                j = quoted(t, j, le, &sc);
                if (j < 0)
                    return -1;
            } else if (key_start(c)) {
                Py_ssize_t k = j;
                while (k < le && flow_word_char(AT(t, k)))
                    k++;
                Py_ssize_t b = k;
                while (b > j && AT(t, b - 1) == ' ')
                    b--;
                sc.kind = V_PLAIN;
                sc.a = j;
                sc.b = b;
                j = k;
            } else {
                return -1;
            }
            if (push_item(p, sc) < 0)
                return -2;
            e->count++;
            j = skip_spaces(t, j, le);
            if (j >= le)
                return -1;
            c = AT(t, j);
            if (c == ']') {
                j++;
                break;
            }
            if (c != ',')
                return -1;
            j = skip_spaces(t, j + 1, le);
            if (j < le && AT(t, j) == ']')
                return -1; /* a trailing comma */
        }
    }
    return skip_spaces(t, j, le) == le ? 0 : -1;
}

/* A value (after "key: " or "- ") from i to le, in the subset: quoted or plain. */
static int scalar_value(const Text *t, Py_ssize_t i, Py_ssize_t le, Scalar *sc)
{
    Py_UCS4 c = AT(t, i);
    if (c == '"' || c == '\'') {
        Py_ssize_t j = quoted(t, i, le, sc);
        return j >= 0 && skip_spaces(t, j, le) == le ? 0 : -1;
    }
    return plain_block(t, i, le, sc);
}

static Py_ssize_t line_end(const Text *t, Py_ssize_t i)
{
    while (i < t->n && AT(t, i) != '\n')
        i++;
    return i;
}

static int blank_or_comment(const Text *t, Py_ssize_t i, Py_ssize_t le)
{
    if (i < le && AT(t, i) == '#')
        return 1;
    return skip_spaces(t, i, le) == le;
}

/* The block's entries: 0, -1 (not in the subset), -2 (an error is set). */
static int parse(const Text *t, Parsed *p)
{
    for (Py_ssize_t i = 0; i < t->n; i++)
        if (!(plain_char(AT(t, i)) || AT(t, i) == '\n'))
            return -1;
    Py_ssize_t pos = 0;
    while (pos < t->n) {
        Py_ssize_t le = line_end(t, pos);
        if (blank_or_comment(t, pos, le)) {
            pos = le + 1;
            continue;
        }
        Entry e;
        memset(&e, 0, sizeof e);
        if (!key_start(AT(t, pos)))
            return -1;
        Py_ssize_t k = pos + 1;
        while (k < le && key_char(AT(t, k)))
            k++;
        if (k >= le || AT(t, k) != ':' || k - pos > KEY_MAX)
            return -1;
        e.ka = pos;
        e.kb = k;
        Py_ssize_t v = k + 1;
        if (v < le && AT(t, v) != ' ')
            return -1;
        v = skip_spaces(t, v, le);
        pos = le + 1;
        if (v < le) {
            Py_UCS4 c = AT(t, v);
            if (c == '[') {
                int rc = flow_seq(t, v, le, p, &e);
                if (rc < 0)
                    return rc;
            } else {
                if (scalar_value(t, v, le, &e.value) < 0)
                    return -1;
                e.kind = e.value.kind;
            }
        } else { /* no value on the line: block sequence items follow, or it is null */
            Py_ssize_t indent = -1;
            e.kind = V_NULL;
            while (pos < t->n) {
                Py_ssize_t le2 = line_end(t, pos);
                if (blank_or_comment(t, pos, le2)) {
                    pos = le2 + 1;
                    continue;
                }
                Py_ssize_t d = skip_spaces(t, pos, le2);
                if (AT(t, d) != '-') {
                    if (d == pos)
                        break; /* the next key */
                    return -1;
                }
                if (indent >= 0 && d - pos != indent)
                    return -1;
                if (d + 1 >= le2 || AT(t, d + 1) != ' ')
                    return -1;
                Py_ssize_t w = skip_spaces(t, d + 1, le2);
                if (w >= le2)
                    return -1;
                Scalar sc;
                if (scalar_value(t, w, le2, &sc) < 0)
                    return -1;
                if (indent < 0) {
                    indent = d - pos;
                    e.kind = V_SEQ;
                    e.first = p->nitems;
                    e.count = 0;
                }
                if (push_item(p, sc) < 0)
                    return -2;
                e.count++;
                pos = le2 + 1;
            }
        }
        if (push_entry(p, e) < 0)
            return -2;
    }
    return p->nentries > 0 ? 0 : -1;
}

/* The value of a scalar: a str for a quoted one, plain(text) (memoised) for a plain one.
 * NULL with no error set: `plain` declined (NotImplemented). */
typedef struct {
    PyObject *plain, *cache, *firsts;
} Builder;

static PyObject *build(PyObject *str, const Text *t, Scalar sc, const Builder *bd)
{
    PyObject *text = PyUnicode_Substring(str, sc.a, sc.b);
    if (text == NULL || sc.kind == V_DQ)
        return text;
    if (sc.kind == V_PLAIN &&
        PyUnicode_FindChar(bd->firsts, AT(t, sc.a), 0, PyUnicode_GET_LENGTH(bd->firsts), 1) == -1)
        return text; /* no implicit resolver starts with its first character: a str */
    if (sc.kind == V_SQ) {
        PyObject *q2 = PyUnicode_FromString("''"), *q1 = PyUnicode_FromString("'");
        PyObject *out = NULL;
        if (q2 != NULL && q1 != NULL)
            out = PyUnicode_Replace(text, q2, q1, -1);
        Py_XDECREF(q2);
        Py_XDECREF(q1);
        Py_DECREF(text);
        return out;
    }
    PyObject *cache = bd->cache;
    PyObject *got = PyDict_GetItemWithError(cache, text);
    if (got != NULL) {
        Py_DECREF(text);
        return Py_NewRef(got);
    }
    if (PyErr_Occurred()) {
        Py_DECREF(text);
        return NULL;
    }
    got = PyObject_CallOneArg(bd->plain, text);
    if (got == NULL || got == Py_NotImplemented) {
        Py_DECREF(text);
        Py_XDECREF(got);
        return NULL;
    }
    if (PyDict_GET_SIZE(cache) < CACHE_MAX && PyDict_SetItem(cache, text, got) < 0) {
        Py_DECREF(text);
        Py_DECREF(got);
        return NULL;
    }
    Py_DECREF(text);
    return got;
}

PyDoc_STRVAR(load_doc,
             "load(block, plain, cache, firsts) -> the block's dict, or None when the block is\n"
             "not in the subset this module reads (the caller loads it with PyYAML). firsts:\n"
             "the first characters of the implicit resolvers (a plain scalar starting with\n"
             "another is a str; the others go to plain, memoised in cache)");

static PyObject *fm_load(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyUnicode_Check(args[0]) || !PyDict_Check(args[2]) ||
        !PyUnicode_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "load(block: str, plain, cache: dict, firsts: str)");
        return NULL;
    }
    PyObject *str = args[0];
    Builder bd = {args[1], args[2], args[3]};
    Text t = {PyUnicode_KIND(str), PyUnicode_DATA(str), PyUnicode_GET_LENGTH(str)};
    Parsed p = {0};
    PyObject *result = NULL, *dict = NULL;
    int rc = parse(&t, &p);
    if (rc == -2)
        goto done;
    if (rc == -1) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    dict = PyDict_New();
    if (dict == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < p.nentries; i++) {
        Entry *e = &p.entries[i];
        Scalar key = {V_PLAIN, e->ka, e->kb};
        PyObject *k = build(str, &t, key, &bd), *v = NULL;
        if (k == NULL)
            goto declined;
        if (e->kind == V_NULL) {
            v = Py_NewRef(Py_None);
        } else if (e->kind == V_SEQ) {
            v = PyList_New(e->count);
            for (Py_ssize_t j = 0; v != NULL && j < e->count; j++) {
                PyObject *item = build(str, &t, p.items[e->first + j], &bd);
                if (item == NULL)
                    Py_CLEAR(v);
                else
                    PyList_SET_ITEM(v, j, item);
            }
        } else {
            v = build(str, &t, e->value, &bd);
        }
        if (v == NULL) {
            Py_DECREF(k);
            goto declined;
        }
        int set = PyDict_SetItem(dict, k, v);
        Py_DECREF(k);
        Py_DECREF(v);
        if (set < 0)
            goto done;
    }
    result = Py_NewRef(dict);
    goto done;
declined:
    if (!PyErr_Occurred())
        result = Py_NewRef(Py_None);
done:
    Py_XDECREF(dict);
    parsed_free(&p);
    return result;
}

static PyMethodDef methods[] = {
    {"load", (PyCFunction)(void (*)(void))fm_load, METH_FASTCALL, load_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "vault_brain.native._frontmatter",
    "Simple frontmatter blocks without PyYAML's parser (vault/frontmatter.py is the reference).",
    -1,
    methods,
};

PyMODINIT_FUNC PyInit__frontmatter(void)
{
    return PyModule_Create(&module);
}
