/* Lowering: checked syntax trees -> straight-line scalar SSA (see lower.h).
 *
 * The builders below are the only way instructions enter a program.  Each one first folds
 * (all operands constant -> a constant; x*1, x+0, --x, ... -> x) and then looks the
 * instruction up in a hash table keyed on its whole content, so equal subexpressions get one
 * id however they were reached: through a shared let, written twice, or produced again by
 * the derivative code. */
#include "lower.h"
#include "front/builtins.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void *xrealloc(void *p, size_t size)
{
    void *q = realloc(p, size ? size : 1);
    if (!q) abort(); /* as the front end's arena: no way to continue without memory */
    return q;
}

void dm_prog_init(dm_prog *P, const dm_model *m, dm_diag *diag)
{
    memset(P, 0, sizeof *P);
    P->model = m;
    P->diag = diag;
    P->allow_measures = 1;
    P->stage_first = -1;
    int nlets = m->lets.n;
    P->let_val = xrealloc(NULL, sizeof(int) * DM_MAX_WIDTH * (size_t)(nlets + 1));
    P->let_width = xrealloc(NULL, sizeof(int) * (size_t)(nlets + 1));
    for (int i = 0; i < DM_MAX_WIDTH * nlets; i++) P->let_val[i] = -1;
    for (int i = 0; i < nlets; i++) P->let_width[i] = 0;
}

void dm_prog_free(dm_prog *P)
{
    free(P->ins);
    free(P->table);
    free(P->let_val);
    free(P->let_width);
    memset(P, 0, sizeof *P);
}

/* ---- value numbering ---- */

static unsigned long long ins_hash(const dm_ins *x)
{
    unsigned long long h = 0xcbf29ce484222325ULL;
#define MIX(v) (h = (h ^ (unsigned long long)(v)) * 0x100000001b3ULL)
    MIX(x->op);
    MIX(x->fn + 1);
    MIX(x->index);
    unsigned long long bits;
    memcpy(&bits, &x->num, sizeof bits);
    MIX(bits);
    MIX(bits >> 32);
    for (int i = 0; i < x->nargs; i++) MIX(x->arg[i]);
#undef MIX
    return h ^ (h >> 29);
}

static int ins_equal(const dm_ins *a, const dm_ins *b)
{
    if (a->op != b->op || a->fn != b->fn || a->index != b->index || a->nargs != b->nargs) return 0;
    /* bitwise, so 0 and -0 stay distinct (they can matter: 1/-0) */
    if (memcmp(&a->num, &b->num, sizeof a->num) != 0) return 0;
    for (int i = 0; i < a->nargs; i++)
        if (a->arg[i] != b->arg[i]) return 0;
    return 1;
}

static void table_insert(dm_prog *P, int id)
{
    unsigned mask = (unsigned)P->table_cap - 1;
    unsigned slot = (unsigned)ins_hash(&P->ins[id]) & mask;
    while (P->table[slot] >= 0) slot = (slot + 1) & mask;
    P->table[slot] = id;
}

static int table_find(const dm_prog *P, const dm_ins *x)
{
    if (!P->table_cap) return -1;
    unsigned mask = (unsigned)P->table_cap - 1;
    unsigned slot = (unsigned)ins_hash(x) & mask;
    while (P->table[slot] >= 0) {
        if (ins_equal(&P->ins[P->table[slot]], x)) return P->table[slot];
        slot = (slot + 1) & mask;
    }
    return -1;
}

static int intern(dm_prog *P, dm_ins x)
{
    x.note = NULL;
    x.note_comp = -1;
    int found = table_find(P, &x);
    if (found >= 0) return found;
    if (P->n == P->cap) {
        P->cap = P->cap ? 2 * P->cap : 64;
        P->ins = xrealloc(P->ins, sizeof *P->ins * (size_t)P->cap);
    }
    if (2 * (P->n + 1) > P->table_cap) { /* keep the load factor under 1/2 */
        P->table_cap = P->table_cap ? 2 * P->table_cap : 128;
        P->table = xrealloc(P->table, sizeof(int) * (size_t)P->table_cap);
        for (int i = 0; i < P->table_cap; i++) P->table[i] = -1;
        for (int i = 0; i < P->n; i++) table_insert(P, i);
    }
    P->ins[P->n] = x;
    table_insert(P, P->n);
    return P->n++;
}

static int is_commutative(dm_irop op)
{
    return op == DM_IR_ADD || op == DM_IR_MUL || op == DM_IR_EQ || op == DM_IR_NE ||
           op == DM_IR_AND || op == DM_IR_OR;
}

void dm_prog_copy(dm_prog *dst, const dm_prog *src)
{
    for (int i = 0; i < src->n; i++) {
        int id = intern(dst, src->ins[i]);
        dst->ins[id].note = src->ins[i].note;
        dst->ins[id].note_comp = src->ins[i].note_comp;
    }
    dst->stage_first = src->stage_first;
}

/* ---- builders ---- */

int dm_ir_const_value(const dm_prog *P, int id, double *value)
{
    if (id < 0 || P->ins[id].op != DM_IR_CONST) return 0;
    if (value) *value = P->ins[id].num;
    return 1;
}

