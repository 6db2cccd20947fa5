/* Grammar of the model language (docs/model-language.md).
 *
 * Every statement begins with a keyword, so statements need no terminator and may span
 * lines.  The parser builds the syntax tree of ast.h; names, types and constant values are
 * left to the checker (check.c).  After a syntax error it skips to the next statement
 * keyword and goes on, so that one run reports several errors. */

%code requires {
#include "front/front.h"
#ifndef YY_TYPEDEF_YY_SCANNER_T
#define YY_TYPEDEF_YY_SCANNER_T
typedef void *yyscan_t;
#endif
typedef DM_VEC(dm_expr) dm_expr_list;
typedef DM_VEC(dm_let) dm_let_list;
}

%code provides {
/* The scanner (lexer.l): the next token; a scanner over one source's TEXT (LEN bytes) with CTX
 * as its state, and its end. */
int yylex(YYSTYPE *lval, YYLTYPE *lloc, yyscan_t scanner);
yyscan_t dm_scanner_open(dm_parse_ctx *ctx, const char *text, size_t len);
void dm_scanner_close(yyscan_t scanner);
}

%code {
#include <stdio.h>
#include <string.h>
#include "front/builtins.h"

/* Deep enough for any sensible model; deeper input fails with a clear error rather than
 * growing the stack without end. */
#define YYMAXDEPTH 2000

/* A node starts where its first symbol starts. */
#define YYLLOC_DEFAULT(cur, rhs, n) ((cur) = (n) ? YYRHSLOC(rhs, 1) : YYRHSLOC(rhs, 0))

static void yyerror(YYLTYPE *loc, yyscan_t scanner, dm_parse_ctx *ctx, const char *msg);

static dm_expr *new_expr(dm_parse_ctx *ctx, dm_expr_kind kind, dm_loc loc, dm_expr *a,
                         dm_expr *b, dm_expr *c);
static dm_expr *new_num(dm_parse_ctx *ctx, dm_loc loc, double num);
static dm_expr *new_name(dm_parse_ctx *ctx, dm_loc loc, const char *name);
static dm_expr *new_op(dm_parse_ctx *ctx, dm_loc loc, int op, dm_expr *a, dm_expr *b);
static dm_expr *new_call(dm_parse_ctx *ctx, dm_loc loc, const char *name, dm_expr_list *args);
static dm_expr *new_sum(dm_parse_ctx *ctx, dm_loc loc, const char *fn, const char *var,
                        dm_loc var_loc, dm_expr *lo, dm_expr *hi, dm_expr *body);
static dm_expr_list *new_list(dm_parse_ctx *ctx);
static void begin_statement(dm_parse_ctx *ctx);
static void model_statement(dm_parse_ctx *ctx, dm_loc loc, const char *name, const char *desc);
static dm_input *new_input(dm_parse_ctx *ctx, dm_loc loc, const char *name, int width);
static dm_param *new_param(dm_parse_ctx *ctx);
static int first_clause(dm_parse_ctx *ctx, dm_param *p, int already, dm_loc loc,
                        const char *clause);
static void set_prior(dm_parse_ctx *ctx, dm_param *p, dm_loc loc, const char *name,
                      dm_expr_list *args);
static dm_param *init_from(dm_parse_ctx *ctx, dm_param *p, dm_loc loc, dm_expr *rule);
static void output_statement(dm_parse_ctx *ctx, dm_loc loc, const char *name,
                             const char *kind, dm_loc kind_loc, dm_expr *value);
static void library_statement(dm_parse_ctx *ctx, dm_loc loc);
static dm_definition *new_definition(dm_parse_ctx *ctx, int is_compartment, dm_loc loc,
                                     const char *name, dm_expr_list *formals);
static void end_definition(dm_parse_ctx *ctx, dm_definition *def, dm_let_list *locals,
                           dm_expr *body);
static dm_let_list *add_local(dm_parse_ctx *ctx, dm_let_list *list, dm_loc loc,
                              const char *name, dm_expr *value);
static void import_statement(dm_parse_ctx *ctx, dm_loc loc, const char *path);
static void fractions_statement(dm_parse_ctx *ctx, dm_loc loc, dm_expr_list *members,
                                dm_expr_list *inits, dm_loc init_loc);
}

%define api.pure full
%define api.location.type {dm_loc}
%define parse.error custom
%define parse.lac full
%locations
%param {yyscan_t scanner}
%parse-param {dm_parse_ctx *ctx}

