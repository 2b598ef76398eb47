/* The least a user-space relay between two TUN devices can do, as floor-client.c is for an
 * HTTP/1.1 client: one thread, both devices plain (IFF_TUN|IFF_NO_PI: no vnet header, no
 * offloads), blocking poll() on both fds, then one read() from the ready device and one
 * write() of that packet to the other. No model, no timers, no batching, no statistics.
 * It creates OUTER in the network namespace it starts in and INNER in the one NETNS names (a
 * path such as /run/netns/NAME), so it carries the same packet path as `hxlab link`; the
 * caller gives both devices their addresses and routes. bench/link.sh measures its added
 * round-trip time beside hxlab link's and a veth pair's in the same run: the part of
 * hxlab link's added latency that any user-space relay pays on this machine (the TUN path
 * and a thread that sleeps and is woken per packet), as opposed to the part hxlab adds.
 * Build: gcc -O2 -o floor-relay floor-relay.c
 * Usage: floor-relay OUTER INNER NETNS SECS
 *   prints "ready" on stdout once both devices exist; SIGALRM ends it after SECS seconds (or
 *   any signal sooner), and the devices vanish with it. Needs root (CAP_NET_ADMIN and
 *   CAP_SYS_ADMIN). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static int tun(const char *name) {
  struct ifreq ifr;
  int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0) { perror("open /dev/net/tun"); exit(1); }
  memset(&ifr, 0, sizeof ifr);
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
  strncpy(ifr.ifr_name, name, IFNAMSIZ - 1);
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) { perror(name); exit(1); }
  return fd;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: floor-relay OUTER INNER NETNS SECS\n");
    return 2;
  }
  int outer = tun(argv[1]);
  int ns = open(argv[3], O_RDONLY | O_CLOEXEC);
  if (ns < 0 || setns(ns, CLONE_NEWNET) < 0) { perror(argv[3]); return 1; }
  int inner = tun(argv[2]);
  printf("ready\n");
  fflush(stdout);

  alarm(atoi(argv[4])); /* SIGALRM's default action ends it on time */
  static unsigned char buf[65536];
  struct pollfd p[2] = {{.fd = outer, .events = POLLIN}, {.fd = inner, .events = POLLIN}};
  for (;;) {
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      perror("poll");
      return 1;
    }
    for (int i = 0; i < 2; i++) {
      if (!(p[i].revents & POLLIN)) continue;
      ssize_t len = read(p[i].fd, buf, sizeof buf);
      if (len > 0) (void)!write(p[1 - i].fd, buf, len); /* a failed write loses the packet */
    }
  }
}
