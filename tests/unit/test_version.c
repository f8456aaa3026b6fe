/* The version API: zero_version() agrees with the header's macros, and ZERO_VERSION_CHECK's rule
 * (same major, same minor while the major is 0, a library not older than the header). */
#include "harness.h"
#include "zero/zero.h"

#include <stdio.h>

int main(void) {
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", ZERO_VERSION_MAJOR, ZERO_VERSION_MINOR, ZERO_VERSION_PATCH);
    ZT_CHECK(!strcmp(zero_version(), want));
    ZT_CHECK(!strcmp(ZERO_VERSION_STRING, want));
    ZT_EQ_INT(zero_version_number(), ZERO_VERSION_MAJOR * 10000 + ZERO_VERSION_MINOR * 100 + ZERO_VERSION_PATCH);
    ZT_CHECK(ZERO_VERSION_CHECK());
    const int v = ZERO_VERSION_NUMBER;
    ZT_CHECK(zero_version_compatible(v));
    ZT_CHECK(!zero_version_compatible(v + 1));     /* a header newer than the library */
    ZT_CHECK(!zero_version_compatible(v + 10000)); /* another major */
    if (ZERO_VERSION_MAJOR == 0) {
        ZT_CHECK(!zero_version_compatible(v + 100)); /* 0.x: another minor */
        if (ZERO_VERSION_MINOR > 0) ZT_CHECK(!zero_version_compatible(v - 100));
    } else if (ZERO_VERSION_MINOR > 0) {
        ZT_CHECK(zero_version_compatible(v - 100 - ZERO_VERSION_PATCH)); /* an older minor of the same major */
    }
    if (ZERO_VERSION_PATCH > 0) ZT_CHECK(zero_version_compatible(v - 1)); /* an older patch */
    ZT_CHECK(!zero_version_compatible(-1));
    return zt_finish("test_version");
}
