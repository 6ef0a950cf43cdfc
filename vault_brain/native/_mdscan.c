/* vault_brain.native._mdscan: the block scan and the code masking of vault/blocks.py in C.
 *
 * The same answers as blocks.scan, blocks.code_spans and blocks.mask_code (which stay as
 * the fallback and the reference the tests compare with), found in one walk over the str's
 * code points instead of a Python step (and a re.Match) per backtick run and per line:
 * cpp-docs has ~630k backticks. Also the Markdown links of vault/links.py (its regex's
 * matches, less the ones it drops for sure), the language detection's sample of
 * text/analysis.py and the chunker's search for a cut (index/chunking.py): the other
 * per-character loops of a parse worker. Offsets are code-point indices, as Python's str counts
 * them: the str's own 1-, 2- or 4-byte units are read, never UTF-8.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* --- growable arrays --------------------------------------------------------------- */

static int grow(Py_ssize_t **a, Py_ssize_t *cap, Py_ssize_t need)
{
    if (need <= *cap)
        return 0;
    Py_ssize_t size = *cap ? *cap : 16;
    while (size < need)
        size *= 2;
    Py_ssize_t *p = PyMem_Realloc(*a, (size_t)size * sizeof(Py_ssize_t));
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *a = p;
    *cap = size;
    return 0;
}

typedef struct {
    Py_ssize_t *v; /* 4 offsets a span */
    Py_ssize_t count, cap;
} Spans;

static int spans_push(Spans *sp, Py_ssize_t a, Py_ssize_t b, Py_ssize_t c, Py_ssize_t d)
{
    if (grow(&sp->v, &sp->cap, 4 * (sp->count + 1)) < 0)
        return -1;
    Py_ssize_t *p = sp->v + 4 * sp->count++;
    p[0] = a;
    p[1] = b;
    p[2] = c;
    p[3] = d;
    return 0;
}

typedef struct {
    Py_ssize_t *start, *end, *after; /* the runs of backticks; after: next of its width */
    Py_ssize_t count, cap, cap_end, cap_after;
    Py_ssize_t *blanks; /* offsets of each "\n" that ends a line before a blank one */
    Py_ssize_t nblanks, cap_blanks;
    Py_ssize_t *by_width, *first; /* run indices sorted by (width, index); lazily */
    Py_ssize_t max_width;
} Runs;

static int runs_init(Runs *r)
{
    memset(r, 0, sizeof *r);
    return 0;
}

static void runs_free(Runs *r)
{
    PyMem_Free(r->start);
    PyMem_Free(r->end);
    PyMem_Free(r->after);
    PyMem_Free(r->blanks);
    PyMem_Free(r->by_width);
    PyMem_Free(r->first);
}

static int runs_push(Runs *r, Py_ssize_t a, Py_ssize_t b)
{
    Py_ssize_t cap = r->cap;
    if (grow(&r->start, &cap, r->count + 1) < 0)
        return -1;
    if (grow(&r->end, &r->cap_end, cap) < 0)
        return -1;
    r->cap = cap;
    r->start[r->count] = a;
    r->end[r->count] = b;
    r->count++;
    if (b - a > r->max_width)
        r->max_width = b - a;
    return 0;
}

static int blanks_push(Runs *r, Py_ssize_t at)
{
    if (grow(&r->blanks, &r->cap_blanks, r->nblanks + 1) < 0)
        return -1;
    r->blanks[r->nblanks++] = at;
    return 0;
}

/* after[i]: the next run of run i's width, -1 when there is none (one backward pass with
 * the last index seen per width, as blocks.code_spans does with a dict). */
static int runs_link(Runs *r)
{
    if (r->count == 0)
        return 0;
    r->after = PyMem_Malloc((size_t)r->count * sizeof(Py_ssize_t));
    Py_ssize_t *last = PyMem_Malloc((size_t)(r->max_width + 1) * sizeof(Py_ssize_t));
    if (r->after == NULL || last == NULL) {
        PyMem_Free(last);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t w = 0; w <= r->max_width; w++)
        last[w] = -1;
    for (Py_ssize_t i = r->count - 1; i >= 0; i--) {
        Py_ssize_t w = r->end[i] - r->start[i];
        r->after[i] = last[w];
        last[w] = i;
    }
    PyMem_Free(last);
    return 0;
}