%union {
    double num;
    char *str;
    int ival;
    dm_expr *expr;
    dm_expr_list *list;
    dm_param *param;
    dm_definition *def;
    dm_let_list *lets;
}

%token END 0 "end of file"
%token <str> IDENT "a name"
%token <str> STRING "a string"
%token <num> NUMBER "a number"
%token KW_MODEL "'model'" KW_MEASURE "'measure'" KW_VOXEL "'voxel'" KW_PARAM "'param'"
%token KW_IN "'in'" KW_INIT "'init'" KW_FROM "'from'" KW_PRIOR "'prior'" KW_PERIODIC "'periodic'"
%token KW_STEP "'step'" KW_LET "'let'" KW_CONSTRAINT "'constraint'" KW_SIGNAL "'signal'"
%token KW_DERIVATIVE "'derivative'" KW_MULTISTART "'multistart'" KW_OUTPUT "'output'"
%token LE "'<='" GE "'>='" EQ "'=='" NE "'!='" AND "'&&'" OR "'||'"
%token DOTDOT "'..'"
%token KW_FUNCTION "'function'" KW_COMPARTMENT "'compartment'" KW_IMPORT "'import'"
%token KW_FRACTIONS "'fractions'"

/* A sum's body is a product: `sum(k in 1..3) k * x` sums k * x; a '*' or '/' after the body
 * continues it (shift), a '+' or '-' ends it. */
%precedence SUM_BODY
%precedence '*' '/'

%type <expr> expr ternary or and equality relation sum product unary power postfix primary
%type <list> args names
%type <ival> width open close
%type <str> source
%type <expr> scheme_column
%type <param> clauses
%type <def> definition_head
%type <lets> locals
%type <list> formals
%type <ival> definition_kind

%%

file
    : %empty
    | file statement { library_statement(ctx, @2); }
    | file definition
    ;

statement
    : KW_MODEL IDENT STRING { model_statement(ctx, @2, $2, $3); }
    | KW_MEASURE IDENT width source scheme_column
        {
            begin_statement(ctx);
            dm_input *in = new_input(ctx, @2, $2, $3);
            in->source = $4;
            in->source_loc = @4;
            if ($5) {
                in->scheme_column = $5->name;
                if (!$4 || strcmp($4, "scheme") != 0)
                    dm_error(ctx->diag, $5->loc, "only a 'scheme' source takes a column name");
            }
            dm_vec_push(ctx->m, ctx->m->measures, in);
        }
    | KW_VOXEL IDENT width
        {
            begin_statement(ctx);
            dm_vec_push(ctx->m, ctx->m->voxels, new_input(ctx, @2, $2, $3));
        }
    | KW_VOXEL IDENT width '=' expr
        {
            begin_statement(ctx);
            dm_input *in = new_input(ctx, @2, $2, $3);
            in->has_default = 1;
            in->default_expr = $5;
            dm_vec_push(ctx->m, ctx->m->voxels, in);
        }
    | KW_PARAM IDENT clauses
        {
            begin_statement(ctx);
            $3->name = $2;
            $3->loc = @2;
            dm_vec_push(ctx->m, ctx->m->params, $3);
        }
    | KW_LET IDENT '=' expr
        {
            begin_statement(ctx);
            dm_let *let = dm_arena_alloc(ctx->m, sizeof *let);
            let->name = $2;
            let->loc = @2;
            let->value = $4;
            dm_vec_push(ctx->m, ctx->m->lets, let);
        }
    | KW_CONSTRAINT expr
        {
            begin_statement(ctx);
            dm_constraint *c = dm_arena_alloc(ctx->m, sizeof *c);
            c->loc = @2;
            c->cond = $2;
            dm_vec_push(ctx->m, ctx->m->constraints, c);
        }
    | KW_SIGNAL expr
        {
            begin_statement(ctx);
            if (ctx->m->nsignals++ == 0) {
                ctx->m->signal = $2;
                ctx->m->signal_loc = @1;
            } else if (ctx->m->nsignals == 2) {
                ctx->m->extra_signal_loc = @1;
            }
        }
    | KW_DERIVATIVE IDENT '=' expr
        {
            begin_statement(ctx);
            dm_let *d = dm_arena_alloc(ctx->m, sizeof *d);
            d->name = $2;
            d->loc = @2;
            d->value = $4;
            dm_vec_push(ctx->m, ctx->m->derivatives, d);
        }
    | KW_MULTISTART NUMBER
        {
            begin_statement(ctx);
            double n = $2;
            if (ctx->m->multistart)
                dm_error(ctx->diag, @1, "repeated 'multistart' statement");
            else if (!(n >= 1 && n <= DM_MAX_MULTISTART && n == (int)n))
                dm_error(ctx->diag, @2, "multistart needs an integer from 1 to %d",
                         DM_MAX_MULTISTART);
            else {
                ctx->m->multistart = (int)n;
                ctx->m->multistart_loc = @1;
            }
        }
    | KW_FRACTIONS names { fractions_statement(ctx, @1, $2, NULL, @1); }
    | KW_FRACTIONS names KW_INIT args { fractions_statement(ctx, @1, $2, $4, @3); }
    | KW_OUTPUT IDENT '=' expr { output_statement(ctx, @2, $2, NULL, @2, $4); }
    | KW_OUTPUT IDENT IDENT '=' expr { output_statement(ctx, @2, $2, $3, @3, $5); }
    | error
        {
            /* Tokens are skipped up to the next statement keyword. */
            ctx->statement_was_error = 1;
            if (dm_diag_full(ctx->diag))
                YYABORT;
        }
    ;

