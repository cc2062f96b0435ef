/* The lab's pause binary: the process that holds a Pod sandbox's namespaces open.
 *
 * PID 1 of the sandbox: it blocks until SIGINT or SIGTERM (then exits 0) and reaps every child
 * that is re-parented to it (a Pod sharing its process namespace). Built statically by
 * tools/build-binaries.sh (component "pause") into the lab's pause image (lab/images.py), so the
 * lab needs no registry. Written for this project; it does what the upstream pause container does.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("sriov-dra lab pause");
    return 0;
  }
  if (getpid() != 1) {
    fprintf(stderr, "pause: warning: not PID 1\n");
  }
  struct sigaction stop = {.sa_handler = on_stop};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &stop, NULL) < 0 || sigaction(SIGTERM, &stop, NULL) < 0 ||
      sigaction(SIGCHLD, &child, NULL) < 0) {
    fprintf(stderr, "pause: sigaction: %s\n", strerror(errno));
    return 1;
  }
  for (;;) {
    pause();
  }
}
