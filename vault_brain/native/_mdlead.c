/* vault_brain.native._mdlead: a note's lead (vault/note.py's extract_lead loop, _lead_line
 * and plain_inline) in C.
 *
 * The Python is a chain of ~15 regexes per line (embeds, code spans, wikilinks, Markdown
 * links, footnotes, autolinks, HTML tags, strong/emphasis twice, strike, block ids,
 * escapes, spaces), run on every line until the lead has 2 x 300 characters: 0.65 CPU-s
 * of a cpp-docs pass. Here each regex is one hand-written pass over the line's code points
 * with the regex's exact semantics (its leftmost match, its lazy or greedy runs, Python's
 * Unicode \s \w \d: Py_UNICODE_ISSPACE, ISALNUM or '_', ISDECIMAL), in the same order, on
 * the same intermediate text. Code spans come from the caller's code_spans (blocks.py's).
 *
 * A line holding '\n' or '\0' is not taken (plain_inline answers None, lead_text too): the
 * Python reads those (its placeholders for code spans are "\0<n>\0"). vault/note.py keeps
 * the Python as the fallback and the reference the tests compare with.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* --- a growable code-point buffer ------------------------------------------------------ */

typedef struct {
    Py_UCS4 *v;
    Py_ssize_t n, cap;
} Buf;

static int buf_reserve(Buf *b, Py_ssize_t need)
{
    if (need <= b->cap)
        return 0;
    Py_ssize_t size = b->cap ? b->cap : 64;
    while (size < need)
        size *= 2;
    Py_UCS4 *p = PyMem_Realloc(b->v, (size_t)size * sizeof(Py_UCS4));
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->v = p;
    b->cap = size;
    return 0;
}

static inline int buf_put(Buf *b, Py_UCS4 c)
{
    if (b->n >= b->cap && buf_reserve(b, b->n + 1) < 0)
        return -1;
    b->v[b->n++] = c;
    return 0;
}

static inline int buf_add(Buf *b, const Py_UCS4 *s, Py_ssize_t len)
{
    if (len <= 0)
        return 0;
    if (buf_reserve(b, b->n + len) < 0)
        return -1;
    memcpy(b->v + b->n, s, (size_t)len * sizeof(Py_UCS4));
    b->n += len;
    return 0;
}

static void buf_free(Buf *b)
{
    PyMem_Free(b->v);
    b->v = NULL;
    b->n = b->cap = 0;
}

/* --- Python's regex character classes ---------------------------------------------------- */

#define SPACE(c) Py_UNICODE_ISSPACE(c)
#define WORD(c) (Py_UNICODE_ISALNUM(c) || (c) == '_')
#define DECIMAL(c) Py_UNICODE_ISDECIMAL(c)
#define ASCII_ALPHA(c) (((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z'))
#define SPAN 300 /* note.py's _SPAN: the longest emphasis, strong or strike content */

static int has(const Py_UCS4 *s, Py_ssize_t n, Py_UCS4 c)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] == c)
            return 1;
    return 0;
}

/* The first index >= i whose code point is one of `stops` (a C string), else n. */
static Py_ssize_t run_until(const Py_UCS4 *s, Py_ssize_t i, Py_ssize_t n, const char *stops)
{
    for (; i < n; i++) {
        Py_UCS4 c = s[i];
        if (c < 128 && strchr(stops, (int)c) != NULL && c != 0)
            return i;
    }
    return n;
}

/* _PARENS at i: \((?:[^()\n]|\([^()\n]*\))*\) (one level of nesting; no '\n' here). The
 * end of the match, or -1. Deterministic: the first ')' at depth 0 closes it. */
static Py_ssize_t parens_at(const Py_UCS4 *s, Py_ssize_t i, Py_ssize_t n)
{
    if (i >= n || s[i] != '(')
        return -1;
    Py_ssize_t k = i + 1;
    while (k < n) {
        if (s[k] == ')')
            return k + 1;
        if (s[k] == '(') {
            Py_ssize_t j = run_until(s, k + 1, n, "()");
            if (j >= n || s[j] != ')')
                return -1;
            k = j + 1;
        } else {
            k++;
        }
    }
    return -1;
}

/* Every pass below copies the text it does not change in runs: FLUSH(to) appends the
 * source's s[last:to]. */
