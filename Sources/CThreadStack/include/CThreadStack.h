#ifndef C_THREAD_STACK_H
#define C_THREAD_STACK_H

#include <stddef.h>

/// The lowest address and size of the calling thread's stack. Returns 0 on success.
/// Wraps pthread_getattr_np + pthread_attr_getstack, which Swift's Glibc module does not
/// expose (they need _GNU_SOURCE).
int cthreadstack_current(void **lowest, size_t *size);

/// An address in the calling thread's stack right now: this function's frame. Not the address
/// of a local variable, which AddressSanitizer may move to a "fake stack" on the heap.
void *cthreadstack_position(void);

#endif
