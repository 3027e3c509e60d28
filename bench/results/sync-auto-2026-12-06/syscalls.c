// The sync probe's pattern with plain syscalls instead of an io_uring (docs/benchmarks.md, "The
// sync mode chosen at start"): 16 blocks of 4 KiB written and synced first, then 16 pairs of one
// O_DIRECT write each way (pwrite + fdatasync, pwritev2 with RWF_DSYNC), alternating which goes
// first, each on the next block; prints both medians in microseconds.
//   gcc -O2 syscalls.c -o /tmp/syscalls && /tmp/syscalls /tmp/probe.dat
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}
static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    int fd = open(argv[1], O_CREAT | O_TRUNC | O_RDWR | O_DIRECT, 0644);
    void *zeros, *block;
    if (fd < 0 || posix_memalign(&zeros, 4096, 16 * 4096) || posix_memalign(&block, 4096, 4096)) return 1;
    memset(zeros, 0, 16 * 4096);
    for (int i = 0; i < 4096; i++) ((char *)block)[i] = (char)i;
    if (pwrite(fd, zeros, 16 * 4096, 0) != 16 * 4096 || fdatasync(fd)) return 1;
    double fdatasync_us[16], dsync_us[16];
    struct iovec io = {block, 4096};
    for (int pair = 0; pair < 16; pair++) {
        for (int k = 0; k < 2; k++) {
            off_t at = (off_t)((2 * pair + k) % 16) * 4096;
            int dsync_now = (k == 0) == (pair % 2 == 1);
            double t = now_us();
            if (dsync_now) {
                if (pwritev2(fd, &io, 1, at, RWF_DSYNC) != 4096) return 1;
                dsync_us[pair] = now_us() - t;
            } else {
                if (pwrite(fd, block, 4096, at) != 4096 || fdatasync(fd)) return 1;
                fdatasync_us[pair] = now_us() - t;
            }
        }
    }
    qsort(fdatasync_us, 16, sizeof(double), cmp);
    qsort(dsync_us, 16, sizeof(double), cmp);
    printf("syscalls: write + fdatasync p50 %.1f us, RWF_DSYNC write p50 %.1f us\n", fdatasync_us[7], dsync_us[7]);
    unlink(argv[1]);
    return 0;
}
