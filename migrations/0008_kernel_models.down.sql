DROP TABLE platform_kernel_effs;
DROP TABLE trace_kernel_effs;
