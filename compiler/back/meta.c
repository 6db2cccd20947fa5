/* The metadata file model.meta (format: docs/metadata.md), for people and other tools; the
 * runtime describes a model from the same data directly (runtime/model/model_info.c). */
#include "backend.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Numbers as the format says: %.17g, with inf, -inf and nan spelled so. */
static void number(dm_buf *b, double v)
{
    if (isnan(v))
        dm_buf_puts(b, " nan");
    else if (isinf(v))
        dm_buf_puts(b, v > 0 ? " inf" : " -inf");
    else
        dm_buf_printf(b, " %.17g", v);
}

static const char *output_kind_name(dm_output_kind k)
{
    return k == DM_OUT_AXIS ? "axis" : k == DM_OUT_VECTOR ? "vector" : "scalar";
}

char *dm_meta_text(const dm_model *m, const dm_flops *flops, const char *source)
{
    dm_buf b = {0};
    dm_buf_puts(&b, "dimoc-meta 3\n");
    dm_buf_printf(&b, "model %s\n", m->name);
    dm_buf_printf(&b, "description %s\n", m->description ? m->description : "");
    dm_buf_printf(&b, "source_hash %016llx\n", dm_model_source_hash(m));
    dm_buf_printf(&b, "code_hash %016llx\n", dm_hash64(source, strlen(source), 0));
    dm_buf_printf(&b, "flops_signal %ld\n", flops->signal);
    dm_buf_printf(&b, "flops_signal_transcendental %ld\n", flops->signal_transc);
    dm_buf_printf(&b, "flops_gradient %ld\n", flops->gradient);
    dm_buf_printf(&b, "flops_gradient_transcendental %ld\n", flops->gradient_transc);
    dm_buf_printf(&b, "flops_prepare %ld\n", flops->prepare);
    dm_buf_printf(&b, "flops_prepare_transcendental %ld\n", flops->prepare_transc);
    dm_buf_printf(&b, "flops_gradient_prepare %ld\n", flops->gradient_prepare);
    dm_buf_printf(&b, "flops_gradient_prepare_transcendental %ld\n",
                  flops->gradient_prepare_transc);
    dm_buf_printf(&b, "flops_fix %ld\n", flops->fix);
    dm_buf_printf(&b, "flops_fix_transcendental %ld\n", flops->fix_transc);
    dm_buf_printf(&b, "fix_width %d\n", flops->fix_width);
    dm_buf_printf(&b, "multistart %d\n", m->multistart > 0 ? m->multistart : 1);
    for (int i = 0; i < m->measures.n; i++) {
        const dm_input *in = m->measures.items[i];
        dm_buf_printf(&b, "measure %s %d %s %d", in->name, in->width,
                      in->source ? in->source : "file", in->column);
        if (in->scheme_column) dm_buf_printf(&b, " %s", in->scheme_column);
        dm_buf_printf(&b, "\n");
    }
    for (int i = 0; i < m->voxels.n; i++) {
        const dm_input *in = m->voxels.items[i];
        dm_buf_printf(&b, "voxel %s %d", in->name, in->width);
        number(&b, in->has_default ? in->default_value : NAN);
        dm_buf_printf(&b, " %d\n", in->column);
    }
    for (int k = 0; k < m->params.n; k++) {
        const dm_param *p = m->params.items[k];
        dm_buf_printf(&b, "param %s", p->name);
        number(&b, p->has_bounds ? p->lo : -INFINITY);
        number(&b, p->has_bounds ? p->hi : INFINITY);
        dm_buf_printf(&b, " %d %d", p->lo_closed ? 1 : 0, p->hi_closed ? 1 : 0);
        number(&b, p->init);
        if (p->init_source == DM_INIT_THETA || p->init_source == DM_INIT_PHI)
            dm_buf_printf(&b, " %s%d", dm_init_source_name(p->init_source), p->init_axis);
        else
            dm_buf_printf(&b, " %s", dm_init_source_name(p->init_source));
        dm_buf_printf(&b, " %d %s", p->periodic ? 1 : 0, dm_prior_kind_name(p->prior.kind));
        int nargs = dm_prior_constant_args(p->prior.kind);
        number(&b, nargs > 0 ? p->prior.value[0] : 0);
        number(&b, nargs > 1 ? p->prior.value[1] : 0);
        number(&b, p->step);
        dm_buf_puts(&b, "\n");
    }
    for (int i = 0; i < m->outputs.n; i++) {
        const dm_output *o = m->outputs.items[i];
        dm_buf_printf(&b, "output %s %s %d %d\n", o->name, output_kind_name(o->kind), o->width,
                      o->column);
    }
    dm_buf_puts(&b, "end\n");
    return b.s;
}
