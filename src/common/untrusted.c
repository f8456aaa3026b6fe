/* The checks every reader of a file zero did not write shares (docs/SECURITY.md): plain names
 * inside a directory, whole-file reads bounded before they allocate, JSON size and depth. */
#define _GNU_SOURCE /* O_NOCTTY, realpath */
#include "common/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME_MAX_BYTES 255

/* 1 when path p lies strictly under directory root (both canonical, without a trailing '/'). */
static int under(const char *p, const char *root) {
    const size_t n = strlen(root);
    if (n == 1 && root[0] == '/') return p[0] == '/' && p[1] != 0;
    return !strncmp(p, root, n) && p[n] == '/' && p[n + 1] != 0;
}

/* The Hugging Face hub cache keeps a model as R/snapshots/REV/NAME -> ../../blobs/HASH: for a
 * canonical dir R/snapshots/REV, writes R/blobs into buf (0), else -1. */
static int hub_blobs(const char *dir, char *buf, size_t cap) {
    const char *rev = strrchr(dir, '/');
    if (!rev || rev == dir) return -1;
    const size_t at = (size_t)(rev - dir); /* dir[0, at) = R/snapshots */
    if (at < 10 || strncmp(dir + at - 10, "/snapshots", 10)) return -1;
    const size_t r = at - 10; /* dir[0, r) = R */
    if (r == 0 || r + 7 > cap - 1) return -1;
    memcpy(buf, dir, r);
    memcpy(buf + r, "/blobs", 7);
    return 0;
}

zero_status zero_path_in_dir(const char *dir, const char *name, char *out, size_t cap, zero_error *err) {
    if (cap) out[0] = 0;
    if (!dir || !*dir || !name || !out) {
        if (err) ZERO__ERR(err, "zero_path_in_dir: expected a directory, a name and a buffer");
        return ZERO_ERR_INVALID_ARG;
    }
    const size_t n = strlen(name);
    int plain = n > 0 && n <= NAME_MAX_BYTES && strcmp(name, ".") && strcmp(name, "..");
    for (size_t i = 0; plain && i < n; i++) plain = name[i] != '/' && (unsigned char)name[i] >= 0x20 && name[i] != 0x7f;
    if (!plain) {
        if (err)
            ZERO__ERR(err, "%.200s: file name '%.*s%s': expected a plain file name inside the directory (no '/', no "
                      "'..', not absolute, no control characters, at most %d bytes)",
                      dir, (int)(n < 100 ? n : 100), name, n > 100 ? "..." : "", NAME_MAX_BYTES);
        return ZERO_ERR_FORMAT;
    }
    if ((size_t)snprintf(out, cap, "%s/%s", dir, name) >= cap) {
        if (cap) out[0] = 0;
        if (err) ZERO__ERR(err, "%.200s/%.100s: path too long", dir, name);
        return ZERO_ERR_INVALID_ARG;
    }
    struct stat sb;
    if (lstat(out, &sb) != 0) {
        if (errno == ENOENT) return ZERO_OK;
        if (err) ZERO__ERR(err, "%.400s: %s", out, strerror(errno));
        return ZERO_ERR_IO;
    }
    if (S_ISLNK(sb.st_mode)) {
        char *rd = realpath(dir, NULL), *rf = realpath(out, NULL);
        zero_status s = ZERO_OK;
        char blobs[PATH_MAX];
        if (!rd || !rf) {
            if (err) ZERO__ERR(err, "%.400s: a symbolic link that cannot be followed: %s", out, strerror(errno));
            s = ZERO_ERR_IO;
        } else if (!under(rf, rd) && !(hub_blobs(rd, blobs, sizeof blobs) == 0 && under(rf, blobs))) {
            if (err)
                ZERO__ERR(err, "%.200s is a symbolic link to %.200s, outside %.100s: refused (the files a directory "
                          "names stay inside it)", out, rf, rd);
            s = ZERO_ERR_FORMAT;
        } else if (stat(rf, &sb) != 0) {
            if (err) ZERO__ERR(err, "%.400s: %s", rf, strerror(errno));
            s = ZERO_ERR_IO;
        }
        free(rd);
        free(rf);
        if (s != ZERO_OK) return s;
    }
    if (!S_ISREG(sb.st_mode)) {
        if (err) ZERO__ERR(err, "%.400s: not a regular file", out);
        return ZERO_ERR_FORMAT;
    }
    return ZERO_OK;
}

