/* The entry path in C: the copy, the JSON check and the block scan a message goes through
 * when it becomes an entry, and History.add for an entry appended as hosts append. Each
 * function does exactly what its Python twin in stenograph/engine/entries.py, store.py or
 * history.py does for plain dicts, lists and atoms, and hands anything else back (to the
 * Python twin, or as "unsure"), so the two give the same results; tests/test_speedups.py
 * and tests/test_history_speedups.py hold them to that. */

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

/* ---- History.add, the common case --------------------------------------------------
 * history.History.add for an entry of the exact Entry type, appended as a host appends:
 * not memorized, nothing replacing its content, its tool ids exact str, and, when it has
 * content, plain (the guard reads the entry itself), in a new message (its role is not the
 * last message's), with no gap in the entry-to-message index. Every condition is checked
 * before anything changes: otherwise history_add returns False and the Python twin does
 * it all (tests/test_speedups.py holds the two to the same History). */

static PyObject *entry_type; /* entries_setup(Entry, ...) */
static PyObject *str_assistant, *str_append;
static PyObject *str_user, *str_uuid, *str_timestamp, *str_usage, *str_cache_creation;

enum { H_ENTRIES, H_BY_UUID, H_USE_ENTRY, H_RESULT_ENTRY, H_UNMEMORIZED, H_TOOL_CALLS,
       H_MESSAGES, H_IDS, H_USE_COUNTS, H_RUNS, H_MESSAGE_OF, H_CHANGED, H_COUNT };
static const char *history_names[H_COUNT] = {
    "entries", "by_uuid", "tool_use_entry", "tool_result_entry", "unmemorized_tool_entries",
    "_tool_calls", "_messages", "_ids", "_use_counts", "_runs", "_message_of", "_changed",
};
static PyTypeObject *history_types[H_COUNT] = {
    &PyList_Type, &PyDict_Type, &PyDict_Type, &PyDict_Type, &PyDict_Type, NULL,
    &PyList_Type, &PyList_Type, &PyDict_Type, &PyList_Type, NULL, &PySet_Type,
};
enum { E_ROLE, E_CONTENT, E_UUID, E_MEMORIZED, E_SENT, E_PLAIN, E_USES, E_RESULTS, E_COUNT };
static const char *entry_names[E_COUNT] = {
    "role", "content", "uuid", "memorized", "sent_content", "plain", "tool_use_ids",
    "tool_result_ids",
};
static PyObject *history_keys[H_COUNT], *entry_keys[E_COUNT];
static PyObject *str_index, *str_repeated_uses, *str_content_problems, *str_tool_use_ids;

static int
attrs_of(PyObject *obj, PyObject **keys, int n, PyObject **out)
{
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    for (int i = 0; i < n; i++)
        if ((out[i] = PyObject_GetAttr(obj, keys[i])) == NULL)
            return -1;
    return 0;
}

static void
release(PyObject **objs, int n)
{
    for (int i = 0; i < n; i++)
        Py_CLEAR(objs[i]);
}

static int
str_tuple(PyObject *ids)
{
    if (!PyTuple_CheckExact(ids))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(ids); i++)
        if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(ids, i)))
            return 0;
    return 1;
}

/* first(run).role == role: 1, 0, -1 on an error */
static int
same_role(PyObject *run, PyObject *role)
{
    PyObject *first = run;
    if (PyList_CheckExact(run)) {
        if (PyList_GET_SIZE(run) == 0)
            return 0;
        first = PyList_GET_ITEM(run, 0);
    }
    PyObject *other = PyObject_GetAttr(first, entry_keys[E_ROLE]);
    if (other == NULL)
        return -1;
    int same = PyObject_RichCompareBool(other, role, Py_EQ);
    Py_DECREF(other);
    return same;
}

/* history._own_content: no entry of the run sends replaced content */
static int
own_content(PyObject *run)
{
    if (!PyList_CheckExact(run)) {
        PyObject *sent = PyObject_GetAttr(run, entry_keys[E_SENT]);
        if (sent == NULL)
            return -1;
        Py_DECREF(sent);
        return sent == Py_None;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(run); i++) {
        int own = own_content(PyList_GET_ITEM(run, i));
        if (own != 1)
            return own;
    }
    return 1;
}

/* 2 when the entry can take the C path and has content to place, 1 when it can and has
 * none; 0 when it cannot; -1 on an error */
static int
eligible(PyObject **h, PyObject **e, Py_ssize_t *index)
{
    for (int i = 0; i < H_COUNT; i++)
        if (history_types[i] != NULL && Py_TYPE(h[i]) != history_types[i])
            return 0;
    if (!PyUnicode_CheckExact(e[E_ROLE]) || !PyUnicode_CheckExact(e[E_UUID]) ||
        e[E_MEMORIZED] != Py_False || e[E_SENT] != Py_None || !str_tuple(e[E_USES]) ||
        !str_tuple(e[E_RESULTS]))
        return 0;
    int known = PyDict_Contains(h[H_BY_UUID], e[E_UUID]);
    if (known != 0)
        return known < 0 ? -1 : 0; /* the Python twin raises */
    *index = PyList_GET_SIZE(h[H_ENTRIES]);
    PyObject *content = e[E_CONTENT];
    if (!PyUnicode_CheckExact(content) && !PyList_CheckExact(content))
        return 0;
    if (PyObject_Length(content) == 0)
        return 1; /* in no message */
    if (e[E_PLAIN] != Py_True || PyList_GET_SIZE(h[H_IDS]) != PyList_GET_SIZE(h[H_MESSAGES]) ||
        PyList_GET_SIZE(h[H_RUNS]) != PyList_GET_SIZE(h[H_MESSAGES]))
        return 0;
    Py_ssize_t placed = PyObject_Length(h[H_MESSAGE_OF]);
    if (placed < 0)
        return -1;
    if (placed != *index)
        return 0;
    Py_ssize_t runs = PyList_GET_SIZE(h[H_RUNS]);
    if (runs == 0)
        return 2;
    int same = same_role(PyList_GET_ITEM(h[H_RUNS], runs - 1), e[E_ROLE]);
    return same < 0 ? -1 : same ? 0 : 2;
}

