// Command pause is the node tier's sandbox ("pause") image: it holds a
// pod's namespaces, sleeps, reaps the children it inherits as the pod's
// init, and exits 0 on SIGTERM or SIGINT. A static Go binary, so the image
// needs no registry and no libc.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for { // reap every child that has exited
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
