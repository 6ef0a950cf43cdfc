/* The scanners of _mdscan.c for one PyUnicode kind: included three times, with CH the
 * code unit type (Py_UCS1, Py_UCS2, Py_UCS4) and K(name) the name's suffix. Every offset
 * is an index into the str's code points, as Python's own slicing counts them. */

/* The first '\n' at or after i, else n. */
static Py_ssize_t K(next_newline)(const CH *s, Py_ssize_t i, Py_ssize_t n)
{
#if KIND_BYTES == 1
    const void *p = memchr(s + i, '\n', (size_t)(n - i));
    return p == NULL ? n : (const CH *)p - s;
#else
    while (i < n && s[i] != '\n')
        i++;
    return i;
#endif
}

/* The start of the first run of ≥ 3 '`' or '~' after the fence's lead-in ([ \t]*, then any
 * '>' each with one optional [ \t], then [ \t]*: the possessive regexes of blocks.py), or
 * -1 when the line holds none there. */
static Py_ssize_t K(fence_at)(const CH *s, Py_ssize_t i, Py_ssize_t le, Py_ssize_t *run)
{
    while (i < le && (s[i] == ' ' || s[i] == '\t'))
        i++;
    while (i < le && s[i] == '>') {
        i++;
        if (i < le && (s[i] == ' ' || s[i] == '\t'))
            i++;
    }
    while (i < le && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i >= le || (s[i] != '`' && s[i] != '~'))
        return -1;
    Py_ssize_t j = i;
    while (j < le && s[j] == s[i])
        j++;
    if (j - i < 3)
        return -1;
    *run = j - i;
    return i;
}

/* scan(): (fenced, headings) as blocks.scan finds them, headings as (start, level, text). */
static int K(scan)(PyObject *body, const CH *s, Py_ssize_t n, PyObject *fenced,
                   PyObject *headings)
{
    Py_UCS4 fence_char = 0;
    Py_ssize_t fence_len = 0, fence_start = 0, ls = 0;
    while (ls <= n) {
        Py_ssize_t le = K(next_newline)(s, ls, n), run = 0;
        Py_ssize_t next = le + 1;
        if (fence_char) {
            Py_ssize_t at = K(fence_at)(s, ls, le, &run);
            if (at >= 0 && s[at] == fence_char && run >= fence_len) {
                Py_ssize_t j = at + run;
                while (j < le && (s[j] == ' ' || s[j] == '\t'))
                    j++;
                if (j == le) {
                    fence_char = 0;
                    if (append_pair(fenced, fence_start, le < n ? le + 1 : n) < 0)
                        return -1;
                }
            }
            ls = next;
            continue;
        }
        Py_ssize_t at = K(fence_at)(s, ls, le, &run);
        if (at >= 0) {
            int info_tick = 0;
            if (s[at] == '`')
                for (Py_ssize_t j = at + run; j < le; j++)
                    if (s[j] == '`') {
                        info_tick = 1;
                        break;
                    }
            if (!info_tick) {
                fence_char = s[at];
                fence_len = run;
                fence_start = ls;
                ls = next;
                continue;
            }
        }
        /* ATX: ' {0,3}(#{1,6})(?=[ \t]|$)' */
        Py_ssize_t i = ls;
        while (i < le && i - ls < 3 && s[i] == ' ')
            i++;
        if (i < le && s[i] == '#') {
            Py_ssize_t j = i;
            while (j < le && s[j] == '#')
                j++;
            if (j - i <= 6 && (j == le || s[j] == ' ' || s[j] == '\t')) {
                /* heading_text(line[j:le]): strip; the closing '#'s go when they follow
                 * a space or are all there is; then strip again. */
                Py_ssize_t a = j, b = le;
                while (a < b && Py_UNICODE_ISSPACE(s[a]))
                    a++;
                while (b > a && Py_UNICODE_ISSPACE(s[b - 1]))
                    b--;
                Py_ssize_t h = b;
                while (h > a && s[h - 1] == '#')
                    h--;
                if (h != b && (h == a || s[h - 1] == ' ' || s[h - 1] == '\t')) {
                    b = h;
                    while (b > a && Py_UNICODE_ISSPACE(s[b - 1]))
                        b--;
                }
                PyObject *text = PyUnicode_Substring(body, a, b);
                if (text == NULL)
                    return -1;
                PyObject *item = Py_BuildValue("(nnN)", ls, j - i, text);
                if (item == NULL)
                    return -1;
                int rc = PyList_Append(headings, item);
                Py_DECREF(item);
                if (rc < 0)
                    return -1;
            }
        }
        ls = next;
    }
    if (fence_char && append_pair(fenced, fence_start, n) < 0)
        return -1;
    return 0;
}