width
    : %empty { $$ = 1; }
    | '[' NUMBER ']'
        {
            double w = $2;
            if (!(w >= 1 && w <= DM_MAX_INPUT_WIDTH && w == (int)w)) {
                dm_error(ctx->diag, @2, "the width must be an integer from 1 to %d",
                         DM_MAX_INPUT_WIDTH);
                w = 1;
            }
            $$ = (int)w;
        }
    ;

/* The source's location is that of its name (YYLLOC_DEFAULT would give the '='). */
source
    : %empty { $$ = NULL; }
    | '=' IDENT { $$ = $2; @$ = @2; }
    ;

/* `measure NAME = scheme COLUMN`: the column's name (a name node, for its location). */
scheme_column
    : %empty { $$ = NULL; }
    | IDENT { $$ = new_name(ctx, @1, $1); }
    ;

/* The members of a `fractions` set, as name nodes. */
names
    : IDENT { $$ = new_list(ctx); dm_vec_push(ctx->m, *$$, new_name(ctx, @1, $1)); }
    | names ',' IDENT { $$ = $1; dm_vec_push(ctx->m, *$$, new_name(ctx, @3, $3)); }
    ;

/* Parameter clauses, in any order, each at most once. */
clauses
    : %empty { $$ = new_param(ctx); }
    | clauses KW_IN open expr ',' expr close
        {
            $$ = $1;
            if (first_clause(ctx, $$, $$->has_bounds, @2, "in")) {
                $$->has_bounds = 1;
                $$->lo_closed = $3;
                $$->lo_expr = $4;
                $$->hi_expr = $6;
                $$->hi_closed = $7;
            }
        }
    | clauses KW_INIT expr
        {
            $$ = $1;
            int already = $$->init_expr != NULL || $$->init_from != NULL || $$->init_source;
            if (first_clause(ctx, $$, already, @2, "init")) {
                /* `init b0` is not an expression but a rule; b0 stays a free name. */
                if ($3->kind == DM_E_NAME && strcmp($3->name, "b0") == 0)
                    $$->init_source = DM_INIT_B0;
                else
                    $$->init_expr = $3;
            }
        }
    | clauses KW_INIT KW_FROM IDENT { $$ = init_from(ctx, $1, @2, new_name(ctx, @4, $4)); }
    | clauses KW_INIT KW_FROM IDENT '(' args ')'
        {
            $$ = init_from(ctx, $1, @2, new_call(ctx, @4, $4, $6));
        }
    | clauses KW_PRIOR IDENT { $$ = $1; set_prior(ctx, $$, @3, $3, NULL); }
    | clauses KW_PRIOR IDENT '(' args ')' { $$ = $1; set_prior(ctx, $$, @3, $3, $5); }
    | clauses KW_PERIODIC
        {
            $$ = $1;
            if (first_clause(ctx, $$, $$->periodic, @2, "periodic"))
                $$->periodic = 1;
        }
    | clauses KW_STEP expr
        {
            $$ = $1;
            if (first_clause(ctx, $$, $$->step_expr != NULL, @2, "step"))
                $$->step_expr = $3;
        }
    ;

