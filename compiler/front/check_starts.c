/* Semantic checks of the data-driven starts: `init from RULE` clauses (b0, md, theta(K),
 * phi(K)) and the `multistart N` statement.  Fills dm_param.init_source / init_axis and
 * dm_model.multistart (1 without the statement). */
#include <string.h>

#include "check.h"

/* The measures a rule needs: b-values (b0, md) and directions (md, theta, phi). */
static int reads_source(const dm_model *m, const char *source)
{
    for (int i = 0; i < m->measures.n; i++)
        if (m->measures.items[i]->source && strcmp(m->measures.items[i]->source, source) == 0)
            return 1;
    return 0;
}

/* Classifies one `init from RULE`; reports a rule that is not one of the four. */
static void classify(checker *c, dm_param *p)
{
    const dm_expr *r = p->init_from;
    int tensor = 0;
    if (r->kind == DM_E_NAME && strcmp(r->name, "b0") == 0) {
        p->init_source = DM_INIT_B0;
        return;
    }
    if (r->kind == DM_E_NAME && strcmp(r->name, "md") == 0) {
        p->init_source = DM_INIT_MD;
        tensor = 1;
    } else if (r->kind == DM_E_CALL && (!strcmp(r->name, "theta") || !strcmp(r->name, "phi"))) {
        if (r->nargs != 1 || r->args[0]->kind != DM_E_NUM ||
            !(r->args[0]->num == 1 || r->args[0]->num == 2 || r->args[0]->num == 3)) {
            dm_error(c->d, r->loc,
                     "'init from %s(K)' needs K = 1, 2 or 3: the tensor's eigenvector, largest "
                     "eigenvalue first",
                     r->name);
            return;
        }
        if (!p->periodic) /* reported; the pair is still formed, for one message */
            dm_error(c->d, r->loc,
                     "'init from %s(K)' is for an angle: '%s' must be periodic, as in "
                     "'in [0, %s] periodic'",
                     r->name, p->name, r->name[0] == 't' ? "pi" : "2*pi");
        p->init_source = r->name[0] == 't' ? DM_INIT_THETA : DM_INIT_PHI;
        p->init_axis = (int)r->args[0]->num;
        tensor = 1;
    } else {
        dm_error(c->d, r->loc,
                 "unknown start 'init from %s': use b0, md, theta(K) or phi(K) (K = 1, 2, 3)",
                 r->name);
        return;
    }
    if (tensor && !(reads_source(c->m, "bvals") && reads_source(c->m, "bvecs")))
        dm_error(c->d, r->loc,
                 "'init from %s' comes from a tensor fit: the model must read bvals and bvecs "
                 "(measure NAME = bvals, measure NAME[3] = bvecs)",
                 r->name);
}

/* Every theta(K) needs exactly one phi(K) and the other way round. */
static void check_pairs(checker *c)
{
    dm_model *m = c->m;
    for (int i = 0; i < m->params.n; i++) {
        dm_param *p = m->params.items[i];
        if (p->init_source != DM_INIT_THETA && p->init_source != DM_INIT_PHI) continue;
        dm_init_source want = p->init_source == DM_INIT_THETA ? DM_INIT_PHI : DM_INIT_THETA;
        int same = 0, partner = 0;
        for (int j = 0; j < m->params.n; j++) {
            const dm_param *q = m->params.items[j];
            if (q->init_axis != p->init_axis) continue;
            same += q->init_source == p->init_source;
            partner += q->init_source == want;
        }
        if (same > 1)
            dm_error(c->d, p->init_from_loc, "'init from %s(%d)' is given to %d parameters",
                     dm_init_source_name(p->init_source), p->init_axis, same);
        else if (partner != 1)
            dm_error(c->d, p->init_from_loc,
                     "'init from %s(%d)' needs one parameter with 'init from %s(%d)' (a "
                     "direction is two angles)",
                     dm_init_source_name(p->init_source), p->init_axis, dm_init_source_name(want),
                     p->init_axis);
    }
}

void dm_check_starts(checker *c)
{
    dm_model *m = c->m;
    int pairs = 0;
    for (int i = 0; i < m->params.n; i++) {
        dm_param *p = m->params.items[i];
        if (p->init_from) classify(c, p);
    }
    check_pairs(c);
    for (int i = 0; i < m->params.n; i++) pairs += m->params.items[i]->init_source == DM_INIT_THETA;
    if (m->multistart > 1 && pairs < 2)
        dm_error(c->d, m->multistart_loc,
                 "multistart turns the directions that start from the tensor's axes: it needs "
                 "two or more ('init from theta(K)' and 'init from phi(K)' for K = 1, 2)");
    if (m->multistart < 1) m->multistart = 1;
}