#define FLUSH(to)                                                                            \
    do {                                                                                     \
        if (buf_add(o, s + last, (to)-last) < 0)                                             \
            return -1;                                                                       \
    } while (0)

/* _EMBED.sub(" "): !\[\[[^\[\]\n]*\]\]|!\[[^\[\]\n]*\]PARENS */
static int sub_embed(const Py_UCS4 *s, Py_ssize_t n, Buf *o)
{
    Py_ssize_t i = 0, last = 0;
    while (i < n) {
        if (s[i] == '!' && i + 1 < n && s[i + 1] == '[') {
            Py_ssize_t end = -1;
            if (i + 2 < n && s[i + 2] == '[') {
                Py_ssize_t j = run_until(s, i + 3, n, "[]");
                if (j + 1 < n && s[j] == ']' && s[j + 1] == ']')
                    end = j + 2;
            } else {
                Py_ssize_t j = run_until(s, i + 2, n, "[]");
                if (j < n && s[j] == ']')
                    end = parens_at(s, j + 1, n);
            }
            if (end >= 0) {
                FLUSH(i);
                if (buf_put(o, ' ') < 0)
                    return -1;
                i = last = end;
                continue;
            }
        }
        i++;
    }
    FLUSH(n);
    return 0;
}

/* _WIKI.sub(_wiki_text):
 * \[\[([^\[\]|#\n]*)(?:#([^\[\]|\n]*))?(?:\|([^\[\]\n]*))?\]\] -> (alias or target or
 * heading or "").strip(). Deterministic: each group stops at the character that follows it. */
static int sub_wiki(const Py_UCS4 *s, Py_ssize_t n, Buf *o)
{
    Py_ssize_t i = 0, last = 0;
    while (i < n) {
        if (s[i] == '[' && i + 1 < n && s[i + 1] == '[') {
            Py_ssize_t g1 = i + 2, e1 = run_until(s, g1, n, "[]|#");
            Py_ssize_t g2 = -1, e2 = e1, g3 = -1, e3;
            if (e1 < n && s[e1] == '#') {
                g2 = e1 + 1;
                e2 = run_until(s, g2, n, "[]|");
            }
            e3 = e2;
            if (e2 < n && s[e2] == '|') {
                g3 = e2 + 1;
                e3 = run_until(s, g3, n, "[]");
            }
            if (e3 + 1 < n && s[e3] == ']' && s[e3 + 1] == ']') {
                Py_ssize_t a, b;
                if (g3 >= 0 && e3 > g3)
                    a = g3, b = e3;
                else if (e1 > g1)
                    a = g1, b = e1;
                else if (g2 >= 0 && e2 > g2)
                    a = g2, b = e2;
                else
                    a = b = 0;
                while (a < b && SPACE(s[a]))
                    a++;
                while (b > a && SPACE(s[b - 1]))
                    b--;
                FLUSH(i);
                if (buf_add(o, s + a, b - a) < 0)
                    return -1;
                i = last = e3 + 2;
                continue;
            }
        }
        i++;
    }
    FLUSH(n);
    return 0;
}

/* _MD_LINK.sub(group 1): \[([^\[\]\n]*)\](?:PARENS|\[[^\[\]\n]*\]) */
static int sub_md_link(const Py_UCS4 *s, Py_ssize_t n, Buf *o)
{
    Py_ssize_t i = 0, last = 0;
    while (i < n) {
        if (s[i] == '[') {
            Py_ssize_t j = run_until(s, i + 1, n, "[]"), end = -1;
            if (j + 1 < n && s[j] == ']') {
                if (s[j + 1] == '(') {
                    end = parens_at(s, j + 1, n);
                } else if (s[j + 1] == '[') {
                    Py_ssize_t k = run_until(s, j + 2, n, "[]");
                    if (k < n && s[k] == ']')
                        end = k + 1;
                }
            }
            if (end >= 0) {
                FLUSH(i);
                if (buf_add(o, s + i + 1, j - i - 1) < 0)
                    return -1;
                i = last = end;
                continue;
            }
        }
        i++;
    }
    FLUSH(n);
    return 0;
}