open
    : '(' { $$ = 0; }
    | '[' { $$ = 1; }
    ;

close
    : ')' { $$ = 0; }
    | ']' { $$ = 1; }
    ;

args
    : expr { $$ = new_list(ctx); dm_vec_push(ctx->m, *$$, $1); }
    | args ',' expr { $$ = $1; dm_vec_push(ctx->m, *$$, $3); }
    ;

/* Expressions, loosest binding first. */
expr
    : ternary
    ;

ternary
    : or
    | or '?' expr ':' ternary { $$ = new_expr(ctx, DM_E_TERNARY, @2, $1, $3, $5); }
    ;

or
    : and
    | or OR and { $$ = new_op(ctx, @2, DM_OP_OR, $1, $3); }
    ;

and
    : equality
    | and AND equality { $$ = new_op(ctx, @2, DM_OP_AND, $1, $3); }
    ;

/* Comparisons do not chain: `a < b < c` is a syntax error rather than a surprise. */
equality
    : relation
    | relation EQ relation { $$ = new_op(ctx, @2, DM_OP_EQ, $1, $3); }
    | relation NE relation { $$ = new_op(ctx, @2, DM_OP_NE, $1, $3); }
    ;

relation
    : sum
    | sum '<' sum { $$ = new_op(ctx, @2, '<', $1, $3); }
    | sum '>' sum { $$ = new_op(ctx, @2, '>', $1, $3); }
    | sum LE sum { $$ = new_op(ctx, @2, DM_OP_LE, $1, $3); }
    | sum GE sum { $$ = new_op(ctx, @2, DM_OP_GE, $1, $3); }
    ;

sum
    : product
    | sum '+' product { $$ = new_op(ctx, @2, '+', $1, $3); }
    | sum '-' product { $$ = new_op(ctx, @2, '-', $1, $3); }
    ;

product
    : unary
    | product '*' unary { $$ = new_op(ctx, @2, '*', $1, $3); }
    | product '/' unary { $$ = new_op(ctx, @2, '/', $1, $3); }
    ;

/* Unary minus binds looser than ^: -x^2 is -(x^2); 2^-1 is allowed. */
unary
    : power
    | '-' unary { $$ = new_expr(ctx, DM_E_UNARY, @1, $2, NULL, NULL); $$->op = '-'; }
    | '!' unary { $$ = new_expr(ctx, DM_E_UNARY, @1, $2, NULL, NULL); $$->op = '!'; }
    | IDENT '(' IDENT KW_IN expr DOTDOT expr ')' product %prec SUM_BODY
        {
            $$ = new_sum(ctx, @1, $1, $3, @3, $5, $7, $9);
        }
    ;

power
    : postfix
    | postfix '^' unary { $$ = new_op(ctx, @2, '^', $1, $3); }
    ;

postfix
    : primary
    | postfix '[' expr ']' { $$ = new_expr(ctx, DM_E_INDEX, @2, $1, $3, NULL); }
    ;

primary
    : NUMBER { $$ = new_num(ctx, @1, $1); }
    | IDENT { $$ = new_name(ctx, @1, $1); }
    | IDENT '(' ')' { $$ = new_call(ctx, @1, $1, NULL); }
    | IDENT '(' args ')' { $$ = new_call(ctx, @1, $1, $3); }
    | '(' expr ')' { $$ = $2; }
    ;

/* Functions, compartments and imports: the statements an imported file may hold. */
definition
    : definition_head '=' expr { end_definition(ctx, $1, NULL, $3); }
    | definition_head '{' locals '=' expr '}' { end_definition(ctx, $1, $3, $5); }
    | KW_IMPORT STRING { import_statement(ctx, @2, $2); }
    ;

definition_head
    : definition_kind IDENT '(' formals ')' { $$ = new_definition(ctx, $1, @2, $2, $4); }
    | definition_kind IDENT '(' ')' { $$ = new_definition(ctx, $1, @2, $2, NULL); }
    ;

definition_kind
    : KW_FUNCTION { $$ = 0; }
    | KW_COMPARTMENT { $$ = 1; }
    ;

formals
    : IDENT { $$ = new_list(ctx); dm_vec_push(ctx->m, *$$, new_name(ctx, @1, $1)); }
    | formals ',' IDENT { $$ = $1; dm_vec_push(ctx->m, *$$, new_name(ctx, @3, $3)); }
    ;