static int
append_to(PyObject *sequence, Py_ssize_t value)
{
    PyObject *number = PyLong_FromSsize_t(value);
    if (number == NULL)
        return -1;
    PyObject *done = PyObject_CallMethodOneArg(sequence, str_append, number);
    Py_DECREF(number);
    Py_XDECREF(done);
    return done == NULL ? -1 : 0;
}

/* entry.index, entries, by_uuid, the tool indexes and the tool call tally */
static int
add_indexed(PyObject **h, PyObject *entry, PyObject **e, Py_ssize_t index)
{
    PyObject *number = PyLong_FromSsize_t(index);
    if (number == NULL)
        return -1;
    int failed = PyObject_SetAttr(entry, str_index, number) < 0 ||
                 PyList_Append(h[H_ENTRIES], entry) < 0 ||
                 PyDict_SetItem(h[H_BY_UUID], e[E_UUID], entry) < 0;
    Py_ssize_t uses = PyTuple_GET_SIZE(e[E_USES]), results = PyTuple_GET_SIZE(e[E_RESULTS]);
    Py_ssize_t calls = 0;
    for (Py_ssize_t i = 0; !failed && i < uses; i++)
        failed = PyDict_SetDefault(h[H_USE_ENTRY], PyTuple_GET_ITEM(e[E_USES], i), entry) == NULL;
    for (Py_ssize_t i = 0; !failed && i < results; i++)
        failed = PyDict_SetDefault(h[H_RESULT_ENTRY], PyTuple_GET_ITEM(e[E_RESULTS], i),
                                   entry) == NULL;
    if (!failed && (uses || results)) {
        failed = PyDict_SetItem(h[H_UNMEMORIZED], number, entry) < 0;
        if (PyUnicode_Compare(e[E_ROLE], str_assistant) == 0)
            calls = uses;
    }
    Py_DECREF(number);
    if (failed)
        return -1;
    Py_ssize_t tallies = PyObject_Length(h[H_TOOL_CALLS]);
    PyObject *last = tallies < 0 ? NULL : PySequence_GetItem(h[H_TOOL_CALLS], tallies - 1);
    if (last == NULL)
        return -1;
    Py_ssize_t before = PyLong_AsSsize_t(last);
    Py_DECREF(last);
    if (before == -1 && PyErr_Occurred())
        return -1;
    return append_to(h[H_TOOL_CALLS], before + calls);
}

/* history._set_ids of a new message: the entry is the guard's view; its tool_use ids
 * counted, and repeated ones tallied in _repeated_uses */
static int
set_ids(PyObject *history, PyObject **h, PyObject *entry, PyObject *uses, Py_ssize_t message)
{
    Py_ssize_t repeated = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(uses); i++) {
        PyObject *id = PyTuple_GET_ITEM(uses, i);
        PyObject *count = PyDict_GetItemWithError(h[H_USE_COUNTS], id);
        if (count == NULL && PyErr_Occurred())
            return -1;
        Py_ssize_t n = count == NULL ? 1 : PyLong_AsSsize_t(count) + 1;
        if (n == 0 && PyErr_Occurred())
            return -1;
        PyObject *number = PyLong_FromSsize_t(n);
        int failed = number == NULL || PyDict_SetItem(h[H_USE_COUNTS], id, number) < 0;
        Py_XDECREF(number);
        if (failed)
            return -1;
        repeated += n > 1;
    }
    if (repeated) {
        PyObject *tally = PyObject_GetAttr(history, str_repeated_uses);
        PyObject *more = tally == NULL ? NULL : PyLong_FromSsize_t(repeated);
        PyObject *sum = more == NULL ? NULL : PyNumber_Add(tally, more);
        int failed = sum == NULL || PyObject_SetAttr(history, str_repeated_uses, sum) < 0;
        Py_XDECREF(tally);
        Py_XDECREF(more);
        Py_XDECREF(sum);
        if (failed)
            return -1;
    }
    if (PyList_Append(h[H_IDS], entry) < 0)
        return -1;
    PyObject *number = PyLong_FromSsize_t(message);
    int failed = number == NULL || PySet_Add(h[H_CHANGED], number) < 0;
    Py_XDECREF(number);
    return failed ? -1 : 0;
}

static int
discard(PyObject *changed, Py_ssize_t message)
{
    PyObject *number = PyLong_FromSsize_t(message);
    int failed = number == NULL || PySet_Discard(changed, number) < 0;
    Py_XDECREF(number);
    return failed ? -1 : 0;
}

