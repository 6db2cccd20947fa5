/* Forward-mode automatic differentiation of a lowered program.
 *
 * Walking the instructions the root depends on, in order, each value gets the list of its
 * nonzero partial derivatives: (parameter, id of the partial's value), sorted by parameter.
 * A parameter a value does not depend on has no entry, so zero partials cost nothing, and
 * the partials are ordinary instructions built through the same value-numbering builders as
 * the signal: they share its subexpressions (exp(x) is its own derivative) and each other's.
 *
 * Built-ins without an analytic rule (lgamma, and the Bingham moments, which are already
 * derivatives of the saddle-point 1F1) are differentiated numerically at that call:
 * a central difference with step dm_fd_step(x) = cbrt(eps) * max(|x|, 1), accurate to about
 * eps^(2/3) relative (~1e-11 in double, ~1e-5 in float) instead of full precision. */
#include "lower.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct partials {
    int n;
    int *param; /* ascending */
    int *value;
} partials;

static void push(partials *g, int param, int value, int cap)
{
    if (!g->param) {
        g->param = malloc(sizeof(int) * (size_t)cap);
        g->value = malloc(sizeof(int) * (size_t)cap);
        if (!g->param || !g->value) abort();
    }
    g->param[g->n] = param;
    g->value[g->n] = value;
    g->n++;
}

static int bin(dm_prog *P, dm_irop op, int a, int b)
{
    return dm_ir_binary(P, op, a, b);
}
static int neg(dm_prog *P, int a)
{
    return dm_ir_unary(P, DM_IR_NEG, a);
}
static int konst(dm_prog *P, double v)
{
    return dm_ir_const(P, v);
}
static int call1(dm_prog *P, dm_mathfn fn, int order, int a)
{
    return dm_ir_call(P, fn, order, &a);
}

/* out = sum_i coef[i] * g[i] for the lists of n operands; coef[i] < 0 means coefficient 1.
 * Terms are built only for parameters present in some list. */
static void linear_combination(dm_prog *P, partials *out, int n, partials *const *g,
                               const int *coef, int cap)
{
    int pos[DM_IR_MAX_ARGS] = {0};
    for (;;) {
        int param = -1;
        for (int i = 0; i < n; i++)
            if (pos[i] < g[i]->n && (param < 0 || g[i]->param[pos[i]] < param))
                param = g[i]->param[pos[i]];
        if (param < 0) break;
        int sum = -1;
        for (int i = 0; i < n; i++) {
            if (pos[i] < g[i]->n && g[i]->param[pos[i]] == param) {
                int d = g[i]->value[pos[i]++];
                int term = coef[i] < 0 ? d : bin(P, DM_IR_MUL, d, coef[i]);
                sum = sum < 0 ? term : bin(P, DM_IR_ADD, sum, term);
            }
        }
        if (!dm_ir_const_value(P, sum, NULL) || P->ins[sum].num != 0) push(out, param, sum, cap);
    }
}

/* u^2 P_l(u) = A P_(l+2)(u) + B P_l(u) + C P_(l-2)(u) (two steps of the Legendre
 * recurrence u P_l = ((l+1) P_(l+1) + l P_(l-1)) / (2l+1)). */
static void u2_legendre(int l, double *A, double *B, double *C)
{
    double L = l;
    *A = (L + 1) * (L + 2) / ((2 * L + 1) * (2 * L + 3));
    *B = ((L + 1) * (L + 1) / (2 * L + 3) + L * L / (2 * L - 1)) / (2 * L + 1);
    *C = L * (L - 1) / ((2 * L + 1) * (2 * L - 1));
}

