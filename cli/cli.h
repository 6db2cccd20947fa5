/* The subcommands of the dimoc program (listed in commands.c); each returns the process exit
 * status. */
#ifndef DIMOC_CLI_H
#define DIMOC_CLI_H

#include <stdio.h>

int dm_cmd_check(int argc, char **argv);
int dm_cmd_compile(int argc, char **argv);
int dm_cmd_info(int argc, char **argv);
int dm_cmd_fit(int argc, char **argv);
int dm_cmd_simulate(int argc, char **argv);
int dm_cmd_scheme(int argc, char **argv);
int dm_cmd_phantom(int argc, char **argv);
int dm_cmd_compare(int argc, char **argv);
int dm_cmd_dti(int argc, char **argv);
int dm_cmd_track(int argc, char **argv);
int dm_cmd_view(int argc, char **argv);
int dm_cmd_pipeline(int argc, char **argv);
int dm_cmd_select(int argc, char **argv);
int dm_cmd_angles(int argc, char **argv);
int dm_cmd_response(int argc, char **argv);
int dm_cmd_csd(int argc, char **argv);
int dm_cmd_peaks(int argc, char **argv);
int dm_cmd_tdi(int argc, char **argv);
int dm_cmd_connectome(int argc, char **argv);
int dm_cmd_commit(int argc, char **argv);
int dm_cmd_merge(int argc, char **argv);
int dm_cmd_warm(int argc, char **argv);
int dm_cmd_mask(int argc, char **argv);
/* `dimoc bids`: it runs the pipelines' stages through the command table, which commands.c
 * hands it as `find` (dm_command_find). */
struct dm_command;
int dm_cmd_bids(int argc, char **argv, const struct dm_command *(*find)(const char *name));

/* `dimoc help CMD` text of the commands that take options; 0 when CMD is known. */
int dm_help_check(FILE *out);
int dm_help_compile(FILE *out);
int dm_help_info(FILE *out);
int dm_help_fit(FILE *out);
int dm_help_simulate(FILE *out);
int dm_help_scheme(FILE *out);
int dm_help_phantom(FILE *out);
int dm_help_compare(FILE *out);
int dm_help_dti(FILE *out);
int dm_help_track(FILE *out);
int dm_help_view(FILE *out);
int dm_help_pipeline(FILE *out);
int dm_help_select(FILE *out);
int dm_help_angles(FILE *out);
int dm_help_response(FILE *out);
int dm_help_csd(FILE *out);
int dm_help_peaks(FILE *out);
int dm_help_tdi(FILE *out);
int dm_help_connectome(FILE *out);
int dm_help_commit(FILE *out);
int dm_help_merge(FILE *out);
int dm_help_warm(FILE *out);
int dm_help_mask(FILE *out);
int dm_help_bids(FILE *out);
/* `dimoc help pipeline NAME`: the pipeline's usage and options; 1 (error printed) when there
 * is no pipeline NAME. */
int dm_help_pipeline_named(FILE *out, const char *name);

/* fit's option table: the pipelines pass these on to their fits. */
struct dm_opt;
const struct dm_opt *dm_fit_options(void);

/* A shipped pipeline as pipelines/NAME.sh's leading comment declares it (cmd_pipeline.c):
 * `dimoc pipeline` and `dimoc bids --pipeline` check their options against the same table. */
typedef struct dm_pipeline_def dm_pipeline_def;
/* Reads the script's usage, summary, own options and the fit options it passes on; NULL with
 * dm_last_error() (no such pipeline, a malformed leading comment, a name that is no name). */
dm_pipeline_def *dm_pipeline_def_load(const char *name);
void dm_pipeline_def_free(dm_pipeline_def *p);
/* The options the script takes besides the five inputs and the cluster options: its own, then
 * the fit options it passes on, into `to` (at most max rows, the last a row of NULLs); their
 * count.  The rows point into p. */
int dm_pipeline_def_options(const dm_pipeline_def *p, struct dm_opt *to, int max);
/* The script's path. */
const char *dm_pipeline_def_script(const dm_pipeline_def *p);
/* The cluster options of `dimoc pipeline --slurm` (--slurm, --parts, --partition, ...): the
 * table and its length (*n), not ended by a row of NULLs. */
const struct dm_opt *dm_pipeline_cluster_options(int *n);

#endif