int dm_ir_is_bool(const dm_prog *P, int id)
{
    const dm_ins *x = &P->ins[id];
    switch (x->op) {
    case DM_IR_LT:
    case DM_IR_LE:
    case DM_IR_GT:
    case DM_IR_GE:
    case DM_IR_EQ:
    case DM_IR_NE:
    case DM_IR_NOT:
    case DM_IR_AND:
    case DM_IR_OR: return 1;
    case DM_IR_SELECT: return dm_ir_is_bool(P, x->arg[1]) && dm_ir_is_bool(P, x->arg[2]);
    default: return 0;
    }
}

int dm_ir_const(dm_prog *P, double value)
{
    dm_ins x = {.op = DM_IR_CONST, .fn = DM_MF_NONE, .num = value};
    return intern(P, x);
}

int dm_ir_leaf(dm_prog *P, dm_irop op, int index)
{
    dm_ins x = {.op = op, .fn = DM_MF_NONE, .index = index};
    return intern(P, x);
}

static double fold_binary(dm_irop op, double a, double b)
{
    switch (op) {
    case DM_IR_ADD: return a + b;
    case DM_IR_SUB: return a - b;
    case DM_IR_MUL: return a * b;
    case DM_IR_DIV: return a / b;
    case DM_IR_LT: return a < b;
    case DM_IR_LE: return a <= b;
    case DM_IR_GT: return a > b;
    case DM_IR_GE: return a >= b;
    case DM_IR_EQ: return a == b;
    case DM_IR_NE: return a != b;
    case DM_IR_AND: return a != 0 && b != 0;
    case DM_IR_OR: return a != 0 || b != 0;
    default: return NAN;
    }
}

int dm_ir_unary(dm_prog *P, dm_irop op, int a)
{
    double c;
    if (dm_ir_const_value(P, a, &c)) return dm_ir_const(P, op == DM_IR_NEG ? -c : (double)(c == 0));
    const dm_ins *x = &P->ins[a];
    if (op == DM_IR_NEG && x->op == DM_IR_NEG) return x->arg[0];
    if (op == DM_IR_NEG && x->op == DM_IR_SUB) /* -(a - b) = b - a */
        return dm_ir_binary(P, DM_IR_SUB, x->arg[1], x->arg[0]);
    dm_ins y = {.op = op, .fn = DM_MF_NONE, .nargs = 1, .arg = {a}};
    return intern(P, y);
}

/* An exact power of two (so that dividing by it equals multiplying by its inverse). */
static int is_power_of_two(double v)
{
    int e;
    double m = frexp(fabs(v), &e);
    return v != 0 && isfinite(v) && m == 0.5 && e > -1000 && e < 1000;
}

int dm_ir_binary(dm_prog *P, dm_irop op, int a, int b)
{
    double ca = 0, cb = 0;
    int ka = dm_ir_const_value(P, a, &ca), kb = dm_ir_const_value(P, b, &cb);
    if (ka && kb) return dm_ir_const(P, fold_binary(op, ca, cb));
    /* Algebraic identities.  x*0 -> 0 drops IEEE's inf*0 = nan, as automatic
     * differentiation conventionally does: a zero partial stays zero. */
    switch (op) {
    case DM_IR_ADD:
        if (ka && ca == 0) return b;
        if (kb && cb == 0) return a;
        if (P->ins[b].op == DM_IR_NEG) return dm_ir_binary(P, DM_IR_SUB, a, P->ins[b].arg[0]);
        if (P->ins[a].op == DM_IR_NEG) return dm_ir_binary(P, DM_IR_SUB, b, P->ins[a].arg[0]);
        break;
    case DM_IR_SUB:
        if (kb && cb == 0) return a;
        if (ka && ca == 0) return dm_ir_unary(P, DM_IR_NEG, b);
        if (a == b) return dm_ir_const(P, 0);
        if (P->ins[b].op == DM_IR_NEG) return dm_ir_binary(P, DM_IR_ADD, a, P->ins[b].arg[0]);
        break;
    case DM_IR_MUL:
        if ((ka && ca == 0) || (kb && cb == 0)) return dm_ir_const(P, 0);
        if (ka && ca == 1) return b;
        if (kb && cb == 1) return a;
        if (ka && ca == -1) return dm_ir_unary(P, DM_IR_NEG, b);
        if (kb && cb == -1) return dm_ir_unary(P, DM_IR_NEG, a);
        if (P->ins[a].op == DM_IR_NEG && P->ins[b].op == DM_IR_NEG)
            return dm_ir_binary(P, DM_IR_MUL, P->ins[a].arg[0], P->ins[b].arg[0]);
        break;
    case DM_IR_DIV:
        if (ka && ca == 0) return dm_ir_const(P, 0);
        if (kb && cb == 1) return a;
        if (kb && cb == -1) return dm_ir_unary(P, DM_IR_NEG, a);
        if (kb && is_power_of_two(cb)) /* exact, and a multiply is cheaper */
            return dm_ir_binary(P, DM_IR_MUL, a, dm_ir_const(P, 1 / cb));
        break;
    default: break;
    }
    dm_ins x = {.op = op, .fn = DM_MF_NONE, .nargs = 2, .arg = {a, b}};
    if (is_commutative(op)) {
        dm_ins swapped = x;
        swapped.arg[0] = b;
        swapped.arg[1] = a;
        int found = table_find(P, &swapped);
        if (found >= 0) return found;
    }
    return intern(P, x);
}

int dm_ir_select(dm_prog *P, int cond, int a, int b)
{
    double c;
    if (dm_ir_const_value(P, cond, &c)) return c != 0 ? a : b;
    if (a == b) return a;
    dm_ins x = {.op = DM_IR_SELECT, .fn = DM_MF_NONE, .nargs = 3, .arg = {cond, a, b}};
    return intern(P, x);
}

