/* tests/unit/test_untrusted.c — the checks on files zero did not write (docs/SECURITY.md): plain
 * names inside a directory and symbolic links leading out (zero_path_in_dir, through the model
 * directory, its index and the tokenizer), bounded reads, JSON size and depth, temporary files
 * that follow no link, private scratch (ZERO_IO_PRIVATE, swap files). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decoder/hf.h"
#include "harness.h"
#include "zero/zero.h"

static char T[256]; /* the test's directory */

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    ZT_CHECKF(system(cmd) == 0, "shell: %s", cmd);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    ZT_CHECKF(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", path);
}

static char *src_dir(void) { return getenv("ZERO_SOURCE_DIR") ? getenv("ZERO_SOURCE_DIR") : "."; }

/* status and a needle in the message */
#define REFUSED(call, want, needle)                                                                \
    do {                                                                                           \
        zero_error e_;                                                                             \
        e_.msg[0] = 0;                                                                             \
        zero_status s_ = (call(&e_));                                                              \
        ZT_CHECKF(s_ == (want) && strstr(e_.msg, needle), "%s: status %d (want %d), message '%s' lacks '%s'", #call, \
                  s_, (int)(want), e_.msg, needle);                                                \
    } while (0)

static const char *g_name;
static char g_dir[512];
static zero_status in_dir(zero_error *e) {
    char out[1024];
    return zero_path_in_dir(g_dir, g_name, out, sizeof out, e);
}

static void test_names(void) {
    snprintf(g_dir, sizeof g_dir, "%s/m", T);
    sh("mkdir -p %s/m && echo '{}' > %s/m/config.json", T, T);
    char out[1024], long_name[300];
    zero_error e;
    ZT_OK(zero_path_in_dir(g_dir, "config.json", out, sizeof out, &e));
    ZT_CHECK(strstr(out, "/m/config.json") != NULL);
    ZT_OK(zero_path_in_dir(g_dir, "missing.safetensors", out, sizeof out, &e)); /* the open says it */
    memset(long_name, 'a', 256);
    long_name[256] = 0;
    const char *bad[] = {"", ".", "..", "a/b", "/etc/passwd", "../x", "sub/../../x", "x\ny", "tab\tname", long_name};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        g_name = bad[i];
        REFUSED(in_dir, ZERO_ERR_FORMAT, "expected a plain file name inside the directory");
    }
    ZT_EQ_INT(zero_path_in_dir(g_dir, "x", out, 8, &e), ZERO_ERR_INVALID_ARG); /* does not fit */
}