/* _FOOTNOTE.sub(""): \[\^[^\[\]\n]*\] */
static int sub_footnote(const Py_UCS4 *s, Py_ssize_t n, Buf *o)
{
    Py_ssize_t i = 0, last = 0;
    while (i < n) {
        if (s[i] == '[' && i + 1 < n && s[i + 1] == '^') {
            Py_ssize_t j = run_until(s, i + 2, n, "[]");
            if (j < n && s[j] == ']') {
                FLUSH(i);
                i = last = j + 1;
                continue;
            }
        }
        i++;
    }
    FLUSH(n);
    return 0;
}

static int starts(const Py_UCS4 *s, Py_ssize_t i, Py_ssize_t n, const char *lit)
{
    for (; *lit; lit++, i++)
        if (i >= n || s[i] != (Py_UCS4)(unsigned char)*lit)
            return 0;
    return 1;
}

/* _AUTOLINK.sub(group 1): <((?:https?|mailto|ftp):[^<>\s]+)> */
static int sub_autolink(const Py_UCS4 *s, Py_ssize_t n, Buf *o)
{
    Py_ssize_t i = 0, last = 0;
    while (i < n) {
        if (s[i] == '<') {
            Py_ssize_t k = -1;
            if (starts(s, i + 1, n, "https:"))
                k = i + 7;
            else if (starts(s, i + 1, n, "http:"))
                k = i + 6;
            else if (starts(s, i + 1, n, "mailto:"))
                k = i + 8;
            else if (starts(s, i + 1, n, "ftp:"))
                k = i + 5;
            if (k >= 0) {
                Py_ssize_t j = k;
                while (j < n && s[j] != '<' && s[j] != '>' && !SPACE(s[j]))
                    j++;
                if (j > k && j < n && s[j] == '>') {
                    FLUSH(i);
                    if (buf_add(o, s + i + 1, j - i - 1) < 0)
                        return -1;
                    i = last = j + 1;
                    continue;
                }
            }
        }
        i++;
    }
    FLUSH(n);
    return 0;
}

/* _HTML_TAG.sub(" "): </?[A-Za-z][^<>\n]*> */
static int sub_html(const Py_UCS4 *s, Py_ssize_t n, Buf *o)
{
    Py_ssize_t i = 0, last = 0;
    while (i < n) {
        if (s[i] == '<') {
            Py_ssize_t k = i + 1;
            if (k < n && s[k] == '/')
                k++;
            if (k < n && ASCII_ALPHA(s[k])) {
                Py_ssize_t j = run_until(s, k + 1, n, "<>");
                if (j < n && s[j] == '>') {
                    FLUSH(i);
                    if (buf_put(o, ' ') < 0)
                        return -1;
                    i = last = j + 1;
                    continue;
                }
            }
        }
        i++;
    }
    FLUSH(n);
    return 0;
}

/* The lazy content of a pair opened by `d` (one char, or two equal chars: wide = 2) at i:
 * (?=\S)(.{1,300}?)(?<=\S) then the closer. Returns the content's end p (the closer at p),
 * or -1. `after` checks the negative lookahead after the closer (0: none, 1: (?![\w*]),
 * 2: (?!\w)). */
static Py_ssize_t pair_close(const Py_UCS4 *s, Py_ssize_t n, Py_ssize_t from, Py_UCS4 d,
                             int wide, int after)
{
    if (from >= n || SPACE(s[from]))
        return -1;
    for (Py_ssize_t k = 1; k <= SPAN; k++) {
        Py_ssize_t p = from + k;
        if (p + wide > n)
            return -1;
        if (SPACE(s[p - 1]) || s[p] != d || (wide == 2 && s[p + 1] != d))
            continue;
        Py_ssize_t q = p + wide;
        if (after == 1 && q < n && (WORD(s[q]) || s[q] == '*'))
            continue;
        if (after == 2 && q < n && WORD(s[q]))
            continue;
        return p;
    }
    return -1;
}

/* _STRONG.sub (marks '*', '_') or _STRIKE_MARK.sub (marks '~', '='): (XX|YY)(?=\S)(.{1,300}?)(?<=\S)\1 -> group 2 */
static int sub_double(const Py_UCS4 *s, Py_ssize_t n, Buf *o, Py_UCS4 m1, Py_UCS4 m2)
{
    Py_ssize_t i = 0, last = 0;
    while (i < n) {
        Py_UCS4 c = s[i];
        if ((c == m1 || c == m2) && i + 1 < n && s[i + 1] == c) {
            Py_ssize_t p = pair_close(s, n, i + 2, c, 2, 0);
            if (p >= 0) {
                FLUSH(i);
                if (buf_add(o, s + i + 2, p - i - 2) < 0)
                    return -1;
                i = last = p + 2;
                continue;
            }
        }
        i++;
    }
    FLUSH(n);
    return 0;
}