/* The first run after index i whose width is w, -1 when none, -2 on error. For a run cut
 * short by an escape (rare): the runs sorted by width once (a counting sort), then a
 * binary search, so no text of escapes makes this quadratic. */
static Py_ssize_t runs_next_of_width(Runs *r, Py_ssize_t w, Py_ssize_t i)
{
    if (w > r->max_width)
        return -1;
    if (r->by_width == NULL) {
        Py_ssize_t m = r->max_width;
        r->first = PyMem_Calloc((size_t)(m + 2), sizeof(Py_ssize_t));
        r->by_width = PyMem_Malloc((size_t)r->count * sizeof(Py_ssize_t));
        if (r->first == NULL || r->by_width == NULL) {
            PyErr_NoMemory();
            return -2;
        }
        for (Py_ssize_t j = 0; j < r->count; j++)
            r->first[r->end[j] - r->start[j] + 1]++;
        for (Py_ssize_t v = 1; v <= m + 1; v++)
            r->first[v] += r->first[v - 1];
        Py_ssize_t *fill = PyMem_Malloc((size_t)(m + 1) * sizeof(Py_ssize_t));
        if (fill == NULL) {
            PyErr_NoMemory();
            return -2;
        }
        memcpy(fill, r->first, (size_t)(m + 1) * sizeof(Py_ssize_t));
        for (Py_ssize_t j = 0; j < r->count; j++)
            r->by_width[fill[r->end[j] - r->start[j]]++] = j;
        PyMem_Free(fill);
    }
    Py_ssize_t lo = r->first[w], hi = r->first[w + 1], end = hi;
    while (lo < hi) { /* bisect_right(same, i) */
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (r->by_width[mid] <= i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < end ? r->by_width[lo] : -1;
}

static int append_pair(PyObject *list, Py_ssize_t a, Py_ssize_t b)
{
    PyObject *item = Py_BuildValue("(nn)", a, b);
    if (item == NULL)
        return -1;
    int rc = PyList_Append(list, item);
    Py_DECREF(item);
    return rc;
}

/* --- the scanners, one copy per kind --------------------------------------------- */

#define CH Py_UCS1
#define K(name) name##_1
#define KIND_BYTES 1
#include "_mdscan_kind.h"
#undef CH
#undef K
#undef KIND_BYTES

#define CH Py_UCS2
#define K(name) name##_2
#define KIND_BYTES 2
#include "_mdscan_kind.h"
#undef CH
#undef K
#undef KIND_BYTES

#define CH Py_UCS4
#define K(name) name##_4
#define KIND_BYTES 4
#include "_mdscan_kind.h"
#undef CH
#undef K
#undef KIND_BYTES

/* --- the module's functions ------------------------------------------------------- */

static PyObject *spans_list(Spans *sp)
{
    PyObject *list = PyList_New(sp->count);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < sp->count; i++) {
        Py_ssize_t *p = sp->v + 4 * i;
        PyObject *item = Py_BuildValue("(nnnn)", p[0], p[1], p[2], p[3]);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static Py_ssize_t spans_of(int kind, const void *data, Py_ssize_t n, Spans *sp)
{
    switch (kind) {
    case PyUnicode_1BYTE_KIND:
        return code_spans_1(data, n, sp);
    case PyUnicode_2BYTE_KIND:
        return code_spans_2(data, n, sp);
    default:
        return code_spans_4(data, n, sp);
    }
}

static int has_backtick(int kind, const void *data, Py_ssize_t n)
{
    switch (kind) {
    case PyUnicode_1BYTE_KIND:
        return has_backtick_1(data, n);
    case PyUnicode_2BYTE_KIND:
        return has_backtick_2(data, n);
    default:
        return has_backtick_4(data, n);
    }
}

PyDoc_STRVAR(scan_doc, "scan(body) -> (fenced [(start, end)], headings [(start, level, text)])");

static PyObject *md_scan(PyObject *self, PyObject *body)
{
    if (!PyUnicode_Check(body)) {
        PyErr_SetString(PyExc_TypeError, "scan() wants a str");
        return NULL;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(body);
    const void *data = PyUnicode_DATA(body);
    PyObject *fenced = PyList_New(0), *headings = PyList_New(0);
    if (fenced == NULL || headings == NULL)
        goto fail;
    int rc;
    switch (PyUnicode_KIND(body)) {
    case PyUnicode_1BYTE_KIND:
        rc = scan_1(body, data, n, fenced, headings);
        break;
    case PyUnicode_2BYTE_KIND:
        rc = scan_2(body, data, n, fenced, headings);
        break;
    default:
        rc = scan_4(body, data, n, fenced, headings);
    }
    if (rc < 0)
        goto fail;
    return Py_BuildValue("(NN)", fenced, headings);
fail:
    Py_XDECREF(fenced);
    Py_XDECREF(headings);
    return NULL;
}

PyDoc_STRVAR(code_spans_doc, "code_spans(text) -> [(start, content start, content end, end)]");

static PyObject *md_code_spans(PyObject *self, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "code_spans() wants a str");
        return NULL;
    }
    Spans sp = {0};
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (spans_of(PyUnicode_KIND(text), PyUnicode_DATA(text), n, &sp) < 0) {
        PyMem_Free(sp.v);
        return NULL;
    }
    PyObject *list = spans_list(&sp);
    PyMem_Free(sp.v);
    return list;
}

PyDoc_STRVAR(mask_code_doc,
             "mask_code(text, fenced) -> text with the fenced ranges and the code spans\n"
             "after them blanked (every code point but '\\n' a space)");

static PyObject *md_mask_code(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "mask_code(text: str, fenced)");
        return NULL;
    }
    PyObject *text = args[0];
    PyObject *fenced = PySequence_Fast(args[1], "mask_code: fenced must be a sequence");
    if (fenced == NULL)
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int kind = PyUnicode_KIND(text);
    Py_ssize_t nf = PySequence_Fast_GET_SIZE(fenced);
    PyObject **items = PySequence_Fast_ITEMS(fenced);
    void *buf = NULL;
    Spans sp = {0};
    PyObject *result = NULL;
    if (nf == 0 && !has_backtick(kind, PyUnicode_DATA(text), n)) {
        Py_DECREF(fenced);
        return Py_NewRef(text);
    }
    buf = PyMem_Malloc((size_t)(n ? n : 1) * (size_t)kind);
    if (buf == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(buf, PyUnicode_DATA(text), (size_t)n * (size_t)kind);
    Py_ssize_t pos = 0;
    for (Py_ssize_t f = 0; f < nf; f++) {
        Py_ssize_t a, b;
        if (!PyArg_ParseTuple(items[f], "nn", &a, &b))
            goto done;
        if (a < pos || b < a || b > n) { /* only scan()'s ranges are known to be alike */
            PyErr_SetString(PyExc_ValueError, "mask_code: fenced ranges out of order");
            goto done;
        }
        if (kind == PyUnicode_1BYTE_KIND)
            blank_1(buf, a, b);
        else if (kind == PyUnicode_2BYTE_KIND)
            blank_2(buf, a, b);
        else
            blank_4(buf, a, b);
        pos = b;
    }
    if (has_backtick(kind, buf, n)) {
        if (spans_of(kind, buf, n, &sp) < 0)
            goto done;
        for (Py_ssize_t i = 0; i < sp.count; i++) {
            Py_ssize_t a = sp.v[4 * i], b = sp.v[4 * i + 3];
            if (kind == PyUnicode_1BYTE_KIND)
                blank_1(buf, a, b);
            else if (kind == PyUnicode_2BYTE_KIND)
                blank_2(buf, a, b);
            else
                blank_4(buf, a, b);
        }
    }
    /* The narrowest kind that holds what is left, as every str must be. */
    result = PyUnicode_FromKindAndData(kind, buf, n);
done:
    PyMem_Free(buf);
    PyMem_Free(sp.v);
    Py_DECREF(fenced);
    return result;
}

PyDoc_STRVAR(md_links_doc,
             "md_links(masked) -> [(start, embed, text, target)]: the Markdown links that\n"
             "links._markdown_links may keep (see _mdscan_kind.h)");

static PyObject *md_md_links(PyObject *self, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "md_links() wants a str");
        return NULL;
    }
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const void *data = PyUnicode_DATA(text);
    int rc;
    switch (PyUnicode_KIND(text)) {
    case PyUnicode_1BYTE_KIND:
        rc = md_links_1(text, data, n, out);
        break;
    case PyUnicode_2BYTE_KIND:
        rc = md_links_2(text, data, n, out);
        break;
    default:
        rc = md_links_4(text, data, n, out);
    }
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* --- the Markdown links' targets (vault/links.py's _note_links) ------------------ */