/* guard.answers_in_order(previous, message), given what it reads of previous (whether it
 * is an assistant message, its tool_use ids) and the message's tool_result ids: 1, 0, -1 */
static int
answers_in_order(PyObject *previous_uses, int previous_assistant, PyObject *results)
{
    if (!previous_assistant)
        return 0;
    int same = PyObject_RichCompareBool(previous_uses, results, Py_EQ);
    if (same != 1 || PyTuple_GET_SIZE(results) == 1)
        return same;
    PyObject *unique = PySet_New(results);
    if (unique == NULL)
        return -1;
    same = PySet_GET_SIZE(unique) == PyTuple_GET_SIZE(results);
    Py_DECREF(unique);
    return same;
}

/* history._settle(message): the entry's message is plain and its own content */
static int
settle(PyObject **h, PyObject **e, Py_ssize_t message)
{
    PyObject *previous = PyList_GET_ITEM(h[H_IDS], message - 1);
    PyObject *uses = e[E_USES], *results = e[E_RESULTS];
    if (PyUnicode_Compare(e[E_ROLE], str_assistant) == 0)
        return PyTuple_GET_SIZE(uses) ? 0 : discard(h[H_CHANGED], message);
    Py_INCREF(previous);
    PyObject *role = PyObject_GetAttr(previous, entry_keys[E_ROLE]);
    PyObject *before = role == NULL ? NULL : PyObject_GetAttr(previous, str_tool_use_ids);
    int assistant = before == NULL ? -1 : PyObject_RichCompareBool(role, str_assistant, Py_EQ);
    int outcome = assistant < 0 ? -1 : 0;
    if (assistant < 0)
        goto done;
    if (PyTuple_GET_SIZE(results)) {
        int answered = answers_in_order(before, assistant, results);
        if (answered != 1) {
            outcome = answered;
            goto done;
        }
    }
    else {
        int calls = PyObject_IsTrue(before);
        if (calls != 0) {
            outcome = calls < 0 ? -1 : 0; /* left unanswered */
            goto done;
        }
    }
    if ((outcome = discard(h[H_CHANGED], message)) < 0 || message <= 1 || !assistant)
        goto done;
    PyObject *problems = PyObject_GetAttr(previous, str_content_problems);
    int clean = problems == NULL ? -1 : !PyObject_IsTrue(problems);
    Py_XDECREF(problems);
    if (clean == 1)
        clean = own_content(PyList_GET_ITEM(h[H_RUNS], message - 1));
    outcome = clean < 0 ? -1 : clean ? discard(h[H_CHANGED], message - 1) : 0;
done:
    Py_XDECREF(role);
    Py_XDECREF(before);
    Py_DECREF(previous);
    return outcome;
}

/* history._place of an entry starting a new message */
static int
place(PyObject *history, PyObject **h, PyObject *entry, PyObject **e)
{
    Py_ssize_t message = PyList_GET_SIZE(h[H_MESSAGES]);
    if (PyList_Append(h[H_RUNS], entry) < 0 || append_to(h[H_MESSAGE_OF], message) < 0)
        return -1;
    PyObject *sent = PyDict_New();
    int failed = sent == NULL || PyDict_SetItem(sent, entry_keys[E_ROLE], e[E_ROLE]) < 0 ||
                 PyDict_SetItem(sent, entry_keys[E_CONTENT], e[E_CONTENT]) < 0 ||
                 PyList_Append(h[H_MESSAGES], sent) < 0;
    Py_XDECREF(sent);
    if (failed || set_ids(history, h, entry, e[E_USES], message) < 0)
        return -1;
    return message ? settle(h, e, message) : 0;
}

/* History.add in C: 1 done (*count: the entries now), 0 not its case, -1 an error */
static int
add_to_history(PyObject *history, PyObject *entry, Py_ssize_t *count)
{
    if (entry_type == NULL || (PyObject *)Py_TYPE(entry) != entry_type)
        return 0;
    PyObject *h[H_COUNT], *e[E_COUNT];
    Py_ssize_t index = 0;
    int ok = -1;
    if (attrs_of(history, history_keys, H_COUNT, h) == 0 &&
        attrs_of(entry, entry_keys, E_COUNT, e) == 0 && (ok = eligible(h, e, &index)) > 0) {
        int placed = ok == 2;
        ok = add_indexed(h, entry, e, index);
        if (ok == 0 && placed)
            ok = place(history, h, entry, e);
        ok = ok < 0 ? -1 : 1;
        *count = index + 1;
    }
    release(h, H_COUNT);
    release(e, E_COUNT);
    return ok;
}

static PyObject *
history_add(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "history_add(history, entry) takes 2 arguments");
        return NULL;
    }
    Py_ssize_t count;
    int ok = add_to_history(args[0], args[1], &count);
    return ok < 0 ? NULL : Py_NewRef(ok ? Py_True : Py_False);
}

/* ---- Session._add of an in-memory session ---------------------------------------------
 * session.Session._add of an entry that History.add takes in C, in a session with no store:
 * the entry checked as store.check_entry checks it (its content, meta and uuid surely JSON,
 * its timestamp a float surely in range), added, then _host_known, _uncounted and
 * _last_response as _commit sets them. What is not surely its case is handed back (False)
 * before anything changes: the Python twin checks it again and says what is wrong. */

