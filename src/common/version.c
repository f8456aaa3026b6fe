/* zero_version(): the version of the library linked at run time, and the check a program makes
 * against the version of the header it was compiled with (ZERO_VERSION_CHECK in zero/zero.h). */
#include "zero/zero.h"

const char *zero_version(void) { return ZERO_VERSION_STRING; }

int zero_version_number(void) { return ZERO_VERSION_NUMBER; }

int zero_version_compatible(int compiled) {
    if (compiled < 0) return 0;
    const int major = compiled / 10000, minor = compiled / 100 % 100;
    if (major != ZERO_VERSION_MAJOR) return 0;
    if (major == 0 && minor != ZERO_VERSION_MINOR) return 0;
    return ZERO_VERSION_NUMBER >= compiled;
}