int dm_ir_call(dm_prog *P, dm_mathfn fn, int order, const int *args)
{
    const dm_mathfn_info *info = dm_mathfn_get(fn);
    dm_ins x = {.op = DM_IR_CALL, .fn = fn, .index = order, .nargs = info->nargs};
    double vals[DM_IR_MAX_ARGS];
    int all_const = 1;
    for (int i = 0; i < info->nargs; i++) {
        x.arg[i] = args[i];
        all_const &= dm_ir_const_value(P, args[i], &vals[i]);
    }
    if (all_const) return dm_ir_const(P, info->fold(vals, order));
    return intern(P, x);
}

/* ---- lowering of syntax trees ---- */

static int fail(dm_prog *P, dm_loc loc, const char *fmt, const char *arg)
{
    if (P->diag)
        dm_error(P->diag, loc, fmt, arg ? arg : "", P->context ? P->context : "this function");
    P->failed = 1;
    return -1;
}

static int call1(dm_prog *P, dm_mathfn fn, int a)
{
    return dm_ir_call(P, fn, 0, &a);
}

static int add(dm_prog *P, int a, int b)
{
    return dm_ir_binary(P, DM_IR_ADD, a, b);
}
static int mul(dm_prog *P, int a, int b)
{
    return dm_ir_binary(P, DM_IR_MUL, a, b);
}

/* x^n for a constant integer n by repeated squaring (x^2 = x*x, x^4 = (x*x)*(x*x)). */
static int int_power(dm_prog *P, int x, long n)
{
    if (n == 0) return dm_ir_const(P, 1);
    if (n < 0) return dm_ir_binary(P, DM_IR_DIV, dm_ir_const(P, 1), int_power(P, x, -n));
    int half = int_power(P, x, n / 2);
    int sq = n / 2 ? mul(P, half, half) : dm_ir_const(P, 1);
    return n % 2 ? mul(P, sq, x) : sq;
}

static int power(dm_prog *P, int x, int y)
{
    double c;
    if (dm_ir_const_value(P, y, &c)) {
        if (c == floor(c) && fabs(c) <= 16) return int_power(P, x, (long)c);
        if (c == 0.5) return call1(P, DM_MF_SQRT, x);
        if (c == -0.5)
            return dm_ir_binary(P, DM_IR_DIV, dm_ir_const(P, 1), call1(P, DM_MF_SQRT, x));
    }
    int args[2] = {x, y};
    return dm_ir_call(P, DM_MF_POW, 0, args);
}

static int lower_let(dm_prog *P, const dm_expr *at, int index, int out[DM_MAX_WIDTH]);

/* The columns of an input: measures live in m[], voxel inputs in v[]. */
static int lower_input(dm_prog *P, const dm_expr *e, const dm_symbol *sym, int first, int count,
                       int out[DM_MAX_WIDTH])
{
    const dm_input *in = sym->kind == DM_SYM_MEASURE ? P->model->measures.items[sym->index]
                                                     : P->model->voxels.items[sym->index];
    if (sym->kind == DM_SYM_MEASURE && !P->allow_measures)
        return fail(P, e->loc, "measurement input '%s' cannot be used in %s", sym->name);
    dm_irop op = sym->kind == DM_SYM_MEASURE ? DM_IR_MEASURE : DM_IR_VOXEL;
    for (int i = 0; i < count; i++) out[i] = dm_ir_leaf(P, op, in->column + first + i);
    return count;
}

static int lower_name(dm_prog *P, const dm_expr *e, int out[DM_MAX_WIDTH])
{
    const dm_symbol *sym = e->sym ? e->sym : dm_model_lookup((dm_model *)P->model, e->name);
    if (!sym) return fail(P, e->loc, "unknown name '%s' in %s", e->name);
    switch (sym->kind) {
    case DM_SYM_PARAM: out[0] = dm_ir_leaf(P, DM_IR_PARAM, sym->index); return 1;
    case DM_SYM_MEASURE:
    case DM_SYM_VOXEL:
        if (sym->width != 1 && sym->width != 3)
            return fail(P, e->loc, "input '%s' has several columns: index it (in %s)", sym->name);
        return lower_input(P, e, sym, 0, sym->width, out);
    case DM_SYM_LET: return lower_let(P, e, sym->index, out);
    case DM_SYM_CONST: out[0] = dm_ir_const(P, sym->value); return 1;
    }
    return fail(P, e->loc, "cannot lower name '%s' in %s", e->name);
}

static int lower_let(dm_prog *P, const dm_expr *at, int index, int out[DM_MAX_WIDTH])
{
    const dm_let *let = P->model->lets.items[index];
    int w = P->let_width[index];
    if (w < 0) return fail(P, at->loc, "let '%s' depends on itself (in %s)", let->name);
    if (w == 0) {
        int vals[DM_MAX_WIDTH];
        P->let_width[index] = -1;
        w = dm_lower_expr(P, let->value, vals);
        P->let_width[index] = w < 0 ? 0 : w;
        if (w < 0) return -1;
        for (int i = 0; i < w; i++) {
            P->let_val[DM_MAX_WIDTH * index + i] = vals[i];
            dm_ins *x = &P->ins[vals[i]];
            if (!x->note && x->op > DM_IR_VOXEL) {
                x->note = let->name;
                x->note_comp = w == 3 ? i : w == 9 ? 3 + i : -1;
            }
        }
    }
    for (int i = 0; i < w; i++) out[i] = P->let_val[DM_MAX_WIDTH * index + i];
    return w;
}

