/* Small fixed name tables (a trace's categories, dtypes, argument keys):
 * each name stored with its length, so that a lookup compares lengths
 * before bytes and never measures a name. For the few dozen names such a
 * table holds, a scan beats hashing. */
#ifndef RV_NAMES_H
#define RV_NAMES_H

#include <stddef.h>

typedef struct rv_name {
    const char *name;
    size_t len;
    int value;
} rv_name;

/* An entry for a string literal. */
#define RV_NAME(lit, value)                                                                        \
    {                                                                                              \
        lit, sizeof(lit) - 1, value                                                                \
    }

/* The value of s[0..n) in tab[0..count), or dflt when it is not there. */
int rv_names_find(const rv_name *tab, size_t count, const char *s, size_t n, int dflt);

#endif