/* s[a:b] without Unicode whitespace at either end (str.strip()), or NULL-less None when
 * empty and none_if_empty. */
static PyObject *strip_slice(PyObject *s, Py_ssize_t a, Py_ssize_t b, int none_if_empty)
{
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    while (a < b && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, a)))
        a++;
    while (b > a && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, b - 1)))
        b--;
    if (a == b && none_if_empty)
        Py_RETURN_NONE;
    return PyUnicode_Substring(s, a, b);
}

/* posixpath.normpath(posixpath.join(folder, raw)) for a raw path starting with "./" or
 * "../", less every leading "../", then stripped: links._note_links' relative target. */
static PyObject *relative_target(PyObject *folder, PyObject *raw)
{
    Py_ssize_t nf = PyUnicode_GET_LENGTH(folder), nr = PyUnicode_GET_LENGTH(raw);
    Py_ssize_t n = nf + 1 + nr;
    Py_UCS4 *path = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_UCS4));
    Py_UCS4 *out = PyMem_Malloc((size_t)(n + 3) * sizeof(Py_UCS4));
    Py_ssize_t *starts = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    Py_ssize_t *lens = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_ssize_t));
    PyObject *result = NULL;
    if (path == NULL || out == NULL || starts == NULL || lens == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i < nf; i++)
        path[m++] = PyUnicode_READ_CHAR(folder, i);
    if (nf && path[m - 1] != '/') /* join: raw is not absolute here */
        path[m++] = '/';
    for (Py_ssize_t i = 0; i < nr; i++)
        path[m++] = PyUnicode_READ_CHAR(raw, i);
    /* normpath: "." when empty; one or three+ leading slashes are "/", two stay "//" */
    Py_ssize_t k = 0;
    if (m == 0) {
        out[k++] = '.';
    } else {
        int slashes = path[0] == '/';
        if (slashes && m > 1 && path[1] == '/' && !(m > 2 && path[2] == '/'))
            slashes = 2;
        Py_ssize_t count = 0;
        for (Py_ssize_t i = 0; i <= m;) {
            Py_ssize_t j = i;
            while (j < m && path[j] != '/')
                j++;
            Py_ssize_t len = j - i;
            int dot = len == 1 && path[i] == '.';
            int dotdot = len == 2 && path[i] == '.' && path[i + 1] == '.';
            if (len == 0 || dot) {
                /* skipped */
            } else if (!dotdot || (!slashes && count == 0) ||
                       (count > 0 && lens[count - 1] == 2 && path[starts[count - 1]] == '.' &&
                        path[starts[count - 1] + 1] == '.')) {
                starts[count] = i;
                lens[count] = len;
                count++;
            } else if (count > 0) {
                count--;
            }
            i = j + 1;
        }
        for (int s = 0; s < slashes; s++)
            out[k++] = '/';
        for (Py_ssize_t c = 0; c < count; c++) {
            if (c)
                out[k++] = '/';
            memcpy(out + k, path + starts[c], (size_t)lens[c] * sizeof(Py_UCS4));
            k += lens[c];
        }
        if (k == 0)
            out[k++] = '.';
    }
    Py_ssize_t a = 0; /* while raw.startswith("../"): raw = raw[3:] */
    while (k - a >= 3 && out[a] == '.' && out[a + 1] == '.' && out[a + 2] == '/')
        a += 3;
    PyObject *joined = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out + a, k - a);
    if (joined != NULL) {
        result = strip_slice(joined, 0, k - a, 0);
        Py_DECREF(joined);
    }