/* The local lets of a block, each one visible to the next and to the value. */
locals
    : %empty { $$ = NULL; }
    | locals KW_LET IDENT '=' expr { $$ = add_local(ctx, $1, @3, $3, $5); }
    ;

%%

static void yyerror(YYLTYPE *loc, yyscan_t scanner, dm_parse_ctx *ctx, const char *msg)
{
    (void)scanner;
    if (strcmp(msg, "memory exhausted") == 0)
        dm_error(ctx->diag, *loc, "expression nested too deeply (the parser's stack is full)");
    else
        dm_error(ctx->diag, *loc, "%s", msg);
}

/* --- Syntax error messages ------------------------------------------------------------ */

static const yysymbol_kind_t statement_keywords[] = {
    YYSYMBOL_KW_MODEL, YYSYMBOL_KW_MEASURE, YYSYMBOL_KW_VOXEL, YYSYMBOL_KW_PARAM,
    YYSYMBOL_KW_LET, YYSYMBOL_KW_CONSTRAINT, YYSYMBOL_KW_SIGNAL, YYSYMBOL_KW_DERIVATIVE,
    YYSYMBOL_KW_MULTISTART, YYSYMBOL_KW_OUTPUT, YYSYMBOL_KW_FRACTIONS,
    YYSYMBOL_KW_FUNCTION, YYSYMBOL_KW_COMPARTMENT, YYSYMBOL_KW_IMPORT,
};
#define NSTATEMENT_KEYWORDS (int)(sizeof statement_keywords / sizeof statement_keywords[0])

static int is_keyword(yysymbol_kind_t k)
{
    return (k >= YYSYMBOL_KW_MODEL && k <= YYSYMBOL_KW_OUTPUT) || k == YYSYMBOL_KW_FRACTIONS ||
           k == YYSYMBOL_KW_FUNCTION || k == YYSYMBOL_KW_COMPARTMENT || k == YYSYMBOL_KW_IMPORT;
}

static int is_statement_keyword(yysymbol_kind_t k)
{
    for (int i = 0; i < NSTATEMENT_KEYWORDS; i++)
        if (statement_keywords[i] == k)
            return 1;
    return 0;
}

/* Tokens that continue an expression: listing them all would only be noise. */
static int is_operator(yysymbol_kind_t k)
{
    switch (k) {
    case YYSYMBOL_LE: case YYSYMBOL_GE: case YYSYMBOL_EQ: case YYSYMBOL_NE:
    case YYSYMBOL_AND: case YYSYMBOL_OR:
        return 1;
    default:
        break;
    }
    const char *name = yysymbol_name(k);
    return strlen(name) == 3 && name[0] == '\'' && strchr("+-*/^<>?[(", name[1]);
}

/* The keyword text, without its quotes. */
static void keyword_text(yysymbol_kind_t k, char *buf, size_t n)
{
    const char *name = yysymbol_name(k);
    size_t len = strlen(name);
    if (len >= 2 && name[0] == '\'')
        snprintf(buf, n, "%.*s", (int)(len - 2), name + 1);
    else
        snprintf(buf, n, "%s", name);
}

static void describe_lookahead(yysymbol_kind_t k, const dm_parse_ctx *ctx, char *buf, size_t n)
{
    if (k == YYSYMBOL_IDENT || k == YYSYMBOL_NUMBER)
        snprintf(buf, n, "'%s'", ctx->last_token);
    else
        snprintf(buf, n, "%s", yysymbol_name(k));
}