/* Both operands lowered; vectors and matrices combine component-wise, a scalar broadcasts
 * over them in * and /. */
static int lower_binary(dm_prog *P, const dm_expr *e, int out[DM_MAX_WIDTH])
{
    int a[DM_MAX_WIDTH], b[DM_MAX_WIDTH];
    int wa = dm_lower_expr(P, e->a, a);
    int wb = wa < 0 ? -1 : dm_lower_expr(P, e->b, b);
    if (wa < 0 || wb < 0) return -1;
    int op = e->op;
    if (wa > 1 || wb > 1) {
        dm_irop irop;
        switch (op) {
        case '+': irop = DM_IR_ADD; break;
        case '-': irop = DM_IR_SUB; break;
        case '*': irop = DM_IR_MUL; break;
        case '/': irop = DM_IR_DIV; break;
        default: return fail(P, e->loc, "operator needs scalar operands%s (in %s)", NULL);
        }
        if (wa != wb && !((op == '*' && (wa == 1 || wb == 1)) || (op == '/' && wb == 1)))
            return fail(P, e->loc, "operands of different widths%s (in %s)", NULL);
        int w = wa > wb ? wa : wb;
        for (int i = 0; i < w; i++)
            out[i] = dm_ir_binary(P, irop, a[wa > 1 ? i : 0], b[wb > 1 ? i : 0]);
        return w;
    }
    switch (op) {
    case '+': out[0] = dm_ir_binary(P, DM_IR_ADD, a[0], b[0]); break;
    case '-': out[0] = dm_ir_binary(P, DM_IR_SUB, a[0], b[0]); break;
    case '*': out[0] = dm_ir_binary(P, DM_IR_MUL, a[0], b[0]); break;
    case '/': out[0] = dm_ir_binary(P, DM_IR_DIV, a[0], b[0]); break;
    case '^': out[0] = power(P, a[0], b[0]); break;
    case '<': out[0] = dm_ir_binary(P, DM_IR_LT, a[0], b[0]); break;
    case '>': out[0] = dm_ir_binary(P, DM_IR_GT, a[0], b[0]); break;
    case DM_OP_LE: out[0] = dm_ir_binary(P, DM_IR_LE, a[0], b[0]); break;
    case DM_OP_GE: out[0] = dm_ir_binary(P, DM_IR_GE, a[0], b[0]); break;
    case DM_OP_EQ: out[0] = dm_ir_binary(P, DM_IR_EQ, a[0], b[0]); break;
    case DM_OP_NE: out[0] = dm_ir_binary(P, DM_IR_NE, a[0], b[0]); break;
    case DM_OP_AND: out[0] = dm_ir_binary(P, DM_IR_AND, a[0], b[0]); break;
    case DM_OP_OR: out[0] = dm_ir_binary(P, DM_IR_OR, a[0], b[0]); break;
    default: return fail(P, e->loc, "unknown operator%s (in %s)", NULL);
    }
    return 1;
}

static int dot3(dm_prog *P, const int *u, const int *v)
{
    return add(P, add(P, mul(P, u[0], v[0]), mul(P, u[1], v[1])), mul(P, u[2], v[2]));
}

/* ---- the NODDI built-ins, lowered into calls of their math-library pieces ---- */

static int sub(dm_prog *P, int a, int b)
{
    return dm_ir_binary(P, DM_IR_SUB, a, b);
}

/* P_n(x) for a constant order n: the recurrence (k+1) P_(k+1) = (2k+1) x P_k - k P_(k-1)
 * written out with its coefficients folded, so that the lower orders are values shared by
 * every order a model uses (the Watson series needs all even orders to 12: 33 operations in
 * all instead of a call per order, each with its own loop and divisions) and the derivative
 * follows from the arithmetic.  Higher orders stay a call of dm_legendre. */
static int legendre(dm_prog *P, int n, int x)
{
    if (n > 16) return dm_ir_call(P, DM_MF_LEGENDRE, n, &x);
    if (n <= 0) return dm_ir_const(P, n == 0 ? 1 : 0);
    int prev = dm_ir_const(P, 1), cur = x;
    for (int k = 1; k < n; k++) {
        int next = sub(P, mul(P, dm_ir_const(P, (2.0 * k + 1) / (k + 1)), mul(P, x, cur)),
                       mul(P, dm_ir_const(P, (double)k / (k + 1)), prev));
        prev = cur;
        cur = next;
    }
    return cur;
}

/* watson_sh / stick_sh of order l at value a; the orders with a known value fold. */
static int sh_call(dm_prog *P, dm_mathfn fn, int l, int a)
{
    if (l & 1) return dm_ir_const(P, 0);
    if (fn == DM_MF_WATSON_SH && l == 0) return dm_ir_const(P, 1);
    return dm_ir_call(P, fn, l, &a);
}

/* sum over even l <= 12 of W_l(kappa) ((2l+1)/2 J_l(x) P_l(t)) (mathlib.h): the Watson
 * coefficients depend on kappa alone, so hoisting moves them out of the measurement loop; the
 * rest depends on the measurement and the orientation alone, so (2l+1)/2 J_l(x) is one fixed
 * value of the measurement, and where a stage holds the orientation (a stage program,
 * programs.c) so is the whole product, which leaves one multiply-add per order. */
