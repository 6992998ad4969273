/* A frame's message bytes, filled in place as its segments arrive, compiled: dissector.framebuf
 * (the pure-Python twin, a bytearray) says what it does. A frame that spans segments is
 * written into one buffer of its size: no piece kept per segment, no join at the end, and the
 * file reader's runs (capture/_walk.c) copy their segments straight into it.
 *
 * frame_buffer(n): a new FrameBuffer (a bytes subtype) of n bytes, not yet written. fill(buf,
 * at, src, start, stop): src[start:stop] (any bytes-like, the buffer itself included) written at
 * buf[at:]. finished(buf): the bytes, the same object made an exact bytes. Writing into a bytes
 * object is sound only while nothing else has seen it: fill writes only into a FrameBuffer (or a
 * bytearray), which only frame_buffer makes and finished ends; the framer keeps its buffer to
 * itself until the frame is complete. Any other bytes object (the interpreter's cached b"a",
 * a key of a dict) is refused. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* The same layout as bytes: an object is made a FrameBuffer and made bytes again by its type
 * alone. Not instantiable from Python (tp_new cleared). */
static PyTypeObject FrameBuffer = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dissector._framebuf.FrameBuffer",
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a frame's bytes being filled (frame_buffer, fill, finished)",
};

static PyObject *frame_buffer(PyObject *Py_UNUSED(module), PyObject *arg)
{
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "negative frame size");
        return NULL;
    }
    /* never the shared empty bytes: one byte made, its size then set to n = 0 */
    PyObject *b = PyBytes_FromStringAndSize(NULL, n ? n : 1);
    if (b == NULL)
        return NULL;
    if (!n) {
        Py_SET_SIZE(b, 0);
        PyBytes_AS_STRING(b)[0] = 0;
    }
    Py_SET_TYPE(b, &FrameBuffer);
    return b;
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
    if (Py_IS_TYPE(buf, &FrameBuffer)) {
        dst = PyBytes_AS_STRING(buf);
        size = PyBytes_GET_SIZE(buf);
    } else if (PyByteArray_CheckExact(buf)) {
        dst = PyByteArray_AS_STRING(buf);
        size = PyByteArray_GET_SIZE(buf);
    } else {
        PyBuffer_Release(&src);
        PyErr_SetString(PyExc_TypeError,
                        "fill: the buffer must be one frame_buffer made (or a bytearray)");
        return NULL;
    }
    if (start < 0 || stop < start || stop > src.len || at < 0 || at > size - (stop - start)) {
        PyBuffer_Release(&src);
        PyErr_SetString(PyExc_ValueError, "fill: out of bounds");
        return NULL;
    }
    memmove(dst + at, (const char *)src.buf + start, stop - start);   /* src may be buf */
    PyBuffer_Release(&src);
    Py_RETURN_NONE;
}

static PyObject *finished(PyObject *Py_UNUSED(module), PyObject *buf)
{
    if (Py_IS_TYPE(buf, &FrameBuffer)) {   /* no longer written: bytes from now on */
        Py_SET_TYPE(buf, &PyBytes_Type);
        return Py_NewRef(buf);
    }
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
    FrameBuffer.tp_base = &PyBytes_Type;
    FrameBuffer.tp_basicsize = PyBytes_Type.tp_basicsize;
    FrameBuffer.tp_itemsize = PyBytes_Type.tp_itemsize;
    if (PyType_Ready(&FrameBuffer) < 0)
        return NULL;
    FrameBuffer.tp_new = NULL;   /* made by frame_buffer only */
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddObjectRef(m, "FrameBuffer", (PyObject *)&FrameBuffer) < 0)
        Py_CLEAR(m);
    return m;
}