/* True when s[index] follows an odd number of backslashes (blocks.escaped). */
static int K(escaped)(const CH *s, Py_ssize_t index)
{
    Py_ssize_t count = 0, i = index - 1;
    while (i >= 0 && s[i] == '\\') {
        count++;
        i--;
    }
    return count % 2 == 1;
}

/* code_spans(): blocks.code_spans' loop, step for step, on arrays instead of lists. The
 * spans go to `out` as 4 offsets each; returns their count, or -1 with an exception set. */
static Py_ssize_t K(code_spans)(const CH *s, Py_ssize_t n, Spans *out)
{
    Runs r;
    if (runs_init(&r) < 0)
        return -1;
    Py_ssize_t result = -1;
    /* the runs of backticks and the blank lines ("\n" then [ \t]* then "\n") */
    for (Py_ssize_t i = 0; i < n;) {
        CH c = s[i];
        if (c == '`') {
            Py_ssize_t j = i + 1;
            while (j < n && s[j] == '`')
                j++;
            if (runs_push(&r, i, j) < 0)
                goto done;
            i = j;
        } else if (c == '\n') {
            Py_ssize_t j = i + 1;
            while (j < n && (s[j] == ' ' || s[j] == '\t'))
                j++;
            if (j < n && s[j] == '\n' && blanks_push(&r, i) < 0)
                goto done;
            i = j > i + 1 ? j : i + 1;
        } else {
            i++;
        }
    }
    if (runs_link(&r) < 0)
        goto done;
    Py_ssize_t count = r.count, pos = 0, i = 0, b = 0;
    while (i < count) {
        Py_ssize_t start = r.start[i], end = r.end[i];
        if (start < pos) {
            start = pos;
            if (start >= end) {
                i++;
                continue;
            }
        }
        if (start && s[start - 1] == '\\' && K(escaped)(s, start)) {
            pos = start + 1; /* "\`" is a literal backtick; the rest of the run may open */
            continue;
        }
        Py_ssize_t k;
        if (start == r.start[i])
            k = r.after[i];
        else if ((k = runs_next_of_width(&r, end - start, i)) < -1)
            goto done;
        if (k < 0)
            k = count;
        if (k == count) {
            pos = end; /* no matching run: these backticks are literal */
            i++;
            continue;
        }
        Py_ssize_t close_start = r.start[k], close_end = r.end[k];
        while (b < r.nblanks && r.blanks[b] < end)
            b++;
        if (b < r.nblanks && close_end > r.blanks[b]) {
            pos = end; /* a blank line comes first: these backticks are literal */
            i++;
            continue;
        }
        if (spans_push(out, start, end, close_start, close_end) < 0)
            goto done;
        pos = close_end;
        i = k + 1;
    }
    result = out->count;
done:
    runs_free(&r);
    return result;
}

/* Every code point but '\n' in [a, b) becomes a space. */
static void K(blank)(CH *s, Py_ssize_t a, Py_ssize_t b)
{
    for (Py_ssize_t i = a; i < b; i++)
        if (s[i] != '\n')
            s[i] = ' ';
}

static int K(has_backtick)(const CH *s, Py_ssize_t n)
{
#if KIND_BYTES == 1
    return memchr(s, '`', (size_t)n) != NULL;
#else
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] == '`')
            return 1;
    return 0;
