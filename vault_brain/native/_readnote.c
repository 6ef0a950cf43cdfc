/* vault_brain.native._readnote: vault/reading.py's read of a note whose path holds no
 * symlink, in C.
 *
 * NoteReader.read resolves every note's path (os.path.realpath: an lstat and Python string
 * work per component, from "/"), checks it, then opens and reads it: ~30 us a note, 0.3
 * CPU-s of a cpp-docs pass. Here the path is walked from "/" with openat(O_NOFOLLOW) on
 * each component, so the file opened is the one the path names only when no component is
 * a symlink: then realpath would have given the path itself, and reading.py's checks come
 * down to its name ending in .md (the caller's _parts already refused '..', dot-folders and
 * empty parts) and being a regular file. Whatever else happens (a symlink, a missing
 * component, an error, a FIFO, not .md) answers None, and the Python does it all again: the
 * same bytes, or the same exception it always raised.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if defined(__unix__) || defined(__APPLE__)
#define HAVE_WALK 1
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__linux__) && defined(__has_include)
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#include <sys/syscall.h>
#ifdef SYS_openat2
#define HAVE_OPENAT2 1
static PyObject *slash;
static int openat2_missing; /* ENOSYS (an old kernel) or a sandbox's EPERM: walk instead */
#endif
#endif
#endif
#ifdef O_PATH /* Linux: a directory is walked through without needing its read permission */
#define DIR_FLAGS (O_PATH | O_DIRECTORY)
#else
#define DIR_FLAGS (O_RDONLY | O_DIRECTORY)
#endif
#endif

PyDoc_STRVAR(read_plain_doc,
             "read_plain(root, parts) -> the bytes of root/parts..., or None where any\n"
             "component is a symlink, the name does not end in .md (any case), the file is\n"
             "not regular, or anything fails (the caller's Python path decides then).\n"
             "root: an absolute real path (no symlink, '.' or '..'); parts: the names below it;\n"
             "walk: open component by component even where openat2 could (for the tests).");

#ifdef HAVE_WALK
/* Open `name` under dirfd without following a symlink; -1 on any failure. */
static int open_step(int dirfd, const char *name, int flags)
{
    int fd;
    do {
        fd = openat(dirfd, name, flags | O_NOFOLLOW | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    return fd;
}

static int ends_md(const char *name)
{
    size_t len = strlen(name);
    if (len < 3)
        return 0;
    const char *e = name + len - 3;
    return e[0] == '.' && (e[1] == 'm' || e[1] == 'M') && (e[2] == 'd' || e[2] == 'D');
}

/* Walk root's components then parts[:-1] as directories; the directory's fd, or -1. */
static int walk_dirs(const char *root, PyObject *parts, Py_ssize_t count)
{
    if (root[0] != '/')
        return -1;
    int fd = open("/", DIR_FLAGS | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char name[4096];
    const char *p = root;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *q = strchr(p, '/');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len >= sizeof name) {
            close(fd);
            return -1;
        }
        memcpy(name, p, len);
        name[len] = 0;
        p += len;
        if ((len == 1 && name[0] == '.') || (len == 2 && name[0] == '.' && name[1] == '.')) {
            close(fd);
            return -1;
        }
        int next = open_step(fd, name, DIR_FLAGS);
        close(fd);
        if (next < 0)
            return -1;
        fd = next;
    }
    for (Py_ssize_t i = 0; i + 1 < count; i++) {
        const char *part = PyBytes_AS_STRING(PyList_GET_ITEM(parts, i));
        int next = open_step(fd, part, DIR_FLAGS);
        close(fd);
        if (next < 0)
            return -1;
        fd = next;
    }
    return fd;
}

/* All of fd's bytes, as reading.py reads them (until a read gives nothing). */
static PyObject *read_all(int fd, Py_ssize_t size)
{
    Py_ssize_t cap = size + 1 > 65536 ? size + 1 : 65536, len = 0;
    PyObject *out = PyBytes_FromStringAndSize(NULL, cap);
    if (out == NULL)
        return NULL;
    for (;;) {
        if (len == cap) {
            cap *= 2;
            if (_PyBytes_Resize(&out, cap) < 0)
                return NULL;
        }
        ssize_t got;
        Py_BEGIN_ALLOW_THREADS
        got = read(fd, PyBytes_AS_STRING(out) + len, (size_t)(cap - len));
        Py_END_ALLOW_THREADS
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            Py_DECREF(out);
            return Py_NewRef(Py_None);
        }
        if (got == 0)
            break;
        len += got;
    }
    if (_PyBytes_Resize(&out, len) < 0)
        return NULL;
    return out;
}
#endif

