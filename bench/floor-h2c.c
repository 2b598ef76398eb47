/* The least an HTTP/2 (h2c, prior knowledge) client can do per request, as floor-client.c is
 * for HTTP/1.1: C connections, M streams each, one fixed HEADERS frame per request (GET with
 * static-table fields only; no HPACK decoding of responses, which it does not need), frames
 * parsed only far enough to see END_STREAM, SETTINGS and PING answered, WINDOW_UPDATE sent for
 * the connection every 32 KiB of DATA. New requests freed by one read go out in one send.
 * No statistics and no timers. It shows how much of a real client's CPU per request on a
 * loopback benchmark is the kernel's TCP path, which every client pays alike.
 * Build: gcc -O2 -o floor-h2c floor-h2c.c
 * Usage: floor-h2c HOST PORT PATH CONNECTIONS STREAMS REQUESTS */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define RBUF 65536

struct conn {
  int fd;
  uint32_t next_id;
  int inflight;
  long unacked_data; /* DATA bytes not yet returned to the connection window */
  size_t have;       /* bytes buffered in rbuf */
  unsigned char rbuf[RBUF];
};

static unsigned char block[600]; /* HPACK block of the request */
static size_t block_len;
static long total, sent, done;
static int streams;

static void put_frame_head(unsigned char *p, size_t len, int type, int flags, uint32_t id) {
  p[0] = len >> 16; p[1] = len >> 8; p[2] = len; p[3] = type; p[4] = flags;
  p[5] = (id >> 24) & 0x7f; p[6] = id >> 16; p[7] = id >> 8; p[8] = id;
}

/* Appends requests to out until the connection has STREAMS in flight or all are sent. */
static size_t fill(struct conn *c, unsigned char *out, size_t off) {
  while (c->inflight < streams && sent < total && off + 9 + block_len < 65536) {
    put_frame_head(out + off, block_len, 1, 0x5 /* END_STREAM|END_HEADERS */, c->next_id);
    memcpy(out + off + 9, block, block_len);
    off += 9 + block_len;
    c->next_id += 2;
    c->inflight++;
    sent++;
  }
  return off;
}

static int hpack_literal(unsigned char *p, int index, const char *v) {
  /* Literal without indexing, indexed name (4-bit prefix, index < 15 here), raw value. */
  size_t n = strlen(v), k = 0;
  p[k++] = index;
  if (n < 127) p[k++] = n;
  else { p[k++] = 127; n -= 127; while (n >= 128) { p[k++] = (n & 127) | 128; n >>= 7; } p[k++] = n; n = strlen(v); }
  memcpy(p + k, v, n);
  return k + n;
}

int main(int argc, char **argv) {
  if (argc != 7) { fprintf(stderr, "usage: floor-h2c HOST PORT PATH CONNECTIONS STREAMS REQUESTS\n"); return 2; }
  int nc = atoi(argv[4]);
  streams = atoi(argv[5]);
  total = atol(argv[6]);
  if (nc < 1 || nc > 4096 || streams < 1 || streams > 1000 || total < 1 || strlen(argv[3]) > 200) {
    fprintf(stderr, "bad arguments\n");
    return 2;
  }
  char authority[300];
  snprintf(authority, sizeof authority, "%s:%s", argv[1], argv[2]);
  block[block_len++] = 0x82; /* :method GET */
  block[block_len++] = 0x86; /* :scheme http */
  block_len += hpack_literal(block + block_len, 4, argv[3]);   /* :path */
  block_len += hpack_literal(block + block_len, 1, authority); /* :authority */

  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
  inet_pton(AF_INET, argv[1], &a.sin_addr);
  int ep = epoll_create1(0);
  struct conn *cs = calloc(nc, sizeof(struct conn));
  static unsigned char out[65536];
  for (int i = 0; i < nc; i++) {
    struct conn *c = &cs[i];
    int one = 1;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof a)) { perror("connect"); return 1; }
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->next_id = 1;
    size_t off = 0;
    memcpy(out, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
    off = 24;
    put_frame_head(out + off, 0, 4, 0, 0); /* empty SETTINGS */
    off += 9;
    off = fill(c, out, off);
    if (send(c->fd, out, off, MSG_NOSIGNAL) != (ssize_t)off) { perror("send"); return 1; }
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
  }
  struct epoll_event evs[256];
  while (done < total) {
    int k = epoll_wait(ep, evs, 256, 10000);
    if (k <= 0) { fprintf(stderr, "stalled\n"); return 1; }
    for (int e = 0; e < k; e++) {
      struct conn *c = &cs[evs[e].data.u32];
      ssize_t n = recv(c->fd, c->rbuf + c->have, RBUF - c->have, 0);
      if (n <= 0) { fprintf(stderr, "connection closed\n"); return 1; }
      c->have += n;
      size_t pos = 0, off = 0;
      while (c->have - pos >= 9) {
        unsigned char *f = c->rbuf + pos;
        size_t len = (f[0] << 16) | (f[1] << 8) | f[2];
        if (len > RBUF - 9) { fprintf(stderr, "frame too large\n"); return 1; }
        if (c->have - pos < 9 + len) break;
        int type = f[3], flags = f[4];
        if (type == 0) c->unacked_data += len;
        if ((type == 0 || type == 1) && (flags & 1)) { c->inflight--; done++; }
        if (type == 4 && !(flags & 1)) { put_frame_head(out + off, 0, 4, 1, 0); off += 9; }
        if (type == 6 && !(flags & 1)) { put_frame_head(out + off, 8, 6, 1, 0); memcpy(out + off + 9, f + 9, 8); off += 17; }
        if (type == 7) { fprintf(stderr, "GOAWAY\n"); return 1; }
        pos += 9 + len;
      }
      memmove(c->rbuf, c->rbuf + pos, c->have - pos);
      c->have -= pos;
      if (c->unacked_data >= 32768) {
        put_frame_head(out + off, 4, 8, 0, 0);
        uint32_t inc = c->unacked_data;
        out[off + 9] = inc >> 24; out[off + 10] = inc >> 16; out[off + 11] = inc >> 8; out[off + 12] = inc;
        off += 13;
        c->unacked_data = 0;
      }
      off = fill(c, out, off);
      if (off && send(c->fd, out, off, MSG_NOSIGNAL) != (ssize_t)off) { perror("send"); return 1; }
    }
  }
  printf("floor: %ld requests done\n", done);
  return 0;
}