static int watson_stick(dm_prog *P, int x, int t, int kappa)
{
    int sum = dm_ir_const(P, 0);
    for (int l = 0; l <= 12; l += 2) {
        int coef = mul(P, dm_ir_const(P, (2 * l + 1) / 2.0), sh_call(P, DM_MF_STICK_SH, l, x));
        if (l > 0) coef = mul(P, coef, legendre(P, l, t));
        sum = add(P, sum, mul(P, sh_call(P, DM_MF_WATSON_SH, l, kappa), coef));
    }
    return sum;
}

/* The trace-free part of the symmetric matrix with diagonal d[] and off-diagonal entries
 * o[] = (A01, A02, A12): e[] its diagonal, *c1 the sum of its principal 2x2 minors, *c0 its
 * determinant; returns trace/3. */
static int trace_free(dm_prog *P, const int d[3], const int o[3], int e[3], int *c1, int *c0)
{
    int mean = mul(P, add(P, add(P, d[0], d[1]), d[2]), dm_ir_const(P, 1.0 / 3));
    for (int i = 0; i < 3; i++) e[i] = sub(P, d[i], mean);
    int o01 = mul(P, o[0], o[0]), o02 = mul(P, o[1], o[1]), o12 = mul(P, o[2], o[2]);
    *c1 = sub(P, add(P, add(P, mul(P, e[0], e[1]), mul(P, e[0], e[2])), mul(P, e[1], e[2])),
              add(P, add(P, o01, o02), o12));
    int det = add(P, mul(P, mul(P, e[0], e[1]), e[2]),
                  mul(P, dm_ir_const(P, 2), mul(P, mul(P, o[0], o[1]), o[2])));
    det = sub(P, det, add(P, add(P, mul(P, e[0], o12), mul(P, e[1], o02)), mul(P, e[2], o01)));
    *c0 = det;
    return mean;
}

/* log 1F1(1/2; 3/2; A) of a symmetric 3x3 matrix (saddle point, mathlib.h). */
static int log_hyp1f1_sym(dm_prog *P, const int d[3], const int o[3])
{
    int e[3], c[2];
    int mean = trace_free(P, d, o, e, &c[0], &c[1]);
    return add(P, dm_ir_call(P, DM_MF_LOG_HYP1F1_DEP, 0, c), mean);
}

/* <n_i^2> under exp(sum a_i n_i^2) / norm: one call each (mathlib.h). */
static void bingham_moments(dm_prog *P, const int a[3], int out[3])
{
    for (int i = 0; i < 3; i++) out[i] = dm_ir_call(P, DM_MF_BINGHAM_MOMENT, i, a);
}

/* F(D - x q q') / F(D), D = diag(-k1, -k2, 0), F = 1F1(1/2; 3/2; .) (thesis eq. 5.18 in the
 * distribution's own frame).  D - x q q' is diagonal plus rank one, so the invariants of its
 * trace-free part follow without its off-diagonal entries: with mean = its trace / 3,
 * e_i = D_i - mean, w_i = q_i^2 and s = w0 + w1 + w2 (so that e0 + e1 + e2 = x s),
 *   c1 = e0 e1 + e0 e2 + e1 e2 - x sum_i w_i (x s - e_i)      (each principal 2x2 minor)
 *   c0 = e0 e1 e2 - x sum_i w_i prod_{j != i} e_j              (the determinant lemma),
 * fewer operations than the general symmetric form, and fewer partials for the gradient. */
static int bingham_stick(dm_prog *P, int x, const int q[3], int k1, int k2)
{
    int zero = dm_ir_const(P, 0);
    int nk1 = dm_ir_unary(P, DM_IR_NEG, k1), nk2 = dm_ir_unary(P, DM_IR_NEG, k2);
    int D[3] = {nk1, nk2, zero}, none[3] = {zero, zero, zero};
    int w[3], e[3];
    for (int i = 0; i < 3; i++) w[i] = mul(P, q[i], q[i]);
    int xs = mul(P, x, add(P, add(P, w[0], w[1]), w[2]));
    int mean = mul(P, sub(P, add(P, nk1, nk2), xs), dm_ir_const(P, 1.0 / 3));
    for (int i = 0; i < 3; i++) e[i] = sub(P, D[i], mean);
    int e01 = mul(P, e[0], e[1]), e02 = mul(P, e[0], e[2]), e12 = mul(P, e[1], e[2]);
    int rank1_c1 = add(P, add(P, mul(P, w[0], sub(P, xs, e[0])), mul(P, w[1], sub(P, xs, e[1]))),
                       mul(P, w[2], sub(P, xs, e[2])));
    int c[2];
    c[0] = sub(P, add(P, add(P, e01, e02), e12), mul(P, x, rank1_c1));
    int rank1_c0 = add(P, add(P, mul(P, w[0], e12), mul(P, w[1], e02)), mul(P, w[2], e01));
    c[1] = sub(P, mul(P, e01, e[2]), mul(P, x, rank1_c0));
    int num = add(P, dm_ir_call(P, DM_MF_LOG_HYP1F1_DEP, 0, c), mean);
    int diff = sub(P, num, log_hyp1f1_sym(P, D, none));
    return call1(P, DM_MF_EXP, diff);
}

/* ---- 3x3 matrices: 9 values, row-major ---- */

