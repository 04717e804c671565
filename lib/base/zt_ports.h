/* zt_ports: TCP ports and socket addresses: a free port from the kernel
 * (kept bound or not), an address's host as text, a wait on one socket. */
#ifndef ZT_PORTS_H
#define ZT_PORTS_H
#include <stdbool.h>
#include <stddef.h>

struct sockaddr;
/* A socket address's host as text (IPv4, IPv6; an IPv4-mapped IPv6 address
 * as IPv4) into out; false (out "") for another family. */
bool zt_sockaddr_name(const struct sockaddr *a, char *out, size_t len);
/* A free TCP port on 127.0.0.1 (bound, then released), none of the last 64
 * this process was given. */
int zt_ephemeral_port(void);
/* The same, but the bound socket is kept in *fd_p (close-on-exec) so that no
 * other bind(0) on this machine gets the port until it is closed. */
int zt_reserve_port(int *fd_p);
/* Waits up to ms (-1: no limit) for events on fd, a signal's interruption
 * waited through: its revents, 0 when none came, -1 on an error. */
int zt_wait_fd(int fd, short events, int ms);

#endif
