/* Diagnostic only, never for reported figures: makes fsync(2) and fdatasync(2) return at
 * once, so that a run of svc-controller under it shows what its durability writes cost.
 *
 *   gcc -shared -fPIC -O2 -o nofsync.so bench/diag/nofsync.c
 *   BENCH_SVC_ENV="LD_PRELOAD=$PWD/nofsync.so" bench/run --no-build
 */
int fsync(int fd) { (void)fd; return 0; }
int fdatasync(int fd) { (void)fd; return 0; }
