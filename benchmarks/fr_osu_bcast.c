/* fr_osu_bcast: OSU-style latency test of fr_bcast(). The driver is
 * osu_common.c, the broadcast's part osu_bcast.c. See docs/benchmarks.md. */
#include "osu_common.h"

int main(int argc, char **argv)
{
    return osu_main(argc, argv, &osu_bcast);
}
