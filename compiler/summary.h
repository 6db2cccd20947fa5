/* The one-screen summary that `dimoc check` prints for a clean model. */
#ifndef DIMOC_SUMMARY_H
#define DIMOC_SUMMARY_H

#include <stdio.h>
#include "ast.h"

/* Name, description, inputs with their columns, parameters with bounds, init, prior, step
 * and periodicity, lets with their types, constraints and outputs. */
void dm_print_summary(const dm_model *m, FILE *out);

/* An expression in source syntax, with only the parentheses it needs. */
void dm_print_expr(const dm_expr *e, FILE *out);

#endif