done:
    PyMem_Free(path);
    PyMem_Free(out);
    PyMem_Free(starts);
    PyMem_Free(lens);
    return result;
}

PyDoc_STRVAR(note_links_doc,
             "note_links(found, folder) -> links._note_links' decisions on md_links' answer:\n"
             "(start, target, heading, alias, embed) for a link to a note, nothing for a\n"
             "target that is not one, the item itself where the target has a '%'");

static PyObject *md_note_links(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "note_links(found: list, folder: str)");
        return NULL;
    }
    PyObject *found = args[0], *folder = args[1];
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t f = 0; f < PyList_GET_SIZE(found); f++) {
        PyObject *item = PyList_GET_ITEM(found, f);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 4 ||
            !PyUnicode_Check(PyTuple_GET_ITEM(item, 2)) ||
            !PyUnicode_Check(PyTuple_GET_ITEM(item, 3))) {
            PyErr_SetString(PyExc_TypeError, "note_links: (start, embed, text, target) items");
            goto fail;
        }
        PyObject *text = PyTuple_GET_ITEM(item, 2), *target = PyTuple_GET_ITEM(item, 3);
        Py_ssize_t n = PyUnicode_GET_LENGTH(target);
        if (PyUnicode_FindChar(target, '%', 0, n, 1) != -1) { /* unquote: the Python's */
            if (PyList_Append(out, item) < 0)
                goto fail;
            continue;
        }
        if (n == 0)
            continue;
        Py_UCS4 c0 = PyUnicode_READ_CHAR(target, 0);
        if (c0 == '#' || c0 == '/')
            continue;
        if (c0 < 128 && Py_ISALPHA(c0)) { /* ^[A-Za-z][A-Za-z0-9+.-]*: */
            Py_ssize_t j = 1;
            Py_UCS4 c;
            while (j < n && (c = PyUnicode_READ_CHAR(target, j)) < 128 &&
                   (Py_ISALNUM(c) || c == '+' || c == '.' || c == '-'))
                j++;
            if (j < n && PyUnicode_READ_CHAR(target, j) == ':')
                continue;
        }
        Py_ssize_t hash = PyUnicode_FindChar(target, '#', 0, n, 1);
        Py_ssize_t end = hash < 0 ? n : hash; /* raw = target[:end] */
        Py_ssize_t slash = PyUnicode_FindChar(target, '/', 0, end, -1);
        Py_ssize_t name = slash < 0 ? 0 : slash + 1; /* basename */
        /* name.lower().endswith(".md"): only '.', 'm'/'M', 'd'/'D' lower to those (every
         * code point's str.lower() was checked) */
        if (end - name >= 3 && PyUnicode_READ_CHAR(target, end - 3) == '.' &&
            (PyUnicode_READ_CHAR(target, end - 2) | 0x20) == 'm' &&
            (PyUnicode_READ_CHAR(target, end - 1) | 0x20) == 'd') {
            end -= 3;
        } else if (PyUnicode_FindChar(target, '.', name, end, 1) != -1) {
            continue; /* an attachment (image, PDF), not a note */
        }
        PyObject *note;
        int relative = end >= 2 && c0 == '.' &&
                       (PyUnicode_READ_CHAR(target, 1) == '/' ||
                        (end >= 3 && PyUnicode_READ_CHAR(target, 1) == '.' &&
                         PyUnicode_READ_CHAR(target, 2) == '/'));
        if (relative) {
            PyObject *raw = PyUnicode_Substring(target, 0, end);
            if (raw == NULL)
                goto fail;
            note = relative_target(folder, raw);
            Py_DECREF(raw);
        } else {
            note = strip_slice(target, 0, end, 0);
        }
        if (note == NULL)
            goto fail;
        if (PyUnicode_GET_LENGTH(note) == 0) {
            Py_DECREF(note);
            continue;
        }
        PyObject *heading =
            hash < 0 ? Py_NewRef(Py_None) : strip_slice(target, hash + 1, n, 1);
        PyObject *alias = heading ? strip_slice(text, 0, PyUnicode_GET_LENGTH(text), 1) : NULL;
        PyObject *row = alias ? PyTuple_Pack(5, PyTuple_GET_ITEM(item, 0), note, heading,
                                             alias, PyTuple_GET_ITEM(item, 1))
                              : NULL;
        Py_DECREF(note);
        Py_XDECREF(heading);
        Py_XDECREF(alias);
        if (row == NULL)
            goto fail;
        int rc = PyList_Append(out, row);
        Py_DECREF(row);
        if (rc < 0)
            goto fail;
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* --- the language detection's sample (text/analysis.py's _detection_sample) ---------- */

