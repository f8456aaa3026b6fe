/* Saves never reach outside their directory: symbolic links planted at every place a save
 * creates, renames or removes (before the save and during it), foreign files in the directories
 * it cleans, rank files of another save, links inside a checkpoint on load, the save directory's
 * lock, and a `latest` left behind by a run stopped between publishing a step and replacing it.
 * Every case checks that a victim directory outside the save is untouched, to the byte. */
#include "harness.h"
#include "zero/zero.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[512];

static void run(const char *fmt, const char *a, const char *b) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    if (system(cmd) != 0) ZT_FAIL("command failed: %s", cmd);
}

static int exists(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0;
}

static int is_link(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0 && S_ISLNK(st.st_mode);
}

static void put(const char *p, const char *text) {
    FILE *f = fopen(p, "wb");
    if (!f) {
        ZT_FAIL("cannot write %s: %s", p, strerror(errno));
        return;
    }
    fputs(text, f);
    fclose(f);
}

/* A victim outside the save: two files and a subdirectory; victim_ok says it is as made. */
static void make_victim(const char *v) {
    char p[900];
    run("rm -rf '%s' && mkdir -p '%s/sub'", v, v);
    snprintf(p, sizeof p, "%s/keep.txt", v);
    put(p, "keep me\n");
    snprintf(p, sizeof p, "%s/sub/deep.txt", v);
    put(p, "deep\n");
}