static int lower_matrix_call(dm_prog *P, dm_builtin_id id,
                             const int arg[DM_BUILTIN_MAX_ARGS][DM_MAX_WIDTH], int *out)
{
    const int *A = arg[0], *B = arg[1];
    switch (id) {
    case DM_FN_MAT:
        for (int i = 0; i < 9; i++) out[i] = arg[i][0];
        return 9;
    case DM_FN_SYM: { /* dxx dxy dxz dyy dyz dzz */
        static const int entry[9] = {0, 1, 2, 1, 3, 4, 2, 4, 5};
        for (int i = 0; i < 9; i++) out[i] = arg[entry[i]][0];
        return 9;
    }
    case DM_FN_DIAG:
        for (int i = 0; i < 9; i++) out[i] = i % 4 == 0 ? arg[i / 4][0] : dm_ir_const(P, 0);
        return 9;
    case DM_FN_OUTER:
        for (int i = 0; i < 9; i++) out[i] = mul(P, A[i / 3], B[i % 3]);
        return 9;
    case DM_FN_MUL:
        for (int i = 0; i < 9; i++) {
            int r = i / 3, c = i % 3, col[3] = {B[c], B[3 + c], B[6 + c]};
            out[i] = dot3(P, A + 3 * r, col);
        }
        return 9;
    case DM_FN_MV:
        for (int r = 0; r < 3; r++) out[r] = dot3(P, A + 3 * r, B);
        return 3;
    case DM_FN_QUAD: { /* v^T M v = sum_r v_r (M v)_r */
        const int *v = A, *M = B;
        int Mv[3];
        for (int r = 0; r < 3; r++) Mv[r] = dot3(P, M + 3 * r, v);
        out[0] = dot3(P, v, Mv);
        return 1;
    }
    case DM_FN_TRANSPOSE:
        for (int i = 0; i < 9; i++) out[i] = A[3 * (i % 3) + i / 3];
        return 9;
    case DM_FN_TRACE: out[0] = add(P, add(P, A[0], A[4]), A[8]); return 1;
    case DM_FN_DET: { /* expansion along the first row: row 0 . (row 1 x row 2) */
        int c[3];
        for (int i = 0; i < 3; i++) {
            int j = (i + 1) % 3, k = (i + 2) % 3;
            c[i] = sub(P, mul(P, A[3 + j], A[6 + k]), mul(P, A[3 + k], A[6 + j]));
        }
        out[0] = dot3(P, A, c);
        return 1;
    }
    case DM_FN_ROTATION: {
        /* Columns: e1 = d dir / d theta and e2 = e3 x e1 (the unit vectors of theta and phi),
         * turned by psi about e3 = dir(theta, phi); det = +1. */
        int th = arg[0][0], ph = arg[1][0], psi = arg[2][0];
        int st = call1(P, DM_MF_SIN, th), ct = call1(P, DM_MF_COS, th);
        int sp = call1(P, DM_MF_SIN, ph), cp = call1(P, DM_MF_COS, ph);
        int ss = call1(P, DM_MF_SIN, psi), cs = call1(P, DM_MF_COS, psi);
        int e1[3] = {mul(P, ct, cp), mul(P, ct, sp), dm_ir_unary(P, DM_IR_NEG, st)};
        int e2[3] = {dm_ir_unary(P, DM_IR_NEG, sp), cp, dm_ir_const(P, 0)};
        int e3[3] = {mul(P, st, cp), mul(P, st, sp), ct};
        for (int r = 0; r < 3; r++) {
            out[3 * r] = add(P, mul(P, cs, e1[r]), mul(P, ss, e2[r]));
            out[3 * r + 1] = sub(P, mul(P, cs, e2[r]), mul(P, ss, e1[r]));
            out[3 * r + 2] = e3[r];
        }
        return 9;
    }
    default: return -1;
    }
}

