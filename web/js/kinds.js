// What-if kinds for the form. The form is generated from GET /v1/whatif/kinds
// ({optimizations: [{kind, description, fields: [...]}], distributed: [...],
// top_level: [...]}); when the server cannot answer it (older servers said
// 501), it falls back to this copy of docs/whatif.md, in this shape:
//
//   {kinds: [{kind, label, description, fields: [{name, type, min, max,
//     exclusive_min, default, required, values, description}]}],
//    distributed: {fields: [...]}, top: [...]}
//
// type: number | integer | boolean | enum | string | selector (a task selector object).

const SEL = 'selector';
export const FALLBACK_KINDS = {
  source: 'built-in copy of docs/whatif.md',
  top: [
    { name: 'power_limit_w', type: 'number', min: 1, max: 5000, description: 'GPU power cap in W (at least the GPU minimum); absent = the cap the trace ran at', slider: true },
    { name: 'schedule', type: 'enum', values: ['earliest_start', 'fifo', 'priority'], description: 'simulator frontier policy' },
    { name: 'gpu', type: 'string', description: 'hardware-table GPU name (e.g. A100-SXM4-80GB); does not rescale kernels', hardware: true },
    { name: 'batch_size', type: 'integer', min: 1, description: 'samples per iteration (for samples per joule)' },
  ],
  kinds: [
    { kind: 'amp', label: 'Mixed precision (AMP)', description: 'Kernel times drop by a roofline with the GPU peaks per dtype (or Daydream /3 and /2); cast kernels are added.',
      fields: [{ name: 'dtype', type: 'enum', values: ['fp16', 'bf16', 'fp8'], default: 'fp16' }, { name: 'model', type: 'enum', values: ['roofline', 'daydream'], default: 'roofline' }, { name: 'cast_us', type: 'number', min: 0, default: 3 }] },
    { kind: 'fused_optimizer', label: 'Fused optimizer', description: "Each optimizer step's kernels on a stream become one kernel; their launches go.",
      fields: [{ name: 'traffic_ratio', type: 'number', min: 0, exclusive_min: true, max: 1, default: 0.5 }] },
    { kind: 'kernel_fusion', label: 'Kernel fusion', description: 'Chains of selected kernels become one kernel; their launches go.',
      fields: [{ name: 'select', type: SEL, required: true }] },
    { kind: 'restructure_batchnorm', label: 'Restructured batchnorm', description: 'Batchnorm kernels take half the time; ReLU kernels and their launches go.', fields: [] },
    { kind: 'vdnn', label: 'vDNN offload', description: 'Offload and prefetch copies are inserted at PCIe bandwidth.',
      fields: [{ name: 'select', type: SEL }, { name: 'pcie_gbps', type: 'number', min: 0, exclusive_min: true }] },
    { kind: 'gist', label: 'Gist encoding', description: 'Encode and decode kernels are inserted.',
      fields: [{ name: 'select', type: SEL }, { name: 'ratio', type: 'number', min: 0, max: 100, default: 1 }] },
    { kind: 'recompute', label: 'Recomputation', description: 'Forward kernels run again in backward.',
      fields: [{ name: 'select', type: SEL }, { name: 'share', type: 'number', min: 0, max: 1, default: 1 }] },
    { kind: 'gradient_accumulation', label: 'Gradient accumulation', description: 'The optimizer and communication cost 1/steps per micro-batch.',
      fields: [{ name: 'steps', type: 'integer', min: 1, required: true, default: 4 }] },
    { kind: 'scale', label: 'Scale selected tasks', description: 'The selected durations are multiplied by factor.',
      fields: [{ name: 'select', type: SEL }, { name: 'factor', type: 'number', min: 0, max: 10000, required: true, default: 0.5 }] },
    { kind: 'remove', label: 'Remove selected tasks', description: "The selected tasks are removed, and so are the kernels' launching calls.",
      fields: [{ name: 'select', type: SEL, required: true }, { name: 'launches', type: 'boolean', default: true }] },
    { kind: 'insert', label: 'Insert work', description: 'New work goes after each match; a kernel also adds one launch.',
      fields: [{ name: 'after', type: SEL, required: true }, { name: 'duration_us', type: 'number', min: 0, exclusive_min: true, max: 1e9, required: true, default: 10 }, { name: 'task', type: 'enum', values: ['kernel', 'cpu', 'memcpy'], default: 'kernel' }] },
    { kind: 'cpu_speed', label: 'CPU speed', description: 'CPU durations and gaps are divided by factor.',
      fields: [{ name: 'factor', type: 'number', min: 0, exclusive_min: true, max: 100, required: true, default: 2 }] },
    { kind: 'dataloader', label: 'Data loader', description: 'Data-loading workers or a faster loader (at least one of workers, speedup).',
      fields: [{ name: 'workers', type: 'integer', min: 0, max: 1024, default: 4 }, { name: 'speedup', type: 'number', min: 0, exclusive_min: true, max: 10000 }, { name: 'contention', type: 'number', min: 0, max: 10 }, { name: 'ipc_us', type: 'number', min: 0 }] },
  ],
  distributed: {
    label: 'Distributed data parallel (workers, bandwidth)',
    description: 'Data-parallel scaling from this trace, or a network change.',
    fields: [
      { name: 'workers', type: 'integer', min: 1, required: true, default: 8 },
      { name: 'gpus_per_node', type: 'integer', min: 1 },
      { name: 'intra_node_gbps', type: 'number', min: 0, exclusive_min: true, description: 'Gb/s per GPU per direction' },
      { name: 'inter_node_gbps', type: 'number', min: 0, exclusive_min: true, description: 'Gb/s per node per direction (100)' },
      { name: 'latency_us', type: 'number', min: 0 },
      { name: 'algorithm', type: 'enum', values: ['ring', 'tree', 'hierarchical', 'parameter_server'] },
      { name: 'bucket_mb', type: 'number', min: 0, exclusive_min: true },
      { name: 'first_bucket_mb', type: 'number', min: 0, exclusive_min: true },
      { name: 'p3', type: 'boolean' },
      { name: 'p3_slice_kb', type: 'number', min: 0, exclusive_min: true },
      { name: 'blueconnect', type: 'boolean' },
      { name: 'dgc_density', type: 'number', min: 0, exclusive_min: true, max: 1 },
      { name: 'tensor_fusion_mb', type: 'number', min: 0, exclusive_min: true },
      { name: 'tensor_partition_mb', type: 'number', min: 0, exclusive_min: true },
      { name: 'efficiency', type: 'number', min: 0, exclusive_min: true, max: 1 },
      { name: 'interference', type: 'number', min: 0, max: 4 },
      { name: 'gradient_mb', type: 'number', min: 0, exclusive_min: true },
      { name: 'ps_servers', type: 'integer', min: 0 },
    ],
  },
  selector: [
    { name: 'kind', type: 'enum', values: ['kernel', 'cpu', 'memcpy', 'comm', 'data'] },
    { name: 'name', type: 'string', description: 'POSIX extended regex on the task name' },
    { name: 'layer', type: 'string', description: 'regex on the layer' },
    { name: 'phase', type: 'enum', values: ['forward', 'backward', 'optimizer', 'dataloader', 'unknown'] },
    { name: 'stream', type: 'integer', min: 0 },
  ],
};

