/* Inside the public API (include/dimoc.h): recording a failure for dimoc_last_error().  Only
 * runtime/api includes this. */
#ifndef DIMOC_API_COMMON_H
#define DIMOC_API_COMMON_H

#include "dimoc.h"
#include "util/error.h"

/* Records a failure without position (message formatted) and returns CODE. */
dimoc_status dm_api_fail(dimoc_status code, const char *fmt, ...) DM_PRINTF(2, 3);
/* Records the runtime's last error (dm_last_error) as a failure of CODE; returns CODE. */
dimoc_status dm_api_fail_runtime(dimoc_status code);
/* Records a whole error record (a file-level failure, a diagnostic); returns its code. */
dimoc_status dm_api_fail_record(const dimoc_error *e);

struct dm_model_info;
/* The runtime's description of a model (api_model.c), or NULL with the failure recorded as
 * dimoc_model_describe records it (fn names the caller). */
const struct dm_model_info *dm_api_model_info(const dimoc_model *model, const char *fn);

#endif