static int is_line_start(const Py_UCS4 *s, Py_ssize_t i)
{
    return i == 0 || s[i - 1] == '\n';
}

static int three(const Py_UCS4 *s, Py_ssize_t i, Py_ssize_t n, Py_UCS4 c)
{
    return i + 3 <= n && s[i] == c && s[i + 1] == c && s[i + 2] == c;
}

/* ^(```|~~~).*?^\1[^\n]*$ (multiline, dotall) -> " " */
static Py_ssize_t sub_fences(const Py_UCS4 *s, Py_ssize_t n, Py_UCS4 *o)
{
    Py_ssize_t i = 0, m = 0;
    while (i < n) {
        if (is_line_start(s, i) && (three(s, i, n, '`') || three(s, i, n, '~'))) {
            Py_UCS4 d = s[i];
            Py_ssize_t p = i + 3;
            while (p < n && !(s[p - 1] == '\n' && three(s, p, n, d)))
                p++;
            if (p < n) {
                Py_ssize_t e = p + 3;
                while (e < n && s[e] != '\n')
                    e++;
                o[m++] = ' ';
                i = e;
                continue;
            }
        }
        o[m++] = s[i++];
    }
    return m;
}

/* `[^`\n]*` -> " " and <[^>\n]*> -> " " */
static Py_ssize_t sub_pairs(const Py_UCS4 *s, Py_ssize_t n, Py_UCS4 *o, Py_UCS4 open,
                            Py_UCS4 close)
{
    Py_ssize_t i = 0, m = 0;
    while (i < n) {
        if (s[i] == open) {
            Py_ssize_t j = i + 1;
            while (j < n && s[j] != close && s[j] != '\n')
                j++;
            if (j < n && s[j] == close) {
                o[m++] = ' ';
                i = j + 1;
                continue;
            }
        }
        o[m++] = s[i++];
    }
    return m;
}

