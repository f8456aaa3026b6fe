/* A program outside the project that uses an installed libzero exactly as a user would: the
 * version check, then real work through the public API (a checksum, a one-rank all-reduce, a
 * DeepSpeed-style config). Prints "zero VERSION ok" and exits 0, or says what failed. */
#include <stdio.h>
#include <string.h>
#include <zero/zero.h>

int main(void) {
    if (!ZERO_VERSION_CHECK()) {
        fprintf(stderr, "libzero %s cannot serve a program built for %s\n", zero_version(), ZERO_VERSION_STRING);
        return 1;
    }
    if (strcmp(zero_version(), ZERO_VERSION_STRING) != 0) return 1;
    if (zero_crc32c(0, "123456789", 9) != 0xE3069283u) return 2;
    zero_comm *comm = NULL;
    if (zero_comm_init_self(&comm) != ZERO_OK) return 3;
    float x[3] = {1.5f, -2.0f, 4.25f}, y[3] = {0};
    zero_status s = zero_comm_all_reduce(comm, x, y, 3, ZERO_DTYPE_FP32, ZERO_OP_SUM);
    const int same = s == ZERO_OK && zero_comm_size(comm) == 1 && x[0] == y[0] && x[1] == y[1] && x[2] == y[2];
    zero_comm_free(comm);
    if (!same) return 4;
    zero_config cfg;
    zero_config_default(&cfg);
    zero_error err;
    /* parsing a config goes through cJSON, a private dependency of libzero */
    if (zero_config_load_json_string(&cfg, "{\"zero_optimization\": {\"stage\": 2}}", &err) != ZERO_OK) {
        fprintf(stderr, "config: %s\n", err.msg);
        return 5;
    }
    printf("zero %s ok (stage %d)\n", zero_version(), cfg.stage);
    return 0;
}