/* _EMPHASIS.sub: \*(?<![\w*]\*)(?=\S)(.{1,300}?)(?<=\S)\*(?![\w*])
 *               |_(?<!\w_)(?=\S)(.{1,300}?)(?<=\S)_(?!\w)  -> the content */
static int sub_emphasis(const Py_UCS4 *s, Py_ssize_t n, Buf *o)
{
    Py_ssize_t i = 0, last = 0;
    while (i < n) {
        Py_UCS4 c = s[i];
        Py_ssize_t p = -1;
        if (c == '*') {
            if (!(i >= 1 && (WORD(s[i - 1]) || s[i - 1] == '*')))
                p = pair_close(s, n, i + 1, '*', 1, 1);
        } else if (c == '_') {
            if (!(i >= 1 && WORD(s[i - 1])))
                p = pair_close(s, n, i + 1, '_', 1, 2);
        }
        if (p >= 0) {
            FLUSH(i);
            if (buf_add(o, s + i + 1, p - i - 1) < 0)
                return -1;
            i = last = p + 1;
            continue;
        }
        i++;
    }
    FLUSH(n);
    return 0;
}

static int block_id_char(Py_UCS4 c)
{
    return ASCII_ALPHA(c) || (c >= '0' && c <= '9') || c == '-';
}

/* _BLOCK_ID.sub(""): \s\^[A-Za-z0-9-]+$ (no '\n' here: $ is the end). Only a suffix can
 * match, and it starts at the last whitespace. */
static int sub_block_id(const Py_UCS4 *s, Py_ssize_t n, Buf *o)
{
    Py_ssize_t cut = n;
    Py_ssize_t i = n - 1;
    while (i >= 0 && !SPACE(s[i]))
        i--;
    if (i >= 0 && i + 2 < n && s[i + 1] == '^') {
        Py_ssize_t j = i + 2;
        while (j < n && block_id_char(s[j]))
            j++;
        if (j == n)
            cut = i;
    }
    return buf_add(o, s, cut);
}

/* _ESCAPE.sub(group 1): \\([!-/:-@\[-`{-~]) */
static int sub_escape(const Py_UCS4 *s, Py_ssize_t n, Buf *o)
{
    Py_ssize_t i = 0, last = 0;
    while (i < n) {
        if (s[i] == '\\' && i + 1 < n) {
            Py_UCS4 c = s[i + 1];
            if ((c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') ||
                (c >= '{' && c <= '~')) {
                FLUSH(i);
                if (buf_put(o, c) < 0)
                    return -1;
                i = last = i + 2;
                continue;
            }
        }
        i++;
    }
    FLUSH(n);
    return 0;
}

typedef struct {
    Buf text;                /* the codes' texts, one after another */
    Py_ssize_t *at;          /* code i is text[at[i] : at[i + 1]] */
    Py_ssize_t count, cap;
} Codes;

static void codes_free(Codes *c)
{
    buf_free(&c->text);
    PyMem_Free(c->at);
    c->at = NULL;
    c->count = c->cap = 0;
}

static int codes_push(Codes *c, const Py_UCS4 *s, Py_ssize_t a, Py_ssize_t b)
{
    while (a < b && SPACE(s[a]))
        a++;
    while (b > a && SPACE(s[b - 1]))
        b--;
    if (c->count + 2 > c->cap) {
        Py_ssize_t size = c->cap ? 2 * c->cap : 16;
        Py_ssize_t *p = PyMem_Realloc(c->at, (size_t)size * sizeof(Py_ssize_t));
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        c->at = p;
        c->cap = size;
    }
    if (c->count == 0)
        c->at[0] = 0;
    if (buf_add(&c->text, s + a, b - a) < 0)
        return -1;
    c->count++;
    c->at[c->count] = c->text.n;
    return 0;
}

static int put_number(Buf *o, Py_ssize_t v)
{
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%zd", v);
    for (int k = 0; k < len; k++)
        if (buf_put(o, (Py_UCS4)digits[k]) < 0)
            return -1;
    return 0;
}

/* The code spans of s (code_spans, the caller's: blocks.code_spans) set aside as
 * "\0<n>\0", their stripped contents kept in `codes`. */
static int sub_codes(const Py_UCS4 *s, Py_ssize_t n, Buf *o, Codes *codes, PyObject *code_spans)
{
    PyObject *str = PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, s, n);
    if (str == NULL)
        return -1;
    PyObject *spans = PyObject_CallOneArg(code_spans, str);
    Py_DECREF(str);
    if (spans == NULL)
        return -1;
    PyObject *seq = PySequence_Fast(spans, "code_spans() must give a sequence");
    Py_DECREF(spans);
    if (seq == NULL)
        return -1;
    Py_ssize_t pos = 0, count = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t v[4];
        PyObject *item = PySequence_Fast_GET_ITEM(seq, k);
        if (!PyArg_ParseTuple(item, "nnnn", &v[0], &v[1], &v[2], &v[3]))
            goto fail;
        if (!(pos <= v[0] && v[0] <= v[1] && v[1] <= v[2] && v[2] <= v[3] && v[3] <= n)) {
            PyErr_SetString(PyExc_ValueError, "code_spans() gave spans out of order");
            goto fail;
        }
        if (codes_push(codes, s, v[1], v[2]) < 0 || buf_add(o, s + pos, v[0] - pos) < 0 ||
            buf_put(o, 0) < 0 || put_number(o, codes->count - 1) < 0 || buf_put(o, 0) < 0)
            goto fail;
        pos = v[3];
    }
    Py_DECREF(seq);
    return buf_add(o, s + pos, n - pos);
