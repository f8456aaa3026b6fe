/* Loads the cuda backend's module (libzero-cuda.so, built from src/cuda/ where nvcc is found) on
 * the first use, so that libzero itself needs no CUDA library to start (docs/DEVICE.md). */
#define _GNU_SOURCE /* dladdr */
#include "device/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ZERO_HAVE_CUDA
#include <dlfcn.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const zero__cuda_module *module;
static char load_error[400];

/* Tries one path: 1 when the module loaded, 0 when the file is not there, -1 when it is there
 * and did not load (load_error says why). */
static int try_path(const char *path) {
    if (access(path, F_OK) != 0) return 0;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(load_error, sizeof load_error, "the CUDA backend's module %s did not load: %s", path, dlerror());
        return -1;
    }
    zero__cuda_module_fn entry;
    *(void **)&entry = dlsym(h, ZERO__CUDA_MODULE_ENTRY);
    const zero__cuda_module *m = entry ? entry() : NULL;
    if (!m || m->abi != zero__dev_abi()) {
        snprintf(load_error, sizeof load_error, "the CUDA backend's module %s is from another build of zero", path);
        dlclose(h);
        return -1;
    }
    module = m; /* kept loaded for the process's life */
    return 1;
}

static void load(void) {
    const char *env = getenv("ZERO_CUDA_MODULE");
    if (env && *env) {
        if (try_path(env) == 0) snprintf(load_error, sizeof load_error, "ZERO_CUDA_MODULE '%s': no such file", env);
        return;
    }
    char paths[5][1024];
    int np = 0;
    Dl_info info;
    /* beside the program or the libzero.so this code is in, or in its zero/ folder (installed) */
    if (dladdr((void *)zero_device_create, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        const int len = slash ? (int)(slash - info.dli_fname) : 1;
        const char *dir = slash ? info.dli_fname : ".";
        snprintf(paths[np++], sizeof paths[0], "%.*s/libzero-cuda.so", len, dir);
        snprintf(paths[np++], sizeof paths[0], "%.*s/zero/libzero-cuda.so", len, dir);
        /* an installed `zero` (PREFIX/bin) finds PREFIX/lib/zero, wherever the prefix was moved */
        snprintf(paths[np++], sizeof paths[0], "%.*s/../%s/zero/libzero-cuda.so", len, dir, ZERO_CUDA_MODULE_LIBDIR);
    }
    snprintf(paths[np++], sizeof paths[0], "%s", ZERO_CUDA_MODULE_INSTALLED);
    snprintf(paths[np++], sizeof paths[0], "%s", ZERO_CUDA_MODULE_BUILT);
    for (int i = 0; i < np; i++)
        if (try_path(paths[i]) != 0) return;
    snprintf(load_error, sizeof load_error,
             "the CUDA backend's module libzero-cuda.so was not found (beside the program, in %s, %s; "
             "ZERO_CUDA_MODULE names another)",
             ZERO_CUDA_MODULE_INSTALLED, ZERO_CUDA_MODULE_BUILT);
}

const zero__dev_vtable *zero__dev_cuda_load(char *why, size_t cap) {
    pthread_once(&once, load);
    if (!module) zero__errorf(why, cap, "%s", load_error);
    return module ? module->vt : NULL;
}

zero_status zero_device_describe(const char *backend, char *buf, size_t cap) {
    if (!backend || !buf || !cap) return ZERO_ERR_INVALID_ARG;
    buf[0] = 0;
    if (!strcmp(backend, "cpu") || !strcmp(backend, "fake")) return ZERO_OK;
    if (strcmp(backend, "cuda") != 0) {
        zero__errorf(buf, cap, "device backend '%s': expected one of %s", backend, zero_device_backends_built());
        return ZERO_ERR_CONFIG;
    }
    if (!zero__dev_cuda_load(buf, cap)) return ZERO_ERR_UNSUPPORTED;
    module->describe(buf, cap);
    return ZERO_OK;
}

#else

const zero__dev_vtable *zero__dev_cuda_load(char *why, size_t cap) {
    zero__errorf(why, cap, "this build has no CUDA backend (nvcc was not found when it was configured)");
    return NULL;
}

zero_status zero_device_describe(const char *backend, char *buf, size_t cap) {
    if (!backend || !buf || !cap) return ZERO_ERR_INVALID_ARG;
    buf[0] = 0;
    if (!strcmp(backend, "cpu") || !strcmp(backend, "fake")) return ZERO_OK;
    if (!strcmp(backend, "cuda")) {
        zero__dev_cuda_load(buf, cap);
        return ZERO_ERR_UNSUPPORTED;
    }
    zero__errorf(buf, cap, "device backend '%s': expected one of %s", backend, zero_device_backends_built());
    return ZERO_ERR_CONFIG;
}

#endif
