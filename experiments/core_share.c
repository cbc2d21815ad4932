/* How much of its core's throughput this thread gets: no Python, no memlab.
 *
 * A loop bound by throughput (the bandwidth read at half the L1d: two loads a
 * cycle) runs at the core's rate only when nothing else issues on that core.
 * On a virtual machine the vCPU may be one hardware thread of a host core
 * whose other thread runs another guest; the guest sees no steal time for it,
 * yet every throughput-bound loop, memlab's or a bare one, gets a share of the
 * ports.  This program tells the two apart from latency: each chunk times
 *   - a dependent chain of adds (one a cycle whatever the sibling does: the
 *     clock), and
 *   - the same number of adds in eight independent chains (as many a cycle as
 *     the core has integer ALUs free for this thread),
 * on the thread's CPU clock (time the vCPU was descheduled left out), and
 * prints both.  experiments/parity.py runs it beside the bandwidth cases
 * inside the L1d and gives independent adds per cycle (chain adds per ns over
 * independent adds per ns, chunk by chunk) against the core's ALU count.
 *
 * usage: core_share CHUNKS
 * prints one line per chunk: chain_adds chain_cpu_ns independent_adds independent_cpu_ns */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAIN_TURNS 250000u /* 8 adds a turn: 2 M cycles, 0.5-1 ms */
#define INDEPENDENT_TURNS (CHAIN_TURNS / 4u) /* 32 adds a turn: the same 2 M adds */

static uint64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

#define ADD1(r) "add $1, %" #r "\n\t"
#define ADD8_ONE ADD1(0) ADD1(0) ADD1(0) ADD1(0) ADD1(0) ADD1(0) ADD1(0) ADD1(0)
#define ADD8_EACH ADD1(0) ADD1(1) ADD1(2) ADD1(3) ADD1(4) ADD1(5) ADD1(6) ADD1(7)

__attribute__((noinline)) static uint64_t dependent(uint64_t turns)
{
    uint64_t a = 0;
    for (uint64_t i = 0; i < turns; i++)
        __asm__ volatile(ADD8_ONE : "+r"(a));
    return a;
}

__attribute__((noinline)) static uint64_t independent(uint64_t turns)
{
    uint64_t a = 0, b = 0, c = 0, d = 0, e = 0, f = 0, g = 0, h = 0;
    for (uint64_t i = 0; i < turns; i++)
        __asm__ volatile(ADD8_EACH ADD8_EACH ADD8_EACH ADD8_EACH
                         : "+r"(a), "+r"(b), "+r"(c), "+r"(d), "+r"(e), "+r"(f), "+r"(g), "+r"(h));
    return a + b + c + d + e + f + g + h;
}

int main(int argc, char **argv)
{
    long chunks = argc == 2 ? strtol(argv[1], NULL, 10) : 0;
    if (chunks < 1 || chunks > 1000000) {
        fprintf(stderr, "usage: %s CHUNKS (1 to 1000000)\n", argv[0]);
        return 2;
    }
    dependent(CHAIN_TURNS); /* the clock settles */
    independent(INDEPENDENT_TURNS);
    for (long k = 0; k < chunks; k++) {
        uint64_t t0 = thread_cpu_ns();
        dependent(CHAIN_TURNS);
        uint64_t t1 = thread_cpu_ns();
        independent(INDEPENDENT_TURNS);
        uint64_t t2 = thread_cpu_ns();
        printf("%u %llu %u %llu\n", 8u * CHAIN_TURNS, (unsigned long long)(t1 - t0), 32u * INDEPENDENT_TURNS,
               (unsigned long long)(t2 - t1));
    }
    return 0;
}
