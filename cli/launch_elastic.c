/* `zero train --hostfile FILE` and `--elastic MIN:MAX` outside an MPI launcher: the job on the
 * hosts of an OpenMPI hostfile, and its restarts (torchrun's elastic idea, with zero's checkpoints).
 *
 * With --elastic the launcher runs the job (cli_job_run: mpiexec, a monitor per rank) and, when it
 * fails for any reason but a usage error or the user's stop, asks every host of the file whether it
 * still answers (a one-rank `mpiexec --host NAME true` each, at once, with a time limit), takes
 * those that do (in the file's order, at most MAX), and starts the job again from the latest
 * committed checkpoint of --save: `--resume DIR` in place of the first start's --resume,
 * --init-from or --lora-from. The checkpoint's global batch decides how many ranks: the most the
 * hosts' slots allow that divide it (so that the ranks keep it: the data order, and so which
 * sequences each step trains, stays the uninterrupted run's), filled host by host. Fewer than MIN
 * hosts, or --max-restarts restarts used up, end the job with one line. A host that died and
 * answers again is taken at the next restart. Each restart is one line on stderr, and the ranks
 * (told through ZERO_ELASTIC_RESTART="K WORLD_BEFORE") keep the global batch and append to
 * --log-json, after a record of the restart. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ELASTIC_ENV       "ZERO_ELASTIC_RESTART"
#define PROBE_TIMEOUT_ENV "ZERO_ELASTIC_PROBE_TIMEOUT" /* seconds a host has to answer (default 30) */

/* ------------------------------------------------------------------ the hostfile */

/* One "key=value" (spaces allowed around '=') at *p; 0 and *p past it, or -1. */
static int take_pair(const char **p, char *key, size_t kcap, char *val, size_t vcap) {
    const char *s = *p;
    size_t n = 0;
    while (*s && *s != '=' && *s != ' ' && *s != '\t') {
        if (n + 1 < kcap) key[n++] = *s;
        s++;
    }
    key[n] = 0;
    while (*s == ' ' || *s == '\t') s++;
    if (*s != '=') return -1;
    s++;
    while (*s == ' ' || *s == '\t') s++;
    n = 0;
    while (*s && *s != ' ' && *s != '\t') {
        if (n + 1 < vcap) val[n++] = *s;
        s++;
    }
    val[n] = 0;
    *p = s;
    return key[0] && val[0] ? 0 : -1;
}

int cli_hostfile_read(const char *flag, const char *path, cli_host **out) {
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f) return cli_error(CLI_USAGE, "%s '%s': %s", flag, path, strerror(errno)), -1;
    cli_host *h = NULL;
    int n = 0, lineno = 0, bad = 0;
    char line[4096];
    while (!bad && fgets(line, sizeof line, f)) {
        lineno++;
        line[strcspn(line, "#\r\n")] = 0;
        const char *s = line;
        while (*s == ' ' || *s == '\t') s++;
        if (!*s) continue;
        char name[256];
        size_t k = 0;
        while (*s && *s != ' ' && *s != '\t') {
            if (k + 1 >= sizeof name) {
                bad = cli_error(CLI_USAGE, "%s %s line %d: a host name longer than %zu bytes", flag, path, lineno,
                                sizeof name - 1);
                break;
            }
            name[k++] = *s++;
        }
        if (bad) break;
        name[k] = 0;
        int slots = 1, max_slots = 0;
        for (;;) {
            while (*s == ' ' || *s == '\t') s++;
            if (!*s) break;
            char key[64], val[64];
            if (take_pair(&s, key, sizeof key, val, sizeof val)) {
                bad = cli_error(CLI_USAGE, "%s %s line %d: '%s': expected key=value after the host name", flag, path,
                                lineno, s);
                break;
            }
            char *end;
            errno = 0;
            const long v = strtol(val, &end, 10);
            const int num = !*end && !errno && v >= 1 && v <= 4096;
            if (!strcmp(key, "slots") && num) slots = (int)v;
            else if ((!strcmp(key, "max_slots") || !strcmp(key, "max-slots")) && num) max_slots = (int)v;
            else if (!strcmp(key, "slots") || !strcmp(key, "max_slots") || !strcmp(key, "max-slots"))
                bad = cli_error(CLI_USAGE, "%s %s line %d: %s=%s: expected a whole number in [1, 4096]", flag, path,
                                lineno, key, val);
            else
                bad = cli_error(CLI_USAGE, "%s %s line %d: '%s' is not supported yet (zero reads slots and max_slots)",
                                flag, path, lineno, key);
            if (bad) break;
        }
        if (bad) break;
        if (max_slots && max_slots < slots) {
            bad = cli_error(CLI_USAGE, "%s %s line %d: max_slots=%d is below slots=%d", flag, path, lineno, max_slots,
                            slots);
            break;
        }
        int at = -1; /* a host named again adds its slots, as OpenMPI does */
        for (int i = 0; i < n; i++)
            if (!strcmp(h[i].name, name)) at = i;
        if (at >= 0) {
            h[at].slots += slots;
            continue;
        }
        cli_host *g = realloc(h, (size_t)(n + 1) * sizeof *h);
        if (!g) {
            bad = cli_error(CLI_RUNTIME, "%s: out of memory", flag);
            break;
        }
        h = g;
        snprintf(h[n].name, sizeof h[n].name, "%s", name);
        h[n].slots = slots;
        n++;
    }
    fclose(f);
    if (!bad && n == 0) bad = cli_error(CLI_USAGE, "%s %s: no hosts in it (expected lines 'NAME slots=N')", flag, path);
    if (bad) {
        free(h);
        return -1;
    }
    *out = h;
    return n;
}

