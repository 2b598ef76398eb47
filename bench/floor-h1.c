/* The least a keep-alive HTTP/1.1 origin can do per request, as floor-client.c is for the
 * client: one thread, one epoll set (edge-triggered), per ready connection one recv and, when
 * it held whole request heads, one send of as many fixed responses (a head with Date,
 * Content-Type and Content-Length, and a body of SIZE bytes) as it held heads. It parses
 * nothing but the blank line that ends a head, keeps no statistics, no timers, no routes and
 * no logs, and answers every request the same way. Measured beside hxlab serve and nginx in
 * one run (bench/origins.py's "floor" line), it shows how much of an origin's CPU per small
 * request on a loopback benchmark is the kernel's TCP path, which every server pays alike.
 * Build: gcc -O2 -o floor-h1 floor-h1.c
 * Usage: floor-h1 PORT SIZE      (listens on 127.0.0.1:PORT; SIZE ≤ 65536) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_BATCH 64 /* responses one send carries at most (pipelined heads) */

struct conn {
  int fd;
  int tail; /* bytes of "\r\n\r\n" matched at the end of the last read: a head split anywhere */
};

static char resp[MAX_BATCH * (65536 + 256)];
static int resp_len;

/* The response head and body; the Date is formatted once, as a real origin caches it per
 * second (its cost per request is nil either way). */
static void build_response(long size) {
  char date[64];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", gmtime(&now));
  int n = snprintf(resp, sizeof resp,
                   "HTTP/1.1 200 OK\r\ndate: %s\r\ncontent-type: application/octet-stream\r\n"
                   "content-length: %ld\r\n\r\n",
                   date, size);
  memset(resp + n, 'x', size);
  resp_len = n + (int)size;
  for (int i = 1; i < MAX_BATCH; i++) memcpy(resp + i * resp_len, resp, resp_len);
}

/* Counts the heads that end in buf, carrying a partial "\r\n\r\n" across reads. */
static int heads_in(struct conn *c, const char *buf, long n) {
  static const char end[] = "\r\n\r\n";
  int heads = 0, t = c->tail;
  for (long i = 0; i < n; i++) {
    if (buf[i] == end[t]) {
      if (++t == 4) { heads++; t = 0; }
    } else {
      t = buf[i] == '\r' ? 1 : 0;
    }
  }
  c->tail = t;
  return heads;
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: floor-h1 PORT SIZE\n"); return 2; }
  int port = atoi(argv[1]);
  long size = atol(argv[2]);
  if (port < 1 || port > 65535 || size < 0 || size > 65536) { fprintf(stderr, "bad PORT or SIZE\n"); return 2; }
  build_response(size);
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 16384)) { perror("listen"); return 1; }
  int ep = epoll_create1(0);
  struct conn lc = {.fd = ls};
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &lc};
  epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  static char buf[65536];
  struct epoll_event evs[256];
  for (;;) {
    int k = epoll_wait(ep, evs, 256, -1);
    if (k < 0 && errno != EINTR) { perror("epoll_wait"); return 1; }
    for (int e = 0; e < k; e++) {
      struct conn *c = evs[e].data.ptr;
      if (c == &lc) {
        int fd;
        while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          struct conn *nc = calloc(1, sizeof *nc);
          if (!nc) { close(fd); continue; }
          nc->fd = fd;
          struct epoll_event cev = {.events = EPOLLIN | EPOLLET | EPOLLRDHUP, .data.ptr = nc};
          epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
        }
        continue;
      }
      /* Edge-triggered: read until the socket is drained (a short read means it is). */
      for (;;) {
        long n = recv(c->fd, buf, sizeof buf, 0);
        if (n <= 0) {
          if (n < 0 && errno == EAGAIN) break;
          close(c->fd); /* also leaves the epoll set */
          free(c);
          break;
        }
        for (int h = heads_in(c, buf, n); h > 0; h -= MAX_BATCH) {
          int m = h < MAX_BATCH ? h : MAX_BATCH;
          /* A loopback socket buffer takes a batch of small responses whole; a real server
           * would keep what did not fit, this floor does not need to. */
          if (send(c->fd, resp, (long)m * resp_len, MSG_NOSIGNAL) < 0) break;
        }
        if (n < (long)sizeof buf) break;
      }
    }
  }
}