/* d f(args) / d args[which] for a call, or -1 when there is no analytic rule. */
static int call_rule(dm_prog *P, int self, int which)
{
    const dm_ins x = P->ins[self]; /* copied: building may move P->ins */
    int a = x.arg[0];
    switch (x.fn) {
    case DM_MF_EXP: return self;
    case DM_MF_LOG: return bin(P, DM_IR_DIV, konst(P, 1), a);
    case DM_MF_LOG1P: return bin(P, DM_IR_DIV, konst(P, 1), bin(P, DM_IR_ADD, konst(P, 1), a));
    case DM_MF_SQRT: return bin(P, DM_IR_DIV, konst(P, 0.5), self);
    case DM_MF_SIN: return call1(P, DM_MF_COS, 0, a);
    case DM_MF_COS: return neg(P, call1(P, DM_MF_SIN, 0, a));
    case DM_MF_TAN: return bin(P, DM_IR_ADD, konst(P, 1), bin(P, DM_IR_MUL, self, self));
    case DM_MF_ASIN:
    case DM_MF_ACOS: {
        int r = call1(P, DM_MF_SQRT, 0, bin(P, DM_IR_SUB, konst(P, 1), bin(P, DM_IR_MUL, a, a)));
        return bin(P, DM_IR_DIV, konst(P, x.fn == DM_MF_ASIN ? 1 : -1), r);
    }
    case DM_MF_ATAN:
        return bin(P, DM_IR_DIV, konst(P, 1),
                   bin(P, DM_IR_ADD, konst(P, 1), bin(P, DM_IR_MUL, a, a)));
    case DM_MF_ATAN2: { /* atan2(y, x): d/dy = x / r2, d/dx = -y / r2 */
        int y = x.arg[0], xx = x.arg[1];
        int r2 = bin(P, DM_IR_ADD, bin(P, DM_IR_MUL, y, y), bin(P, DM_IR_MUL, xx, xx));
        return which == 0 ? bin(P, DM_IR_DIV, xx, r2) : neg(P, bin(P, DM_IR_DIV, y, r2));
    }
    case DM_MF_SINH: return call1(P, DM_MF_COSH, 0, a);
    case DM_MF_COSH: return call1(P, DM_MF_SINH, 0, a);
    case DM_MF_TANH: return bin(P, DM_IR_SUB, konst(P, 1), bin(P, DM_IR_MUL, self, self));
    case DM_MF_FABS: /* sign(x); 1 at 0 (a subgradient) */
        return dm_ir_select(P, bin(P, DM_IR_LT, a, konst(P, 0)), konst(P, -1), konst(P, 1));
    case DM_MF_POW: { /* x^y: d/dx = y x^(y-1), d/dy = x^y log x */
        int y = x.arg[1];
        if (which == 0) {
            int args[2] = {a, bin(P, DM_IR_SUB, y, konst(P, 1))};
            return bin(P, DM_IR_MUL, y, dm_ir_call(P, DM_MF_POW, 0, args));
        }
        return bin(P, DM_IR_MUL, self, call1(P, DM_MF_LOG, 0, a));
    }
    case DM_MF_FLOOR: return konst(P, 0);
    case DM_MF_ERF: /* 2/sqrt(pi) exp(-x^2) */
        return bin(P, DM_IR_MUL, konst(P, 1.1283791670955126),
                   call1(P, DM_MF_EXP, 0, neg(P, bin(P, DM_IR_MUL, a, a))));
    case DM_MF_DAWSON: /* D'(x) = 1 - 2 x D(x) */
        return bin(P, DM_IR_SUB, konst(P, 1),
                   bin(P, DM_IR_MUL, bin(P, DM_IR_MUL, konst(P, 2), a), self));
    case DM_MF_LOG_I0: return call1(P, DM_MF_BESSEL_I1_I0, 0, a);
    case DM_MF_BESSEL_J0: return neg(P, call1(P, DM_MF_BESSEL_J1, 0, a)); /* J0' = -J1 */
    case DM_MF_BESSEL_J1: /* J1' = J0 - J1/x, 1/2 at x = 0 */
        return call1(P, DM_MF_BESSEL_J1_DERIV, 0, a);
    case DM_MF_LEGENDRE: return call1(P, DM_MF_LEGENDRE_DERIV, x.index, a);
    case DM_MF_STICK_SH: /* J_l' = -integral u^2 e^(-x u^2) P_l = -(A J_(l+2) + B J_l + C J_(l-2)) */
    case DM_MF_WATSON_SH: { /* W_l' = <u^2 P_l> - W_l <u^2> = A W_(l+2) + B W_l + C W_(l-2) - W_l <u^2> */
        int l = x.index;
        if (l < 0 || (l & 1) || (x.fn == DM_MF_WATSON_SH && l == 0)) return konst(P, 0);
        double A, B, C;
        u2_legendre(l, &A, &B, &C);
        int sum = bin(P, DM_IR_ADD, bin(P, DM_IR_MUL, konst(P, A), call1(P, x.fn, l + 2, a)),
                      bin(P, DM_IR_MUL, konst(P, B), self));
        if (l >= 2) {
            int below = x.fn == DM_MF_WATSON_SH && l == 2 ? konst(P, 1) : call1(P, x.fn, l - 2, a);
            sum = bin(P, DM_IR_ADD, sum, bin(P, DM_IR_MUL, konst(P, C), below));
        }
        if (x.fn == DM_MF_STICK_SH) return neg(P, sum);
        u2_legendre(0, &A, &B, &C); /* <u^2> = 2/3 W_2 + 1/3 */
        int u2 =
            bin(P, DM_IR_ADD, bin(P, DM_IR_MUL, konst(P, A), call1(P, x.fn, 2, a)), konst(P, B));
        return bin(P, DM_IR_SUB, sum, bin(P, DM_IR_MUL, self, u2));
    }
    case DM_MF_LOG_HYP1F1_DEP:       /* the function itself gives its partials in c1, c0 */
        if (x.index != 0) return -1; /* second derivatives: numerically */
        return dm_ir_call(P, DM_MF_LOG_HYP1F1_DEP, which + 1, x.arg);
    default: return -1; /* lgamma and the helpers */
    }
}

