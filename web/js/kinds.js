// What-if kinds for the form, from GET /v1/whatif/kinds: the catalogue the
// server's parser enforces ({optimizations: [{kind, label, description,
// fields}], distributed: [...], top_level: [...], selector: [...]}), so the
// form can never offer what the server would refuse. There is no local copy:
// when the catalogue cannot be had, the page says so.
//
// Field: {name, type, min, max, min_exclusive, default, required, values,
// description}; type: number | integer | boolean | enum | string | select |
// table. The form calls a task selector type 'selector'.

const SEL = 'selector';

// One field of the catalogue in the form's terms.
function fieldSpec(x) {
  return { ...x, type: x.type === 'select' ? SEL : x.type, exclusive_min: x.min_exclusive };
}

export function normalizeKinds(resp) {
  if (!resp || !Array.isArray(resp.optimizations)) throw new Error('the what-if catalogue has no optimizations');
  return {
    source: 'GET /v1/whatif/kinds',
    kinds: resp.optimizations.map((k) => ({
      kind: k.kind,
      label: k.label || k.kind,
      description: k.description || '',
      fields: (k.fields || []).map(fieldSpec),
    })),
    top: (resp.top_level || []).map(fieldSpec),
    distributed: {
      label: 'Distributed data parallel (workers, bandwidth)',
      description: 'Scale this one-GPU trace out to N workers, or change the network of a multi-rank trace.',
      fields: (resp.distributed || []).map(fieldSpec),
    },
    selector: (resp.selector || []).map(fieldSpec),
  };
}
