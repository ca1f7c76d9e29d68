/* The pod sandbox's process: holds the pod's namespaces open, reaps orphans, exits on a signal.
 * Built static (gcc -static) into an image of one file, the sandbox image the node's containerd runs. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void leave(int signal_number) { _exit(signal_number == SIGTERM || signal_number == SIGINT ? 0 : 1); }

static void reap(int signal_number) {
  (void)signal_number;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction stop = {.sa_handler = leave};
  struct sigaction child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &stop, NULL);
  sigaction(SIGTERM, &stop, NULL);
  sigaction(SIGCHLD, &child, NULL);
  for (;;) pause();
}
