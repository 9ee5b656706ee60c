/* reverie-service: the `reverie` commands that talk to the service, over
 * HTTP (libcurl) or to its database (libpq). `reverie` runs this program
 * for them, so that the engine's commands load neither library. */
#include <stdio.h>
#include <string.h>

#include "rv_cli.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
} command;

static const command commands[] = {
    {"whatif", rv_cmd_whatif},   {"fleet", rv_cmd_fleet},         {"token", rv_cmd_token},
    {"migrate", rv_cmd_migrate}, {"overheads", rv_cmd_overheads}, {"upload", rv_cmd_upload},
};

int main(int argc, char **argv)
{
    if (argc >= 2)
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
            if (strcmp(argv[1], commands[i].name) == 0)
                return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "usage: reverie-service whatif|fleet|token|migrate|overheads|upload [ARGS]\n"
                    "(run through `reverie COMMAND`; `reverie --help` lists every command)\n");
    return 2;
}