static int victim_ok(const char *v) {
    char p[900], buf[64] = "";
    snprintf(p, sizeof p, "%s/keep.txt", v);
    FILE *f = fopen(p, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (strcmp(buf, "keep me\n") != 0) return 0;
    snprintf(p, sizeof p, "%s/sub/deep.txt", v);
    struct stat st;
    if (stat(p, &st) != 0 || st.st_size != 5) return 0;
    /* nothing of a checkpoint's was written into it */
    snprintf(p, sizeof p, "%s/rank_00000.safetensors", v);
    if (exists(p)) return 0;
    snprintf(p, sizeof p, "%s/manifest.json", v);
    return !exists(p);
}

/* Rank r's part of a save of one 1000-element tensor (value = seed + index). */
static zero_status rank_write(const char *dir, int64_t step, int r, int W, const char *id, int seed,
                              zero_ckpt_writer **out, char *msg, size_t cap) {
    zero_error err;
    err.msg[0] = 0;
    *out = NULL;
    zero_status s = zero_ckpt_writer_begin(out, NULL, dir, step, r, W, id, &err);
    if (s != ZERO_OK) {
        snprintf(msg, cap, "%s", err.msg);
        return s;
    }
    zero_ckpt_writer *w = *out;
    s = zero_ckpt_writer_add(w, "u/master", ZERO_DTYPE_FP32, 1000, 16);
    zero_shard sh;
    zero_partition_shard(1000, W, r, 16, &sh);
    float *b = malloc((sh.valid + 1) * sizeof *b);
    for (uint64_t j = 0; j < sh.valid; j++) b[j] = (float)(seed + (int)(sh.offset + j));
    if (s == ZERO_OK) s = zero_ckpt_writer_write(w, b, sh.valid * sizeof *b);
    free(b);
    if (s == ZERO_OK) s = zero_ckpt_writer_finish(w);
    if (s != ZERO_OK) snprintf(msg, cap, "%s", zero_ckpt_writer_last_error(w));
    return s;
}

static const char *id_of(int64_t step, int seed) {
    static char id[ZERO_CKPT_ID_CHARS + 1];
    snprintf(id, sizeof id, "%016llx%016llx", (unsigned long long)step, (unsigned long long)seed);
    return id;
}

/* W simulated ranks save step `step`; rank 0 commits. msg: the first error. */
static zero_status save_steps(const char *dir, int64_t step, int W, int seed, char *msg, size_t cap) {
    zero_ckpt_writer *w[4] = {0};
    zero_status s = ZERO_OK;
    msg[0] = 0;
    for (int r = 0; r < W && s == ZERO_OK; r++)
        s = rank_write(dir, step, r, W, id_of(step, seed), seed, &w[r], msg, cap);
    if (s == ZERO_OK) {
        s = zero_ckpt_commit(w[0], "{}");
        if (s != ZERO_OK) snprintf(msg, cap, "%s", zero_ckpt_writer_last_error(w[0]));
    }
    for (int r = 0; r < W; r++) zero_ckpt_writer_free(w[r]);
    return s;
}

/* The save directory opens as step `step` with the values of `seed`. */
static void expect_step(const char *dir, int64_t step, int seed) {
    zero_ckpt *c = NULL;
    zero_error err;
    err.msg[0] = 0;
    ZT_CHECKF(zero_ckpt_open(&c, NULL, dir, ZERO_CKPT_VERIFY, &err) == ZERO_OK, "open %s: %s", dir, err.msg);
    if (!c) return;
    ZT_EQ_INT(zero_ckpt_step(c), step);
    float v[1000];
    ZT_OK(zero_ckpt_read_range(c, "u/master", 0, 1000, v));
    int bad = 0;
    for (int j = 0; j < 1000; j++) bad += v[j] != (float)(seed + j);
    ZT_EQ_INT(bad, 0);
    zero_ckpt_close(c);
}

static void expect_refused(const char *dir, const char *n1, const char *n2) {
    zero_ckpt *c = NULL;
    zero_error err;
    err.msg[0] = 0;
    zero_status s = zero_ckpt_open(&c, NULL, dir, 0, &err);
    ZT_CHECKF(s != ZERO_OK && !c, "open %s: status %d", dir, s);
    ZT_CHECKF(strstr(err.msg, n1) && (!n2 || strstr(err.msg, n2)), "message '%s' lacks '%s'/'%s'", err.msg, n1,
              n2 ? n2 : "");
    zero_ckpt_close(c);
}

/* ------------------------------------------------------------------ links planted before a save */
typedef struct plant {
    const char *what;
    const char *name;   /* inside the save directory */
    const char *target; /* "V" the victim directory, "VF" its file, "S" the save directory */
    const char *inside; /* a link inside this (uncommitted) step directory instead, or NULL */
    const char *says;   /* in the error */
} plant;

static const plant k_plants[] = {
    {"a step directory linking to a victim (the issue's case)", "step_00000099", "V", NULL,
     "step_00000099 is a symbolic link"},
    {"the staging name linking to a victim", "step_00000002.tmp", "V", NULL, "step_00000002.tmp is a symbolic link"},
    {"a published name linking to a victim", "step_00000002", "V", NULL, "step_00000002 is a symbolic link"},
    {"a numbered save's name linking to a victim", "step_00000001.1", "V", NULL, "step_00000001.1 is a symbolic link"},
    {"a step directory linking to the save directory itself", "step_00000005", "S", NULL,
     "step_00000005 is a symbolic link"},
    {"latest linking to a victim file", "latest", "VF", NULL, "latest is a symbolic link"},
    {"latest.tmp linking to a victim file", "latest.tmp", "VF", NULL, "latest.tmp is a symbolic link"},
    {"a rank file in the staging directory linking out", "rank_00000.safetensors", "VF", "step_00000002.tmp",
     "rank_00000.safetensors is a symbolic link"},
    {"a rank file's temporary in the staging directory linking out", "rank_00001.safetensors.tmp", "VF",
     "step_00000002.tmp", "rank_00001.safetensors.tmp is a symbolic link"},
    {"a directory link in the staging directory", "sub", "V", "step_00000002.tmp", "sub is a symbolic link"},
    {"COMMIT in an uncommitted step directory linking out", "COMMIT", "VF", "step_00000004",
     "COMMIT is a symbolic link"},
    {"a link in an uncommitted step directory", "rank_00000.safetensors", "V", "step_00000003", "is a symbolic link"},
    {"a link to the save directory inside a failed save", "x", "S", "step_00000003.tmp", "x is a symbolic link"},
};

static void test_planted(void) {
    char save[700], victim[700], p[1600], msg[1024], target[800];
    snprintf(victim, sizeof victim, "%s/victim", g_dir);
    for (size_t k = 0; k < sizeof k_plants / sizeof *k_plants; k++) {
        const plant *pl = &k_plants[k];
        snprintf(save, sizeof save, "%s/save%zu", g_dir, k);
        make_victim(victim);
        run("rm -rf '%s'%s", save, "");
        ZT_OK(save_steps(save, 1, 2, 10, msg, sizeof msg));
        if (!strcmp(pl->target, "V")) snprintf(target, sizeof target, "%s", victim);
        else if (!strcmp(pl->target, "VF")) snprintf(target, sizeof target, "%s/keep.txt", victim);
        else snprintf(target, sizeof target, "%s", save);
        if (pl->inside) {
            snprintf(p, sizeof p, "%s/%s", save, pl->inside);
            mkdir(p, 0777);
            snprintf(p, sizeof p, "%s/%s/%s", save, pl->inside, pl->name);
        } else {
            snprintf(p, sizeof p, "%s/%s", save, pl->name);
            unlink(p); /* latest: in place of zero's own */
        }
        ZT_CHECKF(symlink(target, p) == 0, "%s: symlink %s: %s", pl->what, p, strerror(errno));
        zero_status s = save_steps(save, 2, 2, 20, msg, sizeof msg);
        ZT_CHECKF(s != ZERO_OK, "%s: the save succeeded", pl->what);
        ZT_CHECKF(strstr(msg, pl->says) != NULL, "%s: message '%s' lacks '%s'", pl->what, msg, pl->says);
        ZT_CHECKF(victim_ok(victim), "%s: the victim was touched", pl->what);
        ZT_CHECKF(is_link(p), "%s: the planted link is gone", pl->what);
        /* the run's checkpoint is intact and still the one to resume */
        if (strcmp(pl->name, "latest") != 0) expect_step(save, 1, 10);
        /* once the link is gone the save goes through */
        unlink(p);
        ZT_CHECKF(save_steps(save, 2, 2, 20, msg, sizeof msg) == ZERO_OK, "%s, link removed: %s", pl->what, msg);
        expect_step(save, 2, 20);
        ZT_CHECK(victim_ok(victim));
        run("rm -rf '%s'%s", save, "");
    }
}

/* ------------------------------------------------------------------ foreign files */
static void test_foreign(void) {
    char save[700], p[900], msg[1024];
    snprintf(save, sizeof save, "%s/foreign", g_dir);
    ZT_OK(save_steps(save, 1, 2, 10, msg, sizeof msg));
    /* a user's notes in a committed checkpoint of another step: the save goes on, the notes stay */
    snprintf(p, sizeof p, "%s/step_00000001/notes.txt", save);
    put(p, "my notes\n");
    ZT_OK(save_steps(save, 2, 2, 20, msg, sizeof msg));
    ZT_CHECK(exists(p));
    /* a file in an uncommitted step directory, which the save would remove: refused, kept */
    snprintf(p, sizeof p, "%s/step_00000007", save);
    mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/step_00000007/results.csv", save);
    put(p, "1,2\n");
    ZT_CHECK(save_steps(save, 3, 2, 30, msg, sizeof msg) != ZERO_OK);
    ZT_CHECKF(strstr(msg, "results.csv is a file that zero did not write") != NULL, "%s", msg);
    ZT_CHECK(exists(p));
    expect_step(save, 2, 20);
    /* a save of the same step as a checkpoint holding the notes would remove it: refused */
    snprintf(p, sizeof p, "%s/step_00000007", save);
    run("rm -rf '%s'%s", p, "");
    ZT_CHECK(save_steps(save, 1, 2, 11, msg, sizeof msg) != ZERO_OK);
    ZT_CHECKF(strstr(msg, "notes.txt is a file that zero did not write") != NULL, "%s", msg);
    snprintf(p, sizeof p, "%s/step_00000001/notes.txt", save);
    ZT_CHECK(exists(p));
    /* latest and step directories of the wrong kind */
    unlink(p);
    snprintf(p, sizeof p, "%s/step_00000009", save);
    put(p, "a file\n");
    ZT_CHECK(save_steps(save, 3, 2, 30, msg, sizeof msg) != ZERO_OK);
    ZT_CHECKF(strstr(msg, "step_00000009 is a regular file where zero keeps its own step directory") != NULL, "%s",
              msg);
    unlink(p);
    ZT_OK(save_steps(save, 3, 2, 30, msg, sizeof msg));
    expect_step(save, 3, 30);
    run("rm -rf '%s'%s", save, "");
}

/* ------------------------------------------------------------------ links planted during a save */
static void test_races(void) {
    char save[700], victim[700], p[900], msg[1024];
    snprintf(save, sizeof save, "%s/race", g_dir);
    snprintf(victim, sizeof victim, "%s/victim", g_dir);
    make_victim(victim);
    ZT_OK(save_steps(save, 1, 2, 10, msg, sizeof msg));
    /* after every rank began: the published name and a failed save linking out, a link in the
     * staging directory */
    zero_ckpt_writer *w[2] = {0};
    ZT_OK(rank_write(save, 2, 0, 2, id_of(2, 20), 20, &w[0], msg, sizeof msg));
    ZT_OK(rank_write(save, 2, 1, 2, id_of(2, 20), 20, &w[1], msg, sizeof msg));
    snprintf(p, sizeof p, "%s/step_00000002", save);
    ZT_CHECK(symlink(victim, p) == 0);
    snprintf(p, sizeof p, "%s/step_00000001.tmp", save);
    ZT_CHECK(symlink(victim, p) == 0);
    ZT_OK(zero_ckpt_commit(w[0], "{}"));
    /* published under the next free name; the links are left as they are, never followed */
    ZT_CHECK(!strcmp(zero_ckpt_writer_committed_name(w[0]), "step_00000002.1"));
    zero_ckpt_writer_free(w[0]);
    zero_ckpt_writer_free(w[1]);
    ZT_CHECK(victim_ok(victim));
    ZT_CHECK(is_link(p));
    expect_step(save, 2, 20);
    unlink(p);
    snprintf(p, sizeof p, "%s/step_00000002", save);
    unlink(p);
    /* a link put into the staging directory before the commit stops the commit */
    ZT_OK(rank_write(save, 3, 0, 2, id_of(3, 30), 30, &w[0], msg, sizeof msg));
    ZT_OK(rank_write(save, 3, 1, 2, id_of(3, 30), 30, &w[1], msg, sizeof msg));
    snprintf(p, sizeof p, "%s/step_00000003.tmp/rank_00002.safetensors", save);
    ZT_CHECK(symlink(victim, p) == 0);
    ZT_CHECK(zero_ckpt_commit(w[0], "{}") != ZERO_OK);
    ZT_CHECKF(strstr(zero_ckpt_writer_last_error(w[0]), "rank_00002.safetensors is a symbolic link") != NULL, "%s",
              zero_ckpt_writer_last_error(w[0]));
    zero_ckpt_writer_free(w[0]);
    zero_ckpt_writer_free(w[1]);
    ZT_CHECK(victim_ok(victim) && is_link(p));
    expect_step(save, 2, 20);
    run("rm -rf '%s' '%s'", save, victim);
}

/* ------------------------------------------------------------------ rank files bound to their save */
static void test_identity(void) {
    char a[700], b[700], p[900], q[900], msg[1024];
    snprintf(a, sizeof a, "%s/run_a", g_dir);
    snprintf(b, sizeof b, "%s/run_b", g_dir);
    ZT_OK(save_steps(a, 5, 2, 10, msg, sizeof msg));
    ZT_OK(save_steps(b, 5, 2, 99, msg, sizeof msg));
    /* another run's rank file of the same shapes and size, dropped in */
    snprintf(p, sizeof p, "%s/step_00000005/rank_00001.safetensors", b);
    snprintf(q, sizeof q, "%s/step_00000005/rank_00001.safetensors", a);
    run("cp '%s' '%s'", p, q);
    expect_refused(a, "rank_00001.safetensors: its zero.save_id is not the manifest's", "another save");
    run("rm -rf '%s' '%s'", a, b);
}

/* ------------------------------------------------------------------ links inside a checkpoint on load */
static void test_load_links(void) {
    char save[700], other[700], p[900], q[900], msg[1024];
    snprintf(save, sizeof save, "%s/load", g_dir);
    snprintf(other, sizeof other, "%s/elsewhere", g_dir);
    ZT_OK(save_steps(save, 1, 2, 10, msg, sizeof msg));
    ZT_OK(save_steps(other, 1, 2, 10, msg, sizeof msg));
    /* a rank file linking to an identical file outside: refused, although its bytes would do */
    snprintf(p, sizeof p, "%s/step_00000001/rank_00000.safetensors", save);
    snprintf(q, sizeof q, "%s/step_00000001/rank_00000.safetensors", other);
    unlink(p);
    ZT_CHECK(symlink(q, p) == 0);
    expect_refused(save, "is a symbolic link to", "outside");
    /* a link inside the step directory is the rule's allowed case */
    unlink(p);
    snprintf(q, sizeof q, "%s/step_00000001/copy.safetensors", save);
    run("cp '%s/step_00000001/rank_00000.safetensors' '%s'", other, q);
    ZT_CHECK(symlink("copy.safetensors", p) == 0);
    expect_step(save, 1, 10);
    /* the step directory linking out */
    run("rm -rf '%s'%s", save, "");
    ZT_OK(save_steps(save, 1, 2, 10, msg, sizeof msg));
    snprintf(p, sizeof p, "%s/step_00000001", save);
    run("rm -rf '%s'%s", p, "");
    snprintf(q, sizeof q, "%s/step_00000001", other);
    ZT_CHECK(symlink(q, p) == 0);
    expect_refused(save, "is a symbolic link to", "outside");
    /* latest linking out */
    run("rm -rf '%s'%s", save, "");
    ZT_OK(save_steps(save, 1, 2, 10, msg, sizeof msg));
    snprintf(p, sizeof p, "%s/latest", save);
    unlink(p);
    snprintf(q, sizeof q, "%s/latest", other);
    ZT_CHECK(symlink(q, p) == 0);
    expect_refused(save, "latest is a symbolic link to", "outside");
    /* manifest.json linking out */
    unlink(p);
    put(p, "step_00000001\n");
    snprintf(p, sizeof p, "%s/step_00000001/manifest.json", save);
    unlink(p);
    snprintf(q, sizeof q, "%s/step_00000001/manifest.json", other);
    ZT_CHECK(symlink(q, p) == 0);
    expect_refused(save, "manifest.json is a symbolic link to", "outside");
    run("rm -rf '%s' '%s'", save, other);
}

/* ------------------------------------------------------------------ latest behind a committed step */
static void test_latest_behind(void) {
    char save[700], p[900], msg[1024];
    snprintf(save, sizeof save, "%s/behind", g_dir);
    ZT_OK(save_steps(save, 1, 2, 10, msg, sizeof msg));
    ZT_OK(save_steps(save, 2, 2, 20, msg, sizeof msg));
    /* the run stopped after publishing step 2, before replacing latest (it still names step 1,
     * written before step 2's COMMIT) */
    snprintf(p, sizeof p, "%s/latest", save);
    put(p, "step_00000001\n");
    struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
    ZT_CHECK(utimensat(AT_FDCWD, p, old, 0) == 0);
    zero_ckpt *c = NULL;
    zero_error err;
    ZT_OK(zero_ckpt_open(&c, NULL, save, 0, &err));
    if (c) {
        ZT_EQ_INT(zero_ckpt_step(c), 2);
        ZT_CHECKF(strstr(zero_ckpt_note(c), "latest names step_00000001, but step_00000002 was committed after it"),
                  "%s", zero_ckpt_note(c));
        zero_ckpt_close(c);
    }
    /* latest newer than both: it is followed (a user who went back on purpose) */
    put(p, "step_00000001\n");
    expect_step(save, 1, 10);
    /* no latest at all: the newest committed step, with a note */
    unlink(p);
    ZT_OK(zero_ckpt_open(&c, NULL, save, 0, &err));
    if (c) {
        ZT_EQ_INT(zero_ckpt_step(c), 2);
        ZT_CHECK(strstr(zero_ckpt_note(c), "has no latest") != NULL);
        zero_ckpt_close(c);
    }
    run("rm -rf '%s'%s", save, "");
}

/* ------------------------------------------------------------------ retention */
static int n_steps(const char *save) {
    char cmd[900];
    snprintf(cmd, sizeof cmd, "ls -d '%s'/step_* 2>/dev/null | wc -l", save);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1) n = -1;
        pclose(f);
    }
    return n;
}

