/* `zero train --device`: the device backend and its memory from the flags or the environment,
 * checked before anything runs, and the plan's per-rank device bytes against that memory. */
#include "cli.h"
#include "memcheck.h"
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The backends zero knows of, built or not (zero/device.h). */
static const char *const known_backends[] = {"cpu", "fake", "cuda", NULL};

/* 1 when name is one of the comma-separated backends of `built`. */
static int is_built(const char *name, const char *built) {
    const size_t n = strlen(name);
    for (const char *p = built; p && *p;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

int cli_device_resolve(const char *flag_device, const char *flag_memory, cli_device *out) {
    memset(out, 0, sizeof *out);
    const char *built = zero_device_backends_built();
    const char *name = flag_device, *env = getenv("ZERO_DEVICE");
    out->source = flag_device ? "--device" : env && *env ? "ZERO_DEVICE" : NULL;
    if (!name) name = env && *env ? env : "cpu";
    if (!is_built(name, built)) {
        int known = 0;
        for (const char *const *k = known_backends; *k; k++) known |= !strcmp(*k, name);
        if (known)
            return cli_error(CLI_USAGE, "%s %s: this build has no %s backend (built: %s)", out->source, name, name,
                             built);
        return cli_error(CLI_USAGE, "%s '%s': expected one of the built device backends: %s", out->source, name, built);
    }
    snprintf(out->backend, sizeof out->backend, "%s", name);
    const char *mem = flag_memory, *menv = getenv("ZERO_DEVICE_MEMORY");
    out->mem_source = mem ? "--device-memory" : menv && *menv ? "ZERO_DEVICE_MEMORY" : NULL;
    if (!mem) mem = menv && *menv ? menv : NULL;
    out->capacity = 0;
    out->mem_text = mem;
    if (mem) {
        double bytes = 0;
        if (cli_parse_size(out->mem_source, mem, &bytes)) return CLI_USAGE;
        if (!(bytes >= 1) || bytes > 0x1p62)
            return cli_error(CLI_USAGE, "%s '%s': expected a size of at least 1 byte, such as 24GiB", out->mem_source,
                             mem);
        out->capacity = (uint64_t)llround(bytes);
    }
    return CLI_OK;
}

int train_device_resolve(train_opts *o) { return cli_device_resolve(o->device, o->device_memory, &o->dev); }

/* The fake backend's memory when none is given (zero/device.h: 24 GiB). */
#define FAKE_DEFAULT_CAPACITY (UINT64_C(24) << 30)

int train_device_check(const train_opts *o, int world) {
    if (world <= 0) return CLI_OK;
    uint64_t cap = o->dev.capacity;
    if (!cap && !strcmp(o->dev.backend, "fake")) cap = FAKE_DEFAULT_CAPACITY;
    if (!cap) return CLI_OK; /* cpu without a capacity: host memory, which ux_check_memory checks */
    const dec_config *m = &o->model_cfg;
    cli_device_need need;
    if (cli_device_need_of(m, o->lora_on ? &o->lora : NULL, &o->cfg, world, o->cfg.micro_batch, o->T, o->checkpointing,
                           &need))
        return CLI_OK; /* the engine will say what is wrong with the setup */
    const double total = need.device + need.transient + need.act;
    if (total <= (double)cap) return CLI_OK;
    char a[32], b[32], c[32], d[32], e[32], f[32], unit[64];
    cli_fmt_bytes((double)cap, a, sizeof a);
    cli_fmt_bytes(total, b, sizeof b);
    cli_fmt_bytes(need.device, c, sizeof c);
    cli_fmt_bytes(need.transient, d, sizeof d);
    cli_fmt_bytes(need.act, e, sizeof e);
    cli_fmt_bytes(need.largest_bytes, f, sizeof f);
    dec_unit_name(m, need.largest_unit, unit, sizeof unit);
    char given[160];
    if (o->dev.mem_source) snprintf(given, sizeof given, "%s %s", o->dev.mem_source, o->dev.mem_text);
    else
        snprintf(given, sizeof given, "--device %s (%s of device memory: its default; --device-memory sets it)",
                 o->dev.backend, a);
    const double ram = cli_machine_ram();
    char host[48] = "";
    if (ram > 0) snprintf(host, sizeof host, " --host-mem %.0fGiB", floor(ram / 1073741824.0));
    return cli_error(CLI_USAGE,
                     "%s: stage %d needs %s of device memory per rank for this model (model states %s, transient %s, "
                     "activations %s at micro-batch %lld; largest unit %s: %llu parameters, %s), more than %s; `zero "
                     "plan --model %s --gpus %d --gpu-memory %s%s --precision %s --seq %d%s` shows what "
                     "each stage and offload needs",
                     given, o->cfg.stage, b, c, d, e, (long long)o->cfg.micro_batch, unit,
                     (unsigned long long)need.largest_numel, f, a, o->src.name, world,
                     o->dev.mem_text ? o->dev.mem_text : "24GiB", host, zero_dtype_name(o->cfg.precision), o->T,
                     o->cfg.optim_states == ZERO_OPTIM_STATES_INT8 ? " --optimizer-states int8" : "");
}