static PyObject *rn_read_plain(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 2 || nargs > 3 || !PyUnicode_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "read_plain(root: str, parts: list[str], walk=False)");
        return NULL;
    }
    int walk = nargs == 3 ? PyObject_IsTrue(args[2]) : 0;
    if (walk < 0)
        return NULL;
#ifndef HAVE_WALK
    Py_RETURN_NONE;
#else
    PyObject *root = PyUnicode_EncodeFSDefault(args[0]);
    if (root == NULL)
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(args[1]);
    PyObject *parts = PyList_New(count);
    PyObject *result = NULL;
    int dirfd = -1, fd = -1;
    if (parts == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *part = PyList_GET_ITEM(args[1], i);
        if (!PyUnicode_Check(part)) {
            PyErr_SetString(PyExc_TypeError, "read_plain(): parts must be str");
            goto done;
        }
        PyObject *encoded = PyUnicode_EncodeFSDefault(part);
        if (encoded == NULL)
            goto done;
        PyList_SET_ITEM(parts, i, encoded);
        const char *name = PyBytes_AS_STRING(encoded);
        if ((Py_ssize_t)strlen(name) != PyBytes_GET_SIZE(encoded) || name[0] == 0 ||
            name[0] == '.' || strchr(name, '/') != NULL) {
            result = Py_NewRef(Py_None); /* not a plain name: reading.py refuses or decides */
            goto done;
        }
    }
    if (count == 0 || !ends_md(PyBytes_AS_STRING(PyList_GET_ITEM(parts, count - 1))) ||
        (Py_ssize_t)strlen(PyBytes_AS_STRING(root)) != PyBytes_GET_SIZE(root)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
#ifdef HAVE_OPENAT2
    /* Linux >= 5.6 resolves the whole path in one call, refusing any symlink on the way */
    if (!openat2_missing && !walk) {
        PyObject *path = PyBytes_FromStringAndSize(PyBytes_AS_STRING(root), PyBytes_GET_SIZE(root));
        for (Py_ssize_t i = 0; path != NULL && i < count; i++) {
            PyBytes_Concat(&path, slash);
            if (path != NULL)
                PyBytes_Concat(&path, PyList_GET_ITEM(parts, i));
        }
        if (path == NULL)
            goto done;
        struct open_how how;
        memset(&how, 0, sizeof how);
        how.flags = O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC;
        how.resolve = RESOLVE_NO_SYMLINKS;
        do {
            fd = (int)syscall(SYS_openat2, AT_FDCWD, PyBytes_AS_STRING(path), &how, sizeof how);
        } while (fd < 0 && errno == EINTR);
        Py_DECREF(path);
        if (fd < 0 && (errno == ENOSYS || errno == EPERM)) {
            openat2_missing = 1;
        } else {
            struct stat info;
            if (fd < 0 || fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
                result = Py_NewRef(Py_None);
                goto done;
            }
            result = read_all(fd, (Py_ssize_t)info.st_size);
            goto done;
        }
    }
#endif
    dirfd = walk_dirs(PyBytes_AS_STRING(root), parts, count);
    if (dirfd < 0) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    fd = open_step(dirfd, PyBytes_AS_STRING(PyList_GET_ITEM(parts, count - 1)),
                   O_RDONLY | O_NONBLOCK);
    struct stat info;
    if (fd < 0 || fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = read_all(fd, (Py_ssize_t)info.st_size);
done:
    if (fd >= 0)
        close(fd);
    if (dirfd >= 0)
        close(dirfd);
    Py_XDECREF(parts);
    Py_DECREF(root);
    return result;
#endif
}

static PyMethodDef methods[] = {
    {"read_plain", (PyCFunction)(void (*)(void))rn_read_plain, METH_FASTCALL, read_plain_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "vault_brain.native._readnote",
    "A note's read without realpath where its path holds no symlink (vault/reading.py).",
    -1,
    methods,
};

PyMODINIT_FUNC PyInit__readnote(void)
{
#ifdef HAVE_OPENAT2
    slash = PyBytes_FromStringAndSize("/", 1);
    if (slash == NULL)
        return NULL;
#endif
    return PyModule_Create(&module);
}