static void test_prune(void) {
    char save[700], victim[700], p[900], msg[1024];
    snprintf(save, sizeof save, "%s/prune", g_dir);
    snprintf(victim, sizeof victim, "%s/victim", g_dir);
    make_victim(victim);
    for (int k = 1; k <= 5; k++) ZT_OK(save_steps(save, k, 1, 10 * k, msg, sizeof msg));
    int removed = -1;
    zero_error err;
    ZT_OK(zero_ckpt_prune(save, 2, &removed, &err));
    ZT_EQ_INT(removed, 3);
    ZT_EQ_INT(n_steps(save), 2);
    expect_step(save, 5, 50);
    snprintf(p, sizeof p, "%s/step_00000004/COMMIT", save);
    ZT_CHECK(exists(p));
    /* latest naming an older step (a resume went back): it stays, and counts as one */
    ZT_OK(save_steps(save, 2, 1, 21, msg, sizeof msg)); /* now the most recent save: latest = 2 */
    ZT_OK(save_steps(save, 3, 1, 31, msg, sizeof msg));
    snprintf(p, sizeof p, "%s/latest", save);
    put(p, "step_00000002\n");
    ZT_OK(zero_ckpt_prune(save, 1, &removed, &err));
    ZT_EQ_INT(n_steps(save), 1);
    expect_step(save, 2, 21);
    /* a staging directory (a save in progress), a link and a directory holding a user's file stay */
    ZT_OK(save_steps(save, 6, 1, 60, msg, sizeof msg));
    ZT_OK(save_steps(save, 7, 1, 70, msg, sizeof msg));
    snprintf(p, sizeof p, "%s/step_00000006/notes.txt", save);
    put(p, "mine\n");
    snprintf(p, sizeof p, "%s/step_00000008.tmp", save);
    mkdir(p, 0777);
    snprintf(p, sizeof p, "%s/step_00000009", save);
    ZT_CHECK(symlink(victim, p) == 0);
    ZT_OK(zero_ckpt_prune(save, 1, &removed, &err));
    ZT_EQ_INT(removed, 1); /* step 2; step 6 holds notes.txt */
    snprintf(p, sizeof p, "%s/step_00000006/notes.txt", save);
    ZT_CHECK(exists(p));
    snprintf(p, sizeof p, "%s/step_00000008.tmp", save);
    ZT_CHECK(exists(p));
    snprintf(p, sizeof p, "%s/step_00000009", save);
    ZT_CHECK(is_link(p) && victim_ok(victim));
    expect_step(save, 7, 70);
    ZT_EQ_INT(zero_ckpt_prune(save, 0, &removed, &err), ZERO_ERR_INVALID_ARG);
    run("rm -rf '%s' '%s'", save, victim);
}

