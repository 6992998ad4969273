/* A frame's message bytes, filled in place as its segments arrive, compiled: dissector.framebuf
 * (the pure-Python twin, a bytearray) says what it does. A frame that spans segments is
 * written into one buffer of its size: no piece kept per segment, no join at the end, and the
 * file reader's runs (capture/_walk.c) copy their segments straight into it.
 *
 * frame_buffer(n): a new bytes object of n bytes, not yet written. fill(buf, at, src, start,
 * stop): src[start:stop] (any bytes-like) written at buf[at:]. finished(buf): the bytes. Writing
 * into a bytes object is sound only while nothing else has seen it: the framer keeps its
 * buffer to itself until the frame is complete (finished), and never writes it after that. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

static PyObject *frame_buffer(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "negative frame size");
        return NULL;
    }
    return PyBytes_FromStringAndSize(NULL, n);
}

static PyObject *fill(PyObject *Py_UNUSED(module), PyObject *args)
{
    PyObject *buf;
    Py_buffer src;
    Py_ssize_t at, start, stop;
    if (!PyArg_ParseTuple(args, "Ony*nn", &buf, &at, &src, &start, &stop))
        return NULL;
    char *dst;
    Py_ssize_t size;
    if (PyBytes_CheckExact(buf)) {
        dst = PyBytes_AS_STRING(buf);
        size = PyBytes_GET_SIZE(buf);
    } else if (PyByteArray_CheckExact(buf)) {
        dst = PyByteArray_AS_STRING(buf);
        size = PyByteArray_GET_SIZE(buf);
    } else {
        PyBuffer_Release(&src);
        PyErr_SetString(PyExc_TypeError, "fill: the buffer must be bytes or bytearray");
        return NULL;
    }
    if (start < 0 || stop < start || stop > src.len || at < 0 || at > size - (stop - start)) {
        PyBuffer_Release(&src);
        PyErr_SetString(PyExc_ValueError, "fill: out of bounds");
        return NULL;
    }
    memcpy(dst + at, (const char *)src.buf + start, stop - start);
    PyBuffer_Release(&src);
    Py_RETURN_NONE;
}

static PyObject *finished(PyObject *Py_UNUSED(module), PyObject *buf)
{
    if (PyBytes_CheckExact(buf))
        return Py_NewRef(buf);
    return PyBytes_FromObject(buf);
}

/* keep_freed_memory() -> whether glibc's malloc now keeps freed blocks for reuse. Frame buffers
 * of many sizes come and go once a message; by default glibc serves the bigger ones (a Fetch
 * response of a few hundred KiB) with a fresh mapping each, or trims the heap under them, so
 * their pages are faulted in and zeroed again every time (bodies level about 1.05x). */
static PyObject *keep_freed_memory(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(noargs))
{
#ifdef __GLIBC__
    if (mallopt(M_MMAP_THRESHOLD, 4 << 20) && mallopt(M_TRIM_THRESHOLD, 32 << 20))
        Py_RETURN_TRUE;
#endif
    Py_RETURN_FALSE;
}

static PyMethodDef methods[] = {
    {"frame_buffer", frame_buffer, METH_O, "frame_buffer(n) -> bytes of n bytes, to be filled"},
    {"fill", fill, METH_VARARGS, "fill(buf, at, src, start, stop): buf[at:] = src[start:stop]"},
    {"finished", finished, METH_O, "finished(buf) -> the bytes"},
    {"keep_freed_memory", keep_freed_memory, METH_NOARGS,
     "keep_freed_memory() -> whether freed blocks up to 4 MiB (32 MiB at the heap's top) are kept"},
    {NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_framebuf", .m_size = -1,
                                    .m_methods = methods};

PyMODINIT_FUNC PyInit__framebuf(void)
{
    return PyModule_Create(&module);
}
