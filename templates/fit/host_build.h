/* What both translation units of a fitter's host build (cpu_fitter.c, cpu_derived.c) set before
 * the generated model: its precision, `real` (DM_REAL), and how its functions are declared. */
#ifndef DIMOC_HOST_BUILD_H
#define DIMOC_HOST_BUILD_H

#ifndef DM_REAL
#define DM_REAL double
#endif
#ifndef DM_MODEL_FILE
#error "define DM_MODEL_FILE, the generated model source, e.g. -DDM_MODEL_FILE='\"model.h\"'"
#endif

typedef DM_REAL real;
#define DM_FN static inline
#define DM_FN_ONCE static
#define DM_EXPORT __attribute__((visibility("default")))

#endif
