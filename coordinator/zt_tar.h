/* zt_tar: a folder's contents as a ustar archive, gzip-compressed or plain
 * (SageMaker's model.tar.gz and output.tar.gz). */
#ifndef ZT_TAR_H
#define ZT_TAR_H
#include <stdbool.h>
#include <stddef.h>

/* Writes the files and folders under dir (names relative to it, in sorted
 * order; symbolic links and other special files are left out) to path, as
 * a gzip-compressed archive or a plain one, through a temporary file
 * renamed into place: path is whole or absent. 0, or -1 with why. */
int zt_tar_folder(const char *dir, const char *path, bool gzip, char *why, size_t len);
/* The same of n folders, dirs[i]'s contents under names[i]/ in the
 * archive ("" for its top); a folder that does not exist is left out. */
int zt_tar_folders(const char *const *dirs, const char *const *names, int n, const char *path, bool gzip,
                   char *why, size_t len);

void zt_tar_selftest(void);

#endif