fail:
    Py_DECREF(seq);
    return -1;
}

/* _CODE_MARK.sub: \x00(\d+)\x00 -> codes[int(group 1)]. 1: done; 0: a mark the C does not
 * read (a non-ASCII digit, a number past the codes): the caller falls back; -1: error. */
static int sub_code_marks(const Py_UCS4 *s, Py_ssize_t n, Buf *o, Codes *codes)
{
    Py_ssize_t i = 0, last = 0;
    while (i < n) {
        if (s[i] == 0) {
            Py_ssize_t j = i + 1;
            while (j < n && DECIMAL(s[j]))
                j++;
            if (j > i + 1 && j < n && s[j] == 0) {
                Py_ssize_t v = 0;
                for (Py_ssize_t k = i + 1; k < j; k++) {
                    if (s[k] < '0' || s[k] > '9' || v > codes->count)
                        return 0;
                    v = v * 10 + (Py_ssize_t)(s[k] - '0');
                }
                if (v >= codes->count)
                    return 0;
                FLUSH(i);
                if (buf_add(o, codes->text.v + codes->at[v], codes->at[v + 1] - codes->at[v]) < 0)
                    return -1;
                i = last = j + 1;
                continue;
            }
        }
        i++;
    }
    FLUSH(n);
    return 1;
}

/* plain_inline of s[0:n] (holding no '\n' and no '\0'), its words appended to `out`
 * (_SPACES.sub(" ", text).strip()). 1: done; 0: not taken (the caller falls back); -1. */