zero_status zero_read_file(const char *path, uint64_t max_bytes, char **text, size_t *len, zero_error *err) {
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!path || !text) {
        if (err) ZERO__ERR(err, "zero_read_file: expected a path");
        return ZERO_ERR_INVALID_ARG;
    }
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below) */
    int fd;
    do fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        if (err) ZERO__ERR(err, "cannot open %.400s: %s", path, strerror(errno));
        return ZERO_ERR_IO;
    }
    struct stat sb;
    zero_status s = ZERO_OK;
    char *buf = NULL;
    size_t got = 0;
    if (fstat(fd, &sb) != 0) {
        if (err) ZERO__ERR(err, "cannot read %.400s: %s", path, strerror(errno));
        s = ZERO_ERR_IO;
    } else if (!S_ISREG(sb.st_mode)) {
        if (err) ZERO__ERR(err, "%.400s: not a regular file", path);
        s = ZERO_ERR_FORMAT;
    } else if ((uint64_t)sb.st_size > max_bytes || (uint64_t)sb.st_size >= SIZE_MAX) {
        if (err)
            ZERO__ERR(err, "%.400s: %llu bytes, more than the %llu this kind of file may have: refused before reading",
                      path, (unsigned long long)sb.st_size, (unsigned long long)max_bytes);
        s = ZERO_ERR_FORMAT;
    } else if (!(buf = malloc((size_t)sb.st_size + 1))) {
        if (err) ZERO__ERR(err, "%.400s: out of memory for %llu bytes", path, (unsigned long long)sb.st_size);
        s = ZERO_ERR_NOMEM;
    } else {
        /* at most the size fstat gave: a file that grows meanwhile is read up to it */
        const size_t want = (size_t)sb.st_size;
        while (got < want) {
            const ssize_t r = read(fd, buf + got, want - got);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) {
                if (err) ZERO__ERR(err, "cannot read %.400s: %s", path, strerror(errno));
                s = ZERO_ERR_IO;
                break;
            }
            if (r == 0) break;
            got += (size_t)r;
        }
    }
    close(fd);
    if (s != ZERO_OK) {
        free(buf);
        return s;
    }
    buf[got] = 0;
    *text = buf;
    if (len) *len = got;
    return ZERO_OK;
}

zero_status zero_json_check(const char *text, size_t len, uint64_t max_values, int max_depth, zero_error *err) {
    if (!text && len) {
        if (err) ZERO__ERR(err, "zero_json_check: no text");
        return ZERO_ERR_INVALID_ARG;
    }
    /* values <= 1 + brackets + commas: each value but the first of a container follows a comma */
    uint64_t values = 1;
    int depth = 0;
    for (size_t i = 0; i < len; i++) {
        const char c = text[i];
        if (c == '"') {
            for (i++; i < len && text[i] != '"'; i++)
                if (text[i] == '\\') i++;
        } else if (c == '{' || c == '[') {
            values++;
            if (++depth > max_depth) {
                if (err) ZERO__ERR(err, "JSON nested more than %d levels deep (at byte %zu)", max_depth, i);
                return ZERO_ERR_FORMAT;
            }
        } else if (c == '}' || c == ']') {
            if (depth > 0) depth--;
        } else if (c == ',') {
            values++;
        } else {
            continue;
        }
        if (values > max_values) {
            if (err) ZERO__ERR(err, "JSON with more than %llu values (at byte %zu)", (unsigned long long)max_values, i);
            return ZERO_ERR_FORMAT;
        }
    }
    return ZERO_OK;
}

int zero_create_tmp(const char *path, char *tmp, size_t cap, zero_error *err) {
    if (!path || !*path || !tmp || (size_t)snprintf(tmp, cap, "%s.tmp", path) >= cap) {
        if (tmp && cap) tmp[0] = 0;
        if (err) ZERO__ERR(err, "%.400s: path too long for its temporary file", path ? path : "");
        return -1;
    }
    if (unlink(tmp) != 0 && errno != ENOENT && errno != EISDIR && errno != EPERM) {
        if (err) ZERO__ERR(err, "cannot remove the leftover %.400s: %s", tmp, strerror(errno));
        return -1;
    }
    int fd;
    do fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    while (fd < 0 && errno == EINTR);
    if (fd < 0 && err) ZERO__ERR(err, "cannot create %.400s: %s", tmp, strerror(errno));
    return fd;
}