static PyObject *str_store, *str_history, *str_host_known, *str_uncounted;
static PyObject *str_last_response, *str_meta;
static double stamp_low, stamp_high; /* entries.SURELY_IN_RANGE */

/* store.check_entry's fast path: 1 sure, 0 unsure, -1 an error */
static int
entry_json_ok(PyObject *entry)
{
    PyObject *keys[4] = {entry_keys[E_CONTENT], str_meta, entry_keys[E_UUID], str_timestamp};
    PyObject *v[4];
    int ok = -1;
    if (attrs_of(entry, keys, 4, v) == 0 && (ok = is_json_value(v[0], 2)) == 1 &&
        (v[1] == Py_None || (ok = is_json_value(v[1], 2)) == 1) &&
        (ok = is_json_value(v[2], 2)) == 1 && v[3] != Py_None) {
        double stamp = PyFloat_CheckExact(v[3]) ? PyFloat_AS_DOUBLE(v[3]) : NAN;
        ok = stamp_low < stamp && stamp < stamp_high;
    }
    release(v, 4);
    return ok;
}

/* _commit's bookkeeping after the entry was added */
static int
committed(PyObject *session, PyObject *entry, Py_ssize_t count)
{
    PyObject *known = PyLong_FromSsize_t(count);
    int failed = known == NULL || PyObject_SetAttr(session, str_host_known, known) < 0;
    Py_XDECREF(known);
    PyObject *e[2] = {NULL, NULL}, *keys[2] = {entry_keys[E_CONTENT], entry_keys[E_ROLE]};
    if (failed || attrs_of(entry, keys, 2, e) < 0) {
        release(e, 2);
        return -1;
    }
    int content = PyObject_IsTrue(e[0]);
    failed = content < 0;
    if (content > 0) {
        PyObject *queue = PyObject_GetAttr(session, str_uncounted);
        PyObject *done = queue == NULL ? NULL : PyObject_CallMethodOneArg(queue, str_append, entry);
        failed = done == NULL;
        Py_XDECREF(queue);
        Py_XDECREF(done);
    }
    if (!failed && PyUnicode_Compare(e[1], str_assistant) == 0)
        failed = PyObject_SetAttr(session, str_last_response, entry) < 0;
    release(e, 2);
    return failed ? -1 : 0;
}

static PyObject *
session_add(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "session_add(session, entry) takes 2 arguments");
        return NULL;
    }
    PyObject *session = args[0], *entry = args[1];
    if (entry_type == NULL || (PyObject *)Py_TYPE(entry) != entry_type)
        Py_RETURN_FALSE;
    PyObject *store = PyObject_GetAttr(session, str_store);
    if (store == NULL)
        return NULL;
    Py_DECREF(store);
    if (store != Py_None)
        Py_RETURN_FALSE;
    int ok = entry_json_ok(entry);
    if (ok <= 0)
        return ok < 0 ? NULL : Py_NewRef(Py_False);
    PyObject *history = PyObject_GetAttr(session, str_history);
    if (history == NULL)
        return NULL;
    Py_ssize_t count = 0;
    ok = add_to_history(history, entry, &count);
    Py_DECREF(history);
    if (ok == 1 && committed(session, entry, count) < 0)
        ok = -1;
    return ok < 0 ? NULL : Py_NewRef(ok ? Py_True : Py_False);
}

/* ---- the request list brought up to date ----------------------------------------------
 * Session._request's messages in the common case: the session's last request, a plain dict
 * held by the session alone, holds the RequestMessages list this session handed out, held
 * by that request alone and untouched (request.sole_messages), and the history has nothing
 * that list lacks but messages appended since: no preamble, the window at the start, none
 * replaced, nothing pending for the guard, no repeated tool_use id (History.request_messages
 * and the first test of History.request_problems). The messages appended since are put at
 * the list's end and the list returned; anything else is None before any change, and the
 * Python twin does it all. */

static PyObject *request_messages_type; /* request_setup(RequestMessages, probe) */
static Py_ssize_t alone_counts[2] = {-1, -1};
static PyObject *str_last_request, *str_messages, *str_touched;

enum { R_MESSAGES, R_START, R_HANDED, R_HANDED_START, R_PREAMBLE, R_REPLACED, R_CHANGED,
       R_REPEATED, R_IDS, R_COUNT };
static const char *request_names[R_COUNT] = {
    "_messages", "_window_message", "_handed", "_handed_start", "preamble", "_replaced",
    "_changed", "_repeated_uses", "_ids",
};
static PyObject *request_keys[R_COUNT];

/* holder.last_request (a new reference) when a dict holding a list, the list (borrowed)
 * and their reference counts as seen here; 0 when not, -1 on an error */
static int
last_messages(PyObject *holder, PyObject **request, PyObject **messages, Py_ssize_t *counts)
{
    *messages = NULL;
    if ((*request = PyObject_GetAttr(holder, str_last_request)) == NULL)
        return -1;
    if (!PyDict_CheckExact(*request))
        return 0;
    *messages = PyDict_GetItemWithError(*request, str_messages);
    if (*messages == NULL)
        return PyErr_Occurred() ? -1 : 0;
    counts[0] = Py_REFCNT(*request);
    counts[1] = Py_REFCNT(*messages);
    return 1;
}

