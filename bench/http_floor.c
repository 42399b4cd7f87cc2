/* The keep-alive floor of an HTTP responder: the least latency any client can see from it.
 *
 * One blocking TCP connection (TCP_NODELAY), N sequential `GET PATH HTTP/1.1` requests spaced
 * by SPACING_US, each timed with CLOCK_MONOTONIC from just before write() to the read() that
 * completes the body (Content-Length). No event loop, no parser beyond Content-Length, no
 * allocation: what remains is the kernel's loopback/veth path, the responder's own wake-up and
 * handling, and this client's one wake-up per reply. bench/http_vs_blackbox.py runs it against
 * the same responder as the exporter's HTTP probe; the probe's own overhead is its p50 minus
 * this p50 (not minus ping's, which has no user-space server at all).
 *
 * Usage: podnet-bench-http-floor ADDR PORT [N=2000] [SPACING_US=5000] [PATH=/echo]
 * Prints "p50_us P50 p90_us P90 p99_us P99 n N" on stdout; exit 1 on any error (message on
 * stderr). Bounded: N ≤ 100000 requests, each with a 2 s receive timeout.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Reads one response; returns 0 when its body (Content-Length bytes) is complete. */
static int read_response(int fd, char* buf, size_t cap) {
  size_t have = 0;
  long body = -1;
  size_t header_end = 0;
  for (;;) {
    if (have == cap) return -1;
    ssize_t n = read(fd, buf + have, cap - have);
    if (n <= 0) return -1;
    have += (size_t)n;
    if (body < 0) {
      char* end = memmem(buf, have, "\r\n\r\n", 4);
      if (!end) continue;
      header_end = (size_t)(end - buf) + 4;
      char* cl = memmem(buf, header_end, "Content-Length:", 15);
      if (!cl) cl = memmem(buf, header_end, "content-length:", 15);
      if (!cl) return -1;
      body = strtol(cl + 15, NULL, 10);
    }
    if (have >= header_end + (size_t)body) return have == header_end + (size_t)body ? 0 : -1;
  }
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s ADDR PORT [N] [SPACING_US] [PATH]\n", argv[0]);
    return 1;
  }
  int n = argc > 3 ? atoi(argv[3]) : 2000;
  int spacing_us = argc > 4 ? atoi(argv[4]) : 5000;
  const char* path = argc > 5 ? argv[5] : "/echo";
  if (n < 1 || n > 100000 || spacing_us < 0 || spacing_us > 1000000) {
    fprintf(stderr, "N must be 1..100000, SPACING_US 0..1000000\n");
    return 1;
  }
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t len;
  struct sockaddr_in* v4 = (struct sockaddr_in*)&ss;
  struct sockaddr_in6* v6 = (struct sockaddr_in6*)&ss;
  if (inet_pton(AF_INET, argv[1], &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((unsigned short)atoi(argv[2]));
    len = sizeof *v4;
  } else if (inet_pton(AF_INET6, argv[1], &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((unsigned short)atoi(argv[2]));
    len = sizeof *v6;
  } else {
    fprintf(stderr, "not an IP address: %s\n", argv[1]);
    return 1;
  }
  int fd = socket(ss.ss_family, SOCK_STREAM, 0);
  int one = 1;
  struct timeval tv = {2, 0};
  if (fd < 0 || setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
      connect(fd, (struct sockaddr*)&ss, len) != 0) {
    fprintf(stderr, "connect %s:%s: %s\n", argv[1], argv[2], strerror(errno));
    return 1;
  }
  char req[512];
  int req_len = snprintf(req, sizeof req,
                         "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: podnet-bench-http-floor\r\n"
                         "Connection: keep-alive\r\n\r\n",
                         path, argv[1]);
  double* lat = malloc(sizeof(double) * (size_t)n);
  char buf[16384];
  if (!lat) return 1;
  /* One untimed request first: the responder's first-request costs are not the floor. */
  for (int i = -1; i < n; ++i) {
    double t0 = now_us();
    if (write(fd, req, (size_t)req_len) != req_len || read_response(fd, buf, sizeof buf) != 0) {
      fprintf(stderr, "request %d failed: %s\n", i, strerror(errno));
      return 1;
    }
    double t1 = now_us();
    if (i >= 0) lat[i] = t1 - t0;
    if (spacing_us > 0) {
      struct timespec sl = {spacing_us / 1000000, (long)(spacing_us % 1000000) * 1000};
      nanosleep(&sl, NULL);
    }
  }
  close(fd);
  qsort(lat, (size_t)n, sizeof(double), cmp_double);
  printf("p50_us %.1f p90_us %.1f p99_us %.1f n %d\n", lat[n / 2], lat[n * 9 / 10],
         lat[n * 99 / 100], n);
  free(lat);
  return 0;
}
