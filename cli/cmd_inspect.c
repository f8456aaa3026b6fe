/* `zero inspect CKPT`: what a checkpoint holds (step, world, stage, dtypes, units, parameters,
 * files) and whether every checksum of every file matches; exit 1 naming the file and tensor if
 * not. The manifest is read through the ckpt layer (zero_ckpt_summary_get); cJSON only writes the
 * --json output. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: zero inspect CKPT [--json]\n"
            "\n"
            "CKPT is a save directory (its `latest` is followed) or one step directory\n"
            "(DIR/step_00000100). Prints the manifest's summary and the files, then reads every\n"
            "tensor of every rank file and checks its CRC32C. Exit status 0 when the checkpoint\n"
            "is complete and intact, 1 (with the file and tensor named) when it is not.\n"
            "\n"
            "  --json     the summary as one JSON object (\"verified\": true|false)\n"
            "Layout and guarantees: docs/CHECKPOINT.md.\n");
}

/* "1.5 MiB" */
static const char *human(double b, char *buf, size_t cap) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int k = 0;
    while (b >= 1024 && k < 4) {
        b /= 1024;
        k++;
    }
    snprintf(buf, cap, k ? "%.1f %s" : "%.0f %s", b, u[k]);
    return buf;
}

static const char *dtype_label(zero_dtype dt) {
    const char *n = zero_st_dtype_name(dt);
    return n ? n : "?";
}