static int lower_call(dm_prog *P, const dm_expr *e, int out[DM_MAX_WIDTH])
{
    const dm_builtin *fn = e->fn ? e->fn : dm_builtin_find(e->name);
    if (!fn) return fail(P, e->loc, "unknown function '%s' (in %s)", e->name);
    if (e->nargs > DM_BUILTIN_MAX_ARGS || e->nargs != fn->nargs)
        return fail(P, e->loc, "wrong number of arguments to '%s' (in %s)", fn->name);
    int arg[DM_BUILTIN_MAX_ARGS][DM_MAX_WIDTH], w[DM_BUILTIN_MAX_ARGS];
    for (int i = 0; i < e->nargs; i++) {
        w[i] = dm_lower_expr(P, e->args[i], arg[i]);
        if (w[i] < 0) return -1;
        dm_type t = fn->arg_types[i];
        int want = t == DM_T_VEC3 ? 3 : t == DM_T_MAT3 ? 9 : 1;
        if (w[i] != want)
            return fail(P, e->args[i]->loc, "wrong argument type for '%s' (in %s)", fn->name);
    }
    static const dm_mathfn direct[DM_FN_COUNT] = {
        [DM_FN_EXP] = DM_MF_EXP,
        [DM_FN_LOG] = DM_MF_LOG,
        [DM_FN_SQRT] = DM_MF_SQRT,
        [DM_FN_LOG1P] = DM_MF_LOG1P,
        [DM_FN_SIN] = DM_MF_SIN,
        [DM_FN_COS] = DM_MF_COS,
        [DM_FN_TAN] = DM_MF_TAN,
        [DM_FN_ASIN] = DM_MF_ASIN,
        [DM_FN_ACOS] = DM_MF_ACOS,
        [DM_FN_ATAN] = DM_MF_ATAN,
        [DM_FN_ATAN2] = DM_MF_ATAN2,
        [DM_FN_SINH] = DM_MF_SINH,
        [DM_FN_COSH] = DM_MF_COSH,
        [DM_FN_TANH] = DM_MF_TANH,
        [DM_FN_ABS] = DM_MF_FABS,
        [DM_FN_ERF] = DM_MF_ERF,
        [DM_FN_DAWSON] = DM_MF_DAWSON,
        [DM_FN_LGAMMA] = DM_MF_LGAMMA,
        [DM_FN_LOG_I0] = DM_MF_LOG_I0,
        [DM_FN_BESSEL_J0] = DM_MF_BESSEL_J0,
        [DM_FN_BESSEL_J1] = DM_MF_BESSEL_J1,
    };
    switch (fn->id) {
    case DM_FN_POW: out[0] = power(P, arg[0][0], arg[1][0]); return 1;
    case DM_FN_MIN:
    case DM_FN_MAX: {
        int a = arg[0][0], b = arg[1][0];
        int a_first = dm_ir_binary(P, fn->id == DM_FN_MIN ? DM_IR_LE : DM_IR_GE, a, b);
        out[0] = dm_ir_select(P, a_first, a, b);
        return 1;
    }
    case DM_FN_LEGENDRE: {
        double n;
        if (!dm_ir_const_value(P, arg[0][0], &n))
            n = e->args[0]->num; /* the checker's folded constant */
        out[0] = legendre(P, (int)n, arg[1][0]);
        return 1;
    }
    case DM_FN_WATSON_SH:
    case DM_FN_STICK_SH: {
        double n;
        if (!dm_ir_const_value(P, arg[0][0], &n)) n = e->args[0]->num;
        out[0] = sh_call(P, fn->id == DM_FN_WATSON_SH ? DM_MF_WATSON_SH : DM_MF_STICK_SH, (int)n,
                         arg[1][0]);
        return 1;
    }
    case DM_FN_BESSEL_J1P_ROOT:
    case DM_FN_BESSEL_SJ1P_ROOT: { /* constants: folded through the math library */
        double n;
        if (!dm_ir_const_value(P, arg[0][0], &n)) n = e->args[0]->num;
        dm_mathfn root =
            fn->id == DM_FN_BESSEL_J1P_ROOT ? DM_MF_BESSEL_J1P_ROOT : DM_MF_BESSEL_SJ1P_ROOT;
        out[0] = dm_ir_call(P, root, (int)n, NULL);
        return 1;
    }
    case DM_FN_WATSON_STICK: out[0] = watson_stick(P, arg[0][0], arg[1][0], arg[2][0]); return 1;
    case DM_FN_LOG_HYP1F1_BINGHAM: {
        int zero = dm_ir_const(P, 0), o[3] = {zero, zero, zero};
        int d[3] = {arg[0][0], arg[1][0], arg[2][0]};
        out[0] = log_hyp1f1_sym(P, d, o);
        return 1;
    }
    case DM_FN_BINGHAM_MOMENTS: {
        int a[3] = {arg[0][0], arg[1][0], arg[2][0]};
        bingham_moments(P, a, out);
        return 3;
    }
    case DM_FN_BINGHAM_STICK:
        out[0] = bingham_stick(P, arg[0][0], arg[1], arg[2][0], arg[3][0]);
        return 1;
    case DM_FN_DOT: out[0] = dot3(P, arg[0], arg[1]); return 1;
    case DM_FN_CROSS: {
        const int *u = arg[0], *v = arg[1];
        for (int i = 0; i < 3; i++) {
            int j = (i + 1) % 3, k = (i + 2) % 3;
            out[i] = dm_ir_binary(P, DM_IR_SUB, mul(P, u[j], v[k]), mul(P, u[k], v[j]));
        }
        return 3;
    }
    case DM_FN_NORM: out[0] = call1(P, DM_MF_SQRT, dot3(P, arg[0], arg[0])); return 1;
    case DM_FN_DIR: {
        int th = arg[0][0], ph = arg[1][0];
        int sin_th = call1(P, DM_MF_SIN, th);
        out[0] = mul(P, sin_th, call1(P, DM_MF_COS, ph));
        out[1] = mul(P, sin_th, call1(P, DM_MF_SIN, ph));
        out[2] = call1(P, DM_MF_COS, th);
        return 3;
    }
    case DM_FN_VEC:
        for (int i = 0; i < 3; i++) out[i] = arg[i][0];
        return 3;
    case DM_FN_MAT:
    case DM_FN_SYM:
    case DM_FN_DIAG:
    case DM_FN_OUTER:
    case DM_FN_MUL:
    case DM_FN_MV:
    case DM_FN_QUAD:
    case DM_FN_TRANSPOSE:
    case DM_FN_TRACE:
    case DM_FN_DET:
    case DM_FN_ROTATION: return lower_matrix_call(P, fn->id, arg, out);
    default:
        if (fn->id < 0 || fn->id >= DM_FN_COUNT || (direct[fn->id] == 0 && fn->id != DM_FN_EXP))
            return fail(P, e->loc, "no code generation for function '%s' (in %s)", fn->name);
        int scalars[DM_BUILTIN_MAX_ARGS];
        for (int i = 0; i < e->nargs; i++) scalars[i] = arg[i][0];
        out[0] = dm_ir_call(P, direct[fn->id], 0, scalars);
        return 1;
    }
}