static void test_links(void) {
    snprintf(g_dir, sizeof g_dir, "%s/m", T);
    sh("cd %s && mkdir -p m/sub && echo real > m/real.json && echo secret > outside.json && "
       "ln -sf real.json m/in.json && ln -sf ../outside.json m/out.json && ln -sf /etc/passwd m/abs && "
       "ln -sf in.json m/chain_in && ln -sf out.json m/chain_out && ln -sf nowhere m/dangling && "
       "ln -sf sub/../real.json m/dotdot_in && mkfifo m/fifo && ln -sfn m mlink",
       T);
    g_name = "in.json";
    zero_error e;
    char out[1024];
    ZT_OK(zero_path_in_dir(g_dir, "in.json", out, sizeof out, &e));
    ZT_OK(zero_path_in_dir(g_dir, "chain_in", out, sizeof out, &e));
    ZT_OK(zero_path_in_dir(g_dir, "dotdot_in", out, sizeof out, &e)); /* '..' inside a link that stays in */
    const char *outside[] = {"out.json", "abs", "chain_out"};
    for (int i = 0; i < 3; i++) {
        g_name = outside[i];
        REFUSED(in_dir, ZERO_ERR_FORMAT, "outside");
    }
    g_name = "dangling";
    REFUSED(in_dir, ZERO_ERR_IO, "cannot be followed");
    g_name = "sub";
    REFUSED(in_dir, ZERO_ERR_FORMAT, "not a regular file");
    g_name = "fifo";
    REFUSED(in_dir, ZERO_ERR_FORMAT, "not a regular file");
    /* the directory itself through a link: its files are still inside it */
    snprintf(g_dir, sizeof g_dir, "%s/mlink", T);
    ZT_OK(zero_path_in_dir(g_dir, "in.json", out, sizeof out, &e));
    g_name = "out.json";
    REFUSED(in_dir, ZERO_ERR_FORMAT, "outside");
    /* the Hugging Face hub cache: snapshots/REV/NAME -> ../../blobs/HASH is inside the repository */
    sh("cd %s && mkdir -p hub/models--x/snapshots/abc hub/models--x/blobs hub/other/blobs && "
       "echo '{}' > hub/models--x/blobs/h1 && echo no > hub/other/blobs/h2 && echo no > hub/models--x/h3 && "
       "ln -sf ../../blobs/h1 hub/models--x/snapshots/abc/config.json && "
       "ln -sf ../../../other/blobs/h2 hub/models--x/snapshots/abc/other.json && "
       "ln -sf ../../h3 hub/models--x/snapshots/abc/up.json && "
       "mkdir -p notsnap/abc && ln -sf ../../hub/models--x/blobs/h1 notsnap/abc/config.json",
       T);
    snprintf(g_dir, sizeof g_dir, "%s/hub/models--x/snapshots/abc", T);
    ZT_OK(zero_path_in_dir(g_dir, "config.json", out, sizeof out, &e));
    g_name = "other.json";
    REFUSED(in_dir, ZERO_ERR_FORMAT, "outside");
    g_name = "up.json";
    REFUSED(in_dir, ZERO_ERR_FORMAT, "outside");
    snprintf(g_dir, sizeof g_dir, "%s/notsnap/abc", T);
    g_name = "config.json";
    REFUSED(in_dir, ZERO_ERR_FORMAT, "outside");
}

static const char *g_path;
static uint64_t g_max;
static zero_status read_it(zero_error *e) {
    char *t = NULL;
    size_t n = 0;
    zero_status s = zero_read_file(g_path, g_max, &t, &n, e);
    free(t);
    return s;
}

static void test_read(void) {
    char p[512], q[512];
    snprintf(p, sizeof p, "%s/r.txt", T);
    write_file(p, "hello");
    char *t = NULL;
    size_t n = 0;
    zero_error e;
    ZT_OK(zero_read_file(p, 5, &t, &n, &e));
    ZT_CHECK(n == 5 && t && !strcmp(t, "hello"));
    free(t);
    g_path = p, g_max = 4;
    REFUSED(read_it, ZERO_ERR_FORMAT, "5 bytes, more than the 4");
    snprintf(q, sizeof q, "%s/r.fifo", T);
    ZT_CHECK(mkfifo(q, 0600) == 0);
    g_path = q, g_max = 100; /* no writer: it must not wait for one */
    REFUSED(read_it, ZERO_ERR_FORMAT, "not a regular file");
    g_path = T;
    REFUSED(read_it, ZERO_ERR_FORMAT, "not a regular file");
    snprintf(q, sizeof q, "%s/none", T);
    g_path = q;
    REFUSED(read_it, ZERO_ERR_IO, "cannot open");
}