/* ------------------------------------------------------------------ which hosts answer */

/* Starts `mpiexec --host NAME -np 1 true` in a process group of its own, output discarded. */
static pid_t probe_start(const char *host) {
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid != 0) return pid;
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
    }
    char *args[12];
    int k = 0;
    args[k++] = (char *)ZERO_MPIEXEC;
    args[k++] = (char *)"--quiet";
    if (geteuid() == 0) args[k++] = (char *)"--allow-run-as-root";
    args[k++] = (char *)"--host";
    args[k++] = (char *)host;
    args[k++] = (char *)"-np";
    args[k++] = (char *)"1";
    args[k++] = (char *)"true";
    args[k] = NULL;
    execvp(args[0], args);
    _exit(127);
}

/* alive[i] = 1 when host i answered within the time limit; why[i] says how it did not. */
static void probe_hosts(const cli_host *h, int n, int *alive, char (*why)[96]) {
    double limit = 30;
    const char *t = getenv(PROBE_TIMEOUT_ENV);
    if (t && *t) {
        char *end;
        const double v = strtod(t, &end);
        if (!*end && v > 0 && v <= 3600) limit = v;
    }
    pid_t *pid = calloc((size_t)n, sizeof *pid);
    if (!pid) {
        for (int i = 0; i < n; i++) alive[i] = 1; /* cannot ask: try them all */
        return;
    }
    for (int i = 0; i < n; i++) {
        alive[i] = 0;
        pid[i] = probe_start(h[i].name);
        if (pid[i] < 0) snprintf(why[i], sizeof why[i], "cannot start %s: %s", ZERO_MPIEXEC, strerror(errno));
    }
    const double t0 = zero_now();
    int left = 0;
    for (int i = 0; i < n; i++) left += pid[i] > 0;
    while (left > 0) {
        for (int i = 0; i < n; i++) {
            if (pid[i] <= 0) continue;
            int st = 0;
            const pid_t w = waitpid(pid[i], &st, WNOHANG);
            if (w == 0) continue;
            if (w == pid[i]) {
                alive[i] = WIFEXITED(st) && WEXITSTATUS(st) == 0;
                if (!alive[i] && WIFEXITED(st))
                    snprintf(why[i], sizeof why[i], "launching on it failed (status %d)", WEXITSTATUS(st));
                else if (!alive[i]) snprintf(why[i], sizeof why[i], "launching on it ended by signal %d", WTERMSIG(st));
            } else {
                snprintf(why[i], sizeof why[i], "waiting for its probe: %s", strerror(errno));
            }
            kill(-pid[i], SIGKILL); /* whatever the probe left in its group (a remote shell) */
            pid[i] = 0;
            left--;
        }
        if (left > 0 && zero_now() - t0 > limit) {
            for (int i = 0; i < n; i++) {
                if (pid[i] <= 0) continue;
                kill(-pid[i], SIGKILL);
                while (waitpid(pid[i], NULL, 0) < 0 && errno == EINTR) {}
                snprintf(why[i], sizeof why[i], "no answer in %.0f s", limit);
                pid[i] = 0;
            }
            break;
        }
        const struct timespec q = {0, 50000000};
        nanosleep(&q, NULL);
    }
    free(pid);
}

