/* One instance of the CSD solver for the host: templates/csd/csd_solve.h with its names given
 * the suffix DM_CSD_SFX, preceded by the host's products (csd_host_kernels.h).  The includer
 * (runtime/csd/csd_cpu.c) defines `real`, DM_CSD_SFX, the vector type and loads of
 * csd_host_kernels.h, and DM_FN; each inclusion is another instance (a precision, an
 * instruction set).  No include guard. */
#define DM_CSD_CAT_(a, b) a##b
#define DM_CSD_CAT(a, b) DM_CSD_CAT_(a, b)
#define dm_csd_problem DM_CSD_CAT(dm_csd_problem, DM_CSD_SFX)
#define dm_csd_dot_ DM_CSD_CAT(dm_csd_dot, DM_CSD_SFX)
#define dm_csd_dotd_ DM_CSD_CAT(dm_csd_dotd, DM_CSD_SFX)
#define dm_csd_dotrr_ DM_CSD_CAT(dm_csd_dotrr, DM_CSD_SFX)
#define dm_csd_dot4_ DM_CSD_CAT(dm_csd_dot4, DM_CSD_SFX)
#define dm_csd_dotd4_ DM_CSD_CAT(dm_csd_dotd4, DM_CSD_SFX)
#define dm_csd_matvec4_ DM_CSD_CAT(dm_csd_matvec4, DM_CSD_SFX)
#define dm_csd_matvec4d_ DM_CSD_CAT(dm_csd_matvec4d, DM_CSD_SFX)
#define dm_csd_chol_append_ DM_CSD_CAT(dm_csd_chol_append, DM_CSD_SFX)
#define dm_csd_chol_solve_ DM_CSD_CAT(dm_csd_chol_solve, DM_CSD_SFX)
#define dm_csd_chol_delete_ DM_CSD_CAT(dm_csd_chol_delete, DM_CSD_SFX)
#define dm_csd_most_violated_ DM_CSD_CAT(dm_csd_most_violated, DM_CSD_SFX)
#define dm_csd_rank_update_ DM_CSD_CAT(dm_csd_rank_update, DM_CSD_SFX)
#define dm_csd_chol_rows4_ DM_CSD_CAT(dm_csd_chol_rows4, DM_CSD_SFX)
#define dm_csd_update_x_ DM_CSD_CAT(dm_csd_update_x, DM_CSD_SFX)
#define dm_csd_hard_ws DM_CSD_CAT(dm_csd_hard_ws, DM_CSD_SFX)
#define dm_csd_hard_ws_ DM_CSD_CAT(dm_csd_hard_ws_fn, DM_CSD_SFX)
#define dm_csd_drop_ DM_CSD_CAT(dm_csd_drop, DM_CSD_SFX)
#define dm_csd_solve_hard_ DM_CSD_CAT(dm_csd_solve_hard, DM_CSD_SFX)
#define dm_csd_solve_soft_ DM_CSD_CAT(dm_csd_solve_soft, DM_CSD_SFX)
#define dm_csd_solve DM_CSD_CAT(dm_csd_solve, DM_CSD_SFX)

#include "csd/csd_host_kernels.h"
#include "csd/csd_solve.h"

#undef dm_csd_problem
#undef dm_csd_dot_
#undef dm_csd_dotd_
#undef dm_csd_dotrr_
#undef dm_csd_dot4_
#undef dm_csd_dotd4_
#undef dm_csd_matvec4_
#undef dm_csd_matvec4d_
#undef dm_csd_chol_append_
#undef dm_csd_chol_solve_
#undef dm_csd_chol_delete_
#undef dm_csd_most_violated_
#undef dm_csd_rank_update_
#undef dm_csd_chol_rows4_
#undef dm_csd_update_x_
#undef dm_csd_hard_ws
#undef dm_csd_hard_ws_
#undef dm_csd_drop_
#undef dm_csd_solve_hard_
#undef dm_csd_solve_soft_
#undef dm_csd_solve
#undef DM_CSD_CAT
#undef DM_CSD_CAT_