static int lower_index(dm_prog *P, const dm_expr *e, int out[DM_MAX_WIDTH])
{
    int idx_val[DM_MAX_WIDTH];
    if (dm_lower_expr(P, e->b, idx_val) != 1)
        return P->failed ? -1 : fail(P, e->b->loc, "an index must be a scalar%s (in %s)", NULL);
    double k;
    if (!dm_ir_const_value(P, idx_val[0], &k) || k != floor(k))
        return fail(P, e->b->loc, "an index must be a constant integer%s (in %s)", NULL);
    const dm_expr *base = e->a;
    const dm_symbol *sym = NULL;
    if (base->kind == DM_E_NAME)
        sym = base->sym ? base->sym : dm_model_lookup((dm_model *)P->model, base->name);
    if (sym && (sym->kind == DM_SYM_MEASURE || sym->kind == DM_SYM_VOXEL)) {
        if (k < 0 || k >= sym->width)
            return fail(P, e->b->loc, "index out of range for '%s' (in %s)", sym->name);
        return lower_input(P, e, sym, (int)k, 1, out);
    }
    int v[DM_MAX_WIDTH];
    int w = dm_lower_expr(P, base, v);
    if (w < 0) return -1;
    if (w == 9) { /* a matrix's row */
        if (k < 0 || k > 2) return fail(P, e->b->loc, "row index out of range%s (in %s)", NULL);
        for (int i = 0; i < 3; i++) out[i] = v[3 * (int)k + i];
        return 3;
    }
    if (k < 0 || k >= w) return fail(P, e->b->loc, "index out of range%s (in %s)", NULL);
    out[0] = v[(int)k];
    return 1;
}

int dm_lower_expr(dm_prog *P, const dm_expr *e, int out[DM_MAX_WIDTH])
{
    switch (e->kind) {
    case DM_E_NUM: out[0] = dm_ir_const(P, e->num); return 1;
    case DM_E_NAME: return lower_name(P, e, out);
    case DM_E_UNARY: {
        int a[DM_MAX_WIDTH];
        int w = dm_lower_expr(P, e->a, a);
        if (w < 0) return -1;
        if (e->op == '!' && w != 1) return fail(P, e->loc, "'!' needs a scalar%s (in %s)", NULL);
        for (int i = 0; i < w; i++)
            out[i] = dm_ir_unary(P, e->op == '!' ? DM_IR_NOT : DM_IR_NEG, a[i]);
        return w;
    }
    case DM_E_BINARY: return lower_binary(P, e, out);
    case DM_E_TERNARY: {
        int c[DM_MAX_WIDTH], a[DM_MAX_WIDTH], b[DM_MAX_WIDTH];
        int wc = dm_lower_expr(P, e->a, c);
        int wa = wc < 0 ? -1 : dm_lower_expr(P, e->b, a);
        int wb = wa < 0 ? -1 : dm_lower_expr(P, e->c, b);
        if (wb < 0) return -1;
        if (wc != 1 || wa != wb)
            return fail(P, e->loc, "mismatched operands of '?:'%s (in %s)", NULL);
        for (int i = 0; i < wa; i++) out[i] = dm_ir_select(P, c[0], a[i], b[i]);
        return wa;
    }
    case DM_E_CALL: return lower_call(P, e, out);
    case DM_E_INDEX: return lower_index(P, e, out);
    case DM_E_SUM: { /* unrolled: the checker made one term per value of the variable */
        int w = -1;
        for (int i = 0; i < e->nargs; i++) {
            int t[DM_MAX_WIDTH];
            int wi = dm_lower_expr(P, e->args[i], t);
            if (wi < 0) return -1;
            if (w >= 0 && wi != w)
                return fail(P, e->loc, "terms of different widths%s (in %s)", NULL);
            for (int j = 0; j < wi; j++) out[j] = w < 0 ? t[j] : add(P, out[j], t[j]);
            w = wi;
        }
        if (w < 0) return fail(P, e->loc, "a sum without terms%s (in %s)", NULL);
        return w;
    }
    }
    return fail(P, e->loc, "cannot lower this expression%s (in %s)", NULL);
}

void dm_ir_families(const dm_prog *P, const char *mark, int *leader, int *members, int *top)
{
    for (int i = 0; i < P->n; i++) {
        leader[i] = i;
        members[i] = 1;
        top[i] = P->ins[i].index;
        const dm_ins *x = &P->ins[i];
        if (!mark[i] || x->op != DM_IR_CALL || !dm_mathfn_get(x->fn)->family) continue;
        for (int j = 0; j < i; j++) { /* the first earlier member of the same arguments */
            const dm_ins *y = &P->ins[j];
            if (!mark[j] || leader[j] != j || y->op != DM_IR_CALL || y->fn != x->fn) continue;
            int same = 1;
            for (int a = 0; a < x->nargs; a++) same &= x->arg[a] == y->arg[a];
            if (!same) continue;
            leader[i] = j;
            members[j]++;
            if (x->index > top[j]) top[j] = x->index;
            break;
        }
    }
}

void dm_ir_live(const dm_prog *P, const int *roots, int nroots, char *live)
{
    memset(live, 0, (size_t)P->n);
    for (int i = 0; i < nroots; i++)
        if (roots[i] >= 0) live[roots[i]] = 1;
    for (int i = P->n - 1; i >= 0; i--)
        if (live[i])
            for (int j = 0; j < P->ins[i].nargs; j++) live[P->ins[i].arg[j]] = 1;
}
