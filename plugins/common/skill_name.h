/*
 * skill_name.h - what every provider accepts of a skill_install call
 * before it looks at the bundle: the skill's name and the bundle format.
 */
#ifndef SBXP_SKILL_NAME_H
#define SBXP_SKILL_NAME_H

/* Longest skill name. */
#define SBXP_SKILL_NAME_MAX 64

/* Nonzero when name is 1 to SBXP_SKILL_NAME_MAX of A-Z a-z 0-9 . _ -, not
 * starting with . or - (so a directory name without a slash, never "."
 * or ".." and never an option). NULL is not valid. */
int sbxp_skill_name_valid(const char *name);

/* format when it is one of the bundle formats of the ABI ("tar",
 * "tar.gz", "zip"), else NULL (also for NULL). */
const char *sbxp_skill_format(const char *format);

#endif /* SBXP_SKILL_NAME_H */
