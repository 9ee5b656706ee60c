#include "rv_models.h"
int rv_models__amp(const struct rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied,
                   rv_error *err) { return rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1, "todo"); }
int rv_models__fused_optimizer(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                               json_t *applied, rv_error *err) { return rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1, "todo"); }
int rv_models__kernel_fusion(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                             json_t *applied, rv_error *err) { return rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1, "todo"); }
int rv_models__restructure_bn(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                              json_t *applied, rv_error *err) { return rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1, "todo"); }
int rv_models__memory_saver(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                            json_t *applied, rv_error *err) { return rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1, "todo"); }
int rv_models__distributed(const struct rv_whatif *w, rv_graph *g, json_t *applied,
                           rv_error *err) { return rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1, "todo"); }