static PyObject *
request_setup(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "request_setup(RequestMessages, probe) takes 2 arguments");
        return NULL;
    }
    PyObject *request, *messages;
    Py_ssize_t counts[2];
    int found = last_messages(args[1], &request, &messages, counts);
    Py_XDECREF(request);
    if (found < 0)
        return NULL;
    if (found == 0) {
        PyErr_SetString(PyExc_TypeError, "the probe's last_request holds no messages");
        return NULL;
    }
    Py_XSETREF(request_messages_type, Py_NewRef(args[0]));
    alone_counts[0] = counts[0];
    alone_counts[1] = counts[1];
    Py_RETURN_NONE;
}

/* the messages alone (1), not (0), -1 on an error */
static int
sole(PyObject *messages, Py_ssize_t *counts)
{
    if ((PyObject *)Py_TYPE(messages) != request_messages_type || counts[0] != alone_counts[0] ||
        counts[1] != alone_counts[1])
        return 0;
    PyObject *touched = PyObject_GetAttr(messages, str_touched);
    if (touched == NULL)
        return -1;
    Py_DECREF(touched);
    return touched == Py_False;
}

/* the history's state is the common case: 1, 0, -1 */
static int
up_to_date(PyObject **r, Py_ssize_t handed_out)
{
    if (!PyList_CheckExact(r[R_MESSAGES]) || !PyList_CheckExact(r[R_PREAMBLE]) ||
        !PyList_CheckExact(r[R_IDS]) || !PySet_CheckExact(r[R_REPLACED]) ||
        !PySet_CheckExact(r[R_CHANGED]))
        return 0;
    if (PyList_GET_SIZE(r[R_PREAMBLE]) || PySet_GET_SIZE(r[R_REPLACED]) ||
        PySet_GET_SIZE(r[R_CHANGED]) || PyList_GET_SIZE(r[R_IDS]) == 0)
        return 0;
    PyObject *zeros[3] = {r[R_START], r[R_HANDED_START], r[R_REPEATED]};
    for (int i = 0; i < 3; i++) {
        if (!PyLong_CheckExact(zeros[i]))
            return 0;
        int zero = PyObject_Not(zeros[i]);
        if (zero != 1)
            return zero;
    }
    if (!PyLong_CheckExact(r[R_HANDED]))
        return 0;
    Py_ssize_t handed = PyLong_AsSsize_t(r[R_HANDED]);
    if (handed == -1 && PyErr_Occurred())
        return -1;
    return handed == handed_out && handed <= PyList_GET_SIZE(r[R_MESSAGES]);
}

/* the messages appended since put at the list's end, _handed set: 0, -1 */
static int
bring_up_to_date(PyObject *history, PyObject **r, PyObject *messages)
{
    PyObject *all = r[R_MESSAGES];
    for (Py_ssize_t i = PyList_GET_SIZE(messages); i < PyList_GET_SIZE(all); i++)
        if (PyList_Append(messages, PyList_GET_ITEM(all, i)) < 0)
            return -1;
    PyObject *handed = PyLong_FromSsize_t(PyList_GET_SIZE(all));
    int failed = handed == NULL || PyObject_SetAttr(history, request_keys[R_HANDED], handed) < 0;
    Py_XDECREF(handed);
    return failed ? -1 : 0;
}

static PyObject *
request_reuse(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "request_reuse(session) takes 1 argument");
        return NULL;
    }
#ifdef Py_GIL_DISABLED
    Py_RETURN_NONE; /* reference counts say nothing there */
#endif
    PyObject *request, *messages, *history = NULL, *out = NULL;
    Py_ssize_t counts[2];
    int ok = request_messages_type == NULL ? 0 : last_messages(args[0], &request, &messages, counts);
    if (request_messages_type == NULL)
        request = NULL;
    if (ok == 1)
        ok = sole(messages, counts);
    if (ok == 1 && (history = PyObject_GetAttr(args[0], str_history)) == NULL)
        ok = -1;
    PyObject *r[R_COUNT] = {NULL};
    if (ok == 1 && (ok = attrs_of(history, request_keys, R_COUNT, r)) == 0)
        ok = up_to_date(r, PyList_GET_SIZE(messages));
    if (ok == 1 && (ok = bring_up_to_date(history, r, messages)) == 0)
        out = Py_NewRef(messages);
    if (ok == 0 && out == NULL)
        out = Py_NewRef(Py_None);
    release(r, R_COUNT);
    Py_XDECREF(history);
    Py_XDECREF(request);
    return out;
}

/* ---- make_entry and response_entry, the common case -----------------------------------
 * entries.make_entry of a message holding a role and content alone, and
 * entries.response_entry of a response as a dict, whose uuid (if any) is a str and whose
 * timestamp (if any) is an epoch number of the years 1-9999: the content checked, copied and
 * scanned as by _content, the usage read as by _usage, the Entry built. Anything else is
 * handed back (None) before any work: the Python twin does it all, and says what is wrong. */

static PyObject *new_uuid_fn, *usage_fn, *usage_keys, *meta_keys; /* entries_setup */
static PyObject *unsure_error, *refuse_fn, *minus_one;

static PyObject *
refuse(PyObject *module, PyObject *value)
{
    PyErr_SetNone(unsure_error); /* not a dict, list or atom: the Python twin copies it */
    return NULL;
}

