/* The least a keep-alive HTTP/1.1 client can do per request: one send and one recv per
 * response on each of C connections, one epoll_wait per batch of ready connections. It does
 * not parse beyond the response size (learned from the first response's Content-Length,
 * every later response must be the same size), keeps no statistics and no timers. It is the
 * floor under any real load generator's CPU per request on a loopback benchmark, measured by
 * bench/load-bench.py beside hxlab load, h2load and wrk.
 * Build: gcc -O2 -o floor-client floor-client.c
 * Usage: floor-client HOST PORT PATH CONNECTIONS REQUESTS */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static long resp_size = 0;

/* Size of the first response: head up to the blank line plus its Content-Length (any case). */
static long learn_size(const char *b, long n) {
  const char *end = memmem(b, n, "\r\n\r\n", 4);
  if (!end) return 0;
  for (const char *p = b; p + 16 < end; p++)
    if (!strncasecmp(p, "\r\ncontent-length:", 17)) return (end - b) + 4 + atol(p + 17);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 6) { fprintf(stderr, "usage: floor-client HOST PORT PATH CONNECTIONS REQUESTS\n"); return 2; }
  int c = atoi(argv[4]);
  long total = atol(argv[5]), sent = 0, done = 0;
  if (c < 1 || c > 4096 || total < 1) { fprintf(stderr, "bad CONNECTIONS or REQUESTS\n"); return 2; }
  char req[512];
  int rl = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s:%s\r\n\r\n", argv[3], argv[1], argv[2]);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
  inet_pton(AF_INET, argv[1], &a.sin_addr);
  int ep = epoll_create1(0);
  long *have = calloc(c, sizeof(long));
  int *fds = calloc(c, sizeof(int));
  static char buf[65536];
  for (int i = 0; i < c; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) { perror("connect"); return 1; }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fds[i] = fd;
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  }
  for (int i = 0; i < c && sent < total; i++, sent++) send(fds[i], req, rl, 0);
  struct epoll_event evs[256];
  while (done < total) {
    int k = epoll_wait(ep, evs, 256, 10000);
    if (k <= 0) { fprintf(stderr, "stalled\n"); return 1; }
    for (int e = 0; e < k; e++) {
      int i = evs[e].data.u32;
      long n = recv(fds[i], buf, sizeof buf, 0);
      if (n <= 0) { fprintf(stderr, "connection closed\n"); return 1; }
      if (!resp_size) resp_size = learn_size(buf, n);
      if (!resp_size) { fprintf(stderr, "first response not understood\n"); return 1; }
      have[i] += n;
      while (have[i] >= resp_size) {
        have[i] -= resp_size;
        done++;
        if (sent < total) { send(fds[i], req, rl, 0); sent++; }
      }
    }
  }
  printf("floor: %ld requests done\n", done);
  return 0;
}
