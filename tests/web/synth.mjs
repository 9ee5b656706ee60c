// A synthetic Kineto (PyTorch profiler) trace with many tasks, for the
// timeline's frame-time measurement: `steps` ProfilerStep#N annotations, each
// with `perStep` cudaLaunchKernel calls and their kernels (correlated by id and
// ac2g flows), on one CPU thread and two GPU streams.
// profilerSteps: false leaves the ProfilerStep annotations out (one window,
// the whole run, for figures computed over the traced span).
export function synthTrace({ steps = 60, perStep = 1000, seed = 7, profilerSteps = true, gpu = 'NVIDIA A100-SXM4-80GB' } = {}) {
  let s = seed;
  const rnd = () => ((s = (s * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  const ev = [];
  const pid = 4242, tid = 4242;
  let t = 1_000_000; // µs
  let gpuFree = [t, t];
  let corr = 1;
  const names = ['volta_sgemm_128x64_nn', 'void at::native::vectorized_elementwise_kernel<4>', 'void cudnn::bn_fw_tr_1C11_kernel_NCHW', 'void at::native::reduce_kernel<512, 1>'];
  for (let st = 0; st < steps; st++) {
    const stepStart = t;
    const ops = [];
    for (let k = 0; k < perStep; k++) {
      const launchDur = 4 + rnd() * 4;
      const stream = k % 7 === 0 ? 1 : 0;
      const kdur = 2 + rnd() * 30;
      const c = corr++;
      const opStart = t;
      t += 1 + rnd() * 2;
      ev.push({ ph: 'X', cat: 'cuda_runtime', name: 'cudaLaunchKernel', pid, tid, ts: +t.toFixed(3), dur: +launchDur.toFixed(3), args: { correlation: c, 'External id': c } });
      const ks = Math.max(gpuFree[stream], t + launchDur + 3);
      ev.push({ ph: 'X', cat: 'kernel', name: names[k % names.length], pid: 0, tid: 7 + stream * 6, ts: +ks.toFixed(3), dur: +kdur.toFixed(3), args: { device: 0, stream: 7 + stream * 6, correlation: c, 'External id': c } });
      ev.push({ ph: 's', id: c, pid, tid, ts: +t.toFixed(3), cat: 'ac2g', name: 'ac2g' });
      ev.push({ ph: 'f', id: c, pid: 0, tid: 7 + stream * 6, ts: +ks.toFixed(3), cat: 'ac2g', name: 'ac2g', bp: 'e' });
      gpuFree[stream] = ks + kdur;
      t += launchDur + 1;
      ops.push({ ph: 'X', cat: 'cpu_op', name: k % 2 ? 'aten::add' : 'aten::mm', pid, tid, ts: +opStart.toFixed(3), dur: +(t - opStart).toFixed(3), args: { 'External id': c } });
      t += 0.5;
    }
    // the step waits for the GPU, like a loss.item()
    const end = Math.max(t, gpuFree[0], gpuFree[1]) + 5;
    ev.push({ ph: 'X', cat: 'cuda_runtime', name: 'cudaDeviceSynchronize', pid, tid, ts: +t.toFixed(3), dur: +(end - t).toFixed(3), args: { correlation: corr++ } });
    t = end + 20;
    if (profilerSteps) ev.push({ ph: 'X', cat: 'user_annotation', name: `ProfilerStep#${st}`, pid, tid, ts: +stepStart.toFixed(3), dur: +(t - stepStart - 1).toFixed(3), args: {} });
    ev.push(...ops);
  }
  return JSON.stringify({
    schemaVersion: 1,
    deviceProperties: [{ id: 0, name: gpu, totalGlobalMem: 85899345920, computeMajor: 8, computeMinor: 0, numSms: 108 }],
    traceEvents: ev,
  });
}
