/* The four ways clear_order stores zeros: libc memset, rep stosb, vector
 * stores of the widest kind the CPU has, and non-temporal vector stores. */
#include "clear.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

const char *const clear_method_names[] = {"memset", "rep_stosb", "vector", "nontemporal", NULL};

/* Every extent is a multiple of 4 KiB at a 4 KiB boundary, so the vector
 * loops below need neither a head nor a tail.  A turn stores 256 bytes,
 * written out store by store: gcc -O2 left an inner loop of one store per
 * branch, which cleared the caches at 0.68-0.70 of the unrolled turn's rate
 * (36 against 52-53 GB/s over 2 MiB on a Zen 3; docs/clear.md). */
#define CLEAR_LOOP_BYTES 256
#define CLEAR_STORES4(STORE, P, STEP, V)                                                   \
    STORE((void *)((P) + 0 * (STEP)), V), STORE((void *)((P) + 1 * (STEP)), V),             \
        STORE((void *)((P) + 2 * (STEP)), V), STORE((void *)((P) + 3 * (STEP)), V)
#define CLEAR_STORES8(STORE, P, STEP, V)                                                   \
    CLEAR_STORES4(STORE, P, STEP, V), CLEAR_STORES4(STORE, (P) + 4 * (STEP), STEP, V)
#define CLEAR_STORES16(STORE, P, STEP, V)                                                  \
    CLEAR_STORES8(STORE, P, STEP, V), CLEAR_STORES8(STORE, (P) + 8 * (STEP), STEP, V)

static void clear_with_memset(void *dst, size_t bytes)
{
    memset(dst, 0, bytes);
}

#if defined(__x86_64__)
static void clear_with_rep_stosb(void *dst, size_t bytes)
{
    __asm__ volatile("rep stosb" : "+D"(dst), "+c"(bytes) : "a"(0) : "memory");
}

/* The zero vector is laundered through an empty asm so that GCC cannot
 * recognise the loop as a memset and call libc instead. */
__attribute__((target("avx512f"))) static void clear_with_avx512(void *dst, size_t bytes)
{
    __m512i zero = _mm512_setzero_si512();
    __asm__("" : "+v"(zero));
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES)
        CLEAR_STORES4(_mm512_store_si512, p, 64, zero);
}

__attribute__((target("avx512f"))) static void clear_with_avx512_stream(void *dst, size_t bytes)
{
    __m512i zero = _mm512_setzero_si512();
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES)
        CLEAR_STORES4(_mm512_stream_si512, p, 64, zero);
    _mm_sfence();
}

__attribute__((target("avx2"))) static void clear_with_avx2(void *dst, size_t bytes)
{
    __m256i zero = _mm256_setzero_si256();
    __asm__("" : "+x"(zero));
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES)
        CLEAR_STORES8(_mm256_store_si256, p, 32, zero);
}

__attribute__((target("avx2"))) static void clear_with_avx2_stream(void *dst, size_t bytes)
{
    __m256i zero = _mm256_setzero_si256();
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES)
        CLEAR_STORES8(_mm256_stream_si256, p, 32, zero);
    _mm_sfence();
}

static void clear_with_sse2(void *dst, size_t bytes)
{
    __m128i zero = _mm_setzero_si128();
    __asm__("" : "+x"(zero));
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES)
        CLEAR_STORES16(_mm_store_si128, p, 16, zero);
}

static void clear_with_sse2_stream(void *dst, size_t bytes)
{
    __m128i zero = _mm_setzero_si128();
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES)
        CLEAR_STORES16(_mm_stream_si128, p, 16, zero);
    _mm_sfence();
}
#endif

clear_fn clear_method_function(int method, int *store_bytes)
{
    *store_bytes = 0;
    if (method == CLEAR_METHOD_MEMSET)
        return clear_with_memset;
#if defined(__x86_64__)
    int avx512 = ml_cpu_supports(ML_CPU_AVX512F);
    int avx2 = ml_cpu_supports(ML_CPU_AVX2);
    switch (method) {
    case CLEAR_METHOD_REP_STOSB:
        *store_bytes = 1;
        return clear_with_rep_stosb;
    case CLEAR_METHOD_VECTOR:
        *store_bytes = avx512 ? 64 : avx2 ? 32 : 16;
        return avx512 ? clear_with_avx512 : avx2 ? clear_with_avx2 : clear_with_sse2;
    case CLEAR_METHOD_NONTEMPORAL:
        *store_bytes = avx512 ? 64 : avx2 ? 32 : 16;
        return avx512 ? clear_with_avx512_stream : avx2 ? clear_with_avx2_stream : clear_with_sse2_stream;
    }
#endif
    return NULL;
}