static int plain_inline_into(const Py_UCS4 *s, Py_ssize_t n, Buf *out, PyObject *code_spans)
{
    Buf a = {0}, b = {0};
    Codes codes = {0};
    int rc = -1;
    /* the working text: starts as a copy of s, each pass writes the next into `b` */
    if (buf_add(&a, s, n) < 0)
        goto done;
#define PASS(call)                                                                           \
    do {                                                                                     \
        b.n = 0;                                                                             \
        if ((call) < 0)                                                                      \
            goto done;                                                                       \
        Buf t = a;                                                                           \
        a = b;                                                                               \
        b = t;                                                                               \
    } while (0)
    int bang = 0;
    for (Py_ssize_t i = 0; i + 1 < a.n; i++)
        if (a.v[i] == '!' && a.v[i + 1] == '[') {
            bang = 1;
            break;
        }
    if (bang)
        PASS(sub_embed(a.v, a.n, &b));
    if (has(a.v, a.n, '`'))
        PASS(sub_codes(a.v, a.n, &b, &codes, code_spans));
    if (has(a.v, a.n, '[')) {
        PASS(sub_wiki(a.v, a.n, &b));
        PASS(sub_md_link(a.v, a.n, &b));
        PASS(sub_footnote(a.v, a.n, &b));
    }
    if (has(a.v, a.n, '<')) {
        PASS(sub_autolink(a.v, a.n, &b));
        PASS(sub_html(a.v, a.n, &b));
    }
    if (has(a.v, a.n, '*') || has(a.v, a.n, '_')) {
        for (int round = 0; round < 2; round++) {
            PASS(sub_double(a.v, a.n, &b, '*', '_'));
            PASS(sub_emphasis(a.v, a.n, &b));
        }
    }
    if (has(a.v, a.n, '~') || has(a.v, a.n, '='))
        PASS(sub_double(a.v, a.n, &b, '~', '='));
    if (has(a.v, a.n, '^'))
        PASS(sub_block_id(a.v, a.n, &b));
    if (has(a.v, a.n, '\\'))
        PASS(sub_escape(a.v, a.n, &b));
    if (codes.count > 0) {
        b.n = 0;
        int got = sub_code_marks(a.v, a.n, &b, &codes);
        if (got <= 0) {
            rc = got;
            goto done;
        }
        Buf t = a;
        a = b;
        b = t;
    }
#undef PASS
    /* _SPACES.sub(" ", text).strip() */
    {
        int space = 0, any = 0;
        for (Py_ssize_t i = 0; i < a.n; i++) {
            if (SPACE(a.v[i])) {
                space = 1;
                continue;
            }
            if (space && any && buf_put(out, ' ') < 0)
                goto done;
            if (buf_put(out, a.v[i]) < 0)
                goto done;
            space = 0;
            any = 1;
        }
    }
    rc = 1;
done:
    buf_free(&a);
    buf_free(&b);
    codes_free(&codes);
    return rc;
}

/* --- _lead_line ----------------------------------------------------------------------- */

/* _ATX_ANY.match: ^ {0,3}#{1,6}(?:[ \t]|$) */
static int atx_any(const Py_UCS4 *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n && i < 3 && s[i] == ' ')
        i++;
    Py_ssize_t j = i;
    while (j < n && s[j] == '#')
        j++;
    if (j == i || j - i > 6)
        return 0;
    return j == n || s[j] == ' ' || s[j] == '\t';
}

/* _RULE.match: ^(?:[-*_=][ \t]*){3,}$ */
static int rule(const Py_UCS4 *s, Py_ssize_t n)
{
    Py_ssize_t marks = 0;
    if (n == 0 || s[0] == ' ' || s[0] == '\t')
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = s[i];
        if (c == '-' || c == '*' || c == '_' || c == '=')
            marks++;
        else if (c != ' ' && c != '\t')
            return 0;
    }
    return marks >= 3;
}

/* A cell of _TABLE_DELIMITER: [ \t]*:?-+:?[ \t]* spanning s[a:b] */
static int table_cell(const Py_UCS4 *s, Py_ssize_t a, Py_ssize_t b)
{
    while (a < b && (s[a] == ' ' || s[a] == '\t'))
        a++;
    if (a < b && s[a] == ':')
        a++;
    Py_ssize_t dashes = a;
    while (a < b && s[a] == '-')
        a++;
    if (a == dashes)
        return 0;
    if (a < b && s[a] == ':')
        a++;
    while (a < b && (s[a] == ' ' || s[a] == '\t'))
        a++;
    return a == b;
}

/* _TABLE_DELIMITER.match: ^\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?$ : cells
 * between '|'s (a cell holds none), one optional '|' at either end. */
static int table_delimiter(const Py_UCS4 *s, Py_ssize_t n)
{
    Py_ssize_t a = (n > 0 && s[0] == '|') ? 1 : 0; /* the leading \|? always takes it */
    int cells = 0;
    while (1) {
        Py_ssize_t b = a;
        while (b < n && s[b] != '|')
            b++;
        if (b == n) /* the last piece: a cell, or nothing after a trailing '|' */
            return table_cell(s, a, b) || (cells > 0 && a == b);
        if (!table_cell(s, a, b))
            return 0;
        cells++;
        a = b + 1;
    }
}