static int yyreport_syntax_error(const yypcontext_t *pctx, yyscan_t scanner, dm_parse_ctx *ctx)
{
    (void)scanner;
    /* A token right after a skipped bad character: that character is the mistake, already
     * reported; a second message about the same spot would only confuse. */
    if (ctx->token_after_bad_char)
        return 0;
    dm_loc loc = *yypcontext_location(pctx);
    yysymbol_kind_t look = yypcontext_token(pctx);
    yysymbol_kind_t expected[YYNTOKENS];
    int n = yypcontext_expected_tokens(pctx, expected, YYNTOKENS);
    if (n < 0)
        n = 0;

    char found[64], after[64] = "";
    describe_lookahead(look, ctx, found, sizeof found);
    if (ctx->prev_token[0])
        snprintf(after, sizeof after, " after '%s'", ctx->prev_token);

    int statement_expected = 0, expression_expected = 0, any_keyword = 0;
    for (int i = 0; i < n; i++) {
        statement_expected |= is_statement_keyword(expected[i]);
        expression_expected |= expected[i] == YYSYMBOL_NUMBER;
        any_keyword |= is_keyword(expected[i]);
    }

    /* A name where a keyword may stand: most likely a misspelt keyword. */
    if (look == YYSYMBOL_IDENT && any_keyword) {
        const char *names[YYNTOKENS + 1];
        char texts[YYNTOKENS][24];
        int nn = 0;
        for (int i = 0; i < n; i++)
            if (is_keyword(expected[i])) {
                keyword_text(expected[i], texts[nn], sizeof texts[nn]);
                names[nn] = texts[nn];
                nn++;
            }
        names[nn] = NULL;
        const char *near = dm_nearest_name(ctx->last_token, names);
        if (near) {
            dm_error(ctx->diag, loc, "unknown keyword '%s'; did you mean '%s'?", ctx->last_token,
                     near);
            return 0;
        }
        if (statement_expected && !expression_expected) {
            dm_error(ctx->diag, loc,
                     "'%s' does not begin a statement; a statement begins with model, measure, "
                     "voxel, param, fractions, let, constraint, signal, derivative, output, "
                     "function, compartment or import",
                     ctx->last_token);
            return 0;
        }
    }

    if (look == YYSYMBOL_LE || look == YYSYMBOL_GE || look == YYSYMBOL_EQ || look == YYSYMBOL_NE
        || strcmp(yysymbol_name(look), "'<'") == 0 || strcmp(yysymbol_name(look), "'>'") == 0) {
        int comparison_expected = 0;
        for (int i = 0; i < n; i++)
            comparison_expected |= expected[i] == look;
        if (!comparison_expected) {
            dm_error(ctx->diag, loc, "comparisons do not chain; join them with && "
                     "(as in 'a < b && b < c')");
            return 0;
        }
    }

    /* List what could have come, leaving out operators and the statement keywords. */
    char list[256] = "";
    int items = 0;
    const char *item[YYNTOKENS];
    if (expression_expected)
        item[items++] = "an expression";
    for (int i = 0; i < n; i++) {
        yysymbol_kind_t k = expected[i];
        if (is_statement_keyword(k) || is_operator(k) || k == YYSYMBOL_YYEOF)
            continue;
        if (expression_expected &&
            (k == YYSYMBOL_NUMBER || k == YYSYMBOL_IDENT || strcmp(yysymbol_name(k), "'('") == 0
             || strcmp(yysymbol_name(k), "'-'") == 0 || strcmp(yysymbol_name(k), "'!'") == 0))
            continue;
        item[items++] = yysymbol_name(k);
    }
    if (items == 0 || items > 5) {
        dm_error(ctx->diag, loc, "unexpected %s%s", found, after);
        return 0;
    }
    for (int i = 0; i < items; i++) {
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%s",
                 i == 0 ? "" : i == items - 1 ? " or " : ", ", item[i]);
    }
    dm_error(ctx->diag, loc, "expected %s%s, found %s", list, after, found);
    return 0;
}

/* --- Tree building -------------------------------------------------------------------- */

static int depth_of(const dm_expr *e)
{
    return e ? e->depth : 0;
}

static dm_expr *new_expr(dm_parse_ctx *ctx, dm_expr_kind kind, dm_loc loc, dm_expr *a,
                         dm_expr *b, dm_expr *c)
{
    dm_expr *e = dm_arena_alloc(ctx->m, sizeof *e);
    e->kind = kind;
    e->loc = loc;
    e->a = a;
    e->b = b;
    e->c = c;
    int d = depth_of(a);
    if (depth_of(b) > d)
        d = depth_of(b);
    if (depth_of(c) > d)
        d = depth_of(c);
    e->depth = d + 1;
    if (e->depth == DM_MAX_EXPR_DEPTH + 1)
        dm_error(ctx->diag, loc, "expression nested too deeply (more than %d levels)",
                 DM_MAX_EXPR_DEPTH);
    return e;
}

static dm_expr *new_num(dm_parse_ctx *ctx, dm_loc loc, double num)
{
    dm_expr *e = new_expr(ctx, DM_E_NUM, loc, NULL, NULL, NULL);
    e->num = num;
    return e;
}

