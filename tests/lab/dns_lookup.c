/* One getaddrinfo(NAME, AF_UNSPEC) lookup, as an application makes it: the ground truth for the
 * resolver models. Built twice: against glibc (podnet-lab-getaddrinfo-glibc) and statically
 * against musl with musl-gcc (podnet-lab-getaddrinfo-musl). Prints "ok <n addresses>" or
 * "fail <gai error>", then the lookup time in microseconds. Exit 0 found, 1 not found.
 * With -n N it performs N lookups (benchmark) and prints the mean time per lookup. */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
  long n = 1;
  int arg = 1;
  if (argc > 3 && strcmp(argv[1], "-n") == 0) {
    n = strtol(argv[2], NULL, 10);
    arg = 3;
  }
  if (arg >= argc || n < 1 || n > 1000000) {
    fprintf(stderr, "usage: %s [-n COUNT] NAME\n", argv[0]);
    return 2;
  }
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = 0, count = 0;
  double start = now_us();
  for (long i = 0; i < n; i++) {
    struct addrinfo *res = NULL;
    rc = getaddrinfo(argv[arg], NULL, &hints, &res);
    count = 0;
    for (struct addrinfo *p = res; p; p = p->ai_next) count++;
    if (res) freeaddrinfo(res);
  }
  double per = (now_us() - start) / n;
  if (rc == 0) {
    printf("ok %d %.1f\n", count, per);
  } else {
    printf("fail %s %.1f\n", gai_strerror(rc), per);
  }
  return rc == 0 ? 0 : 1;
}
