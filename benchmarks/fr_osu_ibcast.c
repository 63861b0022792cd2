/* fr_osu_ibcast: OSU-style non-blocking test of fr_ibcast() (as
 * osu_ibcast): latency, and how much of it a compute between the start and
 * the wait hides. The driver is osu_nb.c, the broadcast's part
 * osu_bcast.c. See docs/benchmarks.md. */
#include "osu_common.h"

int main(int argc, char **argv)
{
    return osu_nb_main(argc, argv, &osu_bcast);
}
