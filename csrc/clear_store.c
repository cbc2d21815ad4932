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
 * (36 against 52-53 GB/s over 2 MiB on a Zen 3; docs/parity.md). */
#define CLEAR_LOOP_BYTES 256
/* Each method is written into the loop over a pass's calls (CLEAR_CALLS below). */
#define CLEAR_INLINE static inline __attribute__((always_inline))
#define CLEAR_STORES4(STORE, P, STEP, V)                                                   \
    STORE((void *)((P) + 0 * (STEP)), V), STORE((void *)((P) + 1 * (STEP)), V),             \
        STORE((void *)((P) + 2 * (STEP)), V), STORE((void *)((P) + 3 * (STEP)), V)
#define CLEAR_STORES8(STORE, P, STEP, V)                                                   \
    CLEAR_STORES4(STORE, P, STEP, V), CLEAR_STORES4(STORE, (P) + 4 * (STEP), STEP, V)
#define CLEAR_STORES16(STORE, P, STEP, V)                                                  \
    CLEAR_STORES8(STORE, P, STEP, V), CLEAR_STORES8(STORE, (P) + 8 * (STEP), STEP, V)

CLEAR_INLINE void clear_with_memset(void *dst, size_t bytes)
{
    memset(dst, 0, bytes);
}

#if defined(__x86_64__)
CLEAR_INLINE void clear_with_rep_stosb(void *dst, size_t bytes)
{
    __asm__ volatile("rep stosb" : "+D"(dst), "+c"(bytes) : "a"(0) : "memory");
}

/* The zero vector is laundered through an empty asm so that GCC cannot
 * recognise the loop as a memset and call libc instead. */
CLEAR_INLINE __attribute__((target("avx512f"))) void clear_with_avx512(void *dst, size_t bytes)
{
    __m512i zero = _mm512_setzero_si512();
    __asm__("" : "+v"(zero));
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES)
        CLEAR_STORES4(_mm512_store_si512, p, 64, zero);
}

CLEAR_INLINE __attribute__((target("avx512f"))) void clear_with_avx512_stream(void *dst, size_t bytes)
{
    __m512i zero = _mm512_setzero_si512();
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES)
        CLEAR_STORES4(_mm512_stream_si512, p, 64, zero);
    _mm_sfence();
}

CLEAR_INLINE __attribute__((target("avx2"))) void clear_with_avx2(void *dst, size_t bytes)
{
    __m256i zero = _mm256_setzero_si256();
    __asm__("" : "+x"(zero));
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES)
        CLEAR_STORES8(_mm256_store_si256, p, 32, zero);
}

CLEAR_INLINE __attribute__((target("avx2"))) void clear_with_avx2_stream(void *dst, size_t bytes)
{
    __m256i zero = _mm256_setzero_si256();
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES)
        CLEAR_STORES8(_mm256_stream_si256, p, 32, zero);
    _mm_sfence();
}

CLEAR_INLINE void clear_with_sse2(void *dst, size_t bytes)
{
    __m128i zero = _mm_setzero_si128();
    __asm__("" : "+x"(zero));
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES)
        CLEAR_STORES16(_mm_store_si128, p, 16, zero);
}

CLEAR_INLINE void clear_with_sse2_stream(void *dst, size_t bytes)
{
    __m128i zero = _mm_setzero_si128();
    for (char *p = dst, *end = p + bytes; p < end; p += CLEAR_LOOP_BYTES)
        CLEAR_STORES16(_mm_stream_si128, p, 16, zero);
    _mm_sfence();
}
#endif

/* The loops over a pass's calls, one per method with its stores written in: no call through a
 * pointer, and nothing but the list, its end and the sum live across a call.  A loop that called
 * the method through a pointer and reloaded its spilled operands from the stack after each call
 * cleared 2 MiB in the caches at 0.95 of a bare loop's rate with rep stosb (docs/parity.md). */
#define CLEAR_CALLS(NAME, ATTRIBUTES, CLEAR)                                                \
    ATTRIBUTES static size_t NAME(const clear_call *call, const clear_call *end)            \
    {                                                                                      \
        size_t bytes = 0;                                                                  \
        for (; call < end; call++) {                                                       \
            size_t length = call->bytes; /* read before the stores, not after them */      \
            CLEAR(call->start, length);                                                    \
            bytes += length;                                                               \
        }                                                                                  \
        return bytes;                                                                      \
    }

CLEAR_CALLS(clear_calls_memset, , clear_with_memset)
#if defined(__x86_64__)
CLEAR_CALLS(clear_calls_rep_stosb, , clear_with_rep_stosb)
CLEAR_CALLS(clear_calls_avx512, __attribute__((target("avx512f"))), clear_with_avx512)
CLEAR_CALLS(clear_calls_avx512_stream, __attribute__((target("avx512f"))), clear_with_avx512_stream)
CLEAR_CALLS(clear_calls_avx2, __attribute__((target("avx2"))), clear_with_avx2)
CLEAR_CALLS(clear_calls_avx2_stream, __attribute__((target("avx2"))), clear_with_avx2_stream)
CLEAR_CALLS(clear_calls_sse2, , clear_with_sse2)
CLEAR_CALLS(clear_calls_sse2_stream, , clear_with_sse2_stream)
#endif

clear_calls_fn clear_method_calls(int method, int *store_bytes)
{
    *store_bytes = 0;
    if (method == CLEAR_METHOD_MEMSET)
        return clear_calls_memset;
#if defined(__x86_64__)
    int avx512 = ml_cpu_supports(ML_CPU_AVX512F);
    int avx2 = ml_cpu_supports(ML_CPU_AVX2);
    switch (method) {
    case CLEAR_METHOD_REP_STOSB:
        *store_bytes = 1;
        return clear_calls_rep_stosb;
    case CLEAR_METHOD_VECTOR:
        *store_bytes = avx512 ? 64 : avx2 ? 32 : 16;
        return avx512 ? clear_calls_avx512 : avx2 ? clear_calls_avx2 : clear_calls_sse2;
    case CLEAR_METHOD_NONTEMPORAL:
        *store_bytes = avx512 ? 64 : avx2 ? 32 : 16;
        return avx512 ? clear_calls_avx512_stream : avx2 ? clear_calls_avx2_stream : clear_calls_sse2_stream;
    }
#endif
    return NULL;
}
