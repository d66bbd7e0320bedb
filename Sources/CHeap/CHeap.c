#include "CHeap.h"

// Any libc header defines __GLIBC__ on glibc (through <features.h>).
#include <stdlib.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

int cheap_release_free_memory(void) {
#if defined(__GLIBC__)
    return malloc_trim(0);
#else
    return 0;
#endif
}