static void test_json(void) {
    zero_error e;
    ZT_OK(zero_json_check("[1,2,3]", 7, 4, 1, &e)); /* the array and its 3 numbers */
    ZT_EQ_INT(zero_json_check("[1,2,3]", 7, 3, 1, &e), ZERO_ERR_FORMAT);
    ZT_CHECK(strstr(e.msg, "more than 3 values") != NULL);
    ZT_OK(zero_json_check("{\"a\":{\"b\":[]}}", 14, 100, 3, &e));
    ZT_EQ_INT(zero_json_check("{\"a\":{\"b\":[]}}", 14, 100, 2, &e), ZERO_ERR_FORMAT);
    ZT_CHECK(strstr(e.msg, "nested more than 2 levels") != NULL);
    const char *s = "[\"[[[[,,,,\\\"[[[\", 1]"; /* brackets and commas inside strings count for nothing */
    ZT_OK(zero_json_check(s, strlen(s), 3, 1, &e));
    /* the grammar: what another reader would refuse, or read otherwise, is refused here */
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"", "ends where a value was expected"},
        {"  \n ", "ends where a value was expected"},
        {"{\"a\": 1} x", "bytes after the JSON value"},
        {"{\"a\": 1}{}", "bytes after the JSON value"},
        {"[1,]", "where a value was expected"},
        {"{\"a\":1,}", "expected a key"},
        {"{\"a\" 1}", "expected ':'"},
        {"[1 2]", "expected ',' or ']'"},
        {"{\"a\":1 \"b\":2}", "expected ',' or '}'"},
        {"[01]", "leading zero"},
        {"[1.]", "after its '.'"},
        {"[1e]", "exponent"},
        {"[-]", "without digits"},
        {"[+1]", "'+' where a value was expected"},
        {"[NaN]", "NaN is not JSON (RFC 8259 has no such number) and is not supported"},
        {"[-Infinity]", "-Infinity is not JSON"},
        {"[Infinity]", "Infinity is not JSON"},
        {"[Nan]", "'N' where a value was expected"},
        {"[tru]", "'t' where a value was expected"},
        {"[\"ab", "does not end"},
        {"[\"a\tb\"]", "control character (0x09)"},
        {"[\"\\x\"]", "an escape that is not"},
        {"[\"\\u12G4\"]", "an escape that is not"},
        {"[\"\\udc00\"]", "low surrogate"},
        {"{\"text\": \"a\\u0000b\"}", "\\u0000 (a NUL character) inside a string is not supported"},
        {"[\"\\ud800x\"]", "high surrogate"},
        {"[\"\xff\"]", "0xff inside a string is not UTF-8"},
        {"[\"\xc0\xaf\"]", "0xc0 inside a string"},         /* overlong '/' */
        {"[\"\xed\xa0\x80\"]", "0xed inside a string"},     /* a surrogate in UTF-8 */
        {"[\"\xf4\x90\x80\x80\"]", "0xf4 inside a string"}, /* past U+10FFFF */
        {"[\"\xe2\x82\"]", "0xe2 inside a string"},          /* cut short */
        {"{\"a\":1,\"b\":{\"a\":2},\"a\":3}", "the key \"a\" appears twice in one object (first at byte 1)"},
        {"{\"A\":1,\"\\u0041\":2}", "appears twice"},
        {"{\"\\ud83d\\ude00\":1,\"\xf0\x9f\x98\x80\":2}", "appears twice"},
        {"{\"x\":1}\n\n  {", "line 3, column 3 (byte 11)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const size_t n = strlen(bad[i].text);
        e.msg[0] = 0;
        const zero_status st = zero_json_check(bad[i].text, n, 1000, 8, &e);
        if (st != ZERO_ERR_FORMAT || !strstr(e.msg, bad[i].why) || !strstr(e.msg, "not valid JSON at "))
            printf("  json case %zu: status %d, '%s' (expected '%s')\n", i, (int)st, e.msg, bad[i].why);
        ZT_CHECK(st == ZERO_ERR_FORMAT && strstr(e.msg, bad[i].why) != NULL);
    }
    ZT_EQ_INT(zero_json_check("[1]\0", 4, 10, 2, &e), ZERO_ERR_FORMAT); /* a NUL inside the length counts */
    ZT_CHECK(strstr(e.msg, "bytes after the JSON value (") == NULL && strstr(e.msg, "bytes after the JSON value") != NULL);
    static const char *const good[] = {
        " {\"a\": [1, -0, 0.5, 1e9, -2.5E-3, true, false, null, \"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\"]}\r\n",
        "{\"\xc3\xa9\": {\"a\": 1}, \"b\": {\"a\": 2}, \"\\u00e9x\": 3}", /* equal keys in different objects */
        "{\"\\ud83d\\ude00\":1,\"\xf0\x9f\x98\x81\":2}",
        "\"\xef\xbf\xbf\xf4\x8f\xbf\xbf\"", "0", "[[[]]]", "{}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        const zero_status st = zero_json_check(good[i], strlen(good[i]), 1000, 8, &e);
        if (st != ZERO_OK) printf("  good json %zu: %s\n", i, e.msg);
        ZT_OK(st);
    }
    /* a byte order mark is named as one */
    ZT_EQ_INT(zero_json_check("\xef\xbb\xbf{}", 5, 10, 2, &e), ZERO_ERR_FORMAT);
    ZT_CHECK(strstr(e.msg, "column 1 (byte 0): a UTF-8 byte order mark") != NULL);
    /* zero_json_check_last: a key twice is read as Python's json and serde_json read it, the last;
     * the earlier members are blanked (line breaks kept), at every depth and for escaped keys too */
    static const struct {
        const char *text, *want; /* want NULL: nothing repeated, no copy */
    } last[] = {
        {"{\"a\":1,\"b\":2}", NULL},
        {"{\"a\":1,\"b\":{\"a\":2},\"a\":3}", "{      \"b\":{\"a\":2},\"a\":3}"},
        {"{\"a\" : [1,\n2] ,\n \"a\":{\"x\":1,\"x\":2},\"a\":0}", "{         \n    \n                   \"a\":0}"},
        {"[{\"k\":{\"x\":1,\"x\":2}}, {\"\\u0041\":1,\"A\":2,\"\\u0041\":3}]",
         "[{\"k\":{      \"x\":2}}, {                 \"\\u0041\":3}]"},
    };
    for (size_t i = 0; i < sizeof last / sizeof last[0]; i++) {
        char *t = (char *)1;
        const zero_status st = zero_json_check_last(last[i].text, strlen(last[i].text), 1000, 8, &t, &e);
        ZT_OK(st);
        if (!last[i].want) {
            ZT_CHECK(t == NULL);
            continue;
        }
        ZT_CHECKF(t && !strcmp(t, last[i].want), "case %zu: '%s'", i, t ? t : "(none)");
        if (t) ZT_OK(zero_json_check(t, strlen(t), 1000, 8, &e)); /* each key once now */
        free(t);
    }
    char *t = (char *)1;
    ZT_EQ_INT(zero_json_check_last("{\"a\":1,\"a\":2,}", 14, 1000, 8, &t, &e), ZERO_ERR_FORMAT);
    ZT_CHECK(t == NULL && strstr(e.msg, "expected a key") != NULL);
}

