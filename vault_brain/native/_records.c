/* vault_brain.native._records: many instances of a frozen dataclass, made as its __init__
 * makes them.
 *
 * A frozen dataclass's generated __init__ sets each field with object.__setattr__ (its own
 * __setattr__ refuses): a Python frame and a call per field, ~1 us an instance. A parse
 * pass makes 64k Headings and 55k Links on cpp-docs (0.17 CPU-s for the Headings alone).
 * Here each instance is object.__new__(cls) and then object.__setattr__ of each field in
 * the fields' order (PyObject_GenericSetAttr, what object.__setattr__ calls): the same
 * object, attribute for attribute and in the same order. The caller (vault/records use in
 * blocks.py and links.py) checks that the class is such a dataclass: no __new__, no
 * __post_init__, every field set by __init__ in `names`' order.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyDoc_STRVAR(instances_doc,
             "instances(cls, names, rows) -> [cls(*row) for row in rows], for a frozen\n"
             "dataclass whose __init__ only sets `names` (a tuple of str) in order");

static PyObject *rc_instances(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyType_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "instances(cls: type, names: tuple, rows)");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    PyObject *names = args[1];
    Py_ssize_t nnames = PyTuple_GET_SIZE(names);
    for (Py_ssize_t k = 0; k < nnames; k++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(names, k))) {
            PyErr_SetString(PyExc_TypeError, "instances(): names must be str");
            return NULL;
        }
    PyObject *rows = PySequence_Fast(args[2], "instances(): rows must be a sequence");
    if (rows == NULL)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(rows);
    PyObject *out = PyList_New(count);
    PyObject *empty = PyTuple_New(0);
    if (out == NULL || empty == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = PySequence_Fast_GET_ITEM(rows, i);
        if (!PyTuple_Check(row) || PyTuple_GET_SIZE(row) != nnames) {
            PyErr_SetString(PyExc_TypeError, "instances(): each row must be a tuple of the fields");
            goto fail;
        }
        PyObject *obj = PyBaseObject_Type.tp_new(cls, empty, NULL);
        if (obj == NULL)
            goto fail;
        PyList_SET_ITEM(out, i, obj);
        for (Py_ssize_t k = 0; k < nnames; k++)
            if (PyObject_GenericSetAttr(obj, PyTuple_GET_ITEM(names, k), PyTuple_GET_ITEM(row, k)) <
                0)
                goto fail;
    }
    Py_DECREF(empty);
    Py_DECREF(rows);
    return out;
fail:
    Py_XDECREF(empty);
    Py_XDECREF(out);
    Py_DECREF(rows);
    return NULL;
}

static PyMethodDef methods[] = {
    {"instances", (PyCFunction)(void (*)(void))rc_instances, METH_FASTCALL, instances_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    "vault_brain.native._records",
    "Frozen dataclass instances as their __init__ makes them, without its Python frames.",
    -1,
    methods,
};

PyMODINIT_FUNC PyInit__records(void)
{
    return PyModule_Create(&module);
}
