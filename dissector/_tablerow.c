/* An exchange's row, compiled: tables.py_exchange_row (the pure-Python twin) says what it does;
 * this does the same for speed (on message-dense traffic the row was a tenth of the header level,
 * and every table is built from it: the CLI's CSV and JSON lines, the filter, analysis.load).
 *
 * configure(exchange_class, api_name, error_name, sasl_token_name): the names of api keys and
 * error codes are asked of api_name and error_name once per value (they are functions of it alone)
 * and kept; the latency and total times are computed here for an exact `exchange_class` whose
 * times are 64-bit ints (its properties say how), asked of the properties otherwise.
 * exchange_row(ex) -> the tuple of values in tables.EXCHANGE_COLUMNS order. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_attrs.h"

#define COLUMNS 34

static PyObject *exchange_class, *api_name, *error_name, *sasl_name;
static PyObject *api_names, *error_names;   /* value -> name, as asked */

#define NAMES(X) X(connection) X(connection_id) X(client_ip) X(client_port) X(broker_ip) \
    X(broker_port) X(tls) X(request) X(response) X(api_key) X(api_version) X(correlation_id) \
    X(client_id) X(raw_sasl) X(first_ts) X(last_ts) X(length) X(first_packet) X(error_code) \
    X(error_count) X(throttle_time_ms) X(topics) X(partition_count) X(record_count) X(status) \
    X(issues) X(index) X(records_bytes) X(records_uncompressed_bytes) X(version_name) \
    X(cipher_name) X(latency_ms) X(total_ms)
NAMES(SLOT_DECLARE)

static PyObject *configure(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *cls, *api, *err, *sasl;
    if (!PyArg_ParseTuple(args, "O!OOU", &PyType_Type, &cls, &api, &err, &sasl))
        return NULL;
    Py_XSETREF(exchange_class, Py_NewRef(cls));
    Py_XSETREF(api_name, Py_NewRef(api));
    Py_XSETREF(error_name, Py_NewRef(err));
    Py_XSETREF(sasl_name, Py_NewRef(sasl));
    Py_XSETREF(api_names, PyDict_New());
    Py_XSETREF(error_names, PyDict_New());
    if (api_names == NULL || error_names == NULL)
        return NULL;
    Py_RETURN_NONE;
}

/* names(value), kept in `seen` */
static PyObject *name_of(PyObject *seen, PyObject *names, PyObject *value)
{
    if (!PyLong_CheckExact(value))   /* (1.0 would find 1's name: "Unknown(1)", not "(1.0)") */
        return PyObject_CallOneArg(names, value);
    PyObject *name = PyDict_GetItemWithError(seen, value);   /* borrowed */
    if (name != NULL)
        return Py_NewRef(name);
    if (PyErr_Occurred())
        return NULL;
    name = PyObject_CallOneArg(names, value);
    if (name != NULL && PyDict_SetItem(seen, value, name) < 0)
        Py_CLEAR(name);
    return name;
}

/* frame.attr if the frame is there (true), else None */
static PyObject *of_frame(PyObject *frame, int there, Slot *attr)
{
    return there ? attr_get(attr, frame) : Py_NewRef(Py_None);
}

/* (later.first_or_last - earlier.last_or_first) / 1e6, as the property `prop` computes it */
static PyObject *span_ms(PyObject *ex, int exact, PyObject *end, PyObject *start, Slot *prop)
{
    if (exact && end != NULL && start != NULL && PyLong_CheckExact(end)
            && PyLong_CheckExact(start)) {
        int o1, o2;
        long long e = PyLong_AsLongLongAndOverflow(end, &o1);
        long long s = PyLong_AsLongLongAndOverflow(start, &o2);
        long long d;
        if (!o1 && !o2 && !__builtin_sub_overflow(e, s, &d))
            return PyFloat_FromDouble((double)d / 1e6);
        if (PyErr_Occurred())
            return NULL;
    }
    return attr_get(prop, ex);
}

static PyObject *exchange_row(PyObject *Py_UNUSED(module), PyObject *ex)
{
    if (exchange_class == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "exchange_row: not configured");
        return NULL;
    }
    PyObject *v[COLUMNS] = {NULL};
    PyObject *row = NULL, *c = NULL, *tls = NULL, *req = NULL, *resp = NULL, *code = NULL;
    int i = 0;
