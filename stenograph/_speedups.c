/* The entry path in C: the copy, the JSON check and the block scan a message goes through
 * when it becomes an entry. Each function does exactly what its Python twin in
 * stenograph/engine/entries.py or store.py does for plain dicts, lists and atoms, and hands
 * anything else back (to the Python twin, or as "unsure"), so the two give the same results;
 * tests/test_speedups.py holds them to that. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>

#define MAX_JSON_DEPTH 200 /* store.MAX_JSON_DEPTH */

static PyObject *str_type, *str_id, *str_tool_use_id, *str_text;
static PyObject *str_tool_use, *str_server_tool_use, *str_tool_result;
static PyObject *biggest_int, *smallest_int; /* +-10**4000: store._BIGGEST_INT */

static inline int
is_atom(PyObject *v)
{
    PyTypeObject *t = Py_TYPE(v);
    return t == &PyUnicode_Type || t == &PyLong_Type || t == &PyFloat_Type ||
           t == &PyBool_Type || v == Py_None;
}

static PyObject *copy_value(PyObject *value, PyObject *other);

static PyObject *
copy_item(PyObject *v, PyObject *other)
{
    if (is_atom(v))
        return Py_NewRef(v);
    Py_INCREF(v); /* other() may drop it from its container */
    PyObject *copied = copy_value(v, other);
    Py_DECREF(v);
    return copied;
}

/* entries._copy: exact dicts and lists copied, atoms shared, anything else other(value). */
static PyObject *
copy_value(PyObject *value, PyObject *other)
{
    PyObject *out = NULL;
    if (PyDict_CheckExact(value)) {
        if (Py_EnterRecursiveCall(" while copying a message"))
            return NULL;
        out = PyDict_New();
        PyObject *key, *item;
        Py_ssize_t pos = 0;
        while (out != NULL && PyDict_Next(value, &pos, &key, &item)) {
            Py_INCREF(key); /* a key's __hash__ or other() may change the dict */
            PyObject *copied = copy_item(item, other);
            if (copied == NULL || PyDict_SetItem(out, key, copied) < 0)
                Py_CLEAR(out);
            Py_XDECREF(copied);
            Py_DECREF(key);
        }
        Py_LeaveRecursiveCall();
        return out;
    }
    if (PyList_CheckExact(value)) {
        if (Py_EnterRecursiveCall(" while copying a message"))
            return NULL;
        out = PyList_New(0); /* appended to: no empty slot is ever seen, and a list other()
                                changes is read as Python's loop reads it */
        for (Py_ssize_t i = 0; out != NULL && i < PyList_GET_SIZE(value); i++) {
            PyObject *copied = copy_item(PyList_GET_ITEM(value, i), other);
            if (copied == NULL || PyList_Append(out, copied) < 0)
                Py_CLEAR(out);
            Py_XDECREF(copied);
        }
        Py_LeaveRecursiveCall();
        return out;
    }
    if (is_atom(value))
        return Py_NewRef(value);
    return PyObject_CallOneArg(other, value);
}

static PyObject *
copy_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "copy_json(value, other) takes 2 arguments");
        return NULL;
    }
    return copy_value(args[0], args[1]);
}

/* store._is_utf8 for a str that is not ASCII: no lone surrogate. */
static int
utf8_ok(PyObject *text)
{
    int kind = PyUnicode_KIND(text);
    if (kind == PyUnicode_1BYTE_KIND)
        return 1;
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c >= 0xD800 && c <= 0xDFFF)
            return 0;
    }
    return 1;
}

static inline int
text_ok(PyObject *text)
{
    return PyUnicode_IS_ASCII(text) || utf8_ok(text);
}

/* store._is_json: 1 when json.dumps (no NaN) and UTF-8 take value, 0 when unsure, -1 on
 * an error. */
static int
is_json_value(PyObject *value, int depth)
{
    PyTypeObject *t = Py_TYPE(value);
    if (t == &PyUnicode_Type)
        return text_ok(value);
    if (t == &PyLong_Type) {
        int overflow;
        (void)PyLong_AsLongLongAndOverflow(value, &overflow);
        if (!overflow)
            return 1;
        int below = PyObject_RichCompareBool(value, biggest_int, Py_LT);
        if (below <= 0)
            return below;
        return PyObject_RichCompareBool(smallest_int, value, Py_LT);
    }
    if (t == &PyFloat_Type)
        return isfinite(PyFloat_AS_DOUBLE(value));
    if (t == &PyBool_Type || value == Py_None)
        return 1;
    if (t == &PyDict_Type) {
        PyObject *key, *item;
        Py_ssize_t pos = 0;
        while (PyDict_Next(value, &pos, &key, &item))
            if (!PyUnicode_CheckExact(key) || !text_ok(key))
                return 0;
        if (depth > MAX_JSON_DEPTH)
            return 0;
        pos = 0;
        while (PyDict_Next(value, &pos, &key, &item)) {
            int ok = is_json_value(item, depth + 1);
            if (ok <= 0)
                return ok;
        }
        return 1;
    }
    if (t == &PyList_Type) {
        if (depth > MAX_JSON_DEPTH)
            return 0;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++) {
            PyObject *item = PyList_GET_ITEM(value, i);
            Py_INCREF(item);
            int ok = is_json_value(item, depth + 1);
            Py_DECREF(item);
            if (ok <= 0)
                return ok;
        }
        return 1;
    }
    return 0;
}