/* ------------------------------------------------------------------ the latest checkpoint */

typedef struct saved_state {
    int have;       /* DIR/latest exists */
    int64_t step;   /* its step (-1: unreadable) */
    int64_t global; /* its run's global batch (0: unknown) */
    char dir[4096]; /* the step directory opened */
} saved_state;

static void read_latest(const char *save, saved_state *s) {
    memset(s, 0, sizeof *s);
    s->step = -1;
    if (!save) return; /* --hostfile without --save: nothing to resume */
    char path[4200];
    snprintf(path, sizeof path, "%s/latest", save);
    struct stat st;
    if (lstat(path, &st) != 0) return;
    s->have = 1;
    zero_error err = {{0}};
    zero_ckpt *c = NULL;
    if (zero_ckpt_open(&c, NULL, save, 0, &err) != ZERO_OK) return; /* the ranks will say why */
    s->step = zero_ckpt_step(c);
    snprintf(s->dir, sizeof s->dir, "%s", zero_ckpt_dir(c));
    double gb = 0;
    if (zero_ckpt_user_number(c, "global_batch", &gb) == ZERO_OK && gb >= 1 && gb <= 1e12) s->global = (int64_t)gb;
    zero_ckpt_close(c);
}

/* ------------------------------------------------------------------ the launcher */

static void host_list(const cli_host *h, const int *ranks, int n, char *out, size_t cap) {
    size_t k = 0;
    out[0] = 0;
    for (int i = 0; i < n && k + 1 < cap; i++)
        if (ranks[i] > 0) k += (size_t)snprintf(out + k, cap - k, "%s%s", k ? " " : "", h[i].name);
}

static void job_why(const cli_job_end *e, char *out, size_t cap) {
    if (WIFEXITED(e->status))
        snprintf(out, cap, "exit status %d%s", WEXITSTATUS(e->status), e->reported ? ", a rank's failure above" : "");
    else snprintf(out, cap, "%s killed by signal %d", ZERO_MPIEXEC, WTERMSIG(e->status));
}

