/* The subcommands of the dimoc program; each returns the process exit status. */
#ifndef DIMOC_COMMANDS_H
#define DIMOC_COMMANDS_H

#include <stdio.h>

int dm_cmd_check(int argc, char **argv);
int dm_cmd_compile(int argc, char **argv);
int dm_cmd_info(int argc, char **argv);
int dm_cmd_fit(int argc, char **argv);
int dm_cmd_simulate(int argc, char **argv);
int dm_cmd_scheme(int argc, char **argv);
int dm_cmd_phantom(int argc, char **argv);
int dm_cmd_compare(int argc, char **argv);
int dm_cmd_dti(int argc, char **argv);      /* runtime/cmd_dti.c */
int dm_cmd_track(int argc, char **argv);    /* runtime/cmd_track.c */
int dm_cmd_view(int argc, char **argv);     /* runtime/cmd_view.c */
int dm_cmd_pipeline(int argc, char **argv); /* runtime/cmd_pipeline.c */
int dm_cmd_select(int argc, char **argv);   /* runtime/cmd_select.c */
int dm_cmd_angles(int argc, char **argv);   /* runtime/cmd_angles.c */

/* `dimoc help CMD` text of the commands that take options; 0 when CMD is known. */
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

/* Prints "dimoc: error: <dm_last_error()>" and returns 1. */
int dm_report_error(void);
/* The whole command line, quoted where needed (for provenance), malloc'd. */
char *dm_command_line(void);

#endif