/* _SKIPPED_LINE.match: ^(?:\[\^[^\]]+\]:|\[[^\]]+\]:\s|\$\$|<!--|-->) */
static int skipped_line(const Py_UCS4 *s, Py_ssize_t n)
{
    if (n >= 2 && s[0] == '[') {
        Py_ssize_t j = 1;
        while (j < n && s[j] != ']')
            j++;
        if (j < n && j + 1 < n && s[j + 1] == ':') {
            if (s[1] == '^' && j > 2)
                return 1;
            if (j > 1 && j + 2 < n && SPACE(s[j + 2]))
                return 1;
        }
    }
    return starts(s, 0, n, "$$") || starts(s, 0, n, "<!--") || starts(s, 0, n, "-->");
}

/* _lead_line of s[0:n] (the line, already cut to its first chars), its text appended to
 * out (nothing when it gives no text). 1 / 0 (not taken) / -1 as plain_inline_into. */
static int lead_line_into(const Py_UCS4 *s, Py_ssize_t n, Buf *out, PyObject *code_spans)
{
    Py_ssize_t a = 0, b = n;
    while (a < b && SPACE(s[a]))
        a++;
    while (b > a && SPACE(s[b - 1]))
        b--;
    s += a;
    n = b - a;
    if (n == 0 || atx_any(s, n) || rule(s, n))
        return 1;
    if (s[0] == '|' || table_delimiter(s, n))
        return 1;
    if (s[0] == '>') { /* _QUOTE: ^(?:>[ \t]?)+ */
        Py_ssize_t i = 0;
        while (i < n && s[i] == '>') {
            i++;
            if (i < n && (s[i] == ' ' || s[i] == '\t'))
                i++;
        }
        s += i;
        n -= i;
    }
    if (n >= 2 && s[0] == '[' && s[1] == '!') { /* _CALLOUT: ^\[![^\]]*\][-+]?\s* */
        Py_ssize_t j = 2;
        while (j < n && s[j] != ']')
            j++;
        if (j < n) {
            j++;
            if (j < n && (s[j] == '-' || s[j] == '+'))
                j++;
            while (j < n && SPACE(s[j]))
                j++;
            s += j;
            n -= j;
        }
    }
    if (n > 0 && (s[0] == '-' || s[0] == '*' || s[0] == '+' || DECIMAL(s[0]))) {
        /* _BULLET: ^(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[.\][ \t]+)? */
        Py_ssize_t i = -1;
        if (s[0] == '-' || s[0] == '*' || s[0] == '+') {
            i = 1;
        } else {
            Py_ssize_t j = 0;
            while (j < n && DECIMAL(s[j]))
                j++;
            if (j <= 9 && j < n && (s[j] == '.' || s[j] == ')'))
                i = j + 1;
        }
        if (i > 0 && i < n && (s[i] == ' ' || s[i] == '\t')) {
            while (i < n && (s[i] == ' ' || s[i] == '\t'))
                i++;
            if (i + 3 < n && s[i] == '[' && s[i + 2] == ']' && (s[i + 3] == ' ' || s[i + 3] == '\t')) {
                i += 3;
                while (i < n && (s[i] == ' ' || s[i] == '\t'))
                    i++;
            }
            s += i;
            n -= i;
        }
    }
    if (n == 0 || skipped_line(s, n) || atx_any(s, n))
        return 1;
    return plain_inline_into(s, n, out, code_spans);
}

/* --- the module's functions ------------------------------------------------------- */

static int copy_range(PyObject *str, Py_ssize_t a, Py_ssize_t b, Buf *o)
{
    o->n = 0;
    if (buf_reserve(o, b - a) < 0)
        return -1;
    int kind = PyUnicode_KIND(str);
    const void *data = PyUnicode_DATA(str);
    for (Py_ssize_t i = a; i < b; i++)
        o->v[i - a] = PyUnicode_READ(kind, data, i);
    o->n = b - a;
    return 0;
}

static PyObject *to_str(const Buf *b)
{
    return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, b->v, b->n);
}

PyDoc_STRVAR(plain_inline_doc,
             "plain_inline(text, code_spans) -> note.plain_inline(text), or None for a text\n"
             "holding '\\n' or '\\0' (the Python reads those)");