/* https?://\S+ -> " " */
static Py_ssize_t sub_urls(const Py_UCS4 *s, Py_ssize_t n, Py_UCS4 *o)
{
    Py_ssize_t i = 0, m = 0;
    while (i < n) {
        if (s[i] == 'h' && i + 4 < n && s[i + 1] == 't' && s[i + 2] == 't' && s[i + 3] == 'p') {
            Py_ssize_t k = i + 4;
            if (s[k] == 's')
                k++;
            if (k + 3 < n && s[k] == ':' && s[k + 1] == '/' && s[k + 2] == '/' &&
                !Py_UNICODE_ISSPACE(s[k + 3])) {
                Py_ssize_t j = k + 3;
                while (j < n && !Py_UNICODE_ISSPACE(s[j]))
                    j++;
                o[m++] = ' ';
                i = j;
                continue;
            }
        }
        o[m++] = s[i++];
    }
    return m;
}

/* \]\([^)]*\) -> "]" */
static Py_ssize_t sub_targets(const Py_UCS4 *s, Py_ssize_t n, Py_UCS4 *o)
{
    Py_ssize_t i = 0, m = 0;
    int no_close = 0; /* no ')' after some point: none after any later one either */
    while (i < n) {
        if (!no_close && s[i] == ']' && i + 1 < n && s[i + 1] == '(') {
            Py_ssize_t j = i + 2;
            while (j < n && s[j] != ')')
                j++;
            if (j < n) {
                o[m++] = ']';
                i = j + 1;
                continue;
            }
            no_close = 1;
        }
        o[m++] = s[i++];
    }
    return m;
}

PyDoc_STRVAR(detection_sample_doc,
             "detection_sample(text, chars) -> text[:2 * chars] without code, URLs, link\n"
             "targets and tags, cut to chars (text/analysis.py's _detection_sample)");