static PyMethodDef refuse_def = {"refuse", refuse, METH_O, NULL};

/* _content: 1 and (content, scanned = (uses, results, plain)); 0 unsure; -1 an error */
static int
content_of(PyObject *value, int owned, PyObject **content, PyObject **scanned)
{
    *content = *scanned = NULL;
    if (value == NULL || PyUnicode_CheckExact(value)) {
        int plain = value != NULL && !blank(value);
        *content = value == NULL ? PyUnicode_New(0, 0) : Py_NewRef(value);
        *scanned = Py_BuildValue("(()()O)", plain ? Py_True : Py_False);
        return *content != NULL && *scanned != NULL ? 1 : -1;
    }
    if (!PyList_CheckExact(value))
        return 0;
    *content = owned ? Py_NewRef(value) : copy_value(value, refuse_fn);
    if (*content == NULL) { /* nested too deeply: the Python twin says so */
        if (!PyErr_ExceptionMatches(unsure_error) && !PyErr_ExceptionMatches(PyExc_RecursionError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    *scanned = scan_blocks(NULL, *content);
    if (*scanned == NULL)
        return -1;
    return *scanned != Py_None;
}

/* Entry(role, content, uuid, stamp, -1, usage, False, None, None, meta, *scanned) */
static PyObject *
build_entry(PyObject *role, PyObject *content, PyObject *uuid, PyObject *stamp,
            PyObject *usage, PyObject *meta, PyObject *scanned)
{
    PyObject *args[13] = {
        role, content, uuid, stamp, minus_one, usage, Py_False, Py_None, Py_None, meta,
        PyTuple_GET_ITEM(scanned, 0), PyTuple_GET_ITEM(scanned, 1), PyTuple_GET_ITEM(scanned, 2),
    };
    return PyObject_Vectorcall(entry_type, args, 13, NULL);
}

/* the entry from a role, content and the rest; None when the content is not its case */
static PyObject *
entry_of(PyObject *role, PyObject *value, int owned, PyObject *now, PyObject *uuid,
         PyObject *stamp, PyObject *usage, PyObject *meta)
{
    PyObject *content, *scanned, *out = NULL;
    int read = content_of(value, owned, &content, &scanned);
    if (read == 0)
        out = Py_NewRef(Py_None);
    else if (read == 1) {
        PyObject *floated = PyNumber_Float(now); /* as the twin, even when a stamp is given */
        PyObject *id = NULL;
        if (floated != NULL)
            id = uuid ? Py_NewRef(uuid) : PyObject_CallNoArgs(new_uuid_fn);
        if (id != NULL)
            out = build_entry(role, content, id, stamp ? stamp : floated,
                              usage ? usage : Py_None, meta ? meta : Py_None, scanned);
        Py_XDECREF(floated);
        Py_XDECREF(id);
    }
    Py_XDECREF(content);
    Py_XDECREF(scanned);
    return out;
}

static PyObject *
make_entry(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "make_entry(message, now, owned) takes 3 arguments");
        return NULL;
    }
    PyObject *message = args[0];
    if (entry_type == NULL || !PyDict_CheckExact(message) || PyDict_GET_SIZE(message) != 2)
        Py_RETURN_NONE;
    PyObject *role = PyDict_GetItemWithError(message, entry_keys[E_ROLE]);
    if (role == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    Py_INCREF(role);
    PyObject *value = PyDict_GetItemWithError(message, entry_keys[E_CONTENT]);
    Py_XINCREF(value);
    PyObject *out = NULL;
    if (value == NULL && PyErr_Occurred())
        goto done;
    if (value == NULL || !PyUnicode_CheckExact(role) ||
        (PyUnicode_Compare(role, str_user) != 0 && PyUnicode_Compare(role, str_assistant) != 0)) {
        out = Py_NewRef(Py_None);
        goto done;
    }
    out = entry_of(role, value == Py_None ? NULL : value, PyObject_IsTrue(args[2]), args[1],
                   NULL, NULL, NULL, NULL);
done:
    Py_DECREF(role);
    Py_XDECREF(value);
    return out;
}

/* ``built or None``: an empty dict becomes None (NULL stays NULL) */
static PyObject *
or_none(PyObject *built)
{
    if (built == NULL || PyDict_GET_SIZE(built) > 0)
        return built;
    Py_DECREF(built);
    return Py_NewRef(Py_None);
}

/* _usage of a plain dict whose counts are ints: the dict or None; NULL with no error when
 * unsure (another kind of number: the Python twin reads it) */
static PyObject *
usage_of(PyObject *value)
{
    PyObject *split = PyDict_GetItemWithError(value, str_cache_creation);
    if (split == NULL && PyErr_Occurred())
        return NULL;
    if (split != NULL && !PyDict_CheckExact(split)) {
        if (PyDict_Check(split))
            return NULL; /* unsure: a dict subclass, merged by the Python twin */
        split = NULL; /* _usage merges a dict only */
    }
    Py_XINCREF(split); /* a key's __eq__ may change the usage dict holding it */
    PyObject *usage = PyDict_New();
    for (Py_ssize_t i = 0; usage != NULL && i < PyTuple_GET_SIZE(usage_keys); i++) {
        PyObject *key = PyTuple_GET_ITEM(usage_keys, i), *number = NULL;
        if (split != NULL && (number = PyDict_GetItemWithError(split, key)) == NULL &&
            PyErr_Occurred())
            Py_CLEAR(usage);
        if (usage != NULL && number == NULL &&
            (number = PyDict_GetItemWithError(value, key)) == NULL && PyErr_Occurred())
            Py_CLEAR(usage);
        if (usage == NULL || number == NULL || number == Py_None)
            continue;
        if (!PyLong_CheckExact(number)) {
            Py_CLEAR(usage); /* unsure: no error set */
            break;
        }
        int negative = PyObject_RichCompareBool(number, minus_one, Py_LE);
        if (negative < 0 || (!negative && PyDict_SetItem(usage, key, number) < 0))
            Py_CLEAR(usage);
    }
    Py_XDECREF(split);
    return or_none(usage);
}

/* the response's usage as _usage gives it (its twin called when unsure) */
static PyObject *
response_usage(PyObject *data)
{
    PyObject *value = PyDict_GetItemWithError(data, str_usage);
    if (value == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    if (value == Py_None)
        return Py_NewRef(Py_None);
    Py_INCREF(value);
    PyObject *usage = PyDict_CheckExact(value) ? usage_of(value) : NULL;
    if (usage == NULL && !PyErr_Occurred())
        usage = PyObject_CallOneArg(usage_fn, value);
    Py_DECREF(value);
    return usage;
}

/* {k: data[k] for k in RESPONSE_META if data.get(k) is not None} or None */
static PyObject *
response_meta(PyObject *data)
{
    PyObject *meta = PyDict_New();
    for (Py_ssize_t i = 0; meta != NULL && i < PyTuple_GET_SIZE(meta_keys); i++) {
        PyObject *key = PyTuple_GET_ITEM(meta_keys, i);
        PyObject *item = PyDict_GetItemWithError(data, key);
        if ((item == NULL && PyErr_Occurred()) ||
            (item != NULL && item != Py_None && PyDict_SetItem(meta, key, item) < 0))
            Py_CLEAR(meta);
    }
    return or_none(meta);
}

/* the response's uuid (NULL: none given, a new one is drawn) and timestamp (NULL: none
 * given); 1 their case, 0 not, -1 an error */
static int
response_stamp(PyObject *data, PyObject **uuid, PyObject **stamp)
{
    *uuid = *stamp = NULL;
    PyObject *id = PyDict_GetItemWithError(data, str_uuid);
    if (id == NULL && PyErr_Occurred())
        return -1;
    if (id != NULL && id != Py_None) {
        if (!PyUnicode_CheckExact(id))
            return 0;
        if (PyUnicode_GET_LENGTH(id) > 0)
            *uuid = Py_NewRef(id);
    }
    PyObject *given = PyDict_GetItemWithError(data, str_timestamp);
    if (given == NULL)
        return PyErr_Occurred() ? -1 : 1;
    double seconds;
    if (PyFloat_CheckExact(given))
        seconds = PyFloat_AS_DOUBLE(given);
    else if (PyLong_CheckExact(given)) {
        seconds = PyLong_AsDouble(given);
        if (seconds == -1.0 && PyErr_Occurred()) {
            PyErr_Clear(); /* too big for a float: the Python twin says so */
            return 0;
        }
    }
    else
        return 0;
    if (!(stamp_low < seconds && seconds < stamp_high))
        return 0; /* NaN included */
    *stamp = PyFloat_FromDouble(seconds);
    return *stamp == NULL ? -1 : 1;
}

static PyObject *
response_entry(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "response_entry(data, now, owned) takes 3 arguments");
        return NULL;
    }
    PyObject *data = args[0], *uuid, *stamp, *usage = NULL, *meta = NULL, *out = NULL;
    if (entry_type == NULL || !PyDict_CheckExact(data))
        Py_RETURN_NONE;
    int ours = response_stamp(data, &uuid, &stamp);
    if (ours <= 0) {
        out = ours < 0 ? NULL : Py_NewRef(Py_None);
        goto done;
    }
    PyObject *value = PyDict_GetItemWithError(data, entry_keys[E_CONTENT]);
    if (value == NULL && PyErr_Occurred())
        goto done;
    Py_XINCREF(value);
    if (value == NULL) /* data.get("content", []) */
        value = PyList_New(0);
    if (value != NULL && (usage = response_usage(data)) != NULL &&
        (meta = response_meta(data)) != NULL)
        out = entry_of(str_assistant, value, PyObject_IsTrue(args[2]), args[1], uuid, stamp,
                       usage, meta);
    Py_XDECREF(value);
done:
    Py_XDECREF(uuid);
    Py_XDECREF(stamp);
    Py_XDECREF(usage);
    Py_XDECREF(meta);
    return out;
}

static PyObject *
entries_setup(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6 || !PyType_Check(args[0]) || !PyTuple_CheckExact(args[3]) ||
        !PyTuple_CheckExact(args[4]) || !PyTuple_CheckExact(args[5]) ||
        PyTuple_GET_SIZE(args[5]) != 2) {
        PyErr_SetString(PyExc_TypeError,
                        "entries_setup(Entry, new_uuid, _usage, usage keys, meta keys,"
                        " (low, high)) takes 6 arguments");
        return NULL;
    }
    double low = PyFloat_AsDouble(PyTuple_GET_ITEM(args[5], 0));
    double high = PyFloat_AsDouble(PyTuple_GET_ITEM(args[5], 1));
    if (PyErr_Occurred())
        return NULL;
    Py_XSETREF(entry_type, Py_NewRef(args[0]));
    Py_XSETREF(new_uuid_fn, Py_NewRef(args[1]));
    Py_XSETREF(usage_fn, Py_NewRef(args[2]));
    Py_XSETREF(usage_keys, Py_NewRef(args[3]));
    Py_XSETREF(meta_keys, Py_NewRef(args[4]));
    stamp_low = low;
    stamp_high = high;
    Py_RETURN_NONE;
}

