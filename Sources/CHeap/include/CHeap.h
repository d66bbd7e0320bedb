#ifndef C_HEAP_H
#define C_HEAP_H

/// Gives the free memory glibc's allocator holds back to the system (malloc_trim(0), which
/// Swift's Glibc module does not expose: it lives in <malloc.h>). Returns 1 when some was
/// given back, 0 when none could be.
int cheap_release_free_memory(void);

#endif
