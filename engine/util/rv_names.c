/* Small fixed name tables. See rv_names.h. */
#include "util/rv_names.h"

#include <string.h>

int rv_names_find(const rv_name *tab, size_t count, const char *s, size_t n, int dflt)
{
    for (size_t i = 0; i < count; i++)
        if (tab[i].len == n && memcmp(tab[i].name, s, n) == 0)
            return tab[i].value;
    return dflt;
}