// One field of the server's list in the form's terms: a "select" (or an
// object named select/after) is a task selector; min_exclusive -> exclusive_min.
function fieldSpec(x) {
  const sel = x.type === 'select' || x.type === 'selector' || (x.type === 'object' && /select|after/.test(x.name));
  return { ...x, type: sel ? SEL : x.type, values: x.values || x.enum, exclusive_min: x.exclusive_min ?? x.min_exclusive };
}

// Accepts the server's answer in a few plausible shapes: kinds as an array of
// {kind|name, fields|params} (fields as an array or a name->spec map), or a
// map kind->spec. Anything missing comes from the fallback.
export function normalizeKinds(resp) {
  if (!resp) return FALLBACK_KINDS;
  let kinds = resp.kinds || resp.optimizations;
  const fieldsOf = (f) => (Array.isArray(f) ? f : f && typeof f === 'object' ? Object.entries(f).map(([name, s]) => ({ name, ...(typeof s === 'object' ? s : { type: s }) })) : []);
  if (kinds && !Array.isArray(kinds)) kinds = Object.entries(kinds).map(([kind, s]) => ({ kind, ...s }));
  if (!Array.isArray(kinds) || !kinds.length) return FALLBACK_KINDS;
  const fb = new Map(FALLBACK_KINDS.kinds.map((k) => [k.kind, k]));
  const out = kinds.map((k) => {
    const kind = k.kind || k.name;
    const f = fb.get(kind) || {};
    const fields = fieldsOf(k.fields || k.params || k.parameters).map(fieldSpec);
    return { kind, label: k.label || f.label || kind, description: k.description || f.description || '', fields: fields.length ? fields : f.fields || [] };
  });
  return {
    source: 'GET /v1/whatif/kinds',
    kinds: out,
    top: resp.top_level || resp.top ? fieldsOf(resp.top_level || resp.top).map(fieldSpec) : FALLBACK_KINDS.top,
    distributed: resp.distributed ? { ...FALLBACK_KINDS.distributed, fields: fieldsOf(resp.distributed.fields || resp.distributed).map(fieldSpec) } : FALLBACK_KINDS.distributed,
    selector: resp.selector ? fieldsOf(resp.selector) : FALLBACK_KINDS.selector,
  };
}
