/* Platforms: the machine a trace came from (store/rv_db_platforms.c). */
#ifndef RV_DB_PLATFORMS_H
#define RV_DB_PLATFORMS_H

#include <jansson.h>

#include "util/rv_error.h"

typedef struct rv_db rv_db;

typedef struct rv_db_platform {
    const char *gpu_model, *cpu_model, *driver, *runtime_version, *framework;
    int gpus_per_node;
} rv_db_platform;

/* Identity key of a platform: lowercase hex SHA-256 of the six fields (NULL
 * = ""), trimmed, joined by '\n', gpus_per_node in decimal. */
void rv_db_platform_key(const rv_db_platform *p, char out[65]);

/* JSON array of platforms with their trace counts (new reference). */
int rv_db_platform_list(rv_db *db, json_t **out, rv_error *err);

#endif