static dm_expr *new_name(dm_parse_ctx *ctx, dm_loc loc, const char *name)
{
    dm_expr *e = new_expr(ctx, DM_E_NAME, loc, NULL, NULL, NULL);
    e->name = name;
    return e;
}

static dm_expr *new_op(dm_parse_ctx *ctx, dm_loc loc, int op, dm_expr *a, dm_expr *b)
{
    dm_expr *e = new_expr(ctx, DM_E_BINARY, loc, a, b, NULL);
    e->op = op;
    return e;
}

static dm_expr *new_call(dm_parse_ctx *ctx, dm_loc loc, const char *name, dm_expr_list *args)
{
    dm_expr *e = new_expr(ctx, DM_E_CALL, loc, NULL, NULL, NULL);
    e->name = name;
    if (args) {
        e->args = args->items;
        e->nargs = args->n;
        int d = 0;
        for (int i = 0; i < args->n; i++)
            if (args->items[i]->depth > d)
                d = args->items[i]->depth;
        e->depth = d + 1;
        if (e->depth == DM_MAX_EXPR_DEPTH + 1)
            dm_error(ctx->diag, loc, "expression nested too deeply (more than %d levels)",
                     DM_MAX_EXPR_DEPTH);
    }
    return e;
}

/* sum(VAR in LO..HI) BODY; any other name before the parenthesis is a mistake. */
static dm_expr *new_sum(dm_parse_ctx *ctx, dm_loc loc, const char *fn, const char *var,
                        dm_loc var_loc, dm_expr *lo, dm_expr *hi, dm_expr *body)
{
    if (strcmp(fn, "sum") != 0)
        dm_error(ctx->diag, loc, "'%s(%s in ...)' is not an expression; a bounded series is "
                 "written sum(%s in A..B) EXPR", fn, var, var);
    dm_expr *e = new_expr(ctx, DM_E_SUM, loc, lo, hi, body);
    e->name = var;
    e->var_loc = var_loc;
    return e;
}

static dm_expr_list *new_list(dm_parse_ctx *ctx)
{
    return dm_arena_alloc(ctx->m, sizeof(dm_expr_list));
}

/* --- Statements ----------------------------------------------------------------------- */

static void begin_statement(dm_parse_ctx *ctx)
{
    ctx->nstatements++;
}

static void model_statement(dm_parse_ctx *ctx, dm_loc loc, const char *name, const char *desc)
{
    dm_model *m = ctx->m;
    if (m->name)
        dm_error(ctx->diag, loc, "repeated 'model' statement (the first is at line %d)",
                 m->name_loc.line);
    else if (ctx->nstatements > 0)
        dm_error(ctx->diag, loc, "'model' must be the first statement of the file");
    if (!m->name) {
        m->name = name;
        m->description = desc;
        m->name_loc = loc;
    }
    ctx->nstatements++;
}

static dm_input *new_input(dm_parse_ctx *ctx, dm_loc loc, const char *name, int width)
{
    dm_input *in = dm_arena_alloc(ctx->m, sizeof *in);
    in->name = name;
    in->loc = loc;
    in->width = width;
    return in;
}

static dm_param *new_param(dm_parse_ctx *ctx)
{
    return dm_arena_alloc(ctx->m, sizeof(dm_param));
}

/* `init from RULE`: a start computed from the data (the checker reads RULE: a name or a
 * call). */
static dm_param *init_from(dm_parse_ctx *ctx, dm_param *p, dm_loc loc, dm_expr *rule)
{
    int already = p->init_expr != NULL || p->init_from != NULL || p->init_source;
    if (first_clause(ctx, p, already, loc, "init")) {
        p->init_from = rule;
        p->init_from_loc = rule->loc;
    }
    return p;
}

/* Reports a repeated clause; returns 1 when this is the first. */
static int first_clause(dm_parse_ctx *ctx, dm_param *p, int already, dm_loc loc,
                        const char *clause)
{
    (void)p;
    if (already) {
        dm_error(ctx->diag, loc, "repeated '%s' clause in a parameter declaration", clause);
        return 0;
    }
    return 1;
}

static void set_prior(dm_parse_ctx *ctx, dm_param *p, dm_loc loc, const char *name,
                      dm_expr_list *args)
{
    if (!first_clause(ctx, p, p->prior.name != NULL, loc, "prior"))
        return;
    p->prior.name = name;
    p->prior.loc = loc;
    p->prior.nargs = args ? args->n : 0;
    for (int i = 0; i < p->prior.nargs && i < 2; i++)
        p->prior.args[i] = args->items[i];
}