static PyObject *
is_json(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyLong_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "is_json(value, depth: int) takes 2 arguments");
        return NULL;
    }
    long depth = PyLong_AsLong(args[1]);
    if (depth == -1 && PyErr_Occurred())
        return NULL;
    if (depth < 0) {
        PyErr_SetString(PyExc_ValueError, "is_json: depth must be >= 0");
        return NULL;
    }
    if (depth > MAX_JSON_DEPTH + 1) /* deeper is refused alike: kept in an int */
        depth = MAX_JSON_DEPTH + 1;
    int ok = is_json_value(args[0], (int)depth);
    if (ok < 0)
        return NULL;
    return PyBool_FromLong(ok);
}

/* not text or text.isspace(), for an exact str */
static int
blank(PyObject *text)
{
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    for (Py_ssize_t i = 0; i < n; i++)
        if (!Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, i)))
            return 0;
    return 1;
}

static int
append_id(PyObject *ids, PyObject *block, PyObject *key, int *is_str)
{
    PyObject *id = PyDict_GetItemWithError(block, key);
    *is_str = id != NULL && PyUnicode_Check(id);
    if (id == NULL && PyErr_Occurred())
        return -1;
    return *is_str ? PyList_Append(ids, id) : 0;
}

/* One block of scan_blocks: 1 read, 0 unsure (not an exact dict with a str type), -1 an
 * error. Lookups may run a key's __eq__, which may change anything: each value is used
 * before the next lookup. */
static int
scan_block(PyObject *block, PyObject *uses, PyObject *results, int *plain)
{
    int is_str;
    if (!PyDict_CheckExact(block))
        return 0;
    PyObject *kind = PyDict_GetItemWithError(block, str_type);
    if (kind == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!PyUnicode_CheckExact(kind))
        return 0;
    int is_use = PyUnicode_Compare(kind, str_tool_use) == 0;
    if (is_use || PyUnicode_Compare(kind, str_server_tool_use) == 0) {
        if (append_id(uses, block, str_id, &is_str) < 0)
            return -1;
        if (!is_use || !is_str)
            *plain = 0; /* the guard pairs tool_use blocks only, by their ids */
    }
    else if (PyUnicode_Compare(kind, str_tool_result) == 0) {
        if (append_id(results, block, str_tool_use_id, &is_str) < 0)
            return -1;
        if (!is_str)
            *plain = 0;
    }
    else if (PyUnicode_Compare(kind, str_text) == 0) {
        PyObject *text = PyDict_GetItemWithError(block, str_text);
        if (text == NULL && PyErr_Occurred())
            return -1;
        if (text == NULL || !PyUnicode_CheckExact(text) || blank(text))
            *plain = 0;
    }
    else
        *plain = 0; /* thinking, images...: the guard reads the message itself */
    return 1;
}

/* entries._scan_blocks of copied blocks: (tool_use ids, tool_result ids, plain), or None
 * when a block is not an exact dict with a str type (the Python scan then says what is
 * wrong, or takes the odd block). */
static PyObject *
scan_blocks(PyObject *module, PyObject *blocks)
{
    if (!PyList_CheckExact(blocks)) {
        PyErr_SetString(PyExc_TypeError, "scan_blocks takes a list");
        return NULL;
    }
    PyObject *uses = PyList_New(0), *results = PyList_New(0), *out = NULL;
    int plain = PyList_GET_SIZE(blocks) > 0, read = 1;
    for (Py_ssize_t i = 0; uses && results && read == 1 && i < PyList_GET_SIZE(blocks); i++) {
        PyObject *block = Py_NewRef(PyList_GET_ITEM(blocks, i));
        read = scan_block(block, uses, results, &plain);
        Py_DECREF(block);
    }
    if (uses == NULL || results == NULL || read < 0)
        goto done;
    if (read == 0) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    PyObject *use_ids = PyList_AsTuple(uses), *result_ids = PyList_AsTuple(results);
    if (use_ids != NULL && result_ids != NULL)
        out = PyTuple_Pack(3, use_ids, result_ids, plain ? Py_True : Py_False);
    Py_XDECREF(use_ids);
    Py_XDECREF(result_ids);
done:
    Py_XDECREF(uses);
    Py_XDECREF(results);
    return out;
}

static PyMethodDef methods[] = {
    {"copy_json", (PyCFunction)(void (*)(void))copy_json, METH_FASTCALL,
     "copy_json(value, other): entries._copy (other(v) for what is not a dict, list or atom)"},
    {"is_json", (PyCFunction)(void (*)(void))is_json, METH_FASTCALL,
     "is_json(value, depth): store._is_json"},
    {"scan_blocks", scan_blocks, METH_O,
     "scan_blocks(blocks): (tool_use ids, tool_result ids, plain), or None when unsure"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "stenograph._speedups",
    "The entry path in C (see stenograph.engine.speedups).", -1, methods,
};

static int
intern(PyObject **slot, const char *text)
{
    *slot = PyUnicode_InternFromString(text);
    return *slot == NULL ? -1 : 0;
}

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (intern(&str_type, "type") || intern(&str_id, "id") ||
        intern(&str_tool_use_id, "tool_use_id") || intern(&str_text, "text") ||
        intern(&str_tool_use, "tool_use") || intern(&str_server_tool_use, "server_tool_use") ||
        intern(&str_tool_result, "tool_result"))
        return NULL;
    PyObject *ten = PyLong_FromLong(10), *power = PyLong_FromLong(4000);
    if (ten == NULL || power == NULL)
        return NULL;
    biggest_int = PyNumber_Power(ten, power, Py_None);
    Py_DECREF(ten);
    Py_DECREF(power);
    if (biggest_int == NULL || (smallest_int = PyNumber_Negative(biggest_int)) == NULL)
        return NULL;
    return PyModule_Create(&module_def);
}