#endif
}

/* The Markdown links of links._MD_LINK (which see) in masked text, as
 * (start, embed, text, target) where start counts a '!' before the '[' (then embed is
 * true), without the ones links._markdown_links would drop for sure: escaped, and, when the
 * target has no '%' (unquote changes nothing), a target with a URL scheme or starting with
 * '#' or '/'. The regex's backtracking never finds another match than this walk: each part
 * after '[' ends where the next can only fail on what it gave back. */
static int K(md_links)(PyObject *text, const CH *s, Py_ssize_t n, PyObject *out)
{
    Py_ssize_t p = 0;
    for (;;) {
        while (p < n && s[p] != '[')
            p++;
        if (p >= n)
            return 0;
        Py_ssize_t i = p + 1;
        while (i < n && s[i] != '[' && s[i] != ']' && s[i] != '\n')
            i++;
        if (i + 1 >= n || s[i] != ']' || s[i + 1] != '(') {
            p++;
            continue;
        }
        Py_ssize_t text_end = i, a, b, k;
        i += 2;
        while (i < n && Py_UNICODE_ISSPACE(s[i]))
            i++;
        if (i < n && s[i] == '<') { /* <wrapped> */
            Py_ssize_t j = i + 1;
            while (j < n && s[j] != '<' && s[j] != '>' && s[j] != '\n')
                j++;
            if (j == i + 1 || j >= n || s[j] != '>') {
                p++;
                continue;
            }
            a = i + 1;
            b = j;
            k = j + 1;
        } else { /* bare */
            Py_ssize_t j = i;
            while (j < n && !Py_UNICODE_ISSPACE(s[j]) && s[j] != '(' && s[j] != ')' &&
                   s[j] != '<' && s[j] != '>')
                j++;
            if (j == i) {
                p++;
                continue;
            }
            a = i;
            b = j;
            k = j;
        }
        if (k < n && Py_UNICODE_ISSPACE(s[k])) { /* an optional "title" */
            Py_ssize_t t = k;
            while (t < n && Py_UNICODE_ISSPACE(s[t]))
                t++;
            if (t < n && s[t] == '"') {
                Py_ssize_t u = t + 1;
                while (u < n && s[u] != '"' && s[u] != '\n')
                    u++;
                if (u < n && s[u] == '"')
                    k = u + 1;
            }
        }
        while (k < n && Py_UNICODE_ISSPACE(s[k]))
            k++;
        if (k >= n || s[k] != ')') {
            p++;
            continue;
        }
        Py_ssize_t open = p, start = p > 0 && s[p - 1] == '!' ? p - 1 : p;
        p = k + 1; /* finditer goes on after the match */
        if (K(escaped)(s, start))
            continue;
        int percent = 0;
        for (Py_ssize_t j = a; j < b; j++)
            if (s[j] == '%') {
                percent = 1;
                break;
            }
        if (!percent) {
            if (s[a] == '#' || s[a] == '/')
                continue;
            if (s[a] < 128 && Py_ISALPHA(s[a])) { /* ^[A-Za-z][A-Za-z0-9+.-]*: */
                Py_ssize_t j = a + 1;
                while (j < b && s[j] < 128 &&
                       (Py_ISALNUM(s[j]) || s[j] == '+' || s[j] == '.' || s[j] == '-'))
                    j++;
                if (j < b && s[j] == ':')
                    continue;
            }
        }
        PyObject *label = PyUnicode_Substring(text, open + 1, text_end);
        PyObject *target = label ? PyUnicode_Substring(text, a, b) : NULL;
        PyObject *item = target ? Py_BuildValue("(nOOO)", start,
                                                start < open ? Py_True : Py_False, label,
                                                target)
                                : NULL;
        Py_XDECREF(label);
        Py_XDECREF(target);
        if (item == NULL)
            return -1;
        int rc = PyList_Append(out, item);
        Py_DECREF(item);
        if (rc < 0)
            return -1;
    }
}