static void fractions_statement(dm_parse_ctx *ctx, dm_loc loc, dm_expr_list *members,
                                dm_expr_list *inits, dm_loc init_loc)
{
    begin_statement(ctx);
    dm_fractions *f = dm_arena_alloc(ctx->m, sizeof *f);
    f->loc = loc;
    f->members = members->items;
    f->nmembers = members->n;
    if (inits) {
        f->inits = inits->items;
        f->ninits = inits->n;
    }
    f->init_loc = init_loc;
    f->params_before = ctx->m->params.n;
    dm_vec_push(ctx->m, ctx->m->fractions, f);
}

static void output_statement(dm_parse_ctx *ctx, dm_loc loc, const char *name,
                             const char *kind, dm_loc kind_loc, dm_expr *value)
{
    begin_statement(ctx);
    dm_output *out = dm_arena_alloc(ctx->m, sizeof *out);
    out->name = name;
    out->loc = loc;
    out->value = value;
    out->kind = DM_OUT_SCALAR; /* the checker makes it a vector when the value is one */
    if (kind) {
        if (strcmp(kind, "axis") == 0) {
            out->kind = DM_OUT_AXIS;
        } else if (strcmp(kind, "vector") == 0) {
            out->kind = DM_OUT_VECTOR;
        } else {
            static const char *const kinds[] = {"axis", "vector", NULL};
            const char *near = dm_nearest_name(kind, kinds);
            if (near)
                dm_error(ctx->diag, kind_loc, "unknown output kind '%s'; did you mean '%s'?",
                         kind, near);
            else
                dm_error(ctx->diag, kind_loc,
                         "unknown output kind '%s'; expected 'axis', 'vector' or '='", kind);
        }
    }
    dm_vec_push(ctx->m, ctx->m->outputs, out);
}

/* --- Definitions and imports ---------------------------------------------------------- */

/* A model statement (not a definition nor an import) in an imported file. */
static void library_statement(dm_parse_ctx *ctx, dm_loc loc)
{
    if (ctx->file > 0 && !ctx->statement_was_error)
        dm_error(ctx->diag, loc, "an imported file holds only function, compartment and import "
                 "statements");
    ctx->statement_was_error = 0;
}

static dm_definition *new_definition(dm_parse_ctx *ctx, int is_compartment, dm_loc loc,
                                     const char *name, dm_expr_list *formals)
{
    dm_definition *def = dm_arena_alloc(ctx->m, sizeof *def);
    def->name = name;
    def->loc = loc;
    def->is_compartment = is_compartment;
    if (formals) {
        def->formals = formals->items;
        def->nformals = formals->n;
    }
    return def;
}

static void end_definition(dm_parse_ctx *ctx, dm_definition *def, dm_let_list *locals,
                           dm_expr *body)
{
    if (locals) {
        def->locals = locals->items;
        def->nlocals = locals->n;
    }
    def->body = body;
    dm_vec_push(ctx->m, ctx->m->definitions, def);
}

static dm_let_list *add_local(dm_parse_ctx *ctx, dm_let_list *list, dm_loc loc,
                              const char *name, dm_expr *value)
{
    if (!list)
        list = dm_arena_alloc(ctx->m, sizeof *list);
    dm_let *let = dm_arena_alloc(ctx->m, sizeof *let);
    let->name = name;
    let->loc = loc;
    let->value = value;
    dm_vec_push(ctx->m, *list, let);
    return list;
}

static void import_statement(dm_parse_ctx *ctx, dm_loc loc, const char *path)
{
    dm_import *im = dm_arena_alloc(ctx->m, sizeof *im);
    im->path = path;
    im->loc = loc;
    dm_vec_push(ctx->m, ctx->m->imports, im);
}

int dm_parse(dm_model *m, dm_diag *diag, const char *text, size_t len, int file)
{
    dm_parse_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.m = m;
    ctx.file = file;
    ctx.diag = diag;
    ctx.line = 1;
    ctx.col = 1;
    int before = diag->nerrors;

    yyscan_t scanner = dm_scanner_open(&ctx, text, len);
    yyparse(scanner, &ctx);
    dm_scanner_close(scanner);
    return diag->nerrors - before;
}