static void test_tmp_and_private(void) {
    char path[512], tmp[600], target[512];
    snprintf(path, sizeof path, "%s/out.json", T);
    snprintf(target, sizeof target, "%s/victim", T);
    write_file(target, "keep");
    sh("ln -sf %s %s/out.json.tmp", target, T); /* planted where the temporary file goes */
    zero_error e;
    const mode_t old = umask(027);
    int fd = zero_create_tmp(path, tmp, sizeof tmp, &e);
    umask(old);
    ZT_CHECKF(fd >= 0, "%s", e.msg);
    struct stat sb;
    ZT_CHECK(fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 0777) == 0640);
    ZT_CHECK(fd >= 0 && write(fd, "new", 3) == 3);
    if (fd >= 0) close(fd);
    FILE *f = fopen(target, "r");
    char buf[16] = "";
    ZT_CHECK(f && fgets(buf, sizeof buf, f) && !strcmp(buf, "keep")); /* the link was not followed */
    if (f) fclose(f);
    ZT_CHECK(lstat(tmp, &sb) == 0 && S_ISREG(sb.st_mode));

    /* ZERO_IO_PRIVATE: 0600 whatever the umask; refuses a link, a shared file */
    zero_io *io = NULL;
    ZT_OK(zero_io_create_posix(&io, &e));
    char p1[512], p2[512];
    snprintf(p1, sizeof p1, "%s/scratch", T);
    const mode_t o2 = umask(0);
    zero_io_file *h = NULL;
    ZT_OK(zero_io_open(io, p1, ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_EXCL | ZERO_IO_PRIVATE, &h));
    umask(o2);
    ZT_CHECK(stat(p1, &sb) == 0 && (sb.st_mode & 0777) == 0600);
    zero_io_close(h);
    h = NULL;
    ZT_CHECK(chmod(p1, 0644) == 0);
    ZT_EQ_INT(zero_io_open(io, p1, ZERO_IO_READ | ZERO_IO_WRITE | ZERO_IO_PRIVATE, &h), ZERO_ERR_IO);
    ZT_CHECKF(strstr(zero_io_last_error(io), "readable or writable by other users") != NULL, "%s", zero_io_last_error(io));
    snprintf(p2, sizeof p2, "%s/scratch_link", T);
    sh("ln -sf %s %s", target, p2);
    ZT_EQ_INT(zero_io_open(io, p2, ZERO_IO_READ | ZERO_IO_WRITE | ZERO_IO_PRIVATE, &h), ZERO_ERR_IO);
    ZT_CHECKF(strstr(zero_io_last_error(io), "symbolic link") != NULL, "%s", zero_io_last_error(io));
    ZT_EQ_INT(zero_io_open(io, p2, ZERO_IO_READ | ZERO_IO_NOFOLLOW, &h), ZERO_ERR_IO);
    /* a plain create follows the umask, as other tools */
    snprintf(p2, sizeof p2, "%s/plain", T);
    const mode_t o3 = umask(002);
    ZT_OK(zero_io_open(io, p2, ZERO_IO_WRITE | ZERO_IO_CREATE, &h));
    umask(o3);
    ZT_CHECK(stat(p2, &sb) == 0 && (sb.st_mode & 0777) == 0664);
    zero_io_close(h);

    /* swap files: 0600 with umask 0, never through a link, never another user's */
    char nv[512];
    snprintf(nv, sizeof nv, "%s/nvme", T);
    const mode_t o4 = umask(0);
    zero_swap *s = NULL;
    ZT_OK(zero_swap_create(&s, io, nv, "sec", 0, 1, "optim", 4096, &e));
    umask(o4);
    ZT_CHECK(s && stat(zero_swap_path(s), &sb) == 0 && (sb.st_mode & 0777) == 0600);
    char swp[600];
    snprintf(swp, sizeof swp, "%s", s ? zero_swap_path(s) : "");
    ZT_OK(zero_swap_remove(s, &e));
    sh("ln -sf %s %s", target, swp);
    ZT_EQ_INT(zero_swap_probe(swp), ZERO_SWAP_FOREIGN);
    s = NULL;
    ZT_EQ_INT(zero_swap_create(&s, io, nv, "sec", 0, 1, "optim", 4096, &e), ZERO_ERR_IO);
    ZT_CHECKF(strstr(e.msg, "is not a zero swap file") != NULL, "%s", e.msg);
    f = fopen(target, "r");
    ZT_CHECK(f && fgets(buf, sizeof buf, f) && !strcmp(buf, "keep"));
    if (f) fclose(f);
    unlink(swp);
    if (geteuid() == 0) { /* a stale swap file (its process is gone) of another user is left alone */
        ZT_OK(zero_swap_create(&s, io, nv, "sec", 0, 1, "optim", 4096, &e));
        snprintf(swp, sizeof swp, "%s", zero_swap_path(s));
        sh("cp %s %s.keep", swp, swp);
        ZT_OK(zero_swap_remove(s, &e));
        sh("mv %s.keep %s && chown 65534 %s", swp, swp, swp);
        ZT_EQ_INT(zero_swap_probe(swp), ZERO_SWAP_FOREIGN);
        unlink(swp);
    } else {
        printf("SKIP another user's swap file: needs root to chown\n");
    }
    zero_io_free(io);
}

