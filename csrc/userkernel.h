/* User kernels (userkernel.c): loaded from a shared object built against
 * memlab/include/memlab_kernel.h and entered as families for the process. */
#ifndef MEMLAB_USERKERNEL_H
#define MEMLAB_USERKERNEL_H

#include "memlab.h"
#include "memlab_kernel.h"

/* dlopen the shared object at path, check its kernel (API version, entry
 * points, parameter table) and enter it as a family; a kernel of a name
 * already loaded replaces it (a newer build of the same file).  NULL with
 * err (ML_ERR_VALUE) naming what is wrong. */
const ml_family *ml_user_kernel_load(const char *path, const mlk_kernel **kernel, ml_error *err);
/* The latest loaded user kernel called name; NULL if none. */
const ml_family *ml_user_kernel_find(const char *name);
/* The kernel declaration of a family ml_user_kernel_load returned. */
const mlk_kernel *ml_user_kernel_of(const ml_family *family);
/* The user kernel parameter behind the family's i-th ml_param. */
const mlk_param *ml_user_kernel_param(const ml_family *family, size_t index);

#endif
