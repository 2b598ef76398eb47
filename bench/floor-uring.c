/* The floor client of bench/floor-client.c on io_uring instead of epoll: sends and receives
 * are queued in one ring and submitted with one io_uring_enter per loop turn, so it shows
 * what a client could save in syscalls and wake-ups over the epoll floor. Same contract:
 * fixed request, response size learned from the first response, no statistics or timers.
 * Build: gcc -O2 -o floor-uring floor-uring.c -luring   (Debian: liburing-dev)
 * Usage: floor-uring HOST PORT PATH CONNECTIONS REQUESTS */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF 65536
#define SEND_TAG (1UL << 32)

static long learn_size(const char *b, long n) {
  const char *end = memmem(b, n, "\r\n\r\n", 4);
  if (!end) return 0;
  for (const char *p = b; p + 16 < end; p++)
    if (!strncasecmp(p, "\r\ncontent-length:", 17)) return (end - b) + 4 + atol(p + 17);
  return 0;
}

static struct io_uring ring;
static char req[512];
static int rl;

static void queue_send(int fd, int i) {
  struct io_uring_sqe *s = io_uring_get_sqe(&ring);
  io_uring_prep_send(s, fd, req, rl, 0);
  s->user_data = SEND_TAG | (unsigned)i;
  s->flags |= IOSQE_CQE_SKIP_SUCCESS; /* only failed sends complete */
}

static void queue_recv(int fd, int i, char *buf) {
  struct io_uring_sqe *s = io_uring_get_sqe(&ring);
  io_uring_prep_recv(s, fd, buf, BUF, 0);
  s->user_data = (unsigned)i;
}

int main(int argc, char **argv) {
  if (argc != 6) { fprintf(stderr, "usage: floor-uring HOST PORT PATH CONNECTIONS REQUESTS\n"); return 2; }
  int c = atoi(argv[4]);
  long total = atol(argv[5]), sent = 0, done = 0, resp_size = 0;
  if (c < 1 || c > 4096 || total < 1) { fprintf(stderr, "bad CONNECTIONS or REQUESTS\n"); return 2; }
  rl = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: %s:%s\r\n\r\n", argv[3], argv[1], argv[2]);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
  inet_pton(AF_INET, argv[1], &a.sin_addr);
  if (io_uring_queue_init(4 * c + 8, &ring, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN)) {
    fprintf(stderr, "io_uring_queue_init failed\n");
    return 1;
  }
  int *fds = calloc(c, sizeof(int));
  long *have = calloc(c, sizeof(long));
  char **bufs = calloc(c, sizeof(char *));
  for (int i = 0; i < c; i++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) { perror("connect"); return 1; }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fds[i] = fd;
    bufs[i] = malloc(BUF);
    if (sent < total) { queue_send(fd, i); sent++; }
    queue_recv(fd, i, bufs[i]);
  }
  while (done < total) {
    if (io_uring_submit_and_wait(&ring, 1) < 0) { fprintf(stderr, "io_uring_enter failed\n"); return 1; }
    struct io_uring_cqe *cqe;
    unsigned head, k = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      k++;
      int i = cqe->user_data & 0xffffffff;
      if (cqe->user_data & SEND_TAG) { fprintf(stderr, "send failed: %d\n", cqe->res); return 1; }
      long n = cqe->res;
      if (n <= 0) { fprintf(stderr, "connection closed or failed: %ld\n", n); return 1; }
      if (!resp_size) resp_size = learn_size(bufs[i], n);
      if (!resp_size) { fprintf(stderr, "first response not understood\n"); return 1; }
      have[i] += n;
      while (have[i] >= resp_size) {
        have[i] -= resp_size;
        done++;
        if (sent < total) { queue_send(fds[i], i); sent++; }
      }
      if (done < total) queue_recv(fds[i], i, bufs[i]);
    }
    io_uring_cq_advance(&ring, k);
  }
  printf("floor: %ld requests done\n", done);
  return 0;
}