/* Through the readers: a model directory, its index, its tokenizer. */
static void test_model_dir(void) {
    const char *S = src_dir();
    sh("cd %s && mkdir -p md && cp %s/tests/data/decoder/llama_mqa_sharded/* md/ && echo secret > stolen.bin", T, S);
    char md[512];
    snprintf(md, sizeof md, "%s/md", T);
    dec_hf *h = NULL;
    zero_error e;
    ZT_OK(dec_hf_open(&h, md, &e));
    dec_hf_close(h);
    h = NULL;
    /* an index naming a file outside, by '..', by an absolute path, through a link */
    const char *evil[] = {"../stolen.bin", "/etc/passwd", "evil.safetensors"};
    sh("ln -sf ../stolen.bin %s/evil.safetensors", md);
    for (int i = 0; i < 3; i++) {
        sh("sed -i '0,/model-00001-of-00004.safetensors/s||%s|' %s/model.safetensors.index.json", evil[i], md);
        ZT_EQ_INT(dec_hf_open(&h, md, &e), ZERO_ERR_FORMAT);
        ZT_CHECKF(strstr(e.msg, evil[i]) != NULL && (strstr(e.msg, "plain file name") || strstr(e.msg, "outside")),
                  "%s", e.msg);
        dec_hf_close(h);
        h = NULL;
        sh("cp %s/tests/data/decoder/llama_mqa_sharded/model.safetensors.index.json %s/", S, md);
    }
    /* config.json through a link leading out */
    sh("cd %s && mv config.json ../config.real && ln -sf ../config.real config.json", md);
    ZT_EQ_INT(dec_hf_open(&h, md, &e), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(e.msg, "outside") != NULL, "%s", e.msg);
    dec_hf_close(h);
    /* the tokenizer of a directory: tokenizer.json and tokenizer_config.json stay inside */
    sh("cd %s && mkdir -p tk && cp %s/tests/data/tokenizer/qwen2/tokenizer.json tk/ && "
       "cp %s/tests/data/tokenizer/qwen2/tokenizer_config.json tkcfg.json && ln -sf ../tkcfg.json tk/tokenizer_config.json",
       T, S, S);
    char tk[512];
    snprintf(tk, sizeof tk, "%s/tk", T);
    zero_tokenizer *t = NULL;
    ZT_EQ_INT(zero_tokenizer_load(&t, tk, &e), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(e.msg, "tokenizer_config.json is a symbolic link") != NULL, "%s", e.msg);
    zero_tokenizer_free(t);
    t = NULL;
    sh("cd %s && rm tk/tokenizer_config.json && mv tk/tokenizer.json tk.json && ln -sf ../tk.json tk/tokenizer.json", T);
    ZT_EQ_INT(zero_tokenizer_load(&t, tk, &e), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(e.msg, "outside") != NULL, "%s", e.msg);
    zero_tokenizer_free(t);
    t = NULL;
    /* laid out as the hub cache does it, it loads */
    sh("cd %s && mkdir -p hubm/snapshots/r1 hubm/blobs && mv tk.json hubm/blobs/aa && "
       "ln -sf ../../blobs/aa hubm/snapshots/r1/tokenizer.json",
       T);
    snprintf(tk, sizeof tk, "%s/hubm/snapshots/r1", T);
    ZT_OK(zero_tokenizer_load(&t, tk, &e));
    zero_tokenizer_free(t);
}

int main(void) {
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(T, sizeof T, "%s/zt_untrusted_XXXXXX", tmp);
    if (!mkdtemp(T)) {
        perror("mkdtemp");
        return 1;
    }
    test_names();
    test_links();
    test_read();
    test_json();
    test_tmp_and_private();
    test_model_dir();
    sh("rm -rf %s", T);
    return zt_finish("test_untrusted");
}