/* Writes the hostfile of this start: hosts with ranks, "NAME slots=K max_slots=K". */
static int write_hostfile(char *path, size_t cap, const cli_host *h, const int *ranks, int n) {
    const char *tmpdir = getenv("TMPDIR");
    snprintf(path, cap, "%s/zero-hosts-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    const int fd = mkstemp(path);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(path);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (ranks[i] > 0) fprintf(f, "%s slots=%d max_slots=%d\n", h[i].name, ranks[i], ranks[i]);
    if (fclose(f) != 0) {
        unlink(path);
        return -1;
    }
    return 0;
}

int cli_launch_elastic(const cli_elastic_opts *o) {
    cli_host local = {"", o->ranks > 0 ? o->ranks : 1};
    snprintf(local.name, sizeof local.name, "this machine");
    const cli_host *hosts = o->hostfile ? o->hosts : &local;
    const int nh = o->hostfile ? o->nhosts : 1;
    if (nh <= 0) return cli_error(CLI_USAGE, "--hostfile %s: no hosts", o->hostfile);
    int *alive = calloc((size_t)nh, sizeof *alive), *ranks = calloc((size_t)nh, sizeof *ranks);
    char(*why)[96] = calloc((size_t)nh, sizeof *why);
    int rc = CLI_RUNTIME, restarts = 0, world_before = 0;
    char before[2048] = "", last_why[160] = "";
    if (!alive || !ranks || !why) {
        rc = cli_error(CLI_RUNTIME, "--elastic: out of memory");
        goto out;
    }
    for (;;) {
        /* who answers: every host of the file, each time (one that came back joins) */
        if (o->elastic && o->hostfile) probe_hosts(hosts, nh, alive, why);
        else
            for (int i = 0; i < nh; i++) alive[i] = 1;
        saved_state ss;
        read_latest(o->save, &ss);
        int slots = 0, used_hosts = 0;
        for (int i = 0, taken = 0; i < nh; i++) {
            ranks[i] = 0;
            if (alive[i] && taken < o->max_hosts) ranks[i] = hosts[i].slots, taken++, slots += hosts[i].slots;
        }
        int world = slots;
        if (ss.global > 0)
            while (world > 1 && ss.global % world) world--; /* the ranks keep the global batch */
        for (int i = 0, left = world; i < nh; i++) {
            if (ranks[i] > left) ranks[i] = left;
            left -= ranks[i];
            used_hosts += ranks[i] > 0;
        }
        char now[2048], gone[1024] = "";
        host_list(hosts, ranks, nh, now, sizeof now);
        for (int i = 0, k = 0; i < nh; i++)
            if (!alive[i] && k + 1 < (int)sizeof gone)
                k += snprintf(gone + k, sizeof gone - (size_t)k, "; %s: %s", hosts[i].name, why[i]);
        if (o->elastic && used_hosts < o->min_hosts) {
            rc = cli_error(CLI_RUNTIME, "--elastic %d:%d: %d host%s can run the job (%s%s), fewer than %d%s%s",
                           o->min_hosts, o->max_hosts, used_hosts, used_hosts == 1 ? "" : "s", now[0] ? now : "none",
                           gone, o->min_hosts, restarts ? "; the last checkpoint is " : "", restarts ? ss.dir : "");
            goto out;
        }
        if (restarts > 0) {
            char from[4300];
            if (ss.have && ss.step >= 0)
                snprintf(from, sizeof from, "resuming %s (step %lld)", ss.dir, (long long)ss.step);
            else if (ss.have) snprintf(from, sizeof from, "resuming %s", o->save);
            else snprintf(from, sizeof from, "from the start (no checkpoint in %s yet)", o->save);
            fprintf(stderr,
                    "zero: elastic restart %d of at most %d: the job on %d rank%s (%s) failed (%s); %s on %d rank%s "
                    "(%s%s)\n",
                    restarts, o->max_restarts, world_before, world_before == 1 ? "" : "s", before, last_why, from,
                    world, world == 1 ? "" : "s", now, gone);
            fflush(stderr);
            char env[64];
            snprintf(env, sizeof env, "%d %d", restarts, world_before);
            setenv(ELASTIC_ENV, env, 1);
        }
        static const char *const first_from[] = {"--resume", "--init-from", "--lora-from", NULL};
        const char *extra[] = {"--resume", o->save, NULL};
        const int resume = restarts > 0 && ss.have;
        char **args = cli_rank_args(resume ? first_from : NULL, resume ? extra : NULL);
        char hf[4200] = "", what[4200];
        if (o->elastic) snprintf(what, sizeof what, "--elastic %d:%d", o->min_hosts, o->max_hosts);
        else snprintf(what, sizeof what, "--hostfile %s", o->hostfile);
        if (!args) {
            rc = cli_error(CLI_RUNTIME, "%s: out of memory", what);
            goto out;
        }
        if (o->hostfile && write_hostfile(hf, sizeof hf, hosts, ranks, nh)) {
            free(args);
            rc = cli_error(CLI_RUNTIME, "%s: cannot write the job's hostfile in %s: %s", what, hf, strerror(errno));
            goto out;
        }
        const cli_job j = {.np = world, .hostfile = o->hostfile ? hf : NULL, .args = args, .what = what};
        cli_job_end end;
        rc = cli_job_run(&j, &end);
        free(args);
        if (hf[0]) unlink(hf);
        unsetenv(ELASTIC_ENV);
        if (rc != CLI_OK) goto out;
        if (end.stop_signal) cli_job_stopped(end.stop_signal);
        const int ok = WIFEXITED(end.status) && WEXITSTATUS(end.status) == 0;
        const int usage = WIFEXITED(end.status) && WEXITSTATUS(end.status) == CLI_USAGE && !end.reported;
        if (!o->elastic || ok || usage) {
            rc = cli_job_status(&j, &end);
            goto out;
        }
        job_why(&end, last_why, sizeof last_why);
        if (restarts >= o->max_restarts) {
            read_latest(o->save, &ss);
            rc = cli_error(CLI_RUNTIME,
                           "%s: the job failed (%s) and its %d restart%s (--max-restarts) are used up; %s%s", what,
                           last_why, o->max_restarts, o->max_restarts == 1 ? "" : "s",
                           ss.have ? "continue with --resume " : "no checkpoint was saved in ", o->save);
            goto out;
        }
        restarts++;
        world_before = world;
        snprintf(before, sizeof before, "%s", now);
    }
out:
    free(alive);
    free(ranks);
    free(why);
    return rc;
}
