/* The memory a command's model would take (the planner's model states and transient buffers, the
 * decoder's activations) and this machine's RAM, for the checks train and sample make first. */
#include "memcheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

double cli_machine_ram(void) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    double ram = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r"); /* a container's limit, when lower */
    if (f) {
        char b[64] = "";
        if (fgets(b, sizeof b, f) && b[0] >= '0' && b[0] <= '9') {
            const double lim = strtod(b, NULL);
            if (lim > 0 && (ram == 0 || lim < ram)) ram = lim;
        }
        fclose(f);
    }
    return ram;
}

/* The activations of a micro-batch of B (exact when it fits 64 bits, else B times one sequence's). */
static double activations(const dec_config *m, int64_t B, int T, int ckpt) {
    const double one = (double)dec_activation_bytes(m, 1, T, ckpt);
    if (one * (double)B < 0x1p62) return (double)dec_activation_bytes(m, (int)B, T, ckpt);
    return one * (double)B;
}

/* The planner's figures of model m under cfg for `world` ranks, on a device rank or a CPU rank;
 * *largest (may be NULL): the unit of most elements. Returns 0, or -1 as cli_mem_need_of. */
static int plan_of(const dec_config *m, const dec_lora *lora, const zero_config *cfg, int world, int on_device,
                   zero_plan_mem *out, int *largest, uint64_t *largest_numel) {
    const int n = dec_num_units(m);
    if (n < 1) return -1;
    uint64_t *numel = malloc(2 * (size_t)n * sizeof *numel), *frozen = numel ? numel + n : NULL;
    if (!numel) return -1;
    for (int u = 0; u < n; u++) numel[u] = dec_unit_numel(m, u);
    if (lora) /* LoRA (docs/LORA.md): the base frozen, the adapters trained */
        for (int u = 0; u < n; u++) frozen[u] = numel[u], numel[u] += dec_lora_unit_numel(m, lora, u);
    int big = 0;
    for (int u = 1; u < n; u++)
        if (numel[u] > numel[big]) big = u;
    if (largest) *largest = big;
    if (largest_numel) *largest_numel = numel[big];
    zero_plan_model pm = {n, numel, NULL, NULL, lora ? frozen : NULL};
    zero_plan_setup s;
    zero_plan_setup_from_config(&s, cfg, world);
    s.on_device = on_device;
    zero_error err = {{0}};
    const zero_status st = zero_plan_estimate(&pm, &s, out, &err);
    free(numel);
    return st == ZERO_OK ? 0 : -1;
}

int cli_mem_need_of(const dec_config *m, const dec_lora *lora, const zero_config *cfg, int world, int64_t B, int T,
                    int ckpt, cli_mem_need *out) {
    zero_plan_mem pmem;
    if (plan_of(m, lora, cfg, world, 0, &pmem, NULL, NULL)) return -1;
    const double lact = lora ? (double)dec_lora_activation_bytes(m, lora, (int)B, T) : 0.0;
    out->states = (double)pmem.device + (double)pmem.host;
    out->transient = (double)pmem.transient;
    out->act = activations(m, B, T, ckpt) + lact;
    out->act_ckpt = activations(m, B, T, 1) + lact;
    return 0;
}

int cli_device_need_of(const dec_config *m, const dec_lora *lora, const zero_config *cfg, int world, int64_t B, int T,
                       int ckpt, cli_device_need *out) {
    zero_plan_mem pmem;
    if (plan_of(m, lora, cfg, world, 1, &pmem, &out->largest_unit, &out->largest_numel)) return -1;
    const double lact = lora ? (double)dec_lora_activation_bytes(m, lora, (int)B, T) : 0.0;
    out->device = (double)pmem.device;
    out->host = (double)pmem.host;
    out->transient = (double)pmem.transient;
    out->act = activations(m, B, T, ckpt) + lact;
    out->largest_bytes = (double)out->largest_numel * (double)zero_dtype_size(cfg->precision);
    return 0;
}