/* ------------------------------------------------------------------ the lock */
static void test_lock(void) {
    char save[700], victim[700], p[900];
    snprintf(save, sizeof save, "%s/locked", g_dir);
    snprintf(victim, sizeof victim, "%s/victim", g_dir);
    zero_ckpt_lock *a = NULL, *b = NULL;
    zero_error err;
    ZT_OK(zero_ckpt_lock_acquire(&a, save, &err));
    /* a second holder (another open file: as another process would be) is refused, naming the first */
    ZT_EQ_INT(zero_ckpt_lock_acquire(&b, save, &err), ZERO_ERR_STATE);
    char want[64];
    snprintf(want, sizeof want, "pid %lld on ", (long long)getpid());
    ZT_CHECKF(strstr(err.msg, "is in use by another run") && strstr(err.msg, want), "%s", err.msg);
    zero_ckpt_lock_release(a);
    ZT_OK(zero_ckpt_lock_acquire(&b, save, &err));
    zero_ckpt_lock_release(b);
    /* a link at the lock's name is refused, its target untouched */
    make_victim(victim);
    snprintf(p, sizeof p, "%s/lock", save);
    unlink(p);
    char target[800];
    snprintf(target, sizeof target, "%s/keep.txt", victim);
    ZT_CHECK(symlink(target, p) == 0);
    ZT_EQ_INT(zero_ckpt_lock_acquire(&a, save, &err), ZERO_ERR_STATE);
    ZT_CHECKF(strstr(err.msg, "lock is a symbolic link") != NULL, "%s", err.msg);
    ZT_CHECK(victim_ok(victim));
    run("rm -rf '%s' '%s'", save, victim);
}

int main(void) {
    struct stat st;
    const char *base = stat("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/zt_links_XXXXXX", base);
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_planted();
    test_foreign();
    test_races();
    test_identity();
    test_load_links();
    test_latest_behind();
    test_lock();
    test_prune();
    run("rm -rf '%s'%s", g_dir, "");
    return zt_finish("test_ckpt_links");
}
