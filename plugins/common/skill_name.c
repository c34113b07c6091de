/* skill_name.c - a skill's name and bundle format (see skill_name.h). */
#include "skill_name.h"

#include <string.h>

int sbxp_skill_name_valid(const char *n)
{
    size_t len = n ? strlen(n) : 0;
    if (len == 0 || len > SBXP_SKILL_NAME_MAX || n[0] == '.' || n[0] == '-')
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = n[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

const char *sbxp_skill_format(const char *f)
{
    if (!f)
        return NULL;
    if (strcmp(f, "tar") == 0 || strcmp(f, "tar.gz") == 0 || strcmp(f, "zip") == 0)
        return f;
    return NULL;
}