static PyObject *ml_plain_inline(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "plain_inline(text: str, code_spans)");
        return NULL;
    }
    PyObject *text = args[0];
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (PyUnicode_FindChar(text, '\n', 0, n, 1) >= 0 || PyUnicode_FindChar(text, 0, 0, n, 1) >= 0)
        Py_RETURN_NONE;
    Buf in = {0}, out = {0};
    PyObject *result = NULL;
    if (copy_range(text, 0, n, &in) < 0)
        goto done;
    int rc = plain_inline_into(in.v, in.n, &out, args[1]);
    if (rc < 0)
        goto done;
    result = rc ? to_str(&out) : Py_NewRef(Py_None);
done:
    buf_free(&in);
    buf_free(&out);
    return result;
}

PyDoc_STRVAR(lead_text_doc,
             "lead_text(body, fenced, limit, line_chars, code_spans) -> (the text extract_lead\n"
             "cuts (its parts joined by a space), the offset of the end of the last line it\n"
             "read), or None when a line holds '\\0'");

static PyObject *ml_lead_text(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t limit, line_chars;
    if (nargs != 5 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "lead_text(body: str, fenced, limit: int, line_chars: int, code_spans)");
        return NULL;
    }
    limit = PyLong_AsSsize_t(args[2]);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    line_chars = PyLong_AsSsize_t(args[3]);
    if (line_chars == -1 && PyErr_Occurred())
        return NULL;
    if (line_chars < 0)
        line_chars = 0;
    PyObject *body = args[0];
    PyObject *fenced = PySequence_Fast(args[1], "fenced must be a sequence");
    if (fenced == NULL)
        return NULL;
    Py_ssize_t nspans = PySequence_Fast_GET_SIZE(fenced), at = 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(body), start = 0, length = 0, stop = n;
    Buf line = {0}, out = {0};
    PyObject *result = NULL;
    int kind = PyUnicode_KIND(body);
    const void *data = PyUnicode_DATA(body);
    while (start <= n) {
        Py_ssize_t end = n > start ? PyUnicode_FindChar(body, '\n', start, n, 1) : -1;
        if (end == -2)
            goto done;
        if (end < 0)
            end = n;
        Py_ssize_t line_start = start;
        start = end + 1;
        /* fenced_lines' answer for this line, as the Python loop finds it */
        int skip = 0;
        while (at < nspans) {
            Py_ssize_t s0, s1;
            if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fenced, at), "nn", &s0, &s1))
                goto done;
            if (line_start >= s1) {
                at++;
                continue;
            }
            skip = s0 <= line_start;
            break;
        }
        if (skip)
            continue;
        Py_ssize_t cut = end - line_start > line_chars ? line_start + line_chars : end;
        /* the cheap tests first: a blank line or one the lead skips is never copied */
        Py_ssize_t a = line_start;
        while (a < cut && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, a)))
            a++;
        if (a == cut)
            continue;
        if (PyUnicode_FindChar(body, 0, line_start, cut, 1) >= 0) {
            result = Py_NewRef(Py_None); /* a '\0': the Python reads this body */
            goto done;
        }
        if (copy_range(body, line_start, cut, &line) < 0)
            goto done;
        Py_ssize_t before = out.n;
        if (out.n > 0 && buf_put(&out, ' ') < 0)
            goto done;
        int rc = lead_line_into(line.v, line.n, &out, args[4]);
        if (rc < 0)
            goto done;
        if (rc == 0) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        if (out.n == before + (before > 0)) { /* the line gave no text */
            out.n = before;
            continue;
        }
        length += out.n - before - (before > 0) + 1;
        if (length > limit * 2) {
            stop = end;
            break;
        }
    }
    PyObject *text = to_str(&out);
    if (text != NULL)
        result = Py_BuildValue("(Nn)", text, stop);
done:
    Py_DECREF(fenced);
    buf_free(&line);
    buf_free(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"plain_inline", (PyCFunction)(void (*)(void))ml_plain_inline, METH_FASTCALL,
     plain_inline_doc},
    {"lead_text", (PyCFunction)(void (*)(void))ml_lead_text, METH_FASTCALL, lead_text_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "vault_brain.native._mdlead",
    "A note's lead in C (vault/note.py's extract_lead and plain_inline are the reference).",
    -1,
    methods,
};

PyMODINIT_FUNC PyInit__mdlead(void)
{
    return PyModule_Create(&module);
}
