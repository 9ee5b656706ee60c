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

/* Reserves len bytes at the top of the calling thread's malloc heap and
 * marks them for transparent huge pages, so that the allocations that
 * follow there fault 2 MiB at a time instead of 4 KiB: on a 25 MB trace
 * `reverie simulate` took 4,700 page faults, 16% of its time. For a process
 * that keeps freed memory on its heap (M_MMAP_THRESHOLD and
 * M_TRIM_THRESHOLD above len): address space only until written. */
void rv_mem_heap_huge(size_t len);

#endif