#define PUT(expr) if ((v[i++] = (expr)) == NULL) goto done
    c = attr_get(&s_connection, ex);
    if (c == NULL)
        goto done;
    PUT(attr_get(&s_connection_id, c));
    PUT(attr_get(&s_client_ip, c));
    PUT(attr_get(&s_client_port, c));
    PUT(attr_get(&s_broker_ip, c));
    PUT(attr_get(&s_broker_port, c));
    PUT(attr_get(&s_api_key, ex));
    {   /* exchange_api_name */
        PyObject *raw = attr_get(&s_raw_sasl, ex);
        int sasl = raw == NULL ? -1 : PyObject_IsTrue(raw);
        Py_XDECREF(raw);
        if (sasl < 0)
            goto done;
        PyObject *key = v[5];
        PUT(sasl ? Py_NewRef(sasl_name) : key == Py_None ? Py_NewRef(Py_None)
            : name_of(api_names, api_name, key));
    }
    PUT(attr_get(&s_api_version, ex));
    PUT(attr_get(&s_correlation_id, ex));
    PUT(attr_get(&s_client_id, ex));
    req = attr_get(&s_request, ex);
    resp = req == NULL ? NULL : attr_get(&s_response, ex);
    if (resp == NULL)
        goto done;
    int has_req = PyObject_IsTrue(req), has_resp = has_req < 0 ? -1 : PyObject_IsTrue(resp);
    if (has_resp < 0)
        goto done;
    PUT(of_frame(req, has_req, &s_first_ts));
    PUT(of_frame(req, has_req, &s_last_ts));
    PUT(of_frame(resp, has_resp, &s_first_ts));
    PUT(of_frame(resp, has_resp, &s_last_ts));
    {   /* the properties latency_ms and total_ms: computed here for an exact Exchange */
        int exact = Py_IS_TYPE(ex, (PyTypeObject *)exchange_class) && req != Py_None
            && resp != Py_None;
        PUT(span_ms(ex, exact, v[12], v[11], &s_latency_ms));
        PUT(span_ms(ex, exact, v[13], v[10], &s_total_ms));
    }
    PUT(of_frame(req, has_req, &s_length));
    PUT(of_frame(resp, has_resp, &s_length));
    code = attr_get(&s_error_code, ex);
    if (code == NULL)
        goto done;
    PUT(Py_NewRef(code));
    PUT(code == Py_None ? Py_NewRef(Py_None) : name_of(error_names, error_name, code));
    PUT(attr_get(&s_error_count, ex));
    PUT(attr_get(&s_throttle_time_ms, ex));
    PUT(attr_get(&s_topics, ex));
    PUT(attr_get(&s_partition_count, ex));
    PUT(attr_get(&s_record_count, ex));
    PUT(attr_get(&s_status, ex));
    {
        PyObject *issues = attr_get(&s_issues, ex);
        Py_ssize_t n = issues == NULL ? -1 : PyObject_Length(issues);
        Py_XDECREF(issues);
        PUT(n < 0 ? NULL : PyLong_FromSsize_t(n));
    }
    PUT(attr_get(&s_index, ex));
    PUT(attr_get(&s_records_bytes, ex));
    PUT(attr_get(&s_records_uncompressed_bytes, ex));
    PUT(of_frame(req, has_req, &s_first_packet));
    PUT(of_frame(resp, has_resp, &s_first_packet));
    tls = attr_get(&s_tls, c);
    if (tls == NULL)
        goto done;
    PUT(tls != Py_None ? attr_get(&s_version_name, tls) : Py_NewRef(Py_None));
    PUT(tls != Py_None ? attr_get(&s_cipher_name, tls) : Py_NewRef(Py_None));
#undef PUT
    row = PyTuple_New(COLUMNS);
    if (row != NULL)
        for (i = 0; i < COLUMNS; i++) {
            PyTuple_SET_ITEM(row, i, v[i]);
            v[i] = NULL;
        }
done:
    for (i = 0; i < COLUMNS; i++)
        Py_XDECREF(v[i]);
    Py_XDECREF(c);
    Py_XDECREF(tls);
    Py_XDECREF(req);
    Py_XDECREF(resp);
    Py_XDECREF(code);
    return row;
}

static PyMethodDef methods[] = {
    {"configure", configure, METH_VARARGS,
     "configure(exchange_class, api_name, error_name, sasl_token_name)"},
    {"exchange_row", exchange_row, METH_O, "exchange_row(ex) -> the row's values (a tuple)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "dissector._tablerow",
                                    .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__tablerow(void)
{
NAMES(SLOT_INTERN)
    return PyModule_Create(&module);
}
