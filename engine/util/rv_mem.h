/* Memory hints for the engine's big arrays (events, tasks, edges,
 * simulation results). */
#ifndef RV_MEM_H
#define RV_MEM_H

#include <stddef.h>

/* Asks the kernel to back the 2 MiB-aligned part of [p, p + len) with
 * transparent huge pages. A 100k-task what-if touches ~70 MB of fresh
 * memory; with 4 KiB pages the page faults cost more than the simulation.
 * Only a hint: ignored for small blocks and where THP is off. */
void rv_mem_huge(void *p, size_t len);

#endif