/* ---- set_slots: an event's __init__ -------------------------------------------------------
 * events._slot_init's body: each value set through its slot's descriptor, in one C call where
 * the Python twin makes one Python-level call per field. */

static PyObject *
set_slots(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyTuple_CheckExact(args[1]) || !PyTuple_CheckExact(args[2]) ||
        PyTuple_GET_SIZE(args[1]) != PyTuple_GET_SIZE(args[2])) {
        PyErr_SetString(PyExc_TypeError,
                        "set_slots(obj, descriptors, values): two tuples of one length");
        return NULL;
    }
    PyObject *obj = args[0];
    Py_ssize_t n = PyTuple_GET_SIZE(args[1]);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *descr = PyTuple_GET_ITEM(args[1], i);
        descrsetfunc set = Py_TYPE(descr)->tp_descr_set;
        if (set == NULL) {
            PyErr_Format(PyExc_TypeError, "set_slots: %R sets nothing", descr);
            return NULL;
        }
        if (set(descr, obj, PyTuple_GET_ITEM(args[2], i)) < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"copy_json", (PyCFunction)(void (*)(void))copy_json, METH_FASTCALL,
     "copy_json(value, other): entries._copy (other(v) for what is not a dict, list or atom)"},
    {"is_json", (PyCFunction)(void (*)(void))is_json, METH_FASTCALL,
     "is_json(value, depth): store._is_json"},
    {"scan_blocks", scan_blocks, METH_O,
     "scan_blocks(blocks): (tool_use ids, tool_result ids, plain), or None when unsure"},
    {"history_add", (PyCFunction)(void (*)(void))history_add, METH_FASTCALL,
     "history_add(history, entry): History.add done in C (True), or False: not its case"},
    {"session_add", (PyCFunction)(void (*)(void))session_add, METH_FASTCALL,
     "session_add(session, entry): Session._add done in C (True), or False: not its case"},
    {"request_setup", (PyCFunction)(void (*)(void))request_setup, METH_FASTCALL,
     "request_setup(RequestMessages, probe): what request_reuse reads"},
    {"request_reuse", (PyCFunction)(void (*)(void))request_reuse, METH_FASTCALL,
     "request_reuse(session): the last request's list brought up to date, or None"},
    {"make_entry", (PyCFunction)(void (*)(void))make_entry, METH_FASTCALL,
     "make_entry(message, now, owned): entries.make_entry, or None when not its case"},
    {"response_entry", (PyCFunction)(void (*)(void))response_entry, METH_FASTCALL,
     "response_entry(data, now, owned): entries.response_entry of a dict, or None"},
    {"set_slots", (PyCFunction)(void (*)(void))set_slots, METH_FASTCALL,
     "set_slots(obj, descriptors, values): each value set through its descriptor"},
    {"entries_setup", (PyCFunction)(void (*)(void))entries_setup, METH_FASTCALL,
     "entries_setup(Entry, new_uuid, _usage, usage keys, meta keys, (low, high))"},
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
        intern(&str_tool_result, "tool_result") || intern(&str_assistant, "assistant") ||
        intern(&str_append, "append") || intern(&str_index, "index") ||
        intern(&str_repeated_uses, "_repeated_uses") ||
        intern(&str_content_problems, "content_problems") ||
        intern(&str_tool_use_ids, "tool_use_ids") || intern(&str_user, "user") ||
        intern(&str_uuid, "uuid") || intern(&str_timestamp, "timestamp") ||
        intern(&str_usage, "usage") || intern(&str_cache_creation, "cache_creation") ||
        intern(&str_store, "_store") || intern(&str_history, "history") ||
        intern(&str_host_known, "_host_known") || intern(&str_uncounted, "_uncounted") ||
        intern(&str_last_response, "_last_response") || intern(&str_meta, "_meta") ||
        intern(&str_last_request, "last_request") || intern(&str_messages, "messages") ||
        intern(&str_touched, "touched"))
        return NULL;
    unsure_error = PyErr_NewException("stenograph._speedups.Unsure", NULL, NULL);
    refuse_fn = PyCFunction_New(&refuse_def, NULL);
    minus_one = PyLong_FromLong(-1);
    if (unsure_error == NULL || refuse_fn == NULL || minus_one == NULL)
        return NULL;
    for (int i = 0; i < H_COUNT; i++)
        if (intern(&history_keys[i], history_names[i]))
            return NULL;
    for (int i = 0; i < E_COUNT; i++)
        if (intern(&entry_keys[i], entry_names[i]))
            return NULL;
    for (int i = 0; i < R_COUNT; i++)
        if (intern(&request_keys[i], request_names[i]))
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
