/* Work on a second thread. See rv_bg.h. */
#include "util/rv_bg.h"

void rv_bg_start(rv_bg *b, void *(*fn)(void *), void *arg)
{
    b->running = pthread_create(&b->th, NULL, fn, arg) == 0;
    if (!b->running)
        fn(arg);
}

void rv_bg_join(rv_bg *b)
{
    if (b->running)
        pthread_join(b->th, NULL);
    b->running = 0;
}