int cli_inspect(int argc, char **argv) {
    const char *path = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return CLI_OK;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_error(CLI_USAGE, "unknown option '%s' for inspect: expected --json or --help", argv[i]);
        } else if (path) {
            return cli_error(CLI_USAGE, "inspect takes one checkpoint, got '%s' and '%s'", path, argv[i]);
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        return cli_error(CLI_USAGE, "inspect: expected a checkpoint directory (zero inspect --help)");
    }
    struct stat sb;
    if (stat(path, &sb) != 0 && (errno == ENOENT || errno == ENOTDIR)) /* a name on the command line: usage */
        return cli_error(CLI_USAGE, "inspect '%s': %s", path, strerror(errno));
    zero_ckpt *c = NULL;
    zero_error err;
    if (zero_ckpt_open(&c, NULL, path, 0, &err) != ZERO_OK) return cli_error(CLI_RUNTIME, "%s", err.msg);
    cli_ckpt_note(c);
    zero_status vs = zero_ckpt_verify(c);
    char verr[1024] = "";
    if (vs != ZERO_OK) snprintf(verr, sizeof verr, "%s", zero_ckpt_last_error(c));

    zero_ckpt_summary s;
    zero_ckpt_summary_get(c, &s);
    int nt = zero_ckpt_num_tensors(c), nf = zero_ckpt_num_files(c);
    int per_dtype[ZERO_DTYPE_COUNT] = {0};
    double tensor_elems = 0, total_bytes = 0;
    for (int i = 0; i < nt; i++) {
        zero_ckpt_tensor t;
        zero_ckpt_tensor_info(c, i, &t);
        if ((unsigned)t.dtype < ZERO_DTYPE_COUNT) per_dtype[t.dtype]++;
        tensor_elems += (double)t.numel;
    }
    for (int r = 0; r < nf; r++) {
        uint64_t b;
        zero_ckpt_file_info(c, r, NULL, &b);
        total_bytes += (double)b;
    }

    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "checkpoint", zero_ckpt_dir(c));
        cJSON_AddNumberToObject(o, "step", (double)zero_ckpt_step(c));
        cJSON_AddNumberToObject(o, "world", zero_ckpt_world(c));
        if (s.stage >= 0) cJSON_AddNumberToObject(o, "stage", s.stage);
        else cJSON_AddNullToObject(o, "stage");
        if (s.precision) cJSON_AddStringToObject(o, "precision", s.precision);
        else cJSON_AddNullToObject(o, "precision");
        if (s.optimizer) cJSON_AddStringToObject(o, "optimizer", s.optimizer);
        else cJSON_AddNullToObject(o, "optimizer");
        if (s.units >= 0) cJSON_AddNumberToObject(o, "units", s.units);
        else cJSON_AddNullToObject(o, "units");
        if (s.params >= 0) {
            cJSON_AddNumberToObject(o, "params", s.params);
            cJSON_AddNumberToObject(o, "param_elements", s.param_elements);
        } else {
            cJSON_AddNullToObject(o, "params");
            cJSON_AddNullToObject(o, "param_elements");
        }
        cJSON *dts = cJSON_AddObjectToObject(o, "dtypes");
        for (int d = 0; d < ZERO_DTYPE_COUNT; d++)
            if (per_dtype[d]) cJSON_AddNumberToObject(dts, dtype_label((zero_dtype)d), per_dtype[d]);
        cJSON *ts = cJSON_AddArrayToObject(o, "tensors");
        for (int i = 0; i < nt; i++) {
            zero_ckpt_tensor t;
            zero_ckpt_tensor_info(c, i, &t);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "name", t.name);
            cJSON_AddStringToObject(e, "dtype", dtype_label(t.dtype));
            cJSON_AddNumberToObject(e, "numel", (double)t.numel);
            cJSON_AddNumberToObject(e, "align", (double)t.align);
            cJSON_AddItemToArray(ts, e);
        }
        cJSON *fs = cJSON_AddArrayToObject(o, "files");
        for (int r = 0; r < nf; r++) {
            const char *name;
            uint64_t b;
            zero_ckpt_file_info(c, r, &name, &b);
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "name", name);
            cJSON_AddNumberToObject(e, "bytes", (double)b);
            cJSON_AddItemToArray(fs, e);
        }
        cJSON_AddNumberToObject(o, "total_bytes", total_bytes);
        cJSON_AddBoolToObject(o, "verified", vs == ZERO_OK);
        if (vs != ZERO_OK) cJSON_AddStringToObject(o, "error", verr);
        char *text = cJSON_Print(o);
        if (text) printf("%s\n", text);
        cJSON_free(text);
        cJSON_Delete(o);
    } else {
        char b1[32], b2[32];
        printf("checkpoint  %s\n", zero_ckpt_dir(c));
        printf("step        %lld\n", (long long)zero_ckpt_step(c));
        printf("world       %d rank%s\n", zero_ckpt_world(c), zero_ckpt_world(c) == 1 ? "" : "s");
        if (s.stage >= 0) printf("stage       %d\n", s.stage);
        if (s.precision) printf("precision   %s\n", s.precision);
        if (s.optimizer) printf("optimizer   %s\n", s.optimizer);
        if (s.units >= 0) printf("units       %d (%.0f elements)\n", s.units, s.unit_elements);
        if (s.params >= 0) printf("params      %d (%.0f elements)\n", s.params, s.param_elements);
        printf("tensors     %d sharded (%.0f elements):", nt, tensor_elems);
        for (int d = 0, first = 1; d < ZERO_DTYPE_COUNT; d++) {
            if (!per_dtype[d]) continue;
            printf("%s %d %s", first ? "" : ",", per_dtype[d], dtype_label((zero_dtype)d));
            first = 0;
        }
        printf("\nfiles       %d, %s (%.0f bytes)\n", nf, human(total_bytes, b1, sizeof b1), total_bytes);
        for (int r = 0; r < nf; r++) {
            const char *name;
            uint64_t b;
            zero_ckpt_file_info(c, r, &name, &b);
            printf("  %-24s %12llu bytes  %s\n", name, (unsigned long long)b, human((double)b, b2, sizeof b2));
        }
        if (vs == ZERO_OK) printf("checksums   ok (%d tensors in %d files verified)\n", nt * nf, nf);
        else printf("checksums   FAILED\n");
    }
    zero_ckpt_close(c);
    if (vs != ZERO_OK) return cli_error(CLI_RUNTIME, "%s", verr);
    return CLI_OK;
}
