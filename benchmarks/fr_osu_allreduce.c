/* fr_osu_allreduce: OSU-style latency test of fr_allreduce(). The driver is
 * osu_common.c, the allreduce's part osu_allreduce.c. See docs/benchmarks.md. */
#include "osu_common.h"

int main(int argc, char **argv)
{
    return osu_main(argc, argv, &osu_allreduce);
}