/* Central difference of a call in its argument `which`:
 * (f(.., x+h, ..) - f(.., x-h, ..)) / ((x+h) - (x-h)), the denominator being the step that
 * was actually taken after rounding. */
static int numeric_rule(dm_prog *P, int self, int which)
{
    const dm_ins x = P->ins[self];
    int xv = x.arg[which];
    int h = call1(P, DM_MF_FD_STEP, 0, xv);
    int up = bin(P, DM_IR_ADD, xv, h), down = bin(P, DM_IR_SUB, xv, h);
    int args[DM_IR_MAX_ARGS];
    memcpy(args, x.arg, sizeof args);
    args[which] = up;
    int f_up = dm_ir_call(P, x.fn, x.index, args);
    args[which] = down;
    int f_down = dm_ir_call(P, x.fn, x.index, args);
    return bin(P, DM_IR_DIV, bin(P, DM_IR_SUB, f_up, f_down), bin(P, DM_IR_SUB, up, down));
}

static void differentiate_one(dm_prog *P, int id, partials *grad, int cap)
{
    const dm_ins x = P->ins[id];
    partials *g[DM_IR_MAX_ARGS];
    int any = 0;
    for (int i = 0; i < x.nargs; i++) {
        g[i] = &grad[x.arg[i]];
        any |= g[i]->n > 0;
    }
    partials *out = &grad[id];
    if (x.op == DM_IR_PARAM) {
        push(out, x.index, konst(P, 1), cap);
        return;
    }
    if (!any) return;
    int coef[DM_IR_MAX_ARGS] = {-1, -1, -1};
    switch (x.op) {
    case DM_IR_NEG:
        coef[0] = konst(P, -1);
        linear_combination(P, out, 1, g, coef, cap);
        return;
    case DM_IR_ADD: linear_combination(P, out, 2, g, coef, cap); return;
    case DM_IR_SUB:
        coef[1] = konst(P, -1);
        linear_combination(P, out, 2, g, coef, cap);
        return;
    case DM_IR_MUL:
        if (x.arg[0] == x.arg[1]) { /* d(a*a) = (a + a) da: one shared factor */
            coef[0] = bin(P, DM_IR_ADD, x.arg[0], x.arg[0]);
            linear_combination(P, out, 1, g, coef, cap);
            return;
        }
        coef[0] = x.arg[1];
        coef[1] = x.arg[0];
        linear_combination(P, out, 2, g, coef, cap);
        return;
    case DM_IR_DIV: { /* d(a/b) = da / b - (a/b) / b * db */
        int b = x.arg[1];
        /* With several partials of a, one reciprocal and multiplies beat divisions. */
        int recip = g[0]->n > 1 ? bin(P, DM_IR_DIV, konst(P, 1), b) : -1;
        int w = g[1]->n ? neg(P, bin(P, DM_IR_DIV, id, b)) : -1;
        int pos0 = 0, pos1 = 0;
        while (pos0 < g[0]->n || pos1 < g[1]->n) {
            int pa = pos0 < g[0]->n ? g[0]->param[pos0] : 1 << 30;
            int pb = pos1 < g[1]->n ? g[1]->param[pos1] : 1 << 30;
            int param = pa < pb ? pa : pb, sum = -1;
            if (pa == param) {
                int da = g[0]->value[pos0++];
                sum = recip >= 0 ? bin(P, DM_IR_MUL, da, recip) : bin(P, DM_IR_DIV, da, b);
            }
            if (pb == param) {
                int term = bin(P, DM_IR_MUL, g[1]->value[pos1++], w);
                sum = sum < 0 ? term : bin(P, DM_IR_ADD, sum, term);
            }
            push(out, param, sum, cap);
        }
        return;
    }
    case DM_IR_SELECT: {
        int zero = konst(P, 0);
        int pos1 = 0, pos2 = 0;
        partials *ga = g[1], *gb = g[2];
        while (pos1 < ga->n || pos2 < gb->n) {
            int pa = pos1 < ga->n ? ga->param[pos1] : 1 << 30;
            int pb = pos2 < gb->n ? gb->param[pos2] : 1 << 30;
            int param = pa < pb ? pa : pb;
            int da = pa == param ? ga->value[pos1++] : zero;
            int db = pb == param ? gb->value[pos2++] : zero;
            push(out, param, dm_ir_select(P, x.arg[0], da, db), cap);
        }
        return;
    }
    case DM_IR_CALL: {
        int n = 0;
        partials *used[DM_IR_MAX_ARGS];
        for (int i = 0; i < x.nargs; i++) {
            if (!g[i]->n) continue;
            int d = call_rule(P, id, i);
            if (d < 0) d = numeric_rule(P, id, i);
            used[n] = g[i];
            coef[n++] = d;
        }
        linear_combination(P, out, n, used, coef, cap);
        return;
    }
    default: /* comparisons and logic: piecewise constant */ return;
    }
}

void dm_differentiate(dm_prog *P, int root, int nparams, int *partial)
{
    for (int k = 0; k < nparams; k++) partial[k] = -1;
    int n = P->n; /* only the original instructions; derivative ones are appended */
    char *live = malloc((size_t)n + 1);
    partials *grad = calloc((size_t)n + 1, sizeof *grad);
    if (!live || !grad) abort();
    dm_ir_live(P, &root, 1, live);
    for (int i = 0; i <= root; i++)
        if (live[i]) differentiate_one(P, i, grad, nparams);
    for (int i = 0; i < grad[root].n; i++)
        if (grad[root].param[i] < nparams) partial[grad[root].param[i]] = grad[root].value[i];
    for (int i = 0; i < n; i++) {
        free(grad[i].param);
        free(grad[i].value);
    }
    free(grad);
    free(live);
}