static PyObject *md_detection_sample(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t chars;
    if (nargs != 2 || !PyUnicode_Check(args[0]) ||
        (chars = PyLong_AsSsize_t(args[1])) < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "detection_sample(text: str, chars: int >= 0)");
        return NULL;
    }
    PyObject *text = args[0];
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (n > 2 * chars)
        n = 2 * chars;
    Py_UCS4 *a = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_UCS4));
    Py_UCS4 *b = PyMem_Malloc((size_t)(n + 1) * sizeof(Py_UCS4));
    if (a == NULL || b == NULL) {
        PyMem_Free(a);
        PyMem_Free(b);
        return PyErr_NoMemory();
    }
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t i = 0; i < n; i++) /* text[:2 * chars] */
        a[i] = PyUnicode_READ(kind, data, i);
    /* Each pattern on what the one before left, as the Python's chain of re.sub. */
    n = sub_fences(a, n, b);
    n = sub_pairs(b, n, a, '`', '`');
    n = sub_urls(a, n, b);
    n = sub_targets(b, n, a);
    n = sub_pairs(a, n, b, '<', '>');
    if (n > chars)
        n = chars;
    PyObject *out = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, b, n);
    PyMem_Free(a);
    PyMem_Free(b);
    return out;
}

/* --- the chunker's cut (index/chunking.py's _Cutter.best) -------------------------- */

PyDoc_STRVAR(best_cut_doc,
             "best_cut(data, offsets, hi, lo) -> the token position from hi down to lo at a\n"
             "paragraph, else line, else word break, else not inside a UTF-8 character, or\n"
             "None (index/chunking.py's _Cutter.best; offsets: C-contiguous int64)");

static PyObject *md_best_cut(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t hi, lo;
    if (nargs != 4 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "best_cut(data: bytes, offsets, hi, lo)");
        return NULL;
    }
    if ((hi = PyLong_AsSsize_t(args[2])) == -1 && PyErr_Occurred())
        return NULL;
    if ((lo = PyLong_AsSsize_t(args[3])) == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    PyObject *result = NULL;
    if (view.itemsize != 8 || view.format == NULL ||
        (strcmp(view.format, "q") != 0 && strcmp(view.format, "l") != 0 &&
         strcmp(view.format, "<q") != 0 && strcmp(view.format, "<l") != 0)) {
        PyErr_SetString(PyExc_TypeError, "best_cut: offsets must be int64");
        goto done;
    }
    const int64_t *offsets = view.buf;
    Py_ssize_t count = view.len / 8;
    const unsigned char *data = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t size = PyBytes_GET_SIZE(args[0]);
    Py_ssize_t line = -1, word = -1, chr = -1, found = -1;
    for (Py_ssize_t t = hi; t >= lo; t--) {
        if (t < 0 || t >= count) {
            PyErr_SetString(PyExc_IndexError, "best_cut: token position out of range");
            goto done;
        }
        int64_t p = offsets[t];
        if (p < 0) {
            PyErr_SetString(PyExc_ValueError, "best_cut: a negative offset");
            goto done;
        }
        if (p >= size) {
            found = t;
            break;
        }
        unsigned char b = data[p];
        if ((b & 0xC0) == 0x80) /* continuation byte: inside a character */
            continue;
        unsigned char prev = p ? data[p - 1] : 10;
        if (prev == 10) {
            if (p < 2 || data[p - 2] == 10) {
                found = t;
                break;
            }
            if (line < 0)
                line = t;
        } else if (word < 0 && (b == ' ' || b == '\t' || b == '\n' || prev == ' ' ||
                                prev == '\t')) {
            word = t;
        }
        if (chr < 0)
            chr = t;
    }
    if (found < 0)
        found = line >= 0 ? line : word >= 0 ? word : chr;
    result = found >= 0 ? PyLong_FromSsize_t(found) : Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"note_links", (PyCFunction)(void (*)(void))md_note_links, METH_FASTCALL, note_links_doc},
    {"best_cut", (PyCFunction)(void (*)(void))md_best_cut, METH_FASTCALL, best_cut_doc},
    {"detection_sample", (PyCFunction)(void (*)(void))md_detection_sample, METH_FASTCALL,
     detection_sample_doc},
    {"md_links", md_md_links, METH_O, md_links_doc},
    {"scan", md_scan, METH_O, scan_doc},
    {"code_spans", md_code_spans, METH_O, code_spans_doc},
    {"mask_code", (PyCFunction)(void (*)(void))md_mask_code, METH_FASTCALL, mask_code_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "vault_brain.native._mdscan",
    "Markdown's block scan and code masking in C (vault/blocks.py is the reference).",
    -1,
    methods,
};

PyMODINIT_FUNC PyInit__mdscan(void)
{
    return PyModule_Create(&module);
}
