/* zt_tar: a folder's contents as a ustar archive, gzip-compressed or plain
 * (SageMaker's model.tar.gz and output.tar.gz). */
#ifndef ZT_TAR_H
#define ZT_TAR_H
#include <stdbool.h>
#include <stddef.h>

/* Writes the files and folders under dirs[i] (names relative to it, in
 * sorted order, under names[i]/ in the archive, "" for its top; symbolic
 * links and other special files left out; a folder that does not exist
 * left out) to file path in folder descriptor at, as a gzip-compressed
 * archive or a plain one. It is written to a fresh file of a random name
 * in that folder (O_EXCL, O_NOFOLLOW), renamed into place when whole: path
 * is whole or as it was. 0, or -1 with why. */
int zt_tar_folders(const char *const *dirs, const char *const *names, int n, int at, const char *path, bool gzip,
                   char *why, size_t len);

void zt_tar_selftest(void);

#endif
